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

``--grid precision`` is the tensor-core benchmark instead (:func:`precision_grid`): fwd + bwd,
T = 100, LSTM H in {512, 1024} x S in {1, 16, 64, 128} x 1 and 4 layers, then peephole and
layer-norm LSTM at H = 1024, rnngraph in each precision (rnngraph, -tf32, -bf16, and -tf32-mma,
-bf16-mma with the loops' products on tensor cores too) against cuDNN fp32, TF32, fp16 and bf16;
the configurations its targets name run first, and the JSON gains ``targets``
(:func:`precision_targets`). 120 of its 184 jobs compile an rnngraph program (10 to 30 s each):
split them over several runs with ``--only`` (e.g. ``'h1024-i1024/'``) or cut them with
``--time-budget``. ``--compile`` adds nothing to it.

Usage (GPU machine):  python bench/run_all.py --out bench/results/h200-YYYYMMDD.json --time-budget 420
                      python bench/run_all.py --list            # the job labels, nothing run
                      python bench/run_all.py --only 'peephole.*s64.*/torch' --out x.json
                      python bench/run_all.py --grid precision --only 'l1-t100-s(64|128)-h1024' --out x.json
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

from rnngraph.bench import (CUDNN_HALF, PRECISION_IMPLS, Config, Protocol, gpu_available, run_jobs,  # noqa: E402
                            write_results)

CUDNN = ("cudnn-fp32", "cudnn-tf32")
HALF_CUDNN = tuple(CUDNN_HALF)  # cudnn-fp16, cudnn-bf16
PRECISIONS = ("rnngraph", *PRECISION_IMPLS)  # fp32, then tf32, bf16, and each with the loops on tensor cores
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


def precision_grid() -> list[tuple[Config, str]]:
    """Every (Config, impl) job of ``--grid precision`` (see the module docstring), in run order:
    the configurations :data:`PRECISION_TARGETS` name first."""
    first = [target[1] for target in PRECISION_TARGETS]
    lstms = [lstm(S, H, layers=L) for L in (1, 4) for H in (512, 1024) for S in (1, 16, 64, 128)]
    jobs = [(cfg, i) for cfg in dict.fromkeys(first + lstms) for i in CUDNN + HALF_CUDNN + PRECISIONS]
    for cell in ("peephole_lstm", "layernorm_lstm"):
        jobs += [(lstm(S, 1024, cell=cell), i) for S in (1, 16, 64, 128) for i in PRECISIONS]
    return jobs


#: the tensor-core issue's targets: (what, config, rnngraph impls (the faster counts), anchor impls
#: (the faster counts), the largest ratio of forward + backward times that meets it)
PRECISION_TARGETS = [
    ("tf32 <= 1.0x cuDNN TF32, LSTM H=1024 S=64", lstm(64, 1024), ("rnngraph-tf32", "rnngraph-tf32-mma"),
     ("cudnn-tf32",), 1.0),
    ("tf32 <= 1.0x cuDNN TF32, LSTM H=1024 S=128", lstm(128, 1024), ("rnngraph-tf32", "rnngraph-tf32-mma"),
     ("cudnn-tf32",), 1.0),
    ("tf32 <= 0.7x cuDNN TF32, LSTM H=512 S=64", lstm(64), ("rnngraph-tf32", "rnngraph-tf32-mma"), ("cudnn-tf32",), 0.7),
    ("bf16 <= 0.8x cuDNN's faster half precision, LSTM H=1024 S=64", lstm(64, 1024),
     ("rnngraph-bf16", "rnngraph-bf16-mma"), HALF_CUDNN, 0.8),
    ("bf16 <= 0.15x cuDNN fp32, LSTM H=512 S=1", lstm(1), ("rnngraph-bf16", "rnngraph-bf16-mma"), ("cudnn-fp32",), 0.15),
]


def precision_targets(records: list[dict]) -> list[dict]:
    """Each of :data:`PRECISION_TARGETS` from ``records`` (a run's): the faster rnngraph record's
    ``fwdbwd_ms`` over the faster anchor's, ``met`` (None where a record is missing or failed)."""
    def fastest(cfg: Config, impls) -> dict | None:
        fields = cfg.fields()
        recs = [r for r in records if r["impl"] in impls and r.get("fwdbwd_ms")
                and all(r.get(k) == v for k, v in fields.items())]
        return min(recs, key=lambda r: r["fwdbwd_ms"], default=None)

    out = []
    for what, cfg, mine, anchors, bound in PRECISION_TARGETS:
        m, a = fastest(cfg, mine), fastest(cfg, anchors)
        ratio = m["fwdbwd_ms"] / a["fwdbwd_ms"] if m and a else None
        out.append({"target": what, "bound": bound, "impl": m and m["impl"], "ms": m and m["fwdbwd_ms"],
                    "anchor": a and a["impl"], "anchor_ms": a and a["fwdbwd_ms"], "ratio": ratio,
                    "met": None if ratio is None else ratio <= bound})
    return out


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
    ap.add_argument("--grid", choices=("full", "precision"), default="full",
                    help="full: the grid above (default); precision: the tensor-core benchmark")
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
    if args.quick and args.grid != "full":
        ap.error("--quick is a subset of the full grid: leave out --grid")
    jobs = quick_grid(gpu) if args.quick else precision_grid() if args.grid == "precision" else full_grid(args.compile)
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
        print(f"run_all.py: numba finds no CUDA GPU: the {args.grid} grid needs one (run it on the GPU machine); "
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
                                "compile": args.compile, "grid": args.grid})
    if args.grid == "precision":
        result["targets"] = precision_targets(result["records"])
        write_results(args.out, result)
        for t in result["targets"]:
            ratio = "not measured" if t["ratio"] is None else f"{t['ratio']:.2f}x ({'met' if t['met'] else 'not met'})"
            print(f"{t['target']}: {ratio}", flush=True)
    failed = sum(1 for r in result["records"] if r.get("error"))
    print(f"{len(result['records'])} records ({failed} failed), {len(result['skipped'])} skipped, "
          f"{result['time_budget']['elapsed_s']:.0f} s; wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
