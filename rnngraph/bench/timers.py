"""The timing protocol (:class:`Protocol`), the timers (a wall clock, CUDA events through torch or
numba) and :func:`measure`: warm-up calls, then the median of the timed ones."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


@dataclass
class Protocol:
    """warmup and iters: calls before / while timing; max_seconds: the timed calls of one
    measurement stop at about this many seconds (None: never), but never below min_iters."""

    warmup: int = 10
    iters: int = 100
    max_seconds: float | None = 5.0
    min_iters: int = 5


class WallTimer:
    """A wall clock around ``fn`` with ``sync`` (a device synchronise, or nothing) on both sides."""

    def __init__(self, sync=lambda: None):
        self.sync = sync

    def time(self, fn) -> float:
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return (time.perf_counter() - t0) * 1e3


class TorchEventTimer:
    """CUDA events recorded on PyTorch's current stream."""

    def __init__(self):
        import torch
        self.torch = torch

    def sync(self):
        self.torch.cuda.synchronize()

    def time(self, fn) -> float:
        a, b = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b)


class NumbaEventTimer:
    """CUDA events recorded on a numba stream (rnngraph's program stream)."""

    def __init__(self, stream):
        self.stream = stream

    def sync(self):
        self.stream.synchronize()

    def time(self, fn) -> float:
        from numba import cuda
        a, b = cuda.event(timing=True), cuda.event(timing=True)
        a.record(self.stream)
        fn()
        b.record(self.stream)
        b.synchronize()
        return cuda.event_elapsed_time(a, b)


def measure(fn, timer, proto: Protocol) -> dict:
    """Median ms of ``fn`` under ``proto``: {"ms", "iters", "warmup"} (the counts actually run).
    Warm-up stops early once it has taken a fifth of ``max_seconds`` (after at least 2 calls)."""
    warm, spent, last = 0, 0.0, None
    for _ in range(proto.warmup):
        t0 = time.perf_counter()
        fn()
        timer.sync()
        last = time.perf_counter() - t0
        spent, warm = spent + last, warm + 1
        if proto.max_seconds and warm >= 2 and spent > 0.2 * proto.max_seconds:
            break
    n = proto.iters
    if proto.max_seconds and last:
        n = max(min(proto.min_iters, proto.iters), min(proto.iters, int(proto.max_seconds / last)))
    times = [timer.time(fn) for _ in range(n)]
    return {"ms": statistics.median(times), "iters": n, "warmup": warm}


def _timed(fwd, fwdbwd, timer, proto: Protocol) -> dict:
    f = measure(fwd, timer, proto) if fwd else None
    b = measure(fwdbwd, timer, proto) if fwdbwd else None
    return {"fwd_ms": f and f["ms"], "fwdbwd_ms": b and b["ms"],
            "iters": {"fwd": f and f["iters"], "fwdbwd": b and b["iters"]},
            "warmup": {"fwd": f and f["warmup"], "fwdbwd": b and b["warmup"]}}


def add_protocol_arguments(ap, warmup: int = 5, iters: int = 50, max_seconds: float = 3.0) -> None:
    """The options every benchmark script of bench/ shares: --warmup, --iters, --max-seconds
    (the :class:`Protocol`), --device (cuda or cpu) and --out (the results JSON)."""
    ap.add_argument("--warmup", type=int, default=warmup, help="untimed calls first")
    ap.add_argument("--iters", type=int, default=iters, help="timed calls (the median is reported)")
    ap.add_argument("--max-seconds", type=float, default=max_seconds, help="stop timing one case after about this long")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", help="write the results as JSON here")


def protocol_of(args) -> tuple[Protocol, object, bool]:
    """(Protocol, timer, on the GPU) from the options of :func:`add_protocol_arguments`: CUDA
    events on torch's stream for a CUDA device, else a wall clock."""
    gpu = args.device.startswith("cuda")
    timer = TorchEventTimer() if gpu else WallTimer()
    return Protocol(warmup=args.warmup, iters=args.iters, max_seconds=args.max_seconds, min_iters=5), timer, gpu
