#!/usr/bin/env python3
"""Print each parameter's float32 error of the layernorm_lstm step against float64, per RNNGRAPH_LOOP setting (GPU).

The generated step (H=512, T=100, S=--streams) against the float64 NumPy backend, next to float32
NumPy's error: tests/test_gpu.py's comparison (``_check_against_float64``), which prints every
error and the GPU / NumPy ratio; a setting over the bound (--factor x NumPy's error + 1e-5; by
default the GPU tier's: 10 at S=16, else 4) is reported and the next one runs. Exit status 1 if
any setting was over the bound.

Usage (GPU):  python bench/s16_precision.py [--streams 16] [--factor F] ln=1,lnsum=2,barrier=0 ln=0
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("settings", nargs="+", help="RNNGRAPH_LOOP values, e.g. ln=1,lnsum=2 ln=0")
    ap.add_argument("--streams", type=int, default=16, help="streams S (default 16)")
    ap.add_argument("--factor", type=float, help="bound: factor x float32 NumPy error + 1e-5 (default: 10 at S=16, else 4)")
    a = ap.parse_args(argv)
    import test_gpu
    if a.factor is None:  # the GPU tier's bound for this S
        a.factor = next((f for s, _, f in test_gpu.LN_CASES if s == a.streams), 4)
    failed = 0
    for setting in a.settings:
        print(f"RNNGRAPH_LOOP={setting}", flush=True)
        try:  # the setting's keys over the defaults for S, passed as options and tuning
            test_gpu._check_against_float64("layernorm_lstm", 1, a.streams, a.factor, knobs=setting)
        except AssertionError as e:
            failed += 1
            print(f"over the bound ({a.factor}x): {str(e)[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
