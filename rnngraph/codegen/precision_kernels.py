"""Operand conversions for the reduced-precision GEMMs (rnngraph/precision.py): float32 matrices
to bf16 copies for cublasGemmEx, or to float32 copies rounded to TF32 / bf16 for numba's GEMM
(the simulator and machines without CuPy), rounded exactly as the NumPy backend's emulation
(:func:`rnngraph.precision.round_tf32` / :func:`~rnngraph.precision.round_bf16`: round to
nearest, ties to even on the fp32 bit pattern; infinities kept, NaN stays NaN).

The kernels work on the bit patterns: a float32 matrix is passed as its ``uint32`` view (same
strides, so a column slice of a larger buffer needs no copy first); the result is C-contiguous.
Integer arithmetic only: numba widens uint32 arithmetic to uint64, so every constant is a
uint64 (an int literal there would make it float64).
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint64

from .device import blocks, elementwise_threads, in_simulator, launch_stream, stream_handle
from .kernel_cache import cached


@cuda.jit(device=True, inline=True)
def _rounded_bits(b, dropped, keep, half):
    """fp32 bits ``b`` (as uint64) with the low ``dropped`` mantissa bits rounded away (RNE)."""
    exp = uint64(0x7F800000)
    if (b & exp) == exp:  # inf or NaN
        if (b & uint64(0x007FFFFF)) != uint64(0):
            return (b | uint64(0x00400000)) & keep  # NaN: quiet, stays NaN
        return b
    lsb = (b >> dropped) & uint64(1)
    return (b + half + lsb) & keep


@cuda.jit(device=True, inline=True)
def tf32_bits(b):
    """fp32 bit pattern ``b`` rounded to TF32 (10 mantissa bits), as fp32 bits."""
    return _rounded_bits(uint64(b), uint64(13), uint64(0xFFFFE000), uint64(0xFFF))


@cuda.jit(device=True, inline=True)
def bf16_bits32(b):
    """fp32 bit pattern ``b`` rounded to bf16 (7 mantissa bits), as fp32 bits."""
    return _rounded_bits(uint64(b), uint64(16), uint64(0xFFFF0000), uint64(0x7FFF))


@cuda.jit(device=True, inline=True)
def _element(src):
    """(row, column) of this thread's element of ``src``, or (-1, -1) past its end."""
    i = cuda.grid(1)
    n = src.shape[1]
    if n == 0 or i >= src.shape[0] * n:
        return -1, -1
    r = i // n
    return r, i - r * n


def _round_tf32_kernel(src, dst):
    """dst[r, c] = the fp32 bits of src[r, c] rounded to TF32; src, dst uint32 (M, N)."""
    r, c = _element(src)
    if r >= 0:
        dst[r, c] = tf32_bits(src[r, c])


def _round_bf16_kernel(src, dst):
    """dst[r, c] = the fp32 bits of src[r, c] rounded to bf16; src, dst uint32 (M, N)."""
    r, c = _element(src)
    if r >= 0:
        dst[r, c] = bf16_bits32(src[r, c])


def _to_bf16_kernel(src, dst):
    """dst[r, c] = the bf16 encoding of src[r, c] (its RNE-rounded upper 16 bits); src uint32
    (M, N), dst uint16 (M, N)."""
    r, c = _element(src)
    if r >= 0:
        dst[r, c] = bf16_bits32(src[r, c]) >> uint64(16)


#: (kernel, signature): a strided uint32 view in, a C-contiguous copy out
KERNELS = [(fn, f"void(uint32[:, :], {dst}[:, ::1])") for fn, dst in
           ((_round_tf32_kernel, "uint32"), (_round_bf16_kernel, "uint32"), (_to_bf16_kernel, "uint16"))]
round_tf32_kernel, round_bf16_kernel, to_bf16_kernel = (cached(cuda.jit(fn)) for fn, _ in KERNELS)

_COPIES: dict = {}


def _copy_buffer(tag: str, shape: tuple, dtype, stream):
    """A C-contiguous device array of ``shape`` and ``dtype`` for operand slot ``tag`` on
    ``stream``, allocated on first use and returned again for the same key: GEMMs on one stream
    run in order, so they may share it (a conversion, then the product that reads it)."""
    dev = None if in_simulator() else cuda.current_context().device.id
    key = (tag, dev, None if in_simulator() else stream_handle(stream), tuple(shape), np.dtype(dtype).str)
    buf = _COPIES.get(key)
    if buf is None:
        buf = _COPIES[key] = cuda.device_array(tuple(shape), dtype, stream=launch_stream(stream))
    return buf


def conversion_launcher(src, precision: str, target: str, tag: str, stream):
    """(run, copy): ``run()`` writes ``copy``, a C-contiguous array of ``src``'s shape, from the
    float32 device matrix ``src`` (2-D, any row stride): for ``target="bf16"`` its bf16
    encodings (uint16, what cublasGemmEx reads as CUDA_R_16BF); for ``target="float32"`` its
    values rounded to ``precision`` ("tf32" or "bf16") as float32. ``tag`` names the operand
    slot (copies of one tag, shape and stream are shared). ValueError for another precision or
    target."""
    if precision not in ("tf32", "bf16") or target not in ("bf16", "float32") or (
            target == "bf16" and precision != "bf16"):
        raise ValueError(f"conversion_launcher: no conversion of precision {precision!r} to {target!r}")
    bits = src.view(np.uint32)
    rows, cols = src.shape
    if target == "bf16":
        copy, kern = _copy_buffer(tag, (rows, cols), np.uint16, stream), to_bf16_kernel
        out = copy
    else:
        copy = _copy_buffer(tag, (rows, cols), np.float32, stream)
        out = copy.view(np.uint32)
        kern = round_tf32_kernel if precision == "tf32" else round_bf16_kernel
    t = elementwise_threads()
    grid = max(blocks(rows * cols, t), 1)
    return (lambda: kern[grid, t, launch_stream(stream)](bits, out)), copy
