"""Optimizer updates and global-norm gradient clipping on the device, with PyTorch's rules as
:mod:`rnngraph.optim` writes them (that module is the reference; these kernels follow it
operation by operation).

Every array is a C-contiguous float32 device array, taken flat (any shape; the slots ``v``,
``m`` have the parameter's size). Step-dependent scalars (Adam's step size and bias correction,
SGD's learning rate) are computed on the host in float64 (:func:`adam_hyper`, :func:`sgd_hyper`)
and rounded to float32, as NumPy does when ``rnngraph.optim`` updates float32 arrays; the
kernels read them from a small device array, so a captured CUDA graph replays the update with
whatever the host wrote there before the launch (codegen/step_graph.py).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from .device import (MAX_REDUCE_BLOCKS, as_device, blocks, check, elementwise_threads, flat,
                     in_simulator, launch_stream)
from .kernel_cache import cached
from .reductions import SMEM, block_sum


# ---------------------------------------------------------------------------- kernels
def _fill_kernel(x, value):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = value


def _fill_from_kernel(x, src, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = src[k]


def _scale_by_reciprocal_kernel(x, src, k):
    """x *= 1 / src[k] elementwise; x = 0 where src[k] == 0."""
    i = cuda.grid(1)
    if i < x.size:
        d = src[k]
        x[i] = x[i] / d if d != float32(0.0) else float32(0.0)


def _copy_if_kernel(dst, src, ok):
    """dst = src elementwise when ok[0] != 0 (a state carried only after a finite step)."""
    i = cuda.grid(1)
    if i < dst.size and ok[0] != 0:
        dst[i] = src[i]


def _add_kernel(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += y[i]


def _sgd_kernel(p, g, v, hyper, momentum, use_momentum, ok):
    """torch.optim.SGD (no dampening, no Nesterov, no weight decay), lr = hyper[0], the first
    step when hyper[1] != 0; nothing when ok[0] == 0."""
    i = cuda.grid(1)
    if i < p.size and ok[0] != 0:
        lr = hyper[0]
        d = g[i]
        if use_momentum:
            if hyper[1] != float32(0.0):
                d = g[i]
            else:
                d = momentum * v[i] + g[i]
            v[i] = d
        p[i] -= lr * d


@cuda.jit(device=True)
def adam_rule(p, g, m, v, hyper, b1, one_minus_b1, b2, one_minus_b2, eps):
    """One parameter's Adam step, (p, m, v) -> the new (p, m, v), with (step_size, bc2, decay) =
    hyper[0:3] (see _adam_kernel); shared with codegen/lsh_sparse.py's touched-rows update."""
    m = m * b1 + one_minus_b1 * g
    v = v * b2 + one_minus_b2 * g * g
    return p * hyper[2] - hyper[0] * m / (math.sqrt(v / hyper[1]) + eps), m, v


def _adam_kernel(p, g, m, v, hyper, b1, one_minus_b1, b2, one_minus_b2, eps, ok):
    """torch.optim.Adam / AdamW as rnngraph.optim writes them, with (step_size, bc2, decay) =
    hyper[0:3]: p *= decay (AdamW's 1 - lr*wd; exactly 1.0 for Adam, which leaves p unchanged
    bit for bit); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= step_size * m / (sqrt(v / bc2)
    + eps). Nothing when ok[0] == 0."""
    i = cuda.grid(1)
    if i < p.size and ok[0] != 0:
        p[i], m[i], v[i] = adam_rule(p[i], g[i], m[i], v[i], hyper, b1, one_minus_b1, b2, one_minus_b2, eps)


def _all_finite_kernel(acc, ok, rows, hyper):
    """One thread. First the step scalars: hyper = rows[0] if ok[0] != 0 (the previous call's
    flag) else rows[1]. Then ok[0] = 1 if every element of acc is finite, else 0; where the
    chosen row's last element is non-zero (a chain) also 0 when ok[0] held 0 (a call enqueued
    behind one whose outcome the host has not yet seen: in nonfinite="raise" mode it must change
    nothing after that one failed; see CudaBackend.train)."""
    if cuda.grid(1) == 0:
        before = ok[0]
        r = 0 if before != 0 else 1
        for k in range(hyper.size):
            hyper[k] = rows[r, k]
        good = 1
        if hyper[hyper.size - 1] != float32(0.0) and before == 0:
            good = 0
        for k in range(acc.size):
            x = acc[k]
            if not (x == x and x - x == float32(0.0)):  # NaN fails the first, +-inf the second
                good = 0
        ok[0] = good


def _sum_squares_kernel(g, acc):
    """acc[0] += sum(g**2): grid-stride loop, block reduction, one atomic a block."""
    sm = cuda.shared.array(SMEM, float32)
    s = float32(0.0)
    for i in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        s += g[i] * g[i]
    total = block_sum(s, sm)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(acc, 0, total)


def _scale_by_clip_kernel(g, acc, max_norm, norm_out, write_norm):
    """norm = sqrt(acc[0]); if norm > max_norm: g *= max_norm / (norm + 1e-6).
    Thread 0 writes norm to norm_out[0] when ``write_norm`` (norm_out must not be acc)."""
    i = cuda.grid(1)
    norm = math.sqrt(acc[0])
    if write_norm and i == 0:
        norm_out[0] = norm
    if norm > max_norm and i < g.size:
        g[i] *= max_norm / (norm + float32(1e-6))


fill_kernel = cached(cuda.jit(_fill_kernel))
fill_from_kernel = cached(cuda.jit(_fill_from_kernel))
scale_by_reciprocal_kernel = cached(cuda.jit(_scale_by_reciprocal_kernel))
copy_if_kernel = cached(cuda.jit(_copy_if_kernel))
add_kernel = cached(cuda.jit(_add_kernel))
sgd_kernel = cached(cuda.jit(_sgd_kernel))
all_finite_kernel = cached(cuda.jit(_all_finite_kernel))
adam_kernel = cached(cuda.jit(_adam_kernel))
sum_squares_kernel = cached(cuda.jit(_sum_squares_kernel))
scale_by_clip_kernel = cached(cuda.jit(_scale_by_clip_kernel))

_V = "float32[::1]"
KERNELS = [
    (_fill_kernel, f"void({_V}, float32)"),
    (_add_kernel, f"void({_V}, {_V})"),
    (_fill_from_kernel, f"void({_V}, {_V}, int32)"),
    (_scale_by_reciprocal_kernel, f"void({_V}, {_V}, int32)"),
    (_copy_if_kernel, f"void({_V}, {_V}, int32[::1])"),
    (_sgd_kernel, f"void({_V}, {_V}, {_V}, {_V}, float32, int32, int32[::1])"),
    (_adam_kernel, f"void({_V}, {_V}, {_V}, {_V}, {_V}, " + ", ".join(["float32"] * 5) + ", int32[::1])"),
    (_all_finite_kernel, f"void({_V}, int32[::1], float32[:, ::1], {_V})"),
    (_sum_squares_kernel, f"void({_V}, {_V})"),
    (_scale_by_clip_kernel, f"void({_V}, {_V}, float32, {_V}, int32)"),
]


# ---------------------------------------------------------------------------- launchers
def _flat_f32(name, x, stream, size=None):
    x = as_device(x, stream)
    check(name, x, x.ndim)
    if not x.is_c_contiguous():
        raise ValueError(f"{name}: expected a C-contiguous array")
    if size is not None and x.size != size:
        raise ValueError(f"{name}: expected {size} elements, got {x.size}")
    return flat(x)


def _launch_1d(kernel, n, stream, *args):
    t = elementwise_threads()
    kernel[blocks(n, t), t, launch_stream(stream)](*args)


def fill(x, value: float = 0.0, *, stream=None):
    """``x[...] = value`` for a C-contiguous float32 device array of any shape, enqueued on
    ``stream`` (captured by CUDA graphs, unlike a host copy). Returns x.

    +0.0 on the GPU is the driver's memset (``cuMemsetD8Async``: all-zero bytes are float32
    +0.0), about three times the fill kernel's speed (H200: 330 MB in 0.084 vs 0.243 ms,
    bench/kernel_micro.py); other values, and the simulator, launch the fill kernel. Raises
    ValueError for a non-float32 or non-contiguous ``x``."""
    xf = _flat_f32("fill x", x, stream)
    if not xf.size:
        return x
    if value == 0.0 and math.copysign(1.0, value) > 0 and not in_simulator():
        from numba.cuda.cudadrv import driver
        driver.device_memset(xf, 0, xf.size * 4, stream=launch_stream(stream))
    else:
        _launch_1d(fill_kernel, xf.size, stream, xf, np.float32(value))
    return x


def add_into(x, y, *, stream=None):
    """``x += y`` elementwise for two C-contiguous float32 device arrays with the same number of
    elements (any shapes), enqueued on ``stream``. Returns x. Raises ValueError for another
    dtype, a non-contiguous array or a size mismatch."""
    xf = _flat_f32("add_into x", x, stream)
    yf = _flat_f32("add_into y", y, stream, size=xf.size)
    if xf.size:
        _launch_1d(add_kernel, xf.size, stream, xf, yf)
    return x


def fill_from(x, src, index: int = 0, *, stream=None):
    """``x[...] = src[index]`` for C-contiguous float32 device arrays (``src`` flat): a fill whose
    value a captured CUDA graph reads at replay. Returns x."""
    xf = _flat_f32("fill_from x", x, stream)
    if xf.size:
        _launch_1d(fill_from_kernel, xf.size, stream, xf, _flat_f32("fill_from src", src, stream), np.int32(index))
    return x


def scale_by_reciprocal(x, src, index: int, *, stream=None):
    """``x /= src[index]`` (x = 0 when ``src[index]`` is 0) for C-contiguous float32 device arrays
    (``src`` flat): a division by a count that only the device knows at launch (data-parallel
    training's all-reduced column count). Returns x."""
    xf = _flat_f32("scale_by_reciprocal x", x, stream)
    if xf.size:
        _launch_1d(scale_by_reciprocal_kernel, xf.size, stream, xf, _flat_f32("scale_by_reciprocal src", src, stream),
                   np.int32(index))
    return x


def copy_if(dst, src, ok, *, stream=None):
    """``dst[...] = src`` when the int32 (1,) device flag ``ok`` holds 1, else nothing; float32,
    C-contiguous, the same number of elements, not overlapping. Returns dst."""
    df = _flat_f32("copy_if dst", dst, stream)
    sf = _flat_f32("copy_if src", src, stream, df.size)
    if df.size:
        _launch_1d(copy_if_kernel, df.size, stream, df, sf, as_device(ok, stream))
    return dst


def sgd_hyper(lr: float, first_step: bool) -> np.ndarray:
    """The (2,) float32 step scalars :func:`sgd_update` reads: (lr, 1.0 on the first step else 0.0)."""
    return np.array([lr, 1.0 if first_step else 0.0], np.float32)


def adam_hyper(lr: float, beta1: float, beta2: float, step: int, decay: float = 1.0) -> np.ndarray:
    """The (3,) float32 step scalars :func:`adam_update` reads, computed in float64 as
    rnngraph.optim.Adam does: (lr / (1 - beta1**step), 1 - beta2**step, decay). ValueError for
    ``step < 1`` (the first update is step 1)."""
    if step < 1:
        raise ValueError(f"adam_update: step counts from 1, got {step}")
    return np.array([lr / (1 - beta1 ** step), 1 - beta2 ** step, decay], np.float32)


def sgd_update(p, g, v, lr: float = 0.0, momentum: float = 0.0, first_step: bool = False, *, ok=None, hyper=None,
               stream=None):
    """One torch.optim.SGD step in place: ``v = g`` on the first step, else ``v = momentum * v +
    g``; ``p -= lr * v`` (with ``momentum == 0``: ``p -= lr * g`` and ``v`` is neither read nor
    written, so it may be None). p, g, v: float32, same size, any shape, C-contiguous.
    ok: an int32 (1,) device flag (:func:`all_finite`): no update at all when it holds 0.
    hyper: a float32 (2,) device array holding :func:`sgd_hyper`'s values, read at launch in
    place of ``lr`` and ``first_step`` (None: made from them, one small host-to-device copy)."""
    pf = _flat_f32("sgd p", p, stream)
    gf = _flat_f32("sgd g", g, stream, pf.size)
    use_momentum = momentum != 0.0
    vf = _flat_f32("sgd v", v, stream, pf.size) if use_momentum else gf
    if pf.size:
        hyper = _device_hyper(sgd_hyper(lr, first_step) if hyper is None else hyper, stream)
        _launch_1d(sgd_kernel, pf.size, stream, pf, gf, vf, hyper, np.float32(momentum), np.int32(use_momentum),
                   _flag(ok, stream))


def adam_update(p, g, m, v, lr: float = 0.0, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                step: int = 1, *, decay: float = 1.0, ok=None, hyper=None, stream=None):
    """One torch.optim.Adam step in place; ``step`` counts from 1 (the first update is step 1).
    p, g, m, v: float32, same size, any shape, C-contiguous; m, v start at zero.

    ``decay``: p is multiplied by it (as float32) before the update: ``1 - lr * weight_decay``
    makes the step torch.optim.AdamW's (decoupled weight decay, Loshchilov & Hutter 2019; see
    rnngraph.optim.AdamW); 1.0 (the default) is plain Adam. ok: as for :func:`sgd_update`.
    hyper: a float32 (3,) device array holding :func:`adam_hyper`'s values, read at launch in
    place of ``lr``, ``step`` and ``decay`` (None: made from them). ValueError for ``step < 1``."""
    host = adam_hyper(lr, beta1, beta2, step, decay) if hyper is None else None
    pf = _flat_f32("adam p", p, stream)
    gf = _flat_f32("adam g", g, stream, pf.size)
    mf = _flat_f32("adam m", m, stream, pf.size)
    vf = _flat_f32("adam v", v, stream, pf.size)
    if pf.size:
        f = np.float32
        hyper = _device_hyper(host if hyper is None else hyper, stream)
        _launch_1d(adam_kernel, pf.size, stream, pf, gf, mf, vf, hyper, f(beta1), f(1 - beta1), f(beta2),
                   f(1 - beta2), f(eps), _flag(ok, stream))


def _device_hyper(hyper, stream):
    """A step-scalar array on the device: a host array is copied (enqueued on ``stream``)."""
    if isinstance(hyper, np.ndarray):
        return cuda.to_device(hyper, stream=launch_stream(stream))
    return _flat_f32("hyper", hyper, stream)


_ALWAYS: dict = {}  # context -> an int32 (1,) device array holding 1 (updates without a finite check)


def _flag(ok, stream):
    if ok is not None:
        return as_device(ok, stream)
    key = id(cuda.current_context()) if not in_simulator() else 0
    if key not in _ALWAYS:
        _ALWAYS[key] = cuda.to_device(np.ones(1, np.int32))
    return _ALWAYS[key]


def all_finite(acc, ok, rows, hyper, *, stream=None):
    """``ok[0] = 1`` if every element of the float32 device array ``acc`` is finite, else 0
    (one thread; e.g. acc holding sums of squares of the gradients and of the losses); ok: an
    int32 (1,) device array. rows, hyper: the step scalars' two rows (2, n) and their
    destination (n,), n >= 1, float32 on the device: first ``hyper = rows[0]`` where ok[0] (the
    previous call's flag) holds 1, else ``rows[1]``; a non-zero last element chains the check
    to that flag (ok[0] = 0 also when it held 0). ValueError for rows and hyper of other shapes."""
    af = _flat_f32("all_finite acc", acc, stream)
    rows, hyper = as_device(rows, stream), _flat_f32("all_finite hyper", hyper, stream)
    if hyper.size < 1 or rows.shape != (2, hyper.size) or rows.dtype != np.float32 or not rows.is_c_contiguous():
        raise ValueError(f"all_finite rows: expected float32 (2, {hyper.size}), got {rows.dtype} {rows.shape}")
    all_finite_kernel[1, 1, launch_stream(stream)](af, as_device(ok, stream), rows, hyper)


def sum_squares(g, acc, *, stream=None):
    """``acc[0] += sum(g ** 2)`` (float32 accumulation, atomics across blocks). g: float32, any
    shape, C-contiguous; acc: float32 (1,) on the device."""
    gf = _flat_f32("sum_squares g", g, stream)
    acc = as_device(acc, stream)
    check("sum_squares acc", acc, 1, shape=(1,))
    if gf.size:
        t = elementwise_threads()
        sum_squares_kernel[blocks(gf.size, t, MAX_REDUCE_BLOCKS), t, launch_stream(stream)](gf, acc)


def scale_by_clip(g, acc, max_norm: float, *, norm=None, stream=None):
    """torch.nn.utils.clip_grad_norm_'s scaling, decided on the device: with ``total =
    sqrt(acc[0])``, ``g *= max_norm / (total + 1e-6)`` when ``total > max_norm``. No host round
    trip. ``norm`` (float32 (1,), not ``acc``), if given, receives ``total``."""
    gf = _flat_f32("scale_by_clip g", g, stream)
    acc = as_device(acc, stream)
    check("scale_by_clip acc", acc, 1, shape=(1,))
    if norm is not None:
        norm = as_device(norm, stream)
        check("scale_by_clip norm", norm, 1, shape=(1,))
    _launch_1d(scale_by_clip_kernel, max(gf.size, 1), stream, gf, acc, np.float32(max_norm),
               acc if norm is None else norm, np.int32(norm is not None))


def clip_grad_norm(grads, max_norm: float, stream=None, *, acc=None, norm=None):
    """torch.nn.utils.clip_grad_norm_ over a list of float32 device gradients, in place, with
    no host synchronisation: zero ``acc``, add every gradient's sum of squares, then scale every
    gradient by ``max_norm / (total + 1e-6)`` if ``total > max_norm``.

    acc, norm: float32 (1,) device scratch and result (allocated when None; pass them to keep
    the sequence allocation-free, e.g. for CUDA-graph capture). Returns ``norm``: a device
    array whose element 0 is the total norm before clipping (torch's return value)."""
    grads = [as_device(g, stream) for g in grads]
    if acc is None:
        acc = cuda.device_array(1, np.float32, stream=launch_stream(stream))
    if norm is None:
        norm = cuda.device_array(1, np.float32, stream=launch_stream(stream))
    fill(acc, 0.0, stream=stream)
    for g in grads:
        sum_squares(g, acc, stream=stream)
    if not grads:
        fill(norm, 0.0, stream=stream)
    for i, g in enumerate(grads):
        scale_by_clip(g, acc, max_norm, norm=norm if i == 0 else None, stream=stream)
    return norm
