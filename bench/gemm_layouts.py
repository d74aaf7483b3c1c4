#!/usr/bin/env python3
"""The once-per-window GEMMs of a stacked LSTM's training step by operand layout (GPU).

The 2 x 512 S = 64 char LM's step (T = 100: 6,400 columns) spent 0.354 ms in its second layer's
input product, out (6400, 2048) = x (6400, 512) @ W^T, on an H100, where cuBLAS picked a 64 x 64
tile kernel (38 TFLOP/s), against 0.26 ms (51 TFLOP/s) for the weight gradient of the same size
(bench/results/h100-20261206-lm-step-trace-2x512-s64-fwd-4-groups.json). This times, with
``library.gemm_launcher`` (cuBLAS SGEMM as the step calls it) on one stream, CUDA events, the
median of --iters launches in ms:

- ``x@W^T``: the step's way (W as stored, (4H, K), transposed by cuBLAS);
- ``x@WT``: the same product from a transposed copy of W, (K, 4H);
- ``x@W^T+bias``: the step's way with its bias add (``library.add_bias``) after it;
- ``fill+x@W^T``: the bias written into every row first (a candidate kernel defined below, writes
  only), then the product added by cuBLAS (beta = 1);
- ``dW``, ``dx``: the weight-gradient and input-gradient products of the same layer, for scale.

for K in --inner (the char LM's embedding 128 and the hidden size 512). Each record also has
the largest difference from the step's way (0 where the same sums are taken in another order up
to rounding). Writes one JSON record per timing to --out and prints it. Usage (GPU)::

    python3 bench/gemm_layouts.py --out $OUT/gemm-layouts.jsonl
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from rnngraph.codegen import library  # noqa: E402
from loop_profile import _event_times  # noqa: E402  (bench/ is the script's directory)


@cuda.jit
def _broadcast_rows(out, bias):
    """out[i, j] = bias[j]; grid (ceil(N / tpb), M)."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j < out.shape[1]:
        out[cuda.blockIdx.y, j] = bias[j]


def _cases(cols: int, rows: int, inner: int, stream):
    """name -> (launch function, output array) of the products of one layer."""
    rng = np.random.default_rng(0)
    dev = lambda *shape: cuda.to_device(rng.standard_normal(shape).astype(np.float32), stream=stream)  # noqa: E731
    x, w, bias, gy = dev(cols, inner), dev(rows, inner), dev(rows), dev(cols, rows)
    wt = cuda.to_device(np.ascontiguousarray(w.copy_to_host().T), stream=stream)
    outs = {name: cuda.device_array((cols, rows), np.float32, stream=stream)
            for name in ("x@W^T", "x@WT", "x@W^T+bias", "fill+x@W^T")}
    plain, _ = library.gemm_launcher(x, w, outs["x@W^T"], trans_b=True, stream=stream)
    from_t, _ = library.gemm_launcher(x, wt, outs["x@WT"], stream=stream)
    biased, _ = library.gemm_launcher(x, w, outs["x@W^T+bias"], trans_b=True, stream=stream)
    onto, _ = library.gemm_launcher(x, w, outs["fill+x@W^T"], trans_b=True, beta=1.0, stream=stream)
    filled = outs["fill+x@W^T"]
    dw = cuda.device_array((rows, inner), np.float32, stream=stream)
    dx = cuda.device_array((cols, inner), np.float32, stream=stream)
    grad_w, _ = library.gemm_launcher(gy, x, dw, trans_a=True, stream=stream)
    grad_x, _ = library.gemm_launcher(gy, w, dx, stream=stream)

    def fill_rows():
        _broadcast_rows[((rows + 255) // 256, cols), 256, stream](filled, bias)

    return {"x@W^T": (plain, outs["x@W^T"]), "x@WT": (from_t, outs["x@WT"]),
            "x@W^T+bias": (lambda: (biased(), library.add_bias(outs["x@W^T+bias"], bias, stream=stream)),
                           outs["x@W^T+bias"]),
            "fill+x@W^T": (lambda: (fill_rows(), onto()), filled),
            "dW": (grad_w, dw), "dx": (grad_x, dx)}, (x, w, wt, bias, gy)  # (the launchers hold raw pointers)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cols", type=int, default=6400, help="T x S columns (default 6400)")
    ap.add_argument("--rows", type=int, default=2048, help="4H output rows (default 2048)")
    ap.add_argument("--inner", type=int, nargs="+", default=[128, 512], help="K of each layer (default 128 512)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    stream = cuda.stream()
    name = getattr(cuda.get_current_device(), "name", "simulator")
    device = name.decode() if isinstance(name, bytes) else name
    records = []
    for inner in args.inner:
        cases, arrays = _cases(args.cols, args.rows, inner, stream)
        bias = arrays[3]
        ref = None
        for name, (fn, out) in cases.items():
            ms = statistics.median(_event_times(fn, stream, args.iters))
            rec = {"benchmark": "gemm_layouts", "device": device, "cols": args.cols, "rows": args.rows, "inner": inner, "case": name, "ms": ms,
                   "tflops": 2 * args.cols * args.rows * inner / ms / 1e9}
            got = out.copy_to_host(stream=stream)
            stream.synchronize()
            if name == "x@W^T":
                ref = got
            elif name in ("x@WT",):
                rec["max_abs_diff"] = float(np.abs(got - ref).max())
            elif name in ("x@W^T+bias", "fill+x@W^T"):
                rec["max_abs_diff"] = float(np.abs(got - ref - bias.copy_to_host()).max())
            records.append(rec)
            print(json.dumps(rec), flush=True)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
