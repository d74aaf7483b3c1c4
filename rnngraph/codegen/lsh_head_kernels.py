"""The kernels ``rg.LSHSoftmax`` adds to the compiled CUDA training step (codegen/lsh_step.py), on
top of the index's (codegen/lsh_kernels.py) and the sparse forward's (codegen/lsh_sparse.py):

- :func:`column_labels`: the step's targets (N,) -> the labels of the N columns in the ragged
  layout the active sets and the sparse loss read (``label_ids``, ``label_offsets``): one label
  a column, none for a column whose target equals ``ignore_index`` (one block, a prefix count).
- :func:`sparse_xent_backward`: the backward of the sparse softmax cross-entropy of a loss node
  over the active sets, one block a column i (G-SLIDE's ``softmax_fwd_bp_rowmajor`` backward;
  Pan et al., IEEE TPDS 2022), with the column's loss gradient ``gloss[i]`` (the step's
  1/columns seed) instead of a batch-wide scale, and the input's gradient *added* (the head's
  input h is also a state the recurrence reads, whose gradient other kernels add to):

      dz_a = gloss_i (p_a [Y_i non-empty] - [a in Y_i] / |Y_i|)      a in A_i
      gh_i += sum_a dz_a W[a],  gW[a] += dz_a h_i,  gb[a] += dz_a      (atomics: touched rows)

  ``p`` holds the probabilities :func:`rnngraph.codegen.lsh_sparse.sparse_xent` wrote in its
  forward-only mode; they are overwritten by dz.

Arrays: float32 except ids and labels (int32, targets int32 or int64) and offsets (int64). No
launcher allocates or copies from the host: a CUDA graph may hold them.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32

from .device import as_device, check, check_ragged, in_simulator, launch_stream, row_threads
from .kernel_cache import cached
from .lsh_kernels import SCAN_THREADS, _block_scan
from .lsh_sparse import _distinct_labels, _is_label


def _labels_kernel(targets, ignore, use_ignore, label_ids, label_offsets):
    """One block: column i keeps its target unless ``use_ignore`` and it equals ``ignore``;
    label_offsets[i + 1] = kept columns up to i, label_ids[...] = the kept targets in order."""
    sm = cuda.shared.array(SCAN_THREADS, int32)
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    n = targets.shape[0]
    base = 0
    if tid == 0:
        label_offsets[0] = 0
    for c0 in range(0, n, nt):
        i = c0 + tid
        keep = 0
        if i < n and not (use_ignore and targets[i] == ignore):
            keep = 1
        before, total = _block_scan(keep, sm)
        if i < n:
            label_offsets[i + 1] = base + before + keep
            if keep == 1:
                label_ids[base + before] = targets[i]
        base += total


def _backward_kernel(x, weight, ids, offsets, label_ids, label_offsets, p, gloss, gx, gw, gb):
    """One block a column (module docstring): p -> dz in place, then gx, gw, gb added."""
    i = cuda.blockIdx.x
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    o0, o1 = offsets[i], offsets[i + 1]
    l0, l1 = label_offsets[i], label_offsets[i + 1]
    dim = x.shape[1]
    ny = _distinct_labels(label_ids, l0, l1)
    t = float32(1.0) / float32(max(ny, 1))
    has = float32(1.0) if ny > 0 else float32(0.0)
    g_i = gloss[i]
    for e in range(o0 + tid, o1, nt):
        a = ids[e]
        g = p[e] * has
        if _is_label(label_ids, l0, l1, a):
            g -= t
        g *= g_i
        p[e] = g
        cuda.atomic.add(gb, a, g)
    cuda.syncthreads()
    for d in range(tid, dim, nt):
        acc = float32(0.0)
        for e in range(o0, o1):
            acc += p[e] * weight[ids[e], d]
        gx[i, d] += acc
    for q in range(tid, (o1 - o0) * dim, nt):
        e = o0 + q // dim
        d = q - (e - o0) * dim
        cuda.atomic.add(gw, (ids[e], d), p[e] * x[i, d])


labels_kernel = cached(cuda.jit(_labels_kernel))
backward_kernel = cached(cuda.jit(_backward_kernel))


def column_labels(targets, label_ids, label_offsets, *, ignore_index=None, stream=None):
    """The labels of N columns in the ragged layout: column i's are
    ``label_ids[label_offsets[i]:label_offsets[i + 1]]``, its target, or none where the target
    equals ``ignore_index`` (None: every column keeps its target).

    Args:
        targets: (N,) int32 or int64 class ids (device); not range-checked here (the step's feed is).
        label_ids: (N,) int32 (or longer), written. label_offsets: (N+1,) int64, written.

    Returns (label_ids, label_offsets). Raises ValueError naming the array on a wrong shape or dtype.
    """
    targets, label_ids, label_offsets = (as_device(a, stream) for a in (targets, label_ids, label_offsets))
    check("column_labels targets", targets, 1, (np.int32, np.int64))
    n = targets.shape[0]
    check_ragged("column_labels label_", label_ids, label_offsets, n)
    if label_ids.shape[0] < max(n, 1):
        raise ValueError(f"column_labels label_ids: needs at least {max(n, 1)} entries, got {label_ids.shape[0]}")
    use = ignore_index is not None
    labels_kernel[1, 32 if in_simulator() else SCAN_THREADS, launch_stream(stream)](
        targets, np.int64(ignore_index if use else 0), use, label_ids, label_offsets)
    return label_ids, label_offsets


def sparse_xent_backward(x, weight, ids, offsets, label_ids, label_offsets, p, gloss, gx, gw, gb, *, stream=None):
    """The gradients of the sparse softmax cross-entropy of N columns over their active sets
    (module docstring), all added (``+=``).

    Args:
        x: (N, d) float32, the loss's input h; weight: (V, d) float32.
        ids, offsets: the active sets ((E,) int32, (N+1,) int64); label_ids, label_offsets: the
            labels ((M,) int32, (N+1,) int64), as the forward had them.
        p: (E,) float32 or longer, the forward's probabilities; overwritten with dz.
        gloss: (N,) float32, each column's loss gradient.
        gx: (N, d), gw: (V, d), gb: (V,) float32, accumulated.

    Returns gw. Raises ValueError naming the array on a wrong shape or dtype.
    """
    arrays = (x, weight, ids, offsets, label_ids, label_offsets, p, gloss, gx, gw, gb)
    x, weight, ids, offsets, label_ids, label_offsets, p, gloss, gx, gw, gb = (as_device(a, stream) for a in arrays)
    check("sparse_xent_backward x", x, 2)
    n, dim = x.shape
    check("sparse_xent_backward weight", weight, 2, shape=(None, dim))
    check_ragged("sparse_xent_backward ", ids, offsets, n)
    check_ragged("sparse_xent_backward label_", label_ids, label_offsets, n)
    check("sparse_xent_backward p", p, 1)
    check("sparse_xent_backward gloss", gloss, 1, shape=(n,))
    check("sparse_xent_backward gx", gx, 2, shape=x.shape)
    check("sparse_xent_backward gw", gw, 2, shape=weight.shape)
    check("sparse_xent_backward gb", gb, 1, shape=(weight.shape[0],))
    if n:
        backward_kernel[n, 8 if in_simulator() else row_threads(max(dim, 256)), launch_stream(stream)](
            x, weight, ids, offsets, label_ids, label_offsets, p, gloss, gx, gw, gb)
    return gw


KERNELS = [
    (_labels_kernel, "void(int32[::1], int64, boolean, int32[::1], int64[::1])"),
    (_backward_kernel, "void(float32[:, ::1], float32[:, ::1], int32[::1], int64[::1], int32[::1], int64[::1], "
                       "float32[::1], float32[::1], float32[:, ::1], float32[:, ::1], float32[::1])"),
]

__all__ = ["KERNELS", "column_labels", "sparse_xent_backward"]
