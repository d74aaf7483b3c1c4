#!/usr/bin/env python3
"""Every parameter's float32 error of the generated layernorm_lstm step (H=512, T=100) against the
float64 NumPy backend, next to float32 NumPy's, under several RNNGRAPH_LOOP settings (GPU).

It runs tests/test_gpu.py's comparison (``_check_against_float64``), which prints each error and
the GPU / NumPy ratio, and reports a setting whose ratios exceed the bound instead of stopping.

Usage (GPU):  python bench/s16_precision.py [--streams 16] ln=1,lnsum=2,barrier=0 ln=0
"""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("settings", nargs="+", help="RNNGRAPH_LOOP values, e.g. ln=1,lnsum=2 ln=0")
    ap.add_argument("--streams", type=int, default=16, help="streams S (default 16)")
    ap.add_argument("--factor", type=float, default=4, help="bound: factor x float32 NumPy error + 1e-5 (default 4)")
    a = ap.parse_args(argv)
    import test_gpu
    failed = 0
    for setting in a.settings:
        os.environ["RNNGRAPH_LOOP"] = setting
        print(f"RNNGRAPH_LOOP={setting}", flush=True)
        try:
            test_gpu._check_against_float64("layernorm_lstm", 1, a.streams, a.factor)
        except AssertionError as e:
            failed += 1
            print(f"over the bound ({a.factor}x): {str(e)[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
