#!/usr/bin/env python3
"""Where rnngraph.torch.RNN's own time goes: a torch.profiler timeline of the bare compiled
forward+backward and of the module's forward + ``y.backward(dy)``, 2-layer LSTM, H = 512,
T = 100, B = 1 by default (bench/torch_layer.py's overhead setting). ``--min-length L`` adds the
module called with ``lengths=`` drawn uniformly from [L, T) (bench/torch_lengths.py's setting
with ``--layers 1 --batch 64 --min-length 30``): what lengths cost, on the host and on the GPU.

Prints, for each: the host time to issue one call (no synchronisation), the GPU span of one call
(CUDA events), the Python functions' own host time (cProfile) and the profiler's table of host
operations and GPU kernels over ``--iters`` calls (``--trace``: their timelines too). Usage (GPU)::

    python3 bench/experiments/torch_layer_overhead.py --out $OUT/overhead.txt
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from rnngraph.torch import RNN  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cell", default="lstm")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--min-length", type=int, help="also time the module with lengths in [this, 100)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out")
    ap.add_argument("--trace", metavar="PREFIX", help="also write each case's profiler timeline as PREFIX-CASE.json "
                    "(chrome://tracing): where the GPU waits for the host")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    T, H, L, B = 100, args.hidden, args.layers, args.batch
    rnn = RNN(args.cell, H, L, input_size=H).to(dev)
    x = torch.randn(T, B, H, device=dev)
    dy = torch.randn(T, B, H, device=dev)
    compiled = rnn.compiled(dev, x.dtype)

    def bare():
        compiled.forward(x, train=True)
        compiled.backward(dy, input_grads=False)

    def module():  # as a training loop: zero_grad between the forward and the backward
        y, _ = rnn(x)
        rnn.zero_grad(set_to_none=True)
        y.backward(dy)

    cases = [("bare", bare), ("module", module)]
    if args.min_length is not None:
        lengths = torch.randint(args.min_length, T, (B,), generator=torch.Generator().manual_seed(0))

        def module_lengths():
            y, _ = rnn(x, lengths=lengths)
            rnn.zero_grad(set_to_none=True)
            y.backward(dy)
        cases.append(("module with lengths", module_lengths))
    lines = []
    for name, fn in cases:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        issue, span = [], []
        for _ in range(args.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            t0 = time.perf_counter()
            fn()
            issue.append((time.perf_counter() - t0) * 1e3)
            b.record()
            b.synchronize()
            span.append(a.elapsed_time(b))
        issue.sort(), span.sort()
        lines.append(f"== {name}: host issue {issue[len(issue) // 2]:.3f} ms, GPU span {span[len(span) // 2]:.3f} ms "
                     f"(medians of {args.iters})")
        py = cProfile.Profile()
        py.enable()
        for _ in range(args.iters):
            fn()
        py.disable()
        torch.cuda.synchronize()
        buf = io.StringIO()
        pstats.Stats(py, stream=buf).sort_stats("tottime").print_stats(25)
        lines.append(buf.getvalue())
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                fn()
            torch.cuda.synchronize()
        lines.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
        lines.append(prof.key_averages().table(sort_by="self_device_time_total", row_limit=20))
        if args.trace:
            prof.export_chrome_trace(f"{args.trace}-{name.replace(' ', '-')}.json")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
