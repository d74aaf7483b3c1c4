"""How long the compiler's passes take (target: under 0.5 s for a 4-layer LSTM).

Usage: python bench/passes.py [--out bench/results/passes-cpu-YYYYMMDD.json]
Times tracing + validation + every pass + lowering for standard stacks, median of 10 runs, on
this machine's CPU, and writes one JSON object (device, versions, date, records in ms).
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time

import networkx
import numpy

import rnngraph as rg
from rnngraph.passes import schedule

CASES = [("lstm", 1), ("lstm", 4), ("layernorm_lstm", 4), ("gru", 4), ("lstm", 8)]


def measure(cell: str, layers: int, runs: int = 10) -> dict:
    """Median ms to trace the stack and compile its schedule (hidden 512, T=100, S=64)."""
    times, trace_times = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        net = rg.stacked(rg.cells.STANDARD[cell], layers, 512, vocab=10000, embed=512)
        g = net.graph
        t1 = time.perf_counter()
        schedule(g, 100, 64)
        t2 = time.perf_counter()
        trace_times.append((t1 - t0) * 1e3)
        times.append((t2 - t1) * 1e3)
    return {"cell": cell, "layers": layers, "H": 512, "T": 100, "S": 64, "nodes": len(g.nodes),
            "trace_ms": statistics.median(trace_times), "passes_ms": statistics.median(times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here as well as printing it")
    args = ap.parse_args()
    result = {"device": f"cpu {platform.processor() or platform.machine()}", "date": datetime.date.today().isoformat(),
              "versions": {"python": platform.python_version(), "numpy": numpy.__version__,
                           "networkx": networkx.__version__, "rnngraph": rg.__version__},
              "records": [measure(c, n) for c, n in CASES]}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
