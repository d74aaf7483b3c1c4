"""``rnngraph bench``: rnngraph against cuDNN on a quick subset (the full grid: bench/run_all.py)."""
from __future__ import annotations

import argparse
import os

from .arguments import CLIError, nonnegative_int, positive_int


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iters", metavar="N", type=positive_int, default=100, help="timed calls (default 100)")
    p.add_argument("--warmup", metavar="N", type=nonnegative_int, default=10, help="warm-up calls (default 10)")
    p.add_argument("--out", metavar="FILE.json", default=None, help="also write the results JSON here")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: the GPU comparison where numba finds a GPU, else the CPU backend (default auto)")


def run_bench(args) -> int:
    """LSTM H=512 T=100 S in {1, 64}: rnngraph against cuDNN fp32 (the full grid: bench/run_all.py)."""
    from ..bench import cli_bench

    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise CLIError(f"--out {args.out}: no such directory {os.path.dirname(os.path.abspath(args.out))!r}")
    return cli_bench(iters=args.iters, warmup=args.warmup, out=args.out, device=args.device)
