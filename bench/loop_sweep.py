#!/usr/bin/env python3
"""Time the persistent loop kernels under several RNNGRAPH_LOOP settings (the keys of
rnngraph/codegen/tuning.py and rnngraph/schedule_options.py, read by rnngraph/bench.py's gpu_program).

For each setting (threads per block, inner-product unroll, shared-memory budget for weights) and
each configuration it times rnngraph's forward and forward+backward with the fastrnns protocol
(rnngraph.bench.run: CUDA events, 10 warm-up, up to 100 timed, median) and cuDNN (fp32; TF32 too for LSTM) once per
configuration as the yardstick, all in one process; records go to --out as bench/run_all.py's
JSON (each rnngraph record carries its ``loop_tuning``). The best setting becomes LoopTuning's
default.

Usage (GPU):  python bench/loop_sweep.py --out $OUT/loop_sweep.json
              python bench/loop_sweep.py --configs lstm:1 --settings "threads=256,unroll=1,smem_kib=0" "threads=512" --out x.json
              python bench/loop_sweep.py --configs layernorm_lstm:1 layernorm_lstm:64 --settings ln=0 ln=1 --out ln.json
              (ln=1: layer norms inside the persistent loop kernels, the default up to S=64; ln=0: graph mode)
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

from rnngraph.bench import (PROTOCOL, Config, Protocol, describe, device_name, run, versions,  # noqa: E402
                            write_results)

SETTINGS = ("threads=256,unroll=1,rows=1,smem_kib=0",  # the first loop kernel (2026-11-29)
            "threads=256,unroll=4,rows=1,smem_kib=44", "threads=512,unroll=4,rows=1,smem_kib=44",
            "threads=512,unroll=4,rows=2,smem_kib=44", "threads=512,unroll=4,rows=4,smem_kib=44",
            "threads=1024,unroll=2,rows=2,smem_kib=44")
CONFIGS = (Config("lstm", S=1), Config("lstm", S=64), Config("lstm", S=16), Config("peephole_lstm", S=64),
           Config("gru", S=1))
BASELINES = {"lstm": ("cudnn-fp32", "cudnn-tf32"), "gru": ("cudnn-fp32",)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", nargs="+", default=SETTINGS, help="RNNGRAPH_LOOP values to compare")
    ap.add_argument("--configs", nargs="+", metavar="CELL:S", help="configurations (T=100, H=512), e.g. lstm:1 "
                    "lstm:64 (default: " + " ".join(f"{c.cell}:{c.S}" for c in CONFIGS) + ")")
    ap.add_argument("--out", help="JSON file, rewritten after each record")
    ap.add_argument("--max-seconds", type=float, default=2.0, help="timed seconds per measurement at most")
    a = ap.parse_args(argv)
    proto = Protocol(max_seconds=a.max_seconds)
    configs = CONFIGS
    if a.configs:
        try:
            configs = [Config(cell, S=int(streams)) for cell, _, streams in (c.partition(":") for c in a.configs)]
        except ValueError:
            ap.error(f"--configs: expected CELL:S items such as lstm:64, got {a.configs}")
    result = {"device": device_name(True), "date": datetime.date.today().isoformat(), "versions": versions(),
              "protocol": PROTOCOL, "settings": list(a.settings), "records": []}
    for cfg in configs:
        for impl in BASELINES.get(cfg.cell, ()):
            rec = run(cfg, impl, proto)
            result["records"].append(rec)
            print(describe(rec), flush=True)
        for setting in a.settings:
            os.environ["RNNGRAPH_LOOP"] = setting
            rec = run(cfg, "rnngraph", proto)
            rec["setting"] = setting
            result["records"].append(rec)
            print(f"[{setting}] {describe(rec)}", flush=True)
            write_results(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
