"""The fixed kernel library of the CUDA backend: kernels that do not depend on the graph, with
host-side launchers.

Every launcher takes device arrays (numba device arrays, or anything with
``__cuda_array_interface__``, wrapped without a copy by :func:`device.as_device`), float32 data
and int32/int64 ids, and an optional numba ``stream`` (default: numba's default stream). None of
them synchronises with the host, and none allocates unless its docstring says so.

- GEMM (:mod:`.gemm`): :func:`gemm` (cuBLAS, the library CuPy loads, through codegen/cublas.py,
  or a tiled numba kernel; :func:`gemm_launcher` prepares one for repeated launches),
  :func:`add_bias`, :func:`column_sum`;
- row reductions (:mod:`.reductions`): :func:`layer_norm_forward`, :func:`layer_norm_backward`,
  :func:`softmax_xent_forward`, :func:`softmax_xent_backward` (with ``ignore_index``);
- losses (:mod:`.losses`): :func:`mse_forward`, :func:`mse_backward`; the output layer and
  softmax cross-entropy a chunk of the classes at a time (:mod:`.chunked_xent`):
  :func:`chunked_xent_forward`, :func:`chunked_xent_backward`;
- embedding gather and scatter-add (here): :func:`embedding_forward`, :func:`embedding_backward`;
- dropout masks (here): :func:`dropout_threshold` (uniforms -> an inverted-dropout mask, in place);
- optimizers and clipping (:mod:`.optim_kernels`): :func:`sgd_update`, :func:`adam_update` (their
  step scalars from :func:`sgd_hyper`, :func:`adam_hyper`, in a device array),
  :func:`sum_squares`, :func:`scale_by_clip`, :func:`clip_grad_norm`, :func:`fill`,
  :func:`fill_from` (the value read from a device array), :func:`add_into` (``x += y``),
  :func:`all_finite` (a flag the updates read), :func:`copy_if` (a copy only when that flag is set).

:data:`KERNELS` lists every kernel as (Python function, numba signature string), for
``cuda.compile_ptx(fn, sig, cc=(9, 0))`` checks (no ``.f64`` in a float32 kernel);
:func:`ptx_f64_report` runs that check on any such list (generated kernels too).
"""
from __future__ import annotations

import contextlib
import types

import numpy as np
from numba import cuda, float32

from . import chunked_xent as _chunked_mod
from . import gemm as _gemm_mod
from . import precision_kernels as _precision_mod
from . import losses as _loss_mod
from . import optim_kernels as _optim_mod
from . import reductions as _red_mod
from .device import (INDEX_DTYPES, as_device, blocks, check, elementwise_threads, have_cupy,
                     in_simulator, launch_stream)
from .chunked_xent import chunked_xent_backward, chunked_xent_forward
from .gemm import add_bias, column_sum, gemm, gemm_launcher
from .kernel_cache import cached
from .losses import mse_backward, mse_forward
from .optim_kernels import (adam_hyper, adam_update, add_into, all_finite, clip_grad_norm, copy_if, fill, fill_from,
                            scale_by_clip, scale_by_reciprocal, sgd_hyper, sgd_update, sum_squares)
from .reductions import (layer_norm_backward, layer_norm_forward, softmax_xent_backward,
                         softmax_xent_forward)


# ---------------------------------------------------------------------------- embedding
def _embedding_forward_kernel(ids, table, out):
    """out[i, e] = table[ids[i], e]; zeros for an id outside [0, V). Grid (ceil(E / tpb), N)."""
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    i = cuda.blockIdx.y
    if e < out.shape[1]:
        t = ids[i]
        if 0 <= t < table.shape[0]:
            out[i, e] = table[t, e]
        else:
            out[i, e] = float32(0.0)


def _embedding_backward_kernel(ids, gout, gtable):
    """gtable[ids[i], e] += gout[i, e] (atomic: repeated ids add up); ids outside [0, V) are
    skipped. Grid (ceil(E / tpb), N)."""
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    i = cuda.blockIdx.y
    if e < gout.shape[1]:
        t = ids[i]
        if 0 <= t < gtable.shape[0]:
            cuda.atomic.add(gtable, (t, e), gout[i, e])


embedding_forward_kernel = cached(cuda.jit(_embedding_forward_kernel))
embedding_backward_kernel = cached(cuda.jit(_embedding_backward_kernel))


def _embedding_launch(kernel, ids, n_cols, stream, *args):
    if ids.shape[0] == 0 or n_cols == 0:
        return
    t = elementwise_threads()
    kernel[(blocks(n_cols, t), ids.shape[0]), t, launch_stream(stream)](ids, *args)


def embedding_forward(ids, table, out, *, stream=None):
    """Gather: ``out[i] = table[ids[i]]`` (a row of zeros for an id outside [0, V)).
    ids: int32 or int64 (N,); table: float32 (V, E); out: float32 (N, E). Returns out."""
    ids, table, out = (as_device(a, stream) for a in (ids, table, out))
    check("embedding_forward ids", ids, 1, INDEX_DTYPES)
    check("embedding_forward table", table, 2)
    check("embedding_forward out", out, 2, shape=(ids.shape[0], table.shape[1]))
    _embedding_launch(embedding_forward_kernel, ids, table.shape[1], stream, table, out)
    return out


def embedding_backward(ids, gout, gtable, *, stream=None):
    """Scatter-add: ``gtable[ids[i]] += gout[i]`` for every i (accumulates; zero gtable first
    for a fresh gradient; ids outside [0, V) are skipped). ids: int32 or int64 (N,); gout:
    float32 (N, E); gtable: float32 (V, E). Returns gtable."""
    ids, gout, gtable = (as_device(a, stream) for a in (ids, gout, gtable))
    check("embedding_backward ids", ids, 1, INDEX_DTYPES)
    check("embedding_backward gtable", gtable, 2)
    check("embedding_backward gout", gout, 2, shape=(ids.shape[0], gtable.shape[1]))
    _embedding_launch(embedding_backward_kernel, ids, gtable.shape[1], stream, gout, gtable)
    return gtable


_EMBEDDING_KERNELS = []
for _idx in ("int32", "int64"):
    _EMBEDDING_KERNELS += [
        (_embedding_forward_kernel, f"void({_idx}[::1], float32[:, ::1], float32[:, ::1])"),
        (_embedding_backward_kernel, f"void({_idx}[::1], float32[:, ::1], float32[:, ::1])"),
    ]



# ---------------------------------------------------------------------------- dropout masks
def _dropout_threshold_kernel(u, p, scale):
    """u[i] = scale where u[i] > p, else 0: uniforms in (0, 1] become an inverted-dropout mask."""
    i = cuda.grid(1)
    if i < u.size:
        u[i] = scale if u[i] > p else float32(0.0)


dropout_threshold_kernel = cached(cuda.jit(_dropout_threshold_kernel))


def dropout_threshold(u, p: float, *, stream=None):
    """In place, ``u = where(u > p, 1/(1-p), 0)`` (float32, 1/(1-p) rounded once to float32):
    uniforms in (0, 1] (cuRAND's) become a mask that drops with probability p and scales what
    it keeps, PyTorch's inverted dropout. u: C-contiguous float32, any shape; 0 <= p < 1.
    Returns u."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_threshold: p must be in [0, 1), got {p!r}")
    u = as_device(u, stream)
    check("dropout_threshold u", u, u.ndim)
    if not u.is_c_contiguous():
        raise ValueError("dropout_threshold u: expected a C-contiguous array")
    if u.size:
        t = elementwise_threads()
        dropout_threshold_kernel[blocks(u.size, t), t, launch_stream(stream)](
            u.reshape(u.size), np.float32(p), np.float32(1.0 / (1.0 - p)))
    return u


KERNELS: list[tuple] = (_gemm_mod.KERNELS + _red_mod.KERNELS + _loss_mod.KERNELS + _chunked_mod.KERNELS
                        + _EMBEDDING_KERNELS
                        + [(_dropout_threshold_kernel, "void(float32[::1], float32, float32)")]
                        + _optim_mod.KERNELS + _precision_mod.KERNELS)


# ---------------------------------------------------------------------------- PTX check
def ptx_f64_report(kernels=None, cc=(9, 0)) -> dict[str, int]:
    """Compile each (function, signature) of ``kernels`` (default :data:`KERNELS`) to PTX for
    compute capability ``cc`` and count its ``.f64`` occurrences; returns {"name(sig)": count}.

    Needs real numba-cuda (not the simulator) and NVVM (the ``nvidia-cuda-nvrtc`` wheel plus a
    CUDA toolkit's libNVVM; no GPU). Raises whatever ``cuda.compile_ptx`` raises."""
    if in_simulator():
        raise RuntimeError("ptx_f64_report: cuda.compile_ptx does not run in the CUDA simulator")
    out = {}
    with _device_functions_for_cc(cc):
        for fn, sig in (KERNELS if kernels is None else kernels):
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
            out[f"{fn.__name__}{sig[4:]}"] = ptx.count(".f64")
    return out


@contextlib.contextmanager
def _device_functions_for_cc(cc):
    """Let kernels that call ``@cuda.jit(device=True)`` functions compile without a GPU.

    numba-cuda 0.30 types a call to a device-function dispatcher by compiling it for
    ``get_current_device().compute_capability``, which initialises the driver; on a machine
    without one, ``compile_ptx`` of such a kernel fails with CudaSupportError. Where no GPU is
    present, the dispatcher module is shown a stand-in device of compute capability ``cc`` for
    the duration (those overloads are then cached for ``cc``; only use this in a process that
    does not launch kernels, such as a compile-check subprocess)."""
    import numba.cuda.dispatcher as dispatcher

    if cuda.is_available():
        yield
        return
    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=tuple(cc))
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


__all__ = [
    "KERNELS", "add_bias", "adam_hyper", "adam_update", "add_into", "all_finite", "as_device", "chunked_xent_backward",
    "chunked_xent_forward", "clip_grad_norm", "column_sum", "copy_if", "dropout_threshold", "embedding_backward",
    "embedding_forward", "fill", "fill_from", "gemm", "gemm_launcher", "have_cupy", "in_simulator",
    "layer_norm_backward", "layer_norm_forward", "mse_backward", "mse_forward", "ptx_f64_report", "scale_by_clip",
    "scale_by_reciprocal", "sgd_hyper", "sgd_update", "softmax_xent_backward", "softmax_xent_forward", "sum_squares",
]
