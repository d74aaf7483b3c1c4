#!/usr/bin/env python3
"""The GPU timeline of one forward+backward of the generated step, kernel by kernel (GPU).

For each configuration (cell:S; H=512, T=100, one layer, the benchmark's float-input stack,
``rnngraph.bench.gpu_program``) the script runs ``fwdbwd`` a few times to compile and warm up,
then records --iters more under ``torch.profiler`` (CUPTI activity tracing: every kernel and
memset of the process, numba's and cuBLAS's alike, CUDA-graph replays included) and reports,
per iteration, the span from the first kernel's start to the last kernel's end, the busy time
(the sum of kernel and memset durations) and the idle time between them (the GPU waiting for
Python to enqueue), per kernel name the median duration (ms) an iteration (forward and backward, no optimizer), and the
ordered timeline of one iteration.

Unlike bench/loop_profile.py --steps (each step timed alone between CUDA events, host launch
time included), these durations are the GPU's own, and the gaps show where the host, not the
GPU, sets the pace. Writes JSON to --out and prints a table.

Measured on the H200 (bench/results/h200-20261201-lngrad-trace-*.json): layernorm_lstm S=64 spent 6.64 of
its 8.27 ms in the two loop kernels, the backward 4.34 (the LSTM 2.71 of 4.16), the GPU idle 0.03
ms (``-trace-before-lngrad``); --modes (``-trace-modes``, another run) showed the backward loop at
4.35 ms with the benchmark's output gradient and 3.45 ms with an all-zero one
-- the in-loop gain and bias gradient sums (shared-memory compare-and-swap atomics that retry only
when the values change), moved after the loop (``lngrad``, rnngraph/schedule_options.py): 2.89 ms, and the
step 6.97 ms. loop_profile's standalone timings had missed it: they run the backward with zero
gradients.

``--modes lm-step`` traces a whole training step of a char LM instead (:func:`lm_step`) and
reports the GPU's busy time against the step's wall time (bench/results/
h200-20261202-lm-step-trace-before-step-graph.json: 1 x 512 at S = 1, busy 0.91 of 2.77 ms);
``--modes lm-step-unread`` the same steps with their losses left unread, the GPU's busy time per
step against the host's time per step over the run (what a training loop that does not read every
loss sees; bench/results/h200-20261203-lm-step-trace-unread.json: busy 0.79 of 1.01 ms read, 0.79
of 1.00 ms unread: the host's work per step, not the loss's read, keeps the GPU idle a fifth of
the time).

Usage (GPU):  python bench/kernel_trace.py --configs layernorm_lstm:64 lstm:64 lstm:1 --out $OUT/trace.json
              python bench/kernel_trace.py --configs lstm:1 lstm:64 --modes lm-step lm-step-unread --out $OUT/lm-step.json
              python bench/kernel_trace.py --configs lstm:64 --layers 2 --modes lm-step-unread --out $OUT/lm-step-2x512.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")


def short_name(name: str) -> str:
    """A readable kernel name: the last two ``::`` parts of a demangled numba name before its
    ``[abi:...]`` tags (module, function), the last two name parts of a still-mangled one
    (``_ZN6cudapy<len><part>...``); others (cuBLAS, memsets) cut to 60 characters."""
    if name.startswith("_ZN") and "cudapy" in name:
        parts, i = [], 3
        while i < len(name) and name[i].isdigit():
            j = i
            while name[j].isdigit():
                j += 1
            n = int(name[i:j])
            parts.append(name[j:j + n])
            i = j + n
        parts = [p for p in parts if p != "cudapy"]
        return ".".join(parts[-2:]) if parts else name[:60]
    if "[abi:" in name:
        return ".".join(name.split("[abi:")[0].split("::")[-2:])
    return name[:60]


def gpu_events(trace_path: str) -> list[dict]:
    """Kernel, memset and memcpy events of a Chrome trace written by torch.profiler, by start."""
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    out = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    return sorted(out, key=lambda e: e["ts"])


def split_iterations(events: list[dict], iters: int) -> list[list[dict]]:
    """The GPU events of each of ``iters`` identical iterations, in start order: equal shares
    (the GPU clock and the host's annotations are not aligned closely enough to split by time).
    ValueError when the count does not divide evenly."""
    if len(events) % iters:
        raise ValueError(f"{len(events)} GPU events do not split into {iters} equal iterations")
    k = len(events) // iters
    return [events[i * k:(i + 1) * k] for i in range(iters)]


def summarize(iteration: list[dict]) -> dict:
    """Span, busy and idle time (ms) of one iteration's GPU events, and duration per kernel."""
    if not iteration:
        return {"span_ms": 0.0, "busy_ms": 0.0, "idle_ms": 0.0, "kernels": {}}
    start = iteration[0]["ts"]
    end = max(e["ts"] + e["dur"] for e in iteration)
    busy, cursor = 0.0, start
    for e in iteration:  # union of the intervals (events on one stream do not overlap)
        s, f = max(e["ts"], cursor), e["ts"] + e["dur"]
        if f > s:
            busy += f - s
            cursor = f
    per = defaultdict(float)
    for e in iteration:
        per[short_name(e["name"])] += e["dur"] / 1000
    return {"span_ms": (end - start) / 1000, "busy_ms": busy / 1000, "idle_ms": (end - start - busy) / 1000,
            "kernels": dict(per)}


MODES = ("fwdbwd", "zero-dy", "no-zeroing", "backward-only", "lm-step", "lm-step-unread")


def sequences(prog, fwdbwd) -> dict:
    """What each --modes entry runs as one iteration: ``fwdbwd`` the benchmark's forward+backward;
    ``zero-dy`` the same with an all-zero output gradient; ``no-zeroing`` forward, then backward
    with the gradient arenas left as they are (accumulating); ``backward-only`` the backward
    alone, repeated (as bench/loop_profile.py times it). Timing experiments: does the backward's
    time depend on its data or on what ran before it? (``lm-step``, ``lm-step-unread``: see
    :func:`lm_step`.)"""
    from rnngraph.codegen import library
    b = prog.buf

    def zero_dy():
        prog.run_forward()
        library.fill(b.zeroed_grads, 0.0, stream=prog.stream)  # dy, a gradient of the arena, too
        library.fill(b.param_grad_arena, 0.0, stream=prog.stream)
        prog.run_backward()

    return {"fwdbwd": fwdbwd, "zero-dy": zero_dy,
            "no-zeroing": lambda: (prog.run_forward(), prog.run_backward()),
            "backward-only": prog.run_backward}


def lm_step(cell: str, S: int, T: int, H: int, read: bool = True, layers: int = 1, plan: str | None = None):
    """``lm-step`` mode: a whole training step of a char LM through the public API (Embedding 96 ->
    128, ``layers`` ``cell`` layers of H, softmax; Adam, clip 1.0): ``float(step.train(x, y))``, the loss
    read (so the step ends synchronised). ``read=False`` (``lm-step-unread``): ``step.train(x, y)``
    with the loss left unread (rnngraph/lazy_loss.py), as a training loop that logs every N steps
    runs it; ``synchronize`` reads the last one. ``plan`` forces the schedule's plan ("wavefront"
    or "scc-sequential"; None: the cost model's). Returns (run, synchronize)."""
    import numpy as np

    import rnngraph as rg
    net = rg.stacked(getattr(rg.cells, cell), layers, H, vocab=96, embed=128)
    step = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.Adam(lr=2e-3), clip_norm=1.0, seed=0,
                      plan=plan)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 96, (T, S)), rng.integers(0, 96, (T, S))
    if read:
        return (lambda: float(step.train(x, y))), (lambda: None)
    losses = []
    return (lambda: losses.append(step.train(x, y))), (lambda: float(losses[-1]) if losses else None)


def trace(cell: str, S: int, iters: int, T: int = 100, H: int = 512, mode: str = "fwdbwd", layers: int = 1,
          plan: str | None = None) -> dict:
    """One configuration's GPU timeline under ``mode`` (see :func:`sequences`; ``layers`` counts
    the lm-step modes' layers, the others run one; ``plan`` forces theirs); ``wall_ms`` is the
    host's time per iteration (synchronised at its end; ``lm-step-unread``: the iterations'
    total, synchronised once after the last, over their number), ``busy_fraction`` busy / wall."""
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile

    from rnngraph.bench import Config, gpu_program
    if mode.startswith("lm-step"):
        run, sync = lm_step(cell, S, T, H, read=mode == "lm-step", layers=layers, plan=plan)
    else:
        cfg = Config(cell=cell, layers=1, T=T, S=S, H=H, I=H)
        prog, _, fwdbwd = gpu_program(cfg)
        run, sync = sequences(prog, fwdbwd)[mode], prog.stream.synchronize
        fwdbwd()
    for _ in range(3):
        run()
    sync()
    torch.cuda.synchronize()
    walls = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if mode == "lm-step-unread":
            t = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            walls = [(time.perf_counter() - t) * 1e3 / iters]
        for _ in range(iters if mode != "lm-step-unread" else 0):
            t = time.perf_counter()
            run()
            sync()
            walls.append((time.perf_counter() - t) * 1e3)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    try:
        split = split_iterations(gpu_events(path), iters)
    finally:
        Path(path).unlink()
    its = [summarize(it) for it in split]
    mid = split[iters // 2]  # one iteration in order: (name, start after the first, duration), ms
    timeline = [(short_name(e["name"]), (e["ts"] - mid[0]["ts"]) / 1000, e["dur"] / 1000) for e in mid]
    names = sorted({n for it in its for n in it["kernels"]})
    kernels = {n: statistics.median(it["kernels"].get(n, 0.0) for it in its) for n in names}
    rec = {"cell": cell, "S": S, "T": T, "H": H, "layers": layers if mode.startswith("lm-step") else 1,
           "plan": plan if mode.startswith("lm-step") else None,
           "iters": iters, "mode": mode,
           **{k: statistics.median(it[k] for it in its) for k in ("span_ms", "busy_ms", "idle_ms")},
           "wall_ms": statistics.median(walls),
           "kernels_ms": dict(sorted(kernels.items(), key=lambda kv: -kv[1])), "timeline": timeline}
    rec["busy_fraction"] = rec["busy_ms"] / rec["wall_ms"]
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=["layernorm_lstm:64", "lstm:64", "lstm:1"],
                    help="cell:S pairs (H=512, T=100, one layer)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--modes", nargs="+", default=["fwdbwd"], choices=MODES,
                    help="what one iteration runs (timing experiments; see sequences())")
    ap.add_argument("--layers", type=int, default=1, help="the lm-step modes' layers (the others run one)")
    ap.add_argument("--plan", choices=("wavefront", "scc-sequential"),
                    help="the lm-step modes' plan, forced (default: the cost model's)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    records = []
    for c, mode in ((c, m) for c in a.configs for m in a.modes):
        cell, S = c.split(":")
        rec = trace(cell, int(S), a.iters, mode=mode, layers=a.layers, plan=a.plan)
        records.append(rec)
        print(f"{cell} S={S} {mode}: span {rec['span_ms']:.3f} ms, busy {rec['busy_ms']:.3f}, idle {rec['idle_ms']:.3f}, "
              f"wall {rec['wall_ms']:.3f} (busy {rec['busy_fraction']:.0%} of it)")
        for name, ms in rec["kernels_ms"].items():
            print(f"    {ms:8.4f}  {name}")
        print("  timeline of one iteration (start ms, duration ms):")
        for name, t0, dur in rec["timeline"]:
            print(f"    {t0:8.4f} {dur:8.4f}  {name}")
        if a.out:
            Path(a.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
