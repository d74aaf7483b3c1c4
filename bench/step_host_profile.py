#!/usr/bin/env python3
"""Where the host's time goes in a training call of a small char LM (GPU only): the S = 1 step's
GPU was idle about a quarter of the time (bench/results/h100-20261205-lm-step-trace-feed-first.json:
0.148 ms from the first input copy to the first kernel), and the trace cannot say which host
work that was.

For each model of bench/startup.py's MODELS it compiles (``rg.compile``, Adam, clip 1.0), warms
up, then times ``--steps`` calls of ``step.train(x, y)`` whose loss is read at once: the host
time until ``train`` returns (the enqueueing: input checks, staged copies, the step's graph
launch) and until the loss is read (the GPU's work and the settling), medians in microseconds;
then the same calls under cProfile, whose functions with the largest own time go to
``--profile`` (the GPU wait shows as the synchronising call's own time).

Usage (GPU):  python3 bench/step_host_profile.py --models 1x512-s1 --steps 300 --out $OUT/host.json --profile $OUT/host.txt
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup import MODELS, _batch  # noqa: E402


def measure(model: str, steps: int, profile: io.StringIO) -> dict:
    """Median host microseconds of enqueueing and of a whole read-at-once training call."""
    import rnngraph as rg
    cell, L, H, V, E, T, S = MODELS[model]
    net = rg.stacked(getattr(rg.cells, cell), L, H, vocab=V, embed=E)
    step = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.Adam(lr=2e-3), clip_norm=1.0, seed=0)
    batches = [_batch(model, i) for i in range(steps)]
    for x, y in batches[:30]:
        float(step.train(x, y))
    enqueue, whole = [], []
    for x, y in batches:
        t0 = time.perf_counter()
        loss = step.train(x, y)
        t1 = time.perf_counter()
        float(loss)
        t2 = time.perf_counter()
        enqueue.append(t1 - t0)
        whole.append(t2 - t0)
    prof = cProfile.Profile()
    prof.enable()
    for x, y in batches:
        float(step.train(x, y))
    prof.disable()
    profile.write(f"== {model}: {steps} training calls, loss read after each, by own time\n")
    pstats.Stats(prof, stream=profile).sort_stats("tottime").print_stats(40)
    return {"model": model, "steps": steps, "enqueue_us": statistics.median(enqueue) * 1e6,
            "call_us": statistics.median(whole) * 1e6}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="1x512-s1", help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", required=True, help="results JSON")
    p.add_argument("--profile", required=True, help="the cProfile text")
    a = p.parse_args(argv)
    text = io.StringIO()
    records = [measure(m, a.steps, text) for m in a.models.split(",")]
    for r in records:
        print(f"{r['model']}: enqueue {r['enqueue_us']:.1f} us, whole call {r['call_us']:.1f} us")
    Path(a.out).write_text(json.dumps({"benchmark": "step-host-profile", "date": time.strftime("%Y-%m-%d"),
                                       "command": " ".join(sys.argv[1:]), "records": records}, indent=1))
    Path(a.profile).write_text(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
