"""``rnngraph bench``: rnngraph against cuDNN on a quick subset (the full grid: bench/run_all.py)."""
from __future__ import annotations

import argparse
import os

from ..bench import QUICK_CPU, QUICK_GPU
from .arguments import CLIError, nonnegative_int, positive_int


def bench_help() -> str:
    """``bench``'s help line, from the configurations it times: on a GPU rnngraph against cuDNN,
    without one (or with --device cpu) the NumPy backend's char-LM training step alone."""
    gpu, cpu = QUICK_GPU[0][0], QUICK_CPU[0][0]
    streams = " and ".join(str(s) for s in dict.fromkeys(c.S for c, _ in QUICK_GPU))
    return (f"time rnngraph: on a GPU against cuDNN ({gpu.cell.upper()} H={gpu.H} T={gpu.T} S={streams}), else "
            f"the NumPy backend alone (a char-LM step, {cpu.cell.upper()} H={cpu.H} T={cpu.T} S={cpu.S})")


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iters", metavar="N", type=positive_int, default=100, help="timed calls (default 100)")
    p.add_argument("--warmup", metavar="N", type=nonnegative_int, default=10, help="warm-up calls (default 10)")
    p.add_argument("--out", metavar="FILE.json", default=None, help="also write the results JSON here")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: the GPU comparison where numba finds a GPU, else the CPU backend (default auto)")


def run_bench(args) -> int:
    """On a GPU LSTM H=512 T=100 S in {1, 64}, rnngraph against cuDNN fp32 (the full grid:
    bench/run_all.py); without one the NumPy backend's LM step alone (:func:`bench_help`)."""
    from ..bench import cli_bench

    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise CLIError(f"--out {args.out}: no such directory {os.path.dirname(os.path.abspath(args.out))!r}")
    return cli_bench(iters=args.iters, warmup=args.warmup, out=args.out, device=args.device)
