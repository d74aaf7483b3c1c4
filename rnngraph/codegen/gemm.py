"""Matrix products for the generated training step: ``gemm`` (cuBLAS -- the library CuPy loads,
called on the step's stream through codegen/cublas.py so that CUDA graphs can capture it -- or a
tiled numba kernel), ``add_bias`` and ``column_sum``.

All matrices are 2-D row-major float32 device arrays whose last axis is contiguous (a row
stride larger than the row, as in a column slice of a bigger C-contiguous array, is fine for
cuBLAS; the numba kernel takes any strides).
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .optim_kernels import fill
from .device import (as_device, blocks, check, column_chunk, elementwise_threads, have_cupy, in_simulator,
                     launch_stream, stream_handle)
from .kernel_cache import cached
from .gemm_precision import reduced_gemm_launcher
from ..precision import check_precision

TILE = 16  # the numba GEMM's tile: TILE x TILE threads a block, one output each
_TILE_PAD = TILE + 1  # shared rows padded by one word against bank conflicts


# ---------------------------------------------------------------------------- kernels
def _gemm_kernel(a, b, out, trans_a, trans_b, alpha, beta):
    """out[i, j] = alpha * sum_k op(a)[i, k] op(b)[k, j] + beta * out[i, j] (out not read when
    beta == 0). Block (TILE, TILE): threadIdx.x walks columns j, threadIdx.y rows i."""
    sa = cuda.shared.array((TILE, _TILE_PAD), float32)  # sa[i_local, k_local]
    sb = cuda.shared.array((TILE, _TILE_PAD), float32)  # sb[k_local, j_local]
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i0 = cuda.blockIdx.y * TILE
    j0 = cuda.blockIdx.x * TILE
    m = out.shape[0]
    n = out.shape[1]
    kdim = a.shape[0] if trans_a else a.shape[1]
    acc = float32(0.0)
    for k0 in range(0, kdim, TILE):
        # loads walk the contiguous axis with threadIdx.x (coalesced) for every op
        if trans_a:  # a is (K, M): a[k0 + ty, i0 + tx] -> sa[tx, ty]
            k = k0 + ty
            i = i0 + tx
            sa[tx, ty] = a[k, i] if (k < kdim and i < m) else float32(0.0)
        else:  # a is (M, K)
            i = i0 + ty
            k = k0 + tx
            sa[ty, tx] = a[i, k] if (i < m and k < kdim) else float32(0.0)
        if trans_b:  # b is (N, K): b[j0 + ty, k0 + tx] -> sb[tx, ty]
            j = j0 + ty
            k = k0 + tx
            sb[tx, ty] = b[j, k] if (j < n and k < kdim) else float32(0.0)
        else:  # b is (K, N)
            k = k0 + ty
            j = j0 + tx
            sb[ty, tx] = b[k, j] if (k < kdim and j < n) else float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    i = i0 + ty
    j = j0 + tx
    if i < m and j < n:
        if beta == float32(0.0):
            out[i, j] = alpha * acc
        else:
            out[i, j] = alpha * acc + beta * out[i, j]


def _add_bias_kernel(out, bias):
    """out[i, j] += bias[j]; grid (ceil(N / tpb), M)."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    i = cuda.blockIdx.y
    if j < out.shape[1]:
        out[i, j] += bias[j]


def _column_sum_kernel(g, out, twin, rows_per_block, accumulate, atomic, to_twin):
    """out[j] (+)= sum over a chunk of rows of g[:, j], and the same into twin[j] when
    ``to_twin``; grid (ceil(N / tpb), row chunks). ``atomic``: several row chunks add into
    ``out`` (already zeroed unless accumulating). Four rows a trip into four partial sums: four
    independent loads in flight a thread."""
    j, r0, r1 = column_chunk(g, rows_per_block)
    if j < 0:
        return
    s0 = s1 = s2 = s3 = float32(0.0)
    r = r0
    while r + 3 < r1:
        s0 += g[r, j]
        s1 += g[r + 1, j]
        s2 += g[r + 2, j]
        s3 += g[r + 3, j]
        r += 4
    while r < r1:
        s0 += g[r, j]
        r += 1
    s = (s0 + s1) + (s2 + s3)
    _add_column(out, j, s, accumulate, atomic)
    if to_twin:
        _add_column(twin, j, s, accumulate, atomic)


@cuda.jit(device=True, inline=True)
def _add_column(out, j, s, accumulate, atomic):
    """out[j] (+)= s: by an atomic add where several row chunks meet, else added or stored."""
    if atomic:
        cuda.atomic.add(out, j, s)
    elif accumulate:
        out[j] += s
    else:
        out[j] = s


#: the blocks a default column sum aims for: eight a multiprocessor of a 132-multiprocessor GPU,
#: for the loads in flight that keep HBM busy (the 2 x 512 S = 64 step's bias gradients, 6,400 x
#: 2,048, ran at 1.3 TB/s with 264 blocks and one load a trip, H100:
#: h100-20261206-lm-step-trace-2x512-s64.json; this shape and the four loads a trip are not yet
#: timed on a GPU)
COLUMN_SUM_BLOCKS = 1056

gemm_kernel = cached(cuda.jit(_gemm_kernel))
add_bias_kernel = cached(cuda.jit(_add_bias_kernel))
column_sum_kernel = cached(cuda.jit(_column_sum_kernel))

KERNELS = [
    (_gemm_kernel, "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], int32, int32, float32, float32)"),
    (_add_bias_kernel, "void(float32[:, ::1], float32[::1])"),
    (_column_sum_kernel, "void(float32[:, ::1], float32[::1], float32[::1], int32, int32, int32, int32)"),
]


# ---------------------------------------------------------------------------- launchers
def _gemm_dims(a, b, out, trans_a, trans_b):
    check("gemm a", a, 2)
    check("gemm b", b, 2)
    check("gemm out", out, 2)
    m, k = (a.shape[1], a.shape[0]) if trans_a else (a.shape[0], a.shape[1])
    kb, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    if k != kb or tuple(out.shape) != (m, n):
        raise ValueError(f"gemm: op(a) is {m}x{k}, op(b) is {kb}x{n}, out is "
                         f"{tuple(out.shape)}; expected op(a) Mx K, op(b) K x N, out M x N")
    return m, n, k


def gemm(a, b, out, *, trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0,
         beta: float = 0.0, stream=None, backend: str | None = None, precision: str = "fp32"):
    """``out = alpha * op(a) @ op(b) + beta * out`` on the device, in place.

    a: float32 (M, K), or (K, M) with ``trans_a``; b: float32 (K, N), or (N, K) with ``trans_b``;
    out: float32 (M, N). Row-major with a contiguous last axis. ``beta=1`` accumulates into
    ``out``; with ``beta=0`` out's old contents are not read (NaN there is harmless). ``out``
    must not overlap ``a`` or ``b``.

    backend: ``"cublas"`` (zero-copy, on ``stream``, codegen/cublas.py), ``"numba"`` (the tiled kernel), or
    None: cuBLAS where :func:`have_cupy`, else numba (always numba in the simulator).
    precision: the operands' format (rnngraph/precision.py): ``"fp32"`` (SGEMM), ``"tf32"`` or
    ``"bf16"`` (tensor cores, fp32 accumulation: codegen/gemm_precision.py; numba's GEMM
    multiplies the operands rounded as the NumPy backend's emulation rounds them).
    Returns ``out``. Raises ValueError for shapes that do not chain, a non-contiguous last axis or
    an unknown precision.
    """
    run, out = gemm_launcher(a, b, out, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta,
                             stream=stream, backend=backend, precision=precision)
    run()
    return out


def gemm_launcher(a, b, out, *, trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0,
                  beta: float = 0.0, stream=None, backend: str | None = None, precision: str = "fp32"):
    """:func:`gemm`'s checks and argument preparation done once: returns (run, out), where
    ``run()`` launches the product on these arrays (same arguments and errors as :func:`gemm`).

    For a step that repeats the same product on buffers that never move: the cuBLAS call then
    costs its own launch only, not the views, shape checks and ``__cuda_array_interface__``
    lookups (tens of microseconds of Python a call, which the GPU waits for at S=1).
    """
    a, b, out = as_device(a, stream), as_device(b, stream), as_device(out, stream)
    m, n, k = _gemm_dims(a, b, out, trans_a, trans_b)
    if backend is None:
        backend = "cublas" if have_cupy() else "numba"
    if backend not in ("cublas", "numba"):
        raise ValueError(f"gemm: backend must be 'cublas', 'numba' or None, got {backend!r}")
    check_precision(precision, where="gemm: precision")
    if m == 0 or n == 0:
        return (lambda: None), out
    if precision != "fp32" and k > 0:
        return reduced_gemm_launcher(a, b, out, m, n, k, trans_a, trans_b, alpha, beta, stream, backend, precision,
                                     _row_stride, _device_ptr,
                                     lambda ra, rb: _numba_launcher(ra, rb, out, m, n, trans_a, trans_b, alpha,
                                                                    beta, stream)), out
    if backend == "cublas" and k > 0:  # k == 0 (out = beta * out) goes to the numba kernel
        return _cublas_launcher(a, b, out, m, n, k, trans_a, trans_b, alpha, beta, stream), out
    return _numba_launcher(a, b, out, m, n, trans_a, trans_b, alpha, beta, stream), out


def _numba_launcher(a, b, out, m, n, trans_a, trans_b, alpha, beta, stream):
    """A function launching the tiled numba GEMM on these arrays."""
    grid = (blocks(n, TILE), blocks(m, TILE))
    flags = (np.int32(bool(trans_a)), np.int32(bool(trans_b)), np.float32(alpha), np.float32(beta))
    # configured at each call: the simulator's kernel[grid, block] sets the grid on the kernel
    # object itself, so a configuration kept from build time would take the last one set
    return lambda: gemm_kernel[grid, (TILE, TILE), launch_stream(stream)](a, b, out, *flags)


def _row_stride(x) -> int:
    """Elements between rows; ValueError unless the last axis is contiguous."""
    item = np.dtype(x.dtype).itemsize
    s0, s1 = x.strides
    if x.shape[1] > 1 and s1 != item:
        raise ValueError("gemm (cuBLAS): the last axis of every matrix must be contiguous")
    return max(s0 // item, x.shape[1], 1)


def _device_ptr(x) -> int:
    return int(x.__cuda_array_interface__["data"][0])


def _cublas_launcher(a, b, out, m, n, k, trans_a, trans_b, alpha, beta, stream):
    """A function launching cuBLAS SGEMM on the raw pointers, on ``stream`` (no CuPy arrays, so
    no copies and no syncs; capturable into a CUDA graph: codegen/cublas.py says why not through
    CuPy's wrappers).

    cuBLAS is column-major; a row-major (M, N) ``out`` is a column-major (N, M) matrix, so we
    ask for out^T = op(b)^T @ op(a)^T: cuBLAS's A is our b, its B our a, with the same
    transpose flags and leading dimensions equal to our row strides."""
    from . import cublas

    if in_simulator():
        raise RuntimeError("gemm: the cuBLAS backend cannot run in the CUDA simulator")
    lib = cublas.handle()
    scalars = np.array([alpha, beta], dtype=np.float32)  # read by cuBLAS during each call; kept alive here
    op_b = cublas.OP_T if trans_b else cublas.OP_N
    op_a = cublas.OP_T if trans_a else cublas.OP_N
    args = (op_b, op_a, n, m, k, scalars.ctypes.data, _device_ptr(b), _row_stride(b), _device_ptr(a),
            _row_stride(a), scalars.ctypes.data + 4, _device_ptr(out), _row_stride(out))
    stream_h = stream_handle(stream)

    def run():
        lib.sgemm(stream_h, *args)
        return scalars  # (keeps the scalars referenced by the closure)

    return run


def add_bias(out, bias, *, stream=None):
    """``out[i, :] += bias`` for every row. out: float32 (M, N); bias: float32 (N,). Returns out."""
    out, bias = as_device(out, stream), as_device(bias, stream)
    check("add_bias out", out, 2)
    check("add_bias bias", bias, 1, shape=(out.shape[1],))
    m, n = out.shape
    if m == 0 or n == 0:
        return out
    t = elementwise_threads()
    add_bias_kernel[(blocks(n, t), m), t, launch_stream(stream)](out, bias)
    return out


def column_sum(g, out, *, accumulate: bool = True, stream=None, rows_per_block: int | None = None,
               twin=None):
    """``out (+)= g.sum(axis=0)``: bias and vector-parameter gradients.

    g: float32 (M, N); out: float32 (N,), added to when ``accumulate`` (the default), else
    overwritten; ``twin``: None, or a second float32 (N,) that gets the same sums the same way
    (two bias gradients of one value: passes/twin_biases.py). Rows are split into chunks of
    ``rows_per_block`` (default: at least 64 rows, enough chunks for COLUMN_SUM_BLOCKS blocks)
    whose partial sums meet by ``cuda.atomic.add``. Returns out. Raises ValueError (naming the
    array) for a g that is not a 2-D float32 array, or an out or twin that is not float32 of shape
    (N,)."""
    g, out = as_device(g, stream), as_device(out, stream)
    check("column_sum g", g, 2)
    check("column_sum out", out, 1, shape=(g.shape[1],))
    if twin is not None:
        twin = as_device(twin, stream)
        check("column_sum twin", twin, 1, shape=(g.shape[1],))
    m, n = g.shape
    if n == 0:
        return out
    t = elementwise_threads()
    col_blocks = blocks(n, t)
    if rows_per_block is None:
        want_chunks = max(1, COLUMN_SUM_BLOCKS // col_blocks)
        rows_per_block = max(64, -(-m // want_chunks)) if not in_simulator() else max(m, 1)
    chunks = blocks(m, rows_per_block)
    atomic = chunks > 1
    if atomic and not accumulate:
        for o in (out,) if twin is None else (out, twin):
            fill(o, 0.0, stream=stream)
    column_sum_kernel[(col_blocks, chunks), t, launch_stream(stream)](
        g, out, out if twin is None else twin, np.int32(rows_per_block), np.int32(bool(accumulate)),
        np.int32(atomic), np.int32(twin is not None))
    return out
