"""Row-reduction kernels: layer norm (forward, backward) and softmax cross-entropy (forward,
backward), plus the block-wide reductions they (and generated kernels) share.

A row is one column of the graph's batch: arrays are (N, n) float32, row-major. Each row is
reduced by one thread block of a power-of-two size (:func:`device.row_threads`) through a
shared-memory tree; threads stride over the row, so any n works with any block size. The
column sums of layer norm's backward (gain and bias gradients) are a second kernel with threads
over columns and the rows split into chunks.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ..ops import LAYER_NORM_EPS
from .device import (INDEX_DTYPES, MAX_REDUCE_BLOCKS, as_device, blocks, cached_scratch, check, column_chunk,
                     elementwise_threads, launch_stream, row_threads)
from .kernel_cache import cached

SMEM = 1024  # shared scratch of the block reductions: the largest block they support
# layer_norm_backward's column kernel: about this many blocks fill the GPU (4 per SM on an
# H200), with row chunks of at least LN_MIN_CHUNK rows (fewer atomics where N is small).
LN_COLUMN_BLOCKS = 2 * MAX_REDUCE_BLOCKS
LN_MIN_CHUNK = 32
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y
_LN_EPS = np.float32(LAYER_NORM_EPS)
_NEG_INF = np.float32(-np.inf)


# ---------------------------------------------------------------------------- block reductions
@cuda.jit(device=True)
def block_sum(v, sm):
    """Sum of ``v`` over the block (blockDim.x a power of two, every thread calls it);
    ``sm`` a shared float32 array of at least blockDim.x. Returns the sum in every thread."""
    tid = cuda.threadIdx.x
    sm[tid] = v
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
        cuda.syncthreads()
        s //= 2
    total = sm[0]
    cuda.syncthreads()  # sm is free again when the next reduction writes it
    return total


@cuda.jit(device=True)
def block_sum2(v, w, sm, sm2):
    """Two block sums with one set of barriers (see :func:`block_sum`)."""
    tid = cuda.threadIdx.x
    sm[tid] = v
    sm2[tid] = w
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] += sm[tid + s]
            sm2[tid] += sm2[tid + s]
        cuda.syncthreads()
        s //= 2
    tv = sm[0]
    tw = sm2[0]
    cuda.syncthreads()
    return tv, tw


@cuda.jit(device=True)
def block_max(v, sm):
    """Maximum of ``v`` over the block (see :func:`block_sum`)."""
    tid = cuda.threadIdx.x
    sm[tid] = v
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            sm[tid] = max(sm[tid], sm[tid + s])
        cuda.syncthreads()
        s //= 2
    m = sm[0]
    cuda.syncthreads()
    return m


@cuda.jit(device=True)
def row_stats(x, r, sm):
    """Mean and 1/sqrt(var + eps) of row ``r`` of ``x`` (two passes: no cancellation)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    s = float32(0.0)
    for j in range(tid, n, nt):
        s += x[r, j]
    mean = block_sum(s, sm) / float32(n)
    s = float32(0.0)
    for j in range(tid, n, nt):
        d = x[r, j] - mean
        s += d * d
    var = block_sum(s, sm) / float32(n)
    return mean, float32(1.0) / math.sqrt(var + _LN_EPS)


# ---------------------------------------------------------------------------- layer norm
def _layer_norm_forward_kernel(x, gain, bias, out):
    """One block per row r: out[r] = (x[r] - mean) * rstd * gain + bias."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    mean, rstd = row_stats(x, r, sm)
    for j in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        out[r, j] = (x[r, j] - mean) * rstd * gain[j] + bias[j]


def _layer_norm_backward_rows_kernel(x, gain, gy, gx, stats):
    """One block per row r: gx[r] += rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with
    gh = gy * gain, xhat = (x[r] - mean) * rstd; stores stats[r] = (mean, rstd) for
    :func:`_layer_norm_backward_columns_kernel`."""
    sm = cuda.shared.array(SMEM, float32)
    sm2 = cuda.shared.array(SMEM, float32)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    r = cuda.blockIdx.x
    mean, rstd = row_stats(x, r, sm)
    s1 = float32(0.0)
    s2 = float32(0.0)
    for j in range(tid, n, nt):
        gh = gy[r, j] * gain[j]
        s1 += gh
        s2 += gh * (x[r, j] - mean) * rstd
    t1, t2 = block_sum2(s1, s2, sm, sm2)
    a = t1 / float32(n)
    b = t2 / float32(n)
    for j in range(tid, n, nt):
        xh = (x[r, j] - mean) * rstd
        gx[r, j] += rstd * (gy[r, j] * gain[j] - a - xh * b)
    if tid == 0:
        stats[r, 0] = mean
        stats[r, 1] = rstd


def _layer_norm_backward_columns_kernel(x, gy, stats, ggain, gbias, rows_per_chunk):
    """Grid (ceil(n / tpb), row chunks): thread column j of chunk c sums gy * xhat and gy over
    rows [c*R, c*R + R) of column j (xhat from stats = (mean, rstd) per row) and adds them into
    ggain[j] and gbias[j] (one atomic each per column per chunk)."""
    j, r0, r1 = column_chunk(x, rows_per_chunk)
    if j < 0:
        return
    sg = float32(0.0)
    sb = float32(0.0)
    for r in range(r0, r1):
        g = gy[r, j]
        sg += g * (x[r, j] - stats[r, 0]) * stats[r, 1]
        sb += g
    cuda.atomic.add(ggain, j, sg)
    cuda.atomic.add(gbias, j, sb)


layer_norm_forward_kernel = cached(cuda.jit(_layer_norm_forward_kernel))
layer_norm_backward_rows_kernel = cached(cuda.jit(_layer_norm_backward_rows_kernel))
layer_norm_backward_columns_kernel = cached(cuda.jit(_layer_norm_backward_columns_kernel))


def _ln_args(name, x, gain, *more):
    check(f"{name} x", x, 2)
    n = x.shape[1]
    check(f"{name} gain", gain, 1, shape=(n,))
    for label, a, nd in more:
        check(f"{name} {label}", a, nd, shape=(x.shape[0], n) if nd == 2 else (n,))


def column_grid(n: int, nrows: int) -> tuple[int, int, int]:
    """(threads a block, column blocks, rows a chunk) of a column-sum kernel over (nrows, n):
    threads over the n columns, the rows split into chunks (the grid's second dimension) so that
    there are about :data:`LN_COLUMN_BLOCKS` blocks, each chunk at least :data:`LN_MIN_CHUNK` rows."""
    t = elementwise_threads()
    col_blocks = blocks(n, t)
    want_chunks = max(1, -(-LN_COLUMN_BLOCKS // col_blocks))
    return t, col_blocks, max(LN_MIN_CHUNK, -(-nrows // want_chunks))


def layer_norm_forward(x, gain, bias, out, *, stream=None):
    """PyTorch ``nn.LayerNorm`` over each row (eps 1e-5): ``out = (x - mean) / sqrt(var + eps)
    * gain + bias``. x, out: float32 (N, n); gain, bias: float32 (n,). One block per row.
    Returns out."""
    x, gain, bias, out = (as_device(a, stream) for a in (x, gain, bias, out))
    _ln_args("layer_norm_forward", x, gain, ("bias", bias, 1), ("out", out, 2))
    if x.shape[0] == 0:
        return out
    layer_norm_forward_kernel[x.shape[0], row_threads(x.shape[1]), launch_stream(stream)](
        x, gain, bias, out)
    return out


def _ln_stats_scratch(nrows: int, stream):
    """The cached (nrows, 2) float32 (mean, rstd) scratch of :func:`layer_norm_backward`, one per
    (device, stream, N) (device.cached_scratch; the column kernel of one call reads its stats
    before the next call's row kernel on the same stream overwrites them)."""
    return cached_scratch("layer_norm_backward stats", (nrows, 2), stream)


def layer_norm_backward(x, gain, gy, gx, ggain, gbias, *, stream=None, rows_per_chunk=None):
    """Gradients of :func:`layer_norm_forward`, all accumulated (``+=``).

    x, gy, gx: float32 (N, n) — ``gx += dL/dx``; gain: float32 (n,); ggain, gbias: float32 (n,)
    — ``ggain += sum_rows gy * xhat``, ``gbias += sum_rows gy`` (atomics: the order of the
    additions, so the last bits, may vary between runs).

    Two kernels on ``stream``: one block per row computes gx and stores each row's (mean, rstd)
    in a cached (N, 2) scratch; then threads over columns, in a grid whose second dimension
    splits the rows into chunks of ``rows_per_chunk`` (a positive int; default: enough chunks
    for about :data:`LN_COLUMN_BLOCKS` blocks, at least :data:`LN_MIN_CHUNK` rows each), sum
    ggain and gbias per chunk and meet by ``cuda.atomic.add``. Returns gx. Raises ValueError
    for arrays of the wrong rank, shape or dtype, for a ``rows_per_chunk`` that is not a
    positive int, and for more row chunks than a grid's second dimension holds (65535)."""
    x, gain, gy, gx, ggain, gbias = (as_device(a, stream) for a in (x, gain, gy, gx, ggain, gbias))
    _ln_args("layer_norm_backward", x, gain, ("gy", gy, 2), ("gx", gx, 2), ("ggain", ggain, 1),
             ("gbias", gbias, 1))
    nrows, n = x.shape
    t, col_blocks, default_chunk = column_grid(n, nrows)
    if rows_per_chunk is None:
        rows_per_chunk = default_chunk
    if (isinstance(rows_per_chunk, bool) or not isinstance(rows_per_chunk, (int, np.integer))
            or rows_per_chunk < 1):
        raise ValueError(f"layer_norm_backward: rows_per_chunk must be a positive int, "
                         f"got {rows_per_chunk!r}")
    chunks = blocks(nrows, rows_per_chunk)
    if chunks > MAX_GRID_Y:
        raise ValueError(f"layer_norm_backward: rows_per_chunk {rows_per_chunk} gives {chunks} "
                         f"row chunks for {nrows} rows, more than {MAX_GRID_Y}")
    if nrows == 0 or n == 0:
        return gx
    stats = _ln_stats_scratch(nrows, stream)
    s = launch_stream(stream)
    layer_norm_backward_rows_kernel[nrows, row_threads(n), s](x, gain, gy, gx, stats)
    layer_norm_backward_columns_kernel[(col_blocks, chunks), t, s](
        x, gy, stats, ggain, gbias, np.int32(min(rows_per_chunk, nrows)))
    return gx


# ---------------------------------------------------------------------------- softmax cross-entropy
@cuda.jit(device=True)
def row_logsumexp_parts(z, r, sm):
    """(max, sum of exp(z - max)) of row ``r`` of ``z``."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    v = z.shape[1]
    m = _NEG_INF
    for j in range(tid, v, nt):
        m = max(m, z[r, j])
    m = block_max(m, sm)
    s = float32(0.0)
    for j in range(tid, v, nt):
        s += math.exp(z[r, j] - m)
    return m, block_sum(s, sm)


#: The ``ignore`` of the cross-entropy kernels when no target is ignored: no int32 id equals it.
NO_IGNORE = np.int64(-2 ** 63)


def _softmax_xent_forward_kernel(logits, targets, ignore, loss):
    """One block per row r: loss[r] = log(sum exp(z - max)) - (z[y] - max); 0 where y ==
    ignore; NaN for another id outside [0, V)."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    y = targets[r]
    if y == ignore:  # the whole block takes this branch
        if cuda.threadIdx.x == 0:
            loss[r] = float32(0.0)
        return
    m, s = row_logsumexp_parts(logits, r, sm)
    if cuda.threadIdx.x == 0:
        if 0 <= y < logits.shape[1]:
            loss[r] = math.log(s) - (logits[r, y] - m)
        else:
            loss[r] = float32(math.nan)


def _softmax_xent_backward_kernel(logits, targets, ignore, gloss, glogits):
    """One block per row r: glogits[r, j] = (softmax(z)[j] - [j == y]) * gloss[r]; 0 where y == ignore."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    y = targets[r]
    if y == ignore:  # the whole block takes this branch
        for j in range(cuda.threadIdx.x, logits.shape[1], cuda.blockDim.x):
            glogits[r, j] = float32(0.0)
        return
    m, s = row_logsumexp_parts(logits, r, sm)
    g = gloss[r]
    for j in range(cuda.threadIdx.x, logits.shape[1], cuda.blockDim.x):
        p = math.exp(logits[r, j] - m) / s
        if j == y:
            p -= float32(1.0)
        glogits[r, j] = p * g


softmax_xent_forward_kernel = cached(cuda.jit(_softmax_xent_forward_kernel))
softmax_xent_backward_kernel = cached(cuda.jit(_softmax_xent_backward_kernel))


def _xent_args(name, logits, targets, *more):
    check(f"{name} logits", logits, 2)
    check(f"{name} targets", targets, 1, INDEX_DTYPES, shape=(logits.shape[0],))
    for label, a, shape in more:
        check(f"{name} {label}", a, len(shape), shape=shape)


def _ignore(ignore_index) -> np.int64:
    return NO_IGNORE if ignore_index is None else np.int64(ignore_index)


def softmax_xent_forward(logits, targets, loss, *, ignore_index=None, stream=None):
    """Per-row cross-entropy ``loss[r] = -log softmax(logits[r])[targets[r]]`` (natural log,
    max-subtracted: finite for logits of any float32 size; 0 where a target equals
    ``ignore_index`` (PyTorch's CrossEntropyLoss(ignore_index=...)); NaN where another target
    is outside [0, V)). logits: float32 (N, V); targets: int32 or int64 (N,); loss: float32
    (N,); ignore_index: None or an int. One block per row. Returns loss."""
    logits, targets, loss = (as_device(a, stream) for a in (logits, targets, loss))
    _xent_args("softmax_xent_forward", logits, targets, ("loss", loss, (logits.shape[0],)))
    if logits.shape[0] == 0:
        return loss
    softmax_xent_forward_kernel[logits.shape[0], row_threads(logits.shape[1]),
                                launch_stream(stream)](logits, targets, _ignore(ignore_index), loss)
    return loss


def softmax_xent_backward(logits, targets, gloss, glogits, *, ignore_index=None, stream=None):
    """Gradient of :func:`softmax_xent_forward`: ``glogits[r] = (softmax(logits[r]) -
    onehot(targets[r])) * gloss[r]``, 0 where targets[r] equals ``ignore_index`` (written, not
    accumulated). logits, glogits: float32 (N, V); targets: int32 or int64 (N,); gloss: float32
    (N,). Returns glogits."""
    logits, targets, gloss, glogits = (as_device(a, stream) for a in (logits, targets, gloss, glogits))
    n, v = logits.shape if logits.ndim == 2 else (0, 0)
    _xent_args("softmax_xent_backward", logits, targets, ("gloss", gloss, (n,)),
               ("glogits", glogits, (n, v)))
    if n == 0:
        return glogits
    softmax_xent_backward_kernel[n, row_threads(v), launch_stream(stream)](
        logits, targets, _ignore(ignore_index), gloss, glogits)
    return glogits


KERNELS = []
for _idx in ("int32", "int64"):
    KERNELS += [
        (_softmax_xent_forward_kernel, f"void(float32[:, ::1], {_idx}[::1], int64, float32[::1])"),
        (_softmax_xent_backward_kernel,
         f"void(float32[:, ::1], {_idx}[::1], int64, float32[::1], float32[:, ::1])"),
    ]
KERNELS = [
    (_layer_norm_forward_kernel, "void(float32[:, ::1], float32[::1], float32[::1], float32[:, ::1])"),
    (_layer_norm_backward_rows_kernel, "void(float32[:, ::1], float32[::1], float32[:, ::1], "
                                       "float32[:, ::1], float32[:, ::1])"),
    (_layer_norm_backward_columns_kernel, "void(float32[:, ::1], float32[:, ::1], "
                                          "float32[:, ::1], float32[::1], float32[::1], int32)"),
] + KERNELS
