"""A linear layer over sparse inputs with a ReLU, on the GPU: the first layer of an extreme
classifier (Amazon-670K: 135,909 sparse features -> 128 ReLU; G-SLIDE, Pan et al., IEEE TPDS
2022), whose inputs are CSR rows (rnngraph/data/xc.py's ``XCDataset`` arrays).

- :func:`sparse_linear_relu`: ``h[i] = relu(sum_k v_k W[f_k] + b)`` over sample i's features
  (f_k, v_k), one block a sample, threads over the H outputs (W stored feature-major, (F, H),
  so a feature's row is read coalesced).
- :func:`sparse_linear_relu_backward`: ``g = dh * [h > 0]``; ``gW[f_k] += v_k g``, ``gb += g``
  (atomics: only the rows of the batch's features receive anything).

Offsets index the id and value arrays absolutely (a slice of a whole data set's offsets
serves a batch without copies). Arrays float32, ids int32, offsets int64.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .device import as_device, check, in_simulator, launch_stream, row_threads
from .kernel_cache import cached


def _forward_kernel(offsets, ids, values, weight, bias, out):
    i = cuda.blockIdx.x
    for j in range(cuda.threadIdx.x, out.shape[1], cuda.blockDim.x):
        acc = bias[j]
        for k in range(offsets[i], offsets[i + 1]):
            acc += values[k] * weight[ids[k], j]
        out[i, j] = max(acc, float32(0.0))


def _backward_kernel(offsets, ids, values, out, dout, gw, gb):
    i = cuda.blockIdx.x
    for j in range(cuda.threadIdx.x, out.shape[1], cuda.blockDim.x):
        g = dout[i, j] if out[i, j] > float32(0.0) else float32(0.0)
        if g != float32(0.0):
            cuda.atomic.add(gb, j, g)
            for k in range(offsets[i], offsets[i + 1]):
                cuda.atomic.add(gw, (ids[k], j), values[k] * g)


forward_kernel = cached(cuda.jit(_forward_kernel))
backward_kernel = cached(cuda.jit(_backward_kernel))


def _threads(h: int) -> int:
    return 8 if in_simulator() else row_threads(h)


def _checked(name, offsets, ids, values, weight, out, stream):
    offsets, ids, values, weight, out = (as_device(a, stream) for a in (offsets, ids, values, weight, out))
    check(f"{name} weight", weight, 2)
    check(f"{name} out", out, 2, shape=(None, weight.shape[1]))
    check(f"{name} offsets", offsets, 1, (np.int64,), shape=(out.shape[0] + 1,))
    check(f"{name} ids", ids, 1, (np.int32,))
    check(f"{name} values", values, 1, shape=ids.shape)
    return offsets, ids, values, weight, out


def sparse_linear_relu(offsets, ids, values, weight, bias, out, *, stream=None):
    """``out[i] = relu(sum_k values[k] weight[ids[k]] + bias)``, k over offsets[i]:offsets[i+1].

    Args:
        offsets: (N+1,) int64 positions in ids/values; ids: (M,) int32 feature ids in [0, F)
            (not checked on the device); values: (M,) float32.
        weight: (F, H) float32 (feature-major); bias: (H,) float32; out: (N, H) float32, written.

    Returns out. Raises ValueError naming the array on a wrong shape or dtype.
    """
    offsets, ids, values, weight, out = _checked("sparse_linear_relu", offsets, ids, values, weight, out, stream)
    bias = as_device(bias, stream)
    check("sparse_linear_relu bias", bias, 1, shape=(weight.shape[1],))
    if out.shape[0]:
        forward_kernel[out.shape[0], _threads(out.shape[1]), launch_stream(stream)](offsets, ids, values, weight,
                                                                                     bias, out)
    return out


def sparse_linear_relu_backward(offsets, ids, values, out, dout, gw, gb, *, stream=None):
    """Accumulates the gradients of :func:`sparse_linear_relu` given its output ``out`` (N, H)
    and the output's gradient ``dout`` (N, H): gw (F, H) and gb (H,) float32, += at the rows of
    the batch's features. Raises ValueError naming the array on a wrong shape or dtype."""
    offsets, ids, values, gw, out = _checked("sparse_linear_relu_backward", offsets, ids, values, gw, out, stream)
    dout, gb = as_device(dout, stream), as_device(gb, stream)
    check("sparse_linear_relu_backward dout", dout, 2, shape=out.shape)
    check("sparse_linear_relu_backward gb", gb, 1, shape=(gw.shape[1],))
    if out.shape[0]:
        backward_kernel[out.shape[0], _threads(out.shape[1]), launch_stream(stream)](offsets, ids, values, out, dout,
                                                                                      gw, gb)


KERNELS = [
    (_forward_kernel, "void(int64[::1], int32[::1], float32[::1], float32[:, ::1], float32[::1], float32[:, ::1])"),
    (_backward_kernel, "void(int64[::1], int32[::1], float32[::1], float32[:, ::1], float32[:, ::1], "
                       "float32[:, ::1], float32[::1])"),
]

__all__ = ["KERNELS", "sparse_linear_relu", "sparse_linear_relu_backward"]
