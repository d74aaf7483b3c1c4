"""The full benchmark grid: rnngraph against cuDNN and PyTorch, every ratio from one run.

Configurations (float32, I = H unless said; jobs run in this order, most important first, so a
--time-budget cuts the least important):
 1. LSTM T=100 S=64 H=512 (the fastrnns default): cuDNN fp32/TF32, rnngraph, rnngraph-naive,
    torch-eager, torchscript;
 2. LSTM T=100 H=512, S in {1, 4, 16, 128}: cuDNN fp32/TF32, rnngraph (+ rnngraph-naive at S=1);
 3. peephole_lstm, gru, layernorm_lstm at T=100 H=512, S in {1, 64}: rnngraph, cuDNN (gru),
    torch-eager, torchscript (+ rnngraph-naive at S=1);
 4. a char-level LM training step (Embedding(96, 128) -> LSTM 512 -> softmax, T=100, S in {1, 64}):
    rnngraph on the GPU against rnngraph-cpu (the NumPy backend);
 5. LSTM T=1000 S=1 H=512; 6. 4-layer LSTM T=100 S=64 H=512: cuDNN fp32/TF32, rnngraph;
 7. torch-compile-cell (torch.compile of the cell, the loop in Python: seconds to compile) of
    peephole_lstm, layernorm_lstm, gru, lstm at S in {1, 64};
 8. LSTM T=100, H in {256, 1024} x S in {1, 4, 16, 64, 128}: cuDNN fp32/TF32, rnngraph;
 9. with --compile only: torch-compile of peephole_lstm, layernorm_lstm, gru, lstm (S=64, then
    S=1), within --compile-budget (each compile takes about 100 s on an H200).

Usage (GPU machine):  python bench/run_all.py --out bench/results/h200-YYYYMMDD.json --time-budget 420
                      python bench/run_all.py --list            # the job labels, nothing run
                      python bench/run_all.py --only 'peephole.*s64.*/torch' --out x.json
Without a GPU the full grid is refused; ``--quick`` then times the CPU part only (the NumPy
backend's LM step on small shapes). Each record is printed as it completes and the JSON
(device, versions, date, protocol, settings, records, skipped, time_budget) is rewritten after
each one, so a run cut short keeps what it measured. Table and plot: bench/report.py.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

from rnngraph.bench import Config, Protocol, gpu_available, run_jobs  # noqa: E402

CUDNN = ("cudnn-fp32", "cudnn-tf32")
CORE = CUDNN + ("rnngraph",)
TORCH = ("torch-eager", "torchscript")
LM = dict(cell="lstm", layers=1, T=100, H=512, I=128, vocab=96)


def lstm(S: int, H: int = 512, T: int = 100, layers: int = 1, cell: str = "lstm") -> Config:
    return Config(cell, layers, T, S, H, H)


def full_grid(compile: bool = False) -> list[tuple[Config, str]]:
    """Every (Config, impl) job of the full grid, in run order (see the module docstring)."""
    jobs = [(lstm(64), i) for i in CORE + ("rnngraph-naive",) + TORCH]
    for S in (1, 4, 16, 128):
        jobs += [(lstm(S), i) for i in CORE]
    jobs.append((lstm(1), "rnngraph-naive"))
    for cell in ("peephole_lstm", "gru", "layernorm_lstm"):
        for S in (1, 64):
            cfg = lstm(S, cell=cell)
            cudnn = CUDNN if cell == "gru" else ()
            jobs += [(cfg, i) for i in ("rnngraph",) + cudnn + TORCH]
        jobs.append((lstm(1, cell=cell), "rnngraph-naive"))
    for S in (1, 64):
        jobs += [(Config(S=S, **LM), i) for i in ("rnngraph", "rnngraph-cpu")]
    jobs += [(lstm(1, T=1000), i) for i in CORE]
    jobs += [(lstm(64, layers=4), i) for i in CORE]
    for S in (1, 64):  # the cost model's plan choice against a measurement of both plans
        jobs += [(lstm(S, layers=4), i) for i in CORE + ("rnngraph-wavefront", "rnngraph-scc-sequential")]
    for cell in ("peephole_lstm", "layernorm_lstm", "gru", "lstm"):  # the cell compiled, the loop eager
        jobs += [(lstm(S, cell=cell), "torch-compile-cell") for S in (1, 64)]
    for H in (256, 1024):
        for S in (1, 4, 16, 64, 128):
            jobs += [(lstm(S, H), i) for i in CORE]
    if compile:
        for S in (64, 1):
            jobs += [(lstm(S, cell=c), "torch-compile") for c in ("peephole_lstm", "layernorm_lstm", "gru", "lstm")]
    return list(dict.fromkeys(jobs))  # first occurrence wins


def quick_grid(gpu: bool) -> list[tuple[Config, str]]:
    """--quick: a smoke test of every GPU path (or, without a GPU, the CPU part on small shapes)."""
    if not gpu:
        return [(Config("lstm", 1, 32, 16, 128, 32, vocab=64), "rnngraph-cpu")]
    return ([(lstm(64), i) for i in ("cudnn-fp32", "rnngraph", "rnngraph-naive", "torch-eager", "torchscript")]
            + [(lstm(1), i) for i in ("cudnn-fp32", "rnngraph")]
            + [(Config(S=16, **{**LM, "T": 32}), i) for i in ("rnngraph", "rnngraph-cpu")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--out", default="bench_results.json", help="results JSON (default bench_results.json)")
    ap.add_argument("--quick", action="store_true", help="a small subset, 3 warm-up + 20 timed calls (without a "
                                                         "GPU: the CPU part only)")
    ap.add_argument("--only", metavar="REGEX", help="run only jobs whose label (see --list) matches (re.search)")
    ap.add_argument("--list", action="store_true", help="print the job labels and exit")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 10; --quick 3)")
    ap.add_argument("--iters", type=int, default=None, help="timed calls (default 100; --quick 20)")
    ap.add_argument("--max-seconds", type=float, default=5.0,
                    help="cap on one measurement's timed calls, in s (slow calls get fewer, at least 5; "
                         "0 = no cap; default 5)")
    ap.add_argument("--time-budget", metavar="SECONDS", type=float, default=None,
                    help="start no job after this many seconds; skipped jobs are listed in the JSON")
    ap.add_argument("--compile", action="store_true", help="add the torch-compile jobs (about 100 s each)")
    ap.add_argument("--compile-budget", metavar="SECONDS", type=float, default=300.0,
                    help="start no torch-compile job once compiles have taken this long (default 300)")
    args = ap.parse_args(argv)

    gpu = gpu_available()
    jobs = quick_grid(gpu) if args.quick else full_grid(args.compile)
    if args.only:
        jobs = [(c, i) for c, i in jobs if re.search(args.only, c.label(i))]
        if not jobs:
            print(f"run_all.py: --only {args.only!r} matches no job (see --list)", file=sys.stderr)
            return 2
    if args.list:
        print("\n".join(c.label(i) for c, i in jobs))
        print(f"{len(jobs)} jobs", file=sys.stderr)
        return 0
    if not gpu and not args.quick:
        print("run_all.py: numba finds no CUDA GPU: the full grid needs one (run it on the GPU machine); "
              "--quick times the CPU part (the NumPy backend) alone", file=sys.stderr)
        return 2
    if not gpu:
        print("no CUDA GPU: timing the CPU part only (rnngraph-cpu)", flush=True)
    proto = Protocol(warmup=args.warmup if args.warmup is not None else (3 if args.quick else 10),
                     iters=args.iters if args.iters is not None else (20 if args.quick else 100),
                     max_seconds=args.max_seconds or None)
    result = run_jobs(jobs, proto, out=args.out, time_budget=args.time_budget,
                      compile_budget=args.compile_budget if args.compile else None, gpu=gpu,
                      settings={"entry": "bench/run_all.py", "quick": args.quick, "only": args.only,
                                "compile": args.compile})
    failed = sum(1 for r in result["records"] if r.get("error"))
    print(f"{len(result['records'])} records ({failed} failed), {len(result['skipped'])} skipped, "
          f"{result['time_budget']['elapsed_s']:.0f} s; wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
