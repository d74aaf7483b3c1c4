"""The GPU side of rnngraph/lsh/sparse_layer.py: softmax cross-entropy over each sample's active
output neurons (forward, loss, backward) and Adam on the touched weight rows only.

:func:`sparse_xent` runs one block a sample i, as G-SLIDE's ``softmax_fwd_bp_rowmajor`` kernels
do (Pan et al., IEEE TPDS 2022; public code PanZaifeng/G-SLIDE), over its active ids
``A_i = ids[offsets[i]:offsets[i + 1]]`` (codegen/lsh_kernels.py) and labels ``Y_i``:

    z_a = W[a] . x_i + b[a]              a thread an active neuron (the row read whole)
    lse = max z + log sum exp(z - max)   block reductions
    loss_i = -(1/|Y_i|) sum_{y in Y_i} (z_y - lse)        (0 without labels)
    dz_a = (p_a [Y_i non-empty] - [a in Y_i] / |Y_i|) * scale
    dx_i = sum_a dz_a W[a]               threads over the input's d entries
    dW[a] += dz_a x_i, db[a] += dz_a     atomics: only the touched rows receive anything

with ``scale`` = 1/N for the batch mean (rnngraph/lsh/sparse_layer.py's equations: the same
values within float32 rounding; a label outside its active set is simply not counted here).
With ``track``, each touched row is also listed once (an ``atomicCAS`` on a per-row mark, then an
``atomicAdd`` on the count) for :func:`touched_adam`.

:func:`touched_adam` is torch.optim.Adam (rnngraph/optim.py's arithmetic, codegen/optim_kernels.py's
step scalars) on the listed rows only, one block a row, clearing their gradients and marks as it
goes: "lazy" Adam (TensorFlow's LazyAdam, PyTorch's SparseAdam): an untouched row keeps its
weights and moments, where dense Adam would move it by its decaying moments. Why this one by
default: its cost follows the touched rows, not the classes, and the gradient rows need no
separate clearing; G-SLIDE runs dense Adam over every row, which the layer (codegen/lsh_layer.py)
offers too (``adam="dense"``: codegen/optim_kernels.py's kernel, then a memset) so that the
benchmark can measure both.

Arrays: float32 except ids (int32), offsets (int64), marks and counts (int32).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from .device import as_device, check, check_ragged, in_simulator, launch_stream, row_threads
from .kernel_cache import cached
from .optim_kernels import adam_hyper, adam_rule
from .reductions import SMEM, block_max, block_sum

_NEG_INF = np.float32(-np.inf)
#: blocks of the touched-rows update (a grid-stride loop over the rows listed on the device)
ADAM_BLOCKS = 1024


@cuda.jit(device=True)
def _distinct_labels(label_ids, l0, l1):
    """How many distinct ids label_ids[l0:l1] holds (a short list: quadratic is fine)."""
    n = 0
    for j in range(l0, l1):
        first = True
        for k in range(l0, j):
            if label_ids[k] == label_ids[j]:
                first = False
        if first:
            n += 1
    return n


@cuda.jit(device=True)
def _is_label(label_ids, l0, l1, a):
    for j in range(l0, l1):
        if label_ids[j] == a:
            return True
    return False


def _sparse_xent_kernel(x, weight, bias, ids, offsets, label_ids, label_offsets, scale, backward, track, z, loss,
                        dx, gw, gb, mark, touched, n_touched):
    """One block a sample (module docstring). z (E,) holds the logits, then the probabilities
    (``backward`` false) or dz."""
    sm = cuda.shared.array(SMEM, float32)
    i = cuda.blockIdx.x
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    o0, o1 = offsets[i], offsets[i + 1]
    l0, l1 = label_offsets[i], label_offsets[i + 1]
    dim = x.shape[1]
    top = _NEG_INF
    for e in range(o0 + tid, o1, nt):
        a = ids[e]
        acc = bias[a]
        for d in range(dim):
            acc += weight[a, d] * x[i, d]
        z[e] = acc
        top = max(top, acc)
    top = block_max(top, sm)
    part = float32(0.0)
    for e in range(o0 + tid, o1, nt):
        part += math.exp(z[e] - top)
    lse = top + math.log(block_sum(part, sm))
    ny = _distinct_labels(label_ids, l0, l1)
    t = float32(1.0) / float32(max(ny, 1))
    hit = float32(0.0)
    for e in range(o0 + tid, o1, nt):
        if _is_label(label_ids, l0, l1, ids[e]):
            hit += z[e] - lse
    hit = block_sum(hit, sm)
    if tid == 0:
        loss[i] = -hit * t
    if not backward:
        for e in range(o0 + tid, o1, nt):
            z[e] = math.exp(z[e] - lse)
        return
    has = float32(1.0) if ny > 0 else float32(0.0)
    for e in range(o0 + tid, o1, nt):
        a = ids[e]
        g = math.exp(z[e] - lse) * has
        if _is_label(label_ids, l0, l1, a):
            g -= t
        g *= scale
        z[e] = g
        cuda.atomic.add(gb, a, g)
        if track and cuda.atomic.cas(mark, a, 0, 1) == 0:
            touched[cuda.atomic.add(n_touched, 0, 1)] = a
    cuda.syncthreads()
    for d in range(tid, dim, nt):
        acc = float32(0.0)
        for e in range(o0, o1):
            acc += z[e] * weight[ids[e], d]
        dx[i, d] = acc
    for q in range(tid, (o1 - o0) * dim, nt):
        e = o0 + q // dim
        d = q - (e - o0) * dim
        cuda.atomic.add(gw, (ids[e], d), z[e] * x[i, d])


def _touched_adam_kernel(weight, bias, gw, gb, mw, vw, mb, vb, touched, n_touched, mark, hyper, b1, one_minus_b1,
                         b2, one_minus_b2, eps):
    """Blocks stride over the n_touched[0] listed rows: Adam on the row's weights and bias
    (optim_kernels' _adam_kernel arithmetic, hyper = (step_size, bc2, decay)), then its gradient
    and mark cleared."""
    for r in range(cuda.blockIdx.x, n_touched[0], cuda.gridDim.x):
        a = touched[r]
        for d in range(cuda.threadIdx.x, weight.shape[1], cuda.blockDim.x):
            weight[a, d], mw[a, d], vw[a, d] = adam_rule(weight[a, d], gw[a, d], mw[a, d], vw[a, d], hyper, b1,
                                                         one_minus_b1, b2, one_minus_b2, eps)
            gw[a, d] = float32(0.0)
        if cuda.threadIdx.x == 0:
            bias[a], mb[a], vb[a] = adam_rule(bias[a], gb[a], mb[a], vb[a], hyper, b1, one_minus_b1, b2,
                                              one_minus_b2, eps)
            gb[a] = float32(0.0)
            mark[a] = 0


def _dense_xent_kernel(z, bias, label_ids, label_offsets, scale, loss):
    """One block a row i of the logits z (N, V) (bias not yet added): the same loss and dz as
    _sparse_xent_kernel with every neuron active, dz written over z."""
    sm = cuda.shared.array(SMEM, float32)
    i = cuda.blockIdx.x
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    l0, l1 = label_offsets[i], label_offsets[i + 1]
    top = _NEG_INF
    for a in range(tid, z.shape[1], nt):
        z[i, a] += bias[a]
        top = max(top, z[i, a])
    top = block_max(top, sm)
    part = float32(0.0)
    for a in range(tid, z.shape[1], nt):
        part += math.exp(z[i, a] - top)
    lse = top + math.log(block_sum(part, sm))
    ny = _distinct_labels(label_ids, l0, l1)
    t = float32(1.0) / float32(max(ny, 1))
    hit = float32(0.0)
    for j in range(l0 + tid, l1, nt):
        hit += z[i, label_ids[j]] - lse   # repeated labels: see the host docstring
    hit = block_sum(hit, sm)
    if tid == 0:
        loss[i] = -hit * t
    has = float32(1.0) if ny > 0 else float32(0.0)
    for a in range(tid, z.shape[1], nt):
        g = math.exp(z[i, a] - lse) * has
        if _is_label(label_ids, l0, l1, a):
            g -= t
        z[i, a] = g * scale


sparse_xent_kernel = cached(cuda.jit(_sparse_xent_kernel))
touched_adam_kernel = cached(cuda.jit(_touched_adam_kernel))
dense_xent_kernel = cached(cuda.jit(_dense_xent_kernel))


def sparse_xent(x, weight, bias, ids, offsets, label_ids, label_offsets, z, loss, *, scale: float = 1.0,
                dx=None, gw=None, gb=None, mark=None, touched=None, n_touched=None, stream=None):
    """Softmax cross-entropy of N samples over their active sets; with ``dx`` the backward too.

    Args:
        x: (N, d) float32, the layer's inputs; weight: (V, d) float32; bias: (V,) float32.
        ids, offsets: the active sets, (E,) int32 ids in [0, V) (or longer) and (N+1,) int64
            (codegen/lsh_kernels.py's ``active_sets``); not checked on the device.
        label_ids, label_offsets: the labels, (M,) int32 (M >= 1) and (N+1,) int64.
        z: (E,) float32 or longer, written: the probabilities (forward only) or dz.
        loss: (N,) float32, written: each sample's loss (the mean over the batch is the sum times
            1/N; ``scale`` does not enter it).
        scale: multiplies the gradients (1/N for the batch mean).
        dx: (N, d) float32, written; gw (V, d), gb (V,) float32, accumulated (+=) at the touched
            rows. All three or none (forward only).
        mark, touched, n_touched: (V,) int32 marks (0 = not listed; zero them once at the start,
            :func:`touched_adam` clears what it updates), (V,) int32 list and (1,) int32 count
            (zero it before each backward), or all None: list the touched rows for
            :func:`touched_adam`.

    Returns z. Raises ValueError naming the array on a wrong shape or dtype, or when only some
    of the gradient or touched-row arrays are given.
    """
    x, weight, bias, ids, offsets, label_ids, label_offsets, z, loss = (
        as_device(a, stream) for a in (x, weight, bias, ids, offsets, label_ids, label_offsets, z, loss))
    n, dim = x.shape if x.ndim == 2 else (0, 0)
    check("sparse_xent x", x, 2)
    check("sparse_xent weight", weight, 2, shape=(None, dim))
    check("sparse_xent bias", bias, 1, shape=(weight.shape[0],))
    check_ragged("sparse_xent ", ids, offsets, n)
    check_ragged("sparse_xent label_", label_ids, label_offsets, n)
    check("sparse_xent z", z, 1)
    check("sparse_xent loss", loss, 1, shape=(n,))
    backward = dx is not None
    if (gw is None) == backward or (gb is None) == backward:
        raise ValueError("sparse_xent: give dx, gw and gb together (backward) or none of them (forward only)")
    track = mark is not None
    if (touched is None) == track or (n_touched is None) == track:
        raise ValueError("sparse_xent: give mark, touched and n_touched together or none of them")
    if track and not backward:
        raise ValueError("sparse_xent: touched rows are listed by the backward: give dx, gw and gb too")
    if backward:
        dx, gw, gb = (as_device(a, stream) for a in (dx, gw, gb))
        check("sparse_xent dx", dx, 2, shape=x.shape)
        check("sparse_xent gw", gw, 2, shape=weight.shape)
        check("sparse_xent gb", gb, 1, shape=bias.shape)
    else:
        dx, gw, gb = x, weight, bias  # never written
    if track:
        mark, touched, n_touched = (as_device(a, stream) for a in (mark, touched, n_touched))
        for name, a, shape in (("mark", mark, bias.shape), ("touched", touched, bias.shape),
                               ("n_touched", n_touched, (1,))):
            check(f"sparse_xent {name}", a, 1, (np.int32,), shape=shape)
    else:
        mark = touched = n_touched = _placeholder()  # never read
    if n:
        sparse_xent_kernel[n, 8 if in_simulator() else row_threads(max(dim, 256)), launch_stream(stream)](
            x, weight, bias, ids, offsets, label_ids, label_offsets, np.float32(scale), backward, track, z, loss,
            dx, gw, gb, mark, touched, n_touched)
    return z


_PLACEHOLDER: dict = {}  # context -> an int32 (1,) device array the kernel never reads


def _placeholder():
    key = 0 if in_simulator() else id(cuda.current_context())
    if key not in _PLACEHOLDER:
        _PLACEHOLDER[key] = cuda.to_device(np.zeros(1, np.int32))
    return _PLACEHOLDER[key]


def touched_adam(weight, bias, gw, gb, mw, vw, mb, vb, touched, n_touched, mark, *, lr: float, step: int,
                 beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, decay: float = 1.0, hyper=None,
                 stream=None):
    """Adam on the rows listed by :func:`sparse_xent` (``touched[:n_touched[0]]``, read on the
    device), clearing their gradients gw, gb and marks.

    Args:
        weight, gw, mw, vw: (V, d) float32; bias, gb, mb, vb: (V,) float32 (m, v start at zero).
        touched, n_touched, mark: (V,), (1,), (V,) int32, as :func:`sparse_xent` leaves them.
        lr, step, beta1, beta2, eps, decay: torch.optim.Adam's (``step`` counts from 1; ``decay``
            1 - lr * weight_decay for AdamW); or ``hyper``, a (3,) float32 device array of
            :func:`rnngraph.codegen.optim_kernels.adam_hyper`'s values.

    Raises ValueError naming the array on a wrong shape or dtype, or for ``step`` < 1.
    """
    arrays = (weight, bias, gw, gb, mw, vw, mb, vb, touched, n_touched, mark)
    weight, bias, gw, gb, mw, vw, mb, vb, touched, n_touched, mark = (as_device(a, stream) for a in arrays)
    check("touched_adam weight", weight, 2)
    for name, a in (("gw", gw), ("mw", mw), ("vw", vw)):
        check(f"touched_adam {name}", a, 2, shape=weight.shape)
    for name, a in (("bias", bias), ("gb", gb), ("mb", mb), ("vb", vb)):
        check(f"touched_adam {name}", a, 1, shape=(weight.shape[0],))
    for name, a, shape in (("touched", touched, (weight.shape[0],)), ("n_touched", n_touched, (1,)),
                           ("mark", mark, (weight.shape[0],))):
        check(f"touched_adam {name}", a, 1, (np.int32,), shape=shape)
    if hyper is None:
        hyper = cuda.to_device(adam_hyper(lr, beta1, beta2, step, decay), stream=launch_stream(stream))
    f = np.float32
    grid = min(4 if in_simulator() else ADAM_BLOCKS, max(1, weight.shape[0]))
    touched_adam_kernel[grid, row_threads(weight.shape[1]), launch_stream(stream)](
        weight, bias, gw, gb, mw, vw, mb, vb, touched, n_touched, mark, as_device(hyper, stream), f(beta1),
        f(1 - beta1), f(beta2), f(1 - beta2), f(eps))


def dense_xent(z, bias, label_ids, label_offsets, loss, *, scale: float = 1.0, stream=None):
    """The dense layer's loss and logit gradient, in place: the baseline :func:`sparse_xent`
    is measured against (logits from cuBLAS, codegen/gemm.py).

    Args:
        z: (N, V) float32 logits ``x W^T`` without the bias; overwritten with dz (the bias
            gradient is its column sum, the weight gradient ``dz^T x``).
        bias: (V,) float32. label_ids, label_offsets: (M,) int32 (M >= 1), (N+1,) int64, the
            labels' distinct ids (a label listed twice would count twice in the loss).
        loss: (N,) float32, written: each row's loss. scale: multiplies dz (1/N for the mean).

    Returns z. Raises ValueError naming the array on a wrong shape or dtype.
    """
    z, bias, label_ids, label_offsets, loss = (as_device(a, stream) for a in (z, bias, label_ids, label_offsets,
                                                                              loss))
    check("dense_xent z", z, 2)
    check("dense_xent bias", bias, 1, shape=(z.shape[1],))
    check_ragged("dense_xent label_", label_ids, label_offsets, z.shape[0])
    check("dense_xent loss", loss, 1, shape=(z.shape[0],))
    if z.shape[0]:
        dense_xent_kernel[z.shape[0], 8 if in_simulator() else row_threads(z.shape[1]), launch_stream(stream)](
            z, bias, label_ids, label_offsets, np.float32(scale), loss)
    return z


KERNELS = [
    (_sparse_xent_kernel, "void(float32[:, ::1], float32[:, ::1], float32[::1], int32[::1], int64[::1], int32[::1], "
                          "int64[::1], float32, boolean, boolean, float32[::1], float32[::1], float32[:, ::1], "
                          "float32[:, ::1], float32[::1], int32[::1], int32[::1], int32[::1])"),
    (_touched_adam_kernel, "void(float32[:, ::1], float32[::1], float32[:, ::1], float32[::1], float32[:, ::1], "
                           "float32[:, ::1], float32[::1], float32[::1], int32[::1], int32[::1], int32[::1], "
                           "float32[::1], float32, float32, float32, float32, float32)"),
    (_dense_xent_kernel, "void(float32[:, ::1], float32[::1], int32[::1], int64[::1], float32, float32[::1])"),
]

__all__ = ["KERNELS", "dense_xent", "sparse_xent", "touched_adam"]
