"""The GPU side of ``chunked_softmax_xent`` (rnngraph/ops_losses.py): the output layer
``z = h W^T + b`` and the per-row softmax cross-entropy, a chunk of the V classes at a time, so
that no (N, V) array of logits exists; the largest temporary is one chunk's (N, chunk).

Forward, per chunk [c0, c1): a GEMM puts ``h W[c0:c1]^T`` in the scratch (N, c1 - c0), then one
block per row adds the bias and folds the chunk into the row's running max ``m`` and sum ``s``
of ``exp(z - m)`` (the online softmax of Milakov & Gimelshein 2018, "Online normalizer
calculation for softmax"), keeping the target's logit ``zt`` when it lies in the chunk; the
last chunk writes ``loss = log s + m - zt``.

Backward: one block per row recomputes ``zt`` (a dot product), and with the forward's loss
gives the log-sum-exp ``lse = loss + zt``; then per chunk the GEMM again, the scratch
overwritten in place by ``G = (exp(z - lse) - onehot(y)) * gloss``, and three accumulations:
``gh += G W[c0:c1]``, ``gW[c0:c1] += G^T h`` (GEMMs: cuBLAS where CuPy is present, else the
numba kernel, codegen/gemm.py) and ``gb[c0:c1] += column sums of G``.

Arrays are float32, row-major; token ids int32 or int64. Scratch: codegen/device.py's
``cached_scratch`` (one (N * chunk,) and three (N,) arrays per N, chunk and stream).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ..ops import chunk_bounds
from .device import (INDEX_DTYPES, as_device, blocks, cached_scratch, check, elementwise_threads, launch_stream,
                     row_threads)
from .gemm import column_sum, gemm
from .kernel_cache import cached
from .reductions import NO_IGNORE, SMEM, block_max, block_sum

_NEG_INF = np.float32(-np.inf)


def _chunk_stats_kernel(z, bias, c0, targets, ignore, first, last, m, s, zt, loss):
    """One block per row r: fold logits z[r] + bias[c0:] of one chunk into m[r], s[r] (reset
    first), keep zt[r] = the target's logit if it is in the chunk; at the last chunk loss[r] =
    log s + m - zt (0 where the target is ``ignore``, NaN for another outside [0, V))."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    tid, nt, w = cuda.threadIdx.x, cuda.blockDim.x, z.shape[1]
    y = targets[r]
    if y == ignore:  # the whole block takes this branch
        if last and tid == 0:
            loss[r] = float32(0.0)
        return
    top = _NEG_INF
    for j in range(tid, w, nt):
        top = max(top, z[r, j] + bias[c0 + j])
    top = block_max(top, sm)
    old = _NEG_INF if first else m[r]
    new = max(old, top)
    part = float32(0.0)
    for j in range(tid, w, nt):
        part += math.exp(z[r, j] + bias[c0 + j] - new)
    part = block_sum(part, sm)
    if tid == 0:
        total = part if first else s[r] * math.exp(old - new) + part
        m[r], s[r] = new, total
        if c0 <= y < c0 + w:
            zt[r] = z[r, y - c0] + bias[y]
        if last:
            loss[r] = math.log(total) + new - zt[r] if 0 <= y < bias.shape[0] else float32(math.nan)


def _target_logit_kernel(h, weight, bias, targets, ignore, zt):
    """One block per row r: zt[r] = h[r] . weight[y] + bias[y] for its target y (0 where y is
    ``ignore`` or outside [0, V))."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    y = targets[r]
    if y == ignore or y < 0 or y >= weight.shape[0]:  # the whole block takes this branch
        if cuda.threadIdx.x == 0:
            zt[r] = float32(0.0)
        return
    acc = float32(0.0)
    for k in range(cuda.threadIdx.x, h.shape[1], cuda.blockDim.x):
        acc += h[r, k] * weight[y, k]
    acc = block_sum(acc, sm)
    if cuda.threadIdx.x == 0:
        zt[r] = acc + bias[y]


def _chunk_grad_kernel(z, bias, c0, targets, ignore, loss, zt, gloss):
    """Over the N * w elements of one chunk, in place: z[r, j] = (exp(z[r, j] + bias[c0 + j] -
    lse[r]) - [c0 + j == y]) * gloss[r], lse = loss[r] + zt[r]; 0 where y is ``ignore``."""
    i = cuda.grid(1)
    w = z.shape[1]
    if i < z.shape[0] * w:
        r, j = i // w, i % w
        y = targets[r]
        if y == ignore:
            z[r, j] = float32(0.0)
            return
        p = math.exp(z[r, j] + bias[c0 + j] - (loss[r] + zt[r]))
        if c0 + j == y:
            p -= float32(1.0)
        z[r, j] = p * gloss[r]


chunk_stats_kernel = cached(cuda.jit(_chunk_stats_kernel))
target_logit_kernel = cached(cuda.jit(_target_logit_kernel))
chunk_grad_kernel = cached(cuda.jit(_chunk_grad_kernel))


def _checked(name, h, weight, bias, targets, loss, chunk, stream):
    """The arrays on the device, checked; ValueError naming ``name`` and the array."""
    h, weight, bias, targets, loss = (as_device(a, stream) for a in (h, weight, bias, targets, loss))
    check(f"{name} h", h, 2)
    check(f"{name} weight", weight, 2, shape=(None, h.shape[1]))
    check(f"{name} bias", bias, 1, shape=(weight.shape[0],))
    check(f"{name} targets", targets, 1, INDEX_DTYPES, shape=(h.shape[0],))
    check(f"{name} loss", loss, 1, shape=(h.shape[0],))
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"{name}: chunk must be a positive int, got {chunk!r}")
    return h, weight, bias, targets, loss


def _ignore(ignore_index) -> np.int64:
    return NO_IGNORE if ignore_index is None else np.int64(ignore_index)


def _scratch(n: int, chunk: int, stream):
    """The (n * chunk,) logits scratch and the (3, n) running max, sum and target logit."""
    return (cached_scratch("chunked_xent logits", (n * chunk,), stream),
            cached_scratch("chunked_xent rows", (3, n), stream))


def chunked_xent_forward(h, weight, bias, targets, loss, *, chunk: int, ignore_index=None, stream=None):
    """Per-row ``loss[r] = -log softmax(h[r] W^T + b)[targets[r]]`` (natural log; 0 where a
    target equals ``ignore_index``, NaN where another is outside [0, V)), ``chunk`` classes at a
    time (see the module docstring). h: float32 (N, H); weight: float32 (V, H); bias: float32
    (V,); targets: int32 or int64 (N,); loss: float32 (N,), written. Returns loss. Raises
    ValueError for an array of the wrong shape or dtype, or a chunk that is not a positive int."""
    h, weight, bias, targets, loss = _checked("chunked_xent_forward", h, weight, bias, targets, loss, chunk,
                                              stream)
    n = h.shape[0]
    if n == 0:
        return loss
    logits, rows = _scratch(n, chunk, stream)
    bounds = chunk_bounds(weight.shape[0], int(chunk))
    s, ignore = launch_stream(stream), _ignore(ignore_index)
    for k, (c0, c1) in enumerate(bounds):
        z = logits[:n * (c1 - c0)].reshape(n, c1 - c0)
        gemm(h, weight[c0:c1], z, trans_b=True, stream=stream)
        chunk_stats_kernel[n, row_threads(c1 - c0), s](z, bias, c0, targets, ignore, k == 0, k == len(bounds) - 1,
                                                        rows[0], rows[1], rows[2], loss)
    return loss


def chunked_xent_backward(h, weight, bias, targets, loss, gloss, gh, gweight, gbias, *, chunk: int,
                          ignore_index=None, stream=None):
    """Gradients of :func:`chunked_xent_forward`, all accumulated (``+=``): ``gh`` (N, H) (None:
    not wanted), ``gweight`` (V, H), ``gbias`` (V,), from ``loss`` (N,) (the forward's, for the
    log-sum-exp) and ``gloss`` (N,); 0 from rows whose target equals ``ignore_index``. float32
    throughout; other arguments as :func:`chunked_xent_forward`. Returns gweight. Raises
    ValueError as :func:`chunked_xent_forward`, also for gradient arrays of the wrong shape."""
    h, weight, bias, targets, loss = _checked("chunked_xent_backward", h, weight, bias, targets, loss, chunk,
                                              stream)
    gloss, gweight, gbias = (as_device(a, stream) for a in (gloss, gweight, gbias))
    check("chunked_xent_backward gloss", gloss, 1, shape=(h.shape[0],))
    check("chunked_xent_backward gweight", gweight, 2, shape=tuple(weight.shape))
    check("chunked_xent_backward gbias", gbias, 1, shape=tuple(bias.shape))
    if gh is not None:
        gh = as_device(gh, stream)
        check("chunked_xent_backward gh", gh, 2, shape=tuple(h.shape))
    n = h.shape[0]
    if n == 0:
        return gweight
    logits, rows = _scratch(n, chunk, stream)
    s, ignore = launch_stream(stream), _ignore(ignore_index)
    target_logit_kernel[n, row_threads(h.shape[1]), s](h, weight, bias, targets, ignore, rows[2])
    for c0, c1 in chunk_bounds(weight.shape[0], int(chunk)):
        z = logits[:n * (c1 - c0)].reshape(n, c1 - c0)
        gemm(h, weight[c0:c1], z, trans_b=True, stream=stream)
        t = elementwise_threads()
        chunk_grad_kernel[blocks(z.size, t), t, s](z, bias, c0, targets, ignore, loss, rows[2], gloss)
        if gh is not None:
            gemm(z, weight[c0:c1], gh, beta=1.0, stream=stream)
        gemm(z, h, gweight[c0:c1], trans_a=True, beta=1.0, stream=stream)
        column_sum(z, gbias[c0:c1], accumulate=True, stream=stream)
    return gweight


KERNELS = []
for _idx in ("int32", "int64"):
    KERNELS += [
        (_chunk_stats_kernel, f"void(float32[:, ::1], float32[::1], int64, {_idx}[::1], int64, boolean, boolean, "
                              f"float32[::1], float32[::1], float32[::1], float32[::1])"),
        (_target_logit_kernel, f"void(float32[:, ::1], float32[:, ::1], float32[::1], {_idx}[::1], int64, "
                               f"float32[::1])"),
        (_chunk_grad_kernel, f"void(float32[:, ::1], float32[::1], int64, {_idx}[::1], int64, float32[::1], "
                             f"float32[::1], float32[::1])"),
    ]

__all__ = ["KERNELS", "chunked_xent_backward", "chunked_xent_forward"]
