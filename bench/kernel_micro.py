#!/usr/bin/env python3
"""Micro-benchmarks of the library kernels that run outside the persistent loops (GPU).

Times (CUDA events, median of --iters launches, ms) on one stream:

- zeroing a gradient arena of --arena-mb MB: the fill kernel (``library.fill``'s way for values other
  than zero) against the
  driver's memset (``cuMemsetD8Async`` through numba's ``driver.device_memset``);
- layer norm over an (N, n) float32 array (the input layer norm of layernorm_lstm at T=100,
  S=64, H=512 is N = 6400 rows of n = 2048): ``library.layer_norm_forward`` and the two kernels of
  ``library.layer_norm_backward`` (rows, columns) each alone and together, against warp-per-row
  candidates (experimental kernels defined below; their largest difference from the library's
  result is recorded before they are timed, a "check" record; at most NMAX = 4096 columns).

Each timing is of one launch between two events, so it includes the host's launch time
(about 0.05 ms for a numba kernel; bench/kernel_trace.py gives the GPU's own durations).
Measured on the H200 (bench/results/h200-20261201-lngrad-kernel-micro.jsonl): zeroing 330 MB, the fill
kernel 0.243 ms (1.4 TB/s), the memset 0.084 ms (4.1 TB/s): ``library.fill`` now memsets +0.0.
At N = 6400 the warp-per-row forward was 8-15 % faster than the library's (0.121-0.143 vs
0.140-0.159 ms over 264-1056 blocks, launch time included), the fused backward slower (0.28-0.31
vs 0.25-0.30): not adopted (at most 0.02 ms a step).

Writes one JSON record per timing to --out (and prints it). Usage (GPU):
    python bench/kernel_micro.py --out $OUT/kernel_micro.json
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

import numpy as np  # noqa: E402
from numba import cuda, float32  # noqa: E402

from rnngraph.codegen import library  # noqa: E402
from rnngraph.codegen import reductions  # noqa: E402
from loop_profile import _event_times  # noqa: E402  (bench/ is the script's directory)

EPS = np.float32(1e-5)
NMAX = 4096  # widest row of the candidate kernels' shared column sums


@cuda.jit(device=True)
def _warp_sum(v):
    off = 16
    while off > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, off)
        off //= 2
    return v


@cuda.jit(device=True)
def _warp_row_stats(x, r, lane):
    """Mean and 1/sqrt(var + eps) of row r of x, by one warp (two passes, as the library's)."""
    n = x.shape[1]
    s = float32(0.0)
    for j in range(lane, n, 32):
        s += x[r, j]
    mean = _warp_sum(s) / float32(n)
    s = float32(0.0)
    for j in range(lane, n, 32):
        d = x[r, j] - mean
        s += d * d
    return mean, float32(1.0) / math.sqrt(_warp_sum(s) / float32(n) + EPS)


@cuda.jit
def ln_forward_warp(x, gain, bias, out):
    """Candidate: one warp per row, grid-stride over rows, shuffles only."""
    lane = cuda.threadIdx.x % 32
    nw = cuda.blockDim.x // 32
    n = x.shape[1]
    for r in range(cuda.blockIdx.x * nw + cuda.threadIdx.x // 32, x.shape[0], cuda.gridDim.x * nw):
        mean, rstd = _warp_row_stats(x, r, lane)
        for j in range(lane, n, 32):
            out[r, j] = (x[r, j] - mean) * rstd * gain[j] + bias[j]


@cuda.jit
def ln_backward_warp(x, gain, gy, gx, ggain, gbias):
    """Candidate: one warp per row (grid-stride), gx as the rows kernel; the column sums of
    gy * xhat and gy gathered in shared memory (shared atomics: warps of a block share columns)
    and added to ggain, gbias once per block: one pass, no statistics scratch."""
    sg = cuda.shared.array(NMAX, float32)
    sb = cuda.shared.array(NMAX, float32)
    tid = cuda.threadIdx.x
    n = x.shape[1]
    for j in range(tid, n, cuda.blockDim.x):
        sg[j] = float32(0.0)
        sb[j] = float32(0.0)
    cuda.syncthreads()
    lane = tid % 32
    nw = cuda.blockDim.x // 32
    for r in range(cuda.blockIdx.x * nw + tid // 32, x.shape[0], cuda.gridDim.x * nw):
        mean, rstd = _warp_row_stats(x, r, lane)
        s1 = float32(0.0)
        s2 = float32(0.0)
        for j in range(lane, n, 32):
            gh = gy[r, j] * gain[j]
            s1 += gh
            s2 += gh * (x[r, j] - mean) * rstd
        a = _warp_sum(s1) / float32(n)
        b = _warp_sum(s2) / float32(n)
        for j in range(lane, n, 32):
            g = gy[r, j]
            xh = (x[r, j] - mean) * rstd
            gx[r, j] += rstd * (g * gain[j] - a - xh * b)
            cuda.atomic.add(sg, j, g * xh)
            cuda.atomic.add(sb, j, g)
    cuda.syncthreads()
    for j in range(tid, n, cuda.blockDim.x):
        cuda.atomic.add(ggain, j, sg[j])
        cuda.atomic.add(gbias, j, sb[j])


def event_ms(fn, stream, iters: int) -> float:
    """Median GPU time (ms) of ``fn()`` between two events on ``stream`` (loop_profile's timer)."""
    return statistics.median(_event_times(fn, stream, iters))


def record(rec: dict, records: list) -> None:
    print(json.dumps(rec), flush=True)
    records.append(rec)


def zeroing(mb: int, stream, iters: int, records: list) -> None:
    from numba.cuda.cudadrv import driver
    arr = cuda.device_array(int(mb * 2**20) // 4, np.float32, stream=stream)
    nbytes = arr.size * 4
    from rnngraph.codegen.device import blocks, elementwise_threads
    from rnngraph.codegen.optim_kernels import fill_kernel
    t = elementwise_threads()
    for name, fn in (("fill kernel", lambda: fill_kernel[blocks(arr.size, t), t, stream](arr, np.float32(0.0))),
                     ("driver memset", lambda: driver.device_memset(arr, 0, nbytes, stream=stream))):
        ms = event_ms(fn, stream, iters)
        record({"what": "zero", "how": name, "MB": mb, "ms": ms, "GB_per_s": nbytes / ms / 1e6}, records)


def layer_norm(N: int, n: int, stream, iters: int, blocks: int, records: list) -> None:
    if n > NMAX:
        raise ValueError(f"--width {n}: the candidate kernels hold at most NMAX = {NMAX} columns")
    rng = np.random.default_rng(0)
    host = {k: rng.standard_normal(shape).astype(np.float32) * scale + shift for k, shape, scale, shift in (
        ("x", (N, n), 2.0, 0.5), ("gy", (N, n), 1.0, 0.0), ("gain", (n,), 0.3, 1.0), ("bias", (n,), 0.1, 0.0))}
    d = {k: cuda.to_device(v, stream=stream) for k, v in host.items()}
    out = cuda.device_array((N, n), np.float32, stream=stream)
    gx = cuda.to_device(np.zeros((N, n), np.float32), stream=stream)
    gg = cuda.to_device(np.zeros(n, np.float32), stream=stream)
    gb = cuda.to_device(np.zeros(n, np.float32), stream=stream)
    base = {"what": "layer_norm", "N": N, "n": n}

    def lib_bwd():
        library.layer_norm_backward(d["x"], d["gain"], d["gy"], gx, gg, gb, stream=stream)

    stats = reductions._ln_stats_scratch(N, stream)
    rows_kernel = lambda: reductions.layer_norm_backward_rows_kernel[N, 256, stream](  # noqa: E731
        d["x"], d["gain"], d["gy"], gx, stats)
    t, col_blocks, rpc = reductions.column_grid(n, N)
    cols_kernel = lambda: reductions.layer_norm_backward_columns_kernel[(col_blocks, -(-N // rpc)), t, stream](  # noqa: E731
        d["x"], d["gy"], stats, gg, gb, np.int32(rpc))
    timings = [("forward library", lambda: library.layer_norm_forward(d["x"], d["gain"], d["bias"], out, stream=stream)),
               ("forward warp-per-row", lambda: ln_forward_warp[blocks, 256, stream](d["x"], d["gain"], d["bias"], out)),
               ("backward library", lib_bwd), ("backward rows kernel", rows_kernel),
               ("backward columns kernel", cols_kernel),
               ("backward warp-per-row fused", lambda: ln_backward_warp[blocks, 256, stream](
                   d["x"], d["gain"], d["gy"], gx, gg, gb))]
    # check the candidates against the library once (fresh accumulators)
    library.layer_norm_forward(d["x"], d["gain"], d["bias"], out, stream=stream)
    want_y = out.copy_to_host(stream=stream)
    ln_forward_warp[blocks, 256, stream](d["x"], d["gain"], d["bias"], out)
    err_f = float(np.abs(out.copy_to_host(stream=stream) - want_y).max())
    results = []
    for fn in (lib_bwd, lambda: ln_backward_warp[blocks, 256, stream](d["x"], d["gain"], d["gy"], gx, gg, gb)):
        for a in (gx, gg, gb):
            library.fill(a, 0.0, stream=stream)
        fn()
        results.append([a.copy_to_host(stream=stream) for a in (gx, gg, gb)])
    err_b = [float(np.abs(u - v).max() / max(1.0, float(np.abs(u).max()))) for u, v in zip(*results)]
    record(dict(base, check="candidates vs library (max abs, rel for column sums)", forward=err_f, backward=err_b),
           records)
    for name, fn in timings:
        record(dict(base, how=name, blocks=blocks, ms=event_ms(fn, stream, iters)), records)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arena-mb", type=float, default=330)
    ap.add_argument("--rows", type=int, nargs="+", default=[6400, 1600, 100])
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--blocks", type=int, nargs="+", default=[264, 528, 1056])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    stream = cuda.stream()
    records: list[dict] = []
    if a.arena_mb > 0:
        zeroing(a.arena_mb, stream, a.iters, records)
    for N in a.rows:
        for b in a.blocks:
            layer_norm(N, a.width, stream, a.iters, b, records)
    if a.out:
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
