"""The GPU side of the loss ops (``kind == "loss"`` in rnngraph.ops_losses): the mean-squared-error
kernels, and the launchers the op registry names in each loss op's ``cuda_loss`` (the softmax
cross-entropy's kernels are in codegen/reductions.py, the chunked one's in codegen/chunked_xent.py;
an LSH head's dense evaluation is the chunked one's, its sparse training loss codegen/lsh_step.py).

A launcher pair is ``forward(call)`` and ``backward(call)`` on a :class:`LossCall`, the views
of one launch. The window's mean (the 1/columns seed) is the caller's (rnngraph.codegen.step).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from numba import cuda, float32

from .chunked_xent import chunked_xent_backward, chunked_xent_forward
from .device import as_device, check, launch_stream, row_threads
from .kernel_cache import cached
from .reductions import SMEM, block_sum, softmax_xent_backward, softmax_xent_forward


@dataclass(frozen=True)
class LossCall:
    """One launch of a loss op over N columns: ``args`` its arguments (float32 (N, n) views,
    token ids (N,) int32), ``params`` its parameters (most loss ops have none), ``loss`` float32
    (N,) its per-column value (written by forward; backward reads it), ``attrs`` the node's
    attributes, ``stream``; backward only: ``gloss`` float32 (N,) the per-column gradient,
    ``gargs`` the arguments' gradient buffers (None where no gradient flows: token ids,
    targets) and ``gparams`` the parameters' gradient arrays (accumulated)."""

    args: list
    params: list
    loss: object
    attrs: dict
    stream: object
    gloss: object = None
    gargs: list | None = None
    gparams: list | None = None


# ---------------------------------------------------------------------------- mean squared error
def _mse_forward_kernel(x, y, loss):
    """One block per row r: loss[r] = mean_j (x[r, j] - y[r, j])^2."""
    sm = cuda.shared.array(SMEM, float32)
    r = cuda.blockIdx.x
    n = x.shape[1]
    s = float32(0.0)
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        d = x[r, j] - y[r, j]
        s += d * d
    s = block_sum(s, sm)
    if cuda.threadIdx.x == 0:
        loss[r] = s / float32(n)


def _mse_backward_kernel(x, y, gloss, gx):
    """One block per row r: gx[r, j] += 2 (x[r, j] - y[r, j]) / n * gloss[r] (accumulated: the
    prediction may be a value other nodes read too, such as a cell's output)."""
    r = cuda.blockIdx.x
    n = x.shape[1]
    g = float32(2.0) * gloss[r] / float32(n)
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        gx[r, j] += (x[r, j] - y[r, j]) * g


mse_forward_kernel = cached(cuda.jit(_mse_forward_kernel))
mse_backward_kernel = cached(cuda.jit(_mse_backward_kernel))


def _mse_args(name, x, y, *more):
    check(f"{name} prediction", x, 2)
    check(f"{name} target", y, 2, shape=x.shape)
    for label, a, shape in more:
        check(f"{name} {label}", a, len(shape), shape=shape)


def mse_forward(x, y, loss, *, stream=None):
    """Per-row mean squared error ``loss[r] = mean_j (x[r, j] - y[r, j])^2`` (PyTorch's
    nn.MSELoss, reduction="none", averaged over a row). x, y: float32 (N, n); loss: float32
    (N,). One block per row. Returns loss. ValueError naming the array for a wrong shape/dtype."""
    x, y, loss = (as_device(a, stream) for a in (x, y, loss))
    _mse_args("mse_forward", x, y, ("loss", loss, (x.shape[0],)))
    if x.shape[0]:
        mse_forward_kernel[x.shape[0], row_threads(x.shape[1]), launch_stream(stream)](x, y, loss)
    return loss


def mse_backward(x, y, gloss, gx, *, stream=None):
    """Gradient of :func:`mse_forward` with respect to x, added to ``gx``:
    ``gx[r] += 2 (x[r] - y[r]) / n * gloss[r]``. x, y, gx: float32 (N, n); gloss: float32 (N,).
    Returns gx."""
    x, y, gloss, gx = (as_device(a, stream) for a in (x, y, gloss, gx))
    _mse_args("mse_backward", x, y, ("gloss", gloss, (x.shape[0],)), ("gx", gx, x.shape))
    if x.shape[0]:
        mse_backward_kernel[x.shape[0], row_threads(x.shape[1]), launch_stream(stream)](x, y, gloss, gx)
    return gx


KERNELS = [
    (_mse_forward_kernel, "void(float32[:, ::1], float32[:, ::1], float32[::1])"),
    (_mse_backward_kernel, "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1])"),
]


# ---------------------------------------------------------------------------- launchers named by ops_losses.py
def run_softmax_xent(call: LossCall) -> None:
    """``softmax_xent(logits, ids)``: per-column cross-entropy, 0 where ids == attrs["ignore_index"]."""
    logits, ids = call.args
    softmax_xent_forward(logits, ids, call.loss, ignore_index=call.attrs.get("ignore_index"), stream=call.stream)


def run_softmax_xent_grad(call: LossCall) -> None:
    """The logits' gradient of ``softmax_xent`` (written: the logits are read by this op alone)."""
    logits, ids = call.args
    softmax_xent_backward(logits, ids, call.gloss, call.gargs[0], ignore_index=call.attrs.get("ignore_index"),
                          stream=call.stream)


def run_chunked_softmax_xent(call: LossCall) -> None:
    """``chunked_softmax_xent(h, ids)`` with parameters (W, b): codegen/chunked_xent.py."""
    (h, ids), (weight, bias) = call.args, call.params
    chunked_xent_forward(h, weight, bias, ids, call.loss, chunk=call.attrs["chunk"],
                         ignore_index=call.attrs.get("ignore_index"), stream=call.stream)


def run_chunked_softmax_xent_grad(call: LossCall) -> None:
    """Its gradients: h's (added, where it has a buffer), W's and b's (added)."""
    (h, ids), (weight, bias) = call.args, call.params
    chunked_xent_backward(h, weight, bias, ids, call.loss, call.gloss, call.gargs[0], *call.gparams,
                          chunk=call.attrs["chunk"], ignore_index=call.attrs.get("ignore_index"), stream=call.stream)


#: classes a chunk of an ``lsh_softmax_xent`` head's dense evaluation (the same values as one chunk
#: of all classes, to float32 rounding; bounds the logits' scratch at V = 100,000 and more)
LSH_DENSE_CHUNK = 16384


def run_lsh_softmax_xent(call: LossCall) -> None:
    """``lsh_softmax_xent(h, ids)`` evaluated densely (rnngraph/ops_lsh.py): the chunked softmax
    cross-entropy over all classes. Training calls run the sparse loss instead (codegen/lsh_step.py)."""
    weight = call.params[0]
    run_chunked_softmax_xent(replace(call, attrs={**call.attrs, "chunk": min(weight.shape[0], LSH_DENSE_CHUNK)}))


def run_lsh_softmax_xent_grad(call: LossCall) -> None:
    """Its dense gradients (a training call outside ``DeviceLSHHead.training`` only)."""
    weight = call.params[0]
    run_chunked_softmax_xent_grad(replace(call, attrs={**call.attrs, "chunk": min(weight.shape[0], LSH_DENSE_CHUNK)}))


def run_mse(call: LossCall) -> None:
    """``mse(prediction, target)``: per-column mean squared error."""
    mse_forward(call.args[0], call.args[1], call.loss, stream=call.stream)


def run_mse_grad(call: LossCall) -> None:
    """The prediction's gradient of ``mse`` (added), and the target's where it has a gradient
    buffer (a computed value, not a head's input ``y``): the same rule with the two swapped."""
    (x, y), gargs = call.args, call.gargs
    mse_backward(x, y, call.gloss, gargs[0], stream=call.stream)
    if gargs[1] is not None:
        mse_backward(y, x, call.gloss, gargs[1], stream=call.stream)


__all__ = ["KERNELS", "LSH_DENSE_CHUNK", "LossCall", "mse_backward", "mse_forward", "run_chunked_softmax_xent",
           "run_chunked_softmax_xent_grad", "run_lsh_softmax_xent", "run_lsh_softmax_xent_grad", "run_mse",
           "run_mse_grad", "run_softmax_xent", "run_softmax_xent_grad"]
