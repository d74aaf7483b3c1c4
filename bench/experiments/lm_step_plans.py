#!/usr/bin/env python3
"""The char-LM training step of bench/startup.py's models with each plan forced: is the cost
model's choice the faster one? (``rg.compile(..., plan=...)``; ``step.schedule`` names the plan.)

For each model (at each of ``--streams``, with each of ``--cells``, with ``--layers``, where given)
and plan, in one process: compile, a warm-up, then the median of ``--steps`` timed steps with the
loss read (synchronised) and the mean of as many with the losses left unread until the end (the
GPU's pace), as bench/startup.py times them. Writes one JSON record per (model, cell, layers, S,
plan) with the plan the cost model picks unforced and its estimates (the schedule's ``why:``
line), and the device's name.
Usage (GPU)::

    python3 bench/experiments/lm_step_plans.py --models 2x512-s8 --out $OUT/plans.json
    python3 bench/experiments/lm_step_plans.py --models 2x512-s8 --streams 2 4 16 --out $OUT/plans-s.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

import rnngraph as rg  # noqa: E402
from rnngraph.bench import device_name  # noqa: E402
from startup import MODELS  # noqa: E402

PLANS = ("scc-sequential", "wavefront")


def time_plan(model: str, plan: str, steps: int, streams: int | None = None, cell: str | None = None,
              layers: int | None = None) -> dict:
    """Compile ``model`` (with ``streams`` streams, ``cell`` and ``layers`` instead of its own,
    where given) with ``plan`` forced and time its step (ms); returns the record."""
    own_cell, L, H, V, E, T, S = MODELS[model]
    S, cell, L = streams or S, cell or own_cell, L if layers is None else layers
    net = rg.stacked(getattr(rg.cells, cell), L, H, vocab=V, embed=E)
    step = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.Adam(lr=2e-3), clip_norm=1.0,
                      seed=0, plan=plan)
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))) for _ in range(8)]
    for x, y in batches:
        float(step.train(x, y))
    times = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        t = time.perf_counter()
        float(step.train(x, y))
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    losses = [step.train(*batches[i % len(batches)]) for i in range(steps)]
    float(losses[-1])
    unread = (time.perf_counter() - t) / steps * 1e3
    why = str(step.schedule).splitlines()[1].strip()
    chosen = rg.compile(net, window=T, streams=S, device="cpu").schedule.plan  # the cost model's, unforced
    return {"model": model, "device": device_name(True), "cell": cell, "layers": L, "streams": S, "plan": plan,
            "cost_model_plan": chosen, "step_ms": statistics.median(times) * 1e3, "step_ms_unread": unread,
            "steps": steps, "why": why}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="2x512-s8", help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--plans", nargs="+", default=list(PLANS), choices=PLANS)
    ap.add_argument("--steps", type=int, default=200, help="timed steps each way (default 200)")
    ap.add_argument("--streams", type=int, nargs="+", help="S values to run each model at (default: its own)")
    ap.add_argument("--cells", nargs="+", help="standard cells to run each model with (default: its own)")
    ap.add_argument("--layers", type=int, help="layers (default: the model's)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown or args.steps < 1 or any(s < 1 for s in args.streams or ()) or (args.layers is not None
                                                                              and args.layers < 1):
        ap.error(f"unknown model {unknown[0]!r} (of {', '.join(MODELS)})" if unknown
                 else "--steps must be >= 1" if args.steps < 1 else "--streams must be >= 1"
                 if any(s < 1 for s in args.streams or ()) else "--layers must be >= 1")
    cells = list(rg.cells.STANDARD)
    if any(c not in cells for c in args.cells or ()):
        ap.error(f"unknown cell {next(c for c in args.cells if c not in cells)!r} (of {', '.join(cells)})")
    records = []
    for model in args.models.split(","):
        runs = [(c, S, p) for c in args.cells or [None] for S in args.streams or [None] for p in args.plans]
        for cell, S, plan in runs:
            r = time_plan(model, plan, args.steps, S, cell, args.layers)
            records.append(r)
            print(f"{model} {r['cell']} {r['layers']} layers S={r['streams']} {plan}: {r['step_ms']:.3f} ms read, "
                  f"{r['step_ms_unread']:.3f} ms unread  (unforced: {r['cost_model_plan']}; {r['why']})", flush=True)
            if args.out:  # rewritten after each record (a run cut short keeps what it measured)
                with open(args.out, "w") as f:
                    json.dump({"benchmark": "lm_step_plans", "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
