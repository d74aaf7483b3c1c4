"""Where the LSH output layer stops paying: one training step of the output layer alone, LSH
against dense (cuBLAS fp32 and bf16), over a grid of classes C x hidden size H x batch n (issue 28).

An LSH layer touches about ``min_active`` classes a sample (plus the hashing, the active-set
collection and, every ``rebuild_every`` samples, a rebuild of its tables from all C rows); a
dense layer multiplies all C. So the LSH layer wins at large C and small H, and the GPU's
tensor-core GEMM wins where C is small next to ``min_active`` or H is large. This script measures
where, with the layers bench/lsh_gpu.py trains (its LSHHead and DenseHead, the same LSH flags and
defaults; G-SLIDE's sets, ``batch_labels=False``, LSHConfig's default and lsh_gpu.py's ``lsh`` variant,
unless ``--batch-labels``):

- inputs: random (n, H) float32 activations (|N(0, 1)|, as after a ReLU), one label a sample drawn
  uniformly from C, the same every step (seeded);
- a step: forward logits, softmax cross-entropy, the gradients of the weights, bias and input, the
  Adam update (touched rows for LSH, every row for dense), and for LSH its rebuild clock;
- timed: ``--steps`` steps after ``--warmup`` (which compile the kernels), the GPU synchronised
  before and after; ``step_ms`` the mean, with at least ``--min-samples`` samples (so every LSH
  time includes its share of rebuilds: several at the default 6,400 samples a rebuild);
- each LSH record's ``lsh_over_dense_bf16``: the LSH step's time over the dense bf16 step's, and
  ``lsh_over_best_dense``: over the faster of the dense steps run (< 1: LSH faster;
  bf16 is not always the faster, its operand copies cost time).

Usage (GPU)::

    python3 bench/lsh_crossover.py --out bench/results/h100-YYYYMMDD-lsh-crossover.json
    python3 bench/lsh_crossover.py --classes 100000 --hidden 1024 --batch 2240   # one point
    python bench/lsh_crossover.py --smoke    # tiny shapes in numba's CUDA simulator (tests/test_bench.py)
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsh_gpu import add_lsh_flags, lsh_config  # noqa: E402

HEADS = ("lsh", "dense-fp32", "dense-bf16")
SMOKE = dict(classes=[64], hidden=[8], batch=[4], steps=2, warmup=1, min_samples=0,
             lsh=dict(K=2, L=2, bin_size=4, capacity=8, min_active=8, rebuild_every=8, redraw_every=16))


def _ints(text: str, least: int = 1) -> list[int]:
    """A comma-separated list of ints >= ``least`` (argparse type)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < least:
        raise argparse.ArgumentTypeError(f"expected {'positive integers' if least == 1 else f'integers >= {least}'}, "
                                         f"got {text!r}")
    return values


def _classes(text: str) -> list[int]:
    """--classes: a comma-separated list of ints >= 2 (a softmax over one class is constant)."""
    return _ints(text, least=2)


def _at_least(least: int):
    """An argparse type: one int >= ``least``."""
    def parse_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}")
        return value
    return parse_int


def parse(argv=None) -> argparse.Namespace:
    """The command line as a namespace, ``config`` the LSHConfig of the LSH flags (bench/lsh_gpu.py's
    defaults); ``--smoke`` replaces the grid, the step counts and the config by SMOKE's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes in numba's CUDA simulator")
    ap.add_argument("--classes", type=_classes, default=[10_000, 100_000, 670_091], help="C values (comma-separated)")
    ap.add_argument("--hidden", type=_ints, default=[128, 512, 1024], help="H values")
    ap.add_argument("--batch", type=_ints, default=[256, 2240], help="samples a step (n values)")
    ap.add_argument("--heads", default=",".join(HEADS), help=f"of {', '.join(HEADS)}")
    ap.add_argument("--steps", type=_at_least(1), default=20, help="timed steps (more where --min-samples asks)")
    ap.add_argument("--warmup", type=_at_least(0), default=3)
    ap.add_argument("--min-samples", type=_at_least(0), default=25_600,
                    help="timed samples at least (default: four rebuilds at --rebuild-every 6400)")
    ap.add_argument("--lr", type=float, default=1e-3)
    add_lsh_flags(ap)
    ap.add_argument("--batch-labels", action="store_true",
                    help="the batch's labels in every LSH active set (LSHConfig(batch_labels=True); without it G-SLIDE's sets, the default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="JSON results file")
    a = ap.parse_args(argv)
    unknown = [h for h in a.heads.split(",") if h not in HEADS]
    if unknown:
        ap.error(f"--heads: unknown {', '.join(map(repr, unknown))}; known: {', '.join(HEADS)}")
    a.config = lsh_config(ap, a, SMOKE, batch_labels=a.batch_labels)
    return a


def time_head(a, head: str, C: int, H: int, n: int) -> dict:
    """One record: ``head`` (of HEADS) with C classes over H inputs, batches of n; step_ms (mean over
    the timed steps, ms), the steps and samples timed, and for LSH the mean active set a batch."""
    from numba import cuda
    from lsh_gpu import DenseHead, LSHHead, sync
    rng = np.random.default_rng(a.seed)
    h = cuda.to_device(np.abs(rng.standard_normal((n, H))).astype(np.float32))
    labels = SimpleNamespace(l_ids=cuda.to_device(rng.integers(0, C, n).astype(np.int32)))
    l_off = cuda.to_device(np.arange(n + 1, dtype=np.int64))
    flags = SimpleNamespace(labels=C, config=a.config, seed=a.seed, lr=a.lr)
    layer = (LSHHead(flags, H, rng, "touched", max_labels=1, batch_labels=a.config.batch_labels) if head == "lsh"
             else DenseHead(flags, H, rng, bf16=head == "dense-bf16"))
    for _ in range(a.warmup):
        layer.step(h, labels, l_off)
    steps = max(a.steps, -(-a.min_samples // n))
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        layer.step(h, labels, l_off)
    sync()
    rec = {"head": head, "classes": C, "hidden": H, "batch": n, "steps": steps, "samples": steps * n,
           "step_ms": (time.perf_counter() - t0) / steps * 1e3}
    rec.update(layer.stats())
    return rec


def main(argv=None) -> dict:
    """Runs the grid (module docstring); returns the results, also written to ``--out`` after each
    point."""
    a = parse(argv)
    if a.smoke and "numba" not in sys.modules:  # the simulator is chosen when numba loads
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    from rnngraph.bench.results import device_name, versions, write_results
    from rnngraph.codegen.device import in_simulator
    result = {"benchmark": "lsh_crossover", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "device": device_name(not in_simulator()), "versions": versions(), "smoke": a.smoke,
              "grid": {"classes": a.classes, "hidden": a.hidden, "batch": a.batch},
              "lsh_config": {k: getattr(a.config, k) for k in ("K", "L", "bin_size", "capacity", "min_active",
                                                                "rebuild_every", "redraw_every", "batch_labels")},
              "records": []}
    for C in a.classes:
        for H in a.hidden:
            for n in a.batch:
                point = {}
                for head in a.heads.split(","):
                    try:
                        rec = time_head(a, head, C, H, n)
                    except Exception as e:  # e.g. out of memory: a record, the grid goes on
                        rec = {"head": head, "classes": C, "hidden": H, "batch": n, "error": f"{type(e).__name__}: {e}"}
                    gc.collect()   # the tables and weights of this point are freed before the next
                    point[head] = rec
                    result["records"].append(rec)
                if "step_ms" in point.get("lsh", {}) and "step_ms" in point.get("dense-bf16", {}):
                    point["lsh"]["lsh_over_dense_bf16"] = point["lsh"]["step_ms"] / point["dense-bf16"]["step_ms"]
                dense = [r["step_ms"] for k, r in point.items() if k.startswith("dense") and "step_ms" in r]
                if "step_ms" in point.get("lsh", {}) and dense:
                    point["lsh"]["lsh_over_best_dense"] = point["lsh"]["step_ms"] / min(dense)
                print(f"C {C:>7}  H {H:>5}  n {n:>5}  " + "  ".join(
                    f"{k} {r['step_ms']:8.3f} ms" if "step_ms" in r else f"{k} error" for k, r in point.items())
                    + (f"  lsh/bf16 {point['lsh']['lsh_over_dense_bf16']:.2f}" if "lsh_over_dense_bf16"
                       in point.get("lsh", {}) else ""), flush=True)
                write_results(a.out, result)
    return result


if __name__ == "__main__":
    failed = [r for r in main()["records"] if "error" in r]
    raise SystemExit(f"{len(failed)} failed points" if failed else 0)
