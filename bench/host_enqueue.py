#!/usr/bin/env python3
"""Host time of each call of the benchmark's forward+backward (``rnngraph.bench.gpu_program``'s
``fwdbwd``), GPU only: the S=1 LSTM's loop kernels got fast enough (0.32 ms forward with the flagged exchange, H200)
that the GPU waited ~0.27 ms for Python between forward and backward (bench/kernel_trace.py).

For each configuration (cell:S; H=512, T=100) it compiles and warms up, then times --iters
rounds of: ``run_forward``, the two gradient-arena fills, making the output gradient's window
view (``buf.window``, as the harness once did in each call), the dy copy, ``run_backward``
(each a host ``perf_counter`` span, the stream synchronised after each round). Prints and writes
JSON (median microseconds per call).

Usage (GPU):  python bench/host_enqueue.py --configs lstm:1 --out $OUT/host_enqueue.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout


def measure(cell: str, S: int, iters: int) -> dict:
    """Median host microseconds of each fwdbwd call for one configuration."""
    import numpy as np
    from numba import cuda

    from rnngraph.bench import Config, gpu_program
    from rnngraph.codegen import library

    prog, _, fwdbwd = gpu_program(Config(cell=cell, layers=1, T=100, S=S, H=512, I=512))
    b, out = prog.buf, prog.g.outputs[0]
    dy = cuda.to_device(np.zeros((100 * S, 512), np.float32))
    for _ in range(3):
        fwdbwd()
    prog.stream.synchronize()
    calls = {
        "run_forward": prog.run_forward,
        "fill_grad_arena": lambda: library.fill(b.zeroed_grads, 0.0, stream=prog.stream),
        "fill_param_grad_arena": lambda: library.fill(b.param_grad_arena, 0.0, stream=prog.stream),
        "window_view": lambda: b.window(out, grad=True),
        "copy_dy": lambda view=b.window(out, grad=True): view.copy_to_device(dy, stream=prog.stream),
        "run_backward": prog.run_backward,
    }
    times = {name: [] for name in calls}
    for _ in range(iters):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(1e6 * (time.perf_counter() - t0))
        prog.stream.synchronize()
    return {"cell": cell, "S": S, "iters": iters, "host_us": {k: statistics.median(v) for k, v in times.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=["lstm:1"], metavar="CELL:S")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", help="JSON file for the records")
    args = ap.parse_args(argv)
    records = []
    for c in args.configs:
        cell, S = c.split(":")
        records.append(measure(cell, int(S), args.iters))
        print(json.dumps(records[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
