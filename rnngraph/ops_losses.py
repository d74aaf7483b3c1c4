"""The loss ops of the registry (rnngraph/ops.py registers them by importing this module):
``softmax_xent`` (per-column cross-entropy over class ids, with an optional ``ignore_index``) and
``mse`` (per-column mean squared error). Their GPU launchers are named by ``cuda_loss`` in
:mod:`rnngraph.codegen.losses`.

A loss op's per-column value is what one column adds to the window's loss; the training loss
is the sum over the window's columns divided by the columns that count (every column, less
those whose target is an ignored id): PyTorch's reduction="mean".
"""
from __future__ import annotations

import numpy as np

from .errors import DtypeError, ShapeError
from .ir import FLOAT, INDEX
from .ops_registry import Op, floats, n_args, node_label, register

#: The smallest ignore_index a softmax_xent takes: the GPU holds token ids as int32.
IGNORE_INDEX_MIN = -2 ** 31


def _xent_shape(node, args, params):
    n_args(node, args, 2)
    logits, target = args
    floats(node, [logits])
    if target.dtype != INDEX:
        raise DtypeError(f"{node_label(node)}: target {target.name!r} holds floats; it must hold class ids")
    ignore = node.attr.get("ignore_index")
    if ignore is not None and (isinstance(ignore, bool) or not isinstance(ignore, int)
                               or not IGNORE_INDEX_MIN <= ignore < logits.size):
        raise ShapeError(f"{node_label(node)}: ignore_index {ignore!r} must be an integer in "
                         f"[{IGNORE_INDEX_MIN}, {logits.size}) (a class id or a negative marker such as -100)")
    return 1, FLOAT


def _log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    s = z - m
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def _kept(ids, at):
    """(N, 1) bool: the columns whose target is not ``at["ignore_index"]`` (all without one)."""
    ignore = at.get("ignore_index")
    return np.ones(ids.shape, bool) if ignore is None else ids != ignore


def _xent_forward(xs, ps, at):
    keep = _kept(xs[1], at)
    ids = np.where(keep, xs[1], 0)  # an ignored id may be negative: read any class, then zero it
    loss = -np.take_along_axis(_log_softmax(xs[0]), ids, axis=1)
    return np.where(keep, loss, 0).astype(xs[0].dtype, copy=False)


def _xent_vjp(g, y, xs, ps, at):
    keep = _kept(xs[1], at)
    ids = np.where(keep, xs[1], 0)
    p = np.exp(_log_softmax(xs[0]))
    np.put_along_axis(p, ids, np.take_along_axis(p, ids, axis=1) - 1, axis=1)
    return [g * p * keep, None], []


def _xent_ids(g, n):
    return {1: (g.by_name[n.args[0].node].size, n.attr.get("ignore_index"))}


# Per-column cross-entropy -log softmax(z)[y], natural log (PyTorch's CrossEntropyLoss,
# reduction="none"); with attribute ignore_index, a column whose target equals it gives 0 and
# no gradient, and the window's mean leaves it out (CrossEntropyLoss(ignore_index=...)).
register(Op("softmax_xent", "loss", _xent_shape, _xent_forward, _xent_vjp, ids=_xent_ids,
            cuda_loss=("run_softmax_xent", "run_softmax_xent_grad")))


def _mse_shape(node, args, params):
    n_args(node, args, 2)
    floats(node, args)
    prediction, target = args
    if prediction.size != target.size:
        raise ShapeError(f"{node_label(node)}: the prediction {prediction.name!r} [{prediction.size}] and the target "
                         f"{target.name!r} [{target.size}] differ in size")
    return 1, FLOAT


def _mse_forward(xs, ps, at):
    d = xs[0] - xs[1]
    return (d * d).mean(axis=1, keepdims=True)


def _mse_vjp(g, y, xs, ps, at):
    d = xs[0] - xs[1]
    gx = g * d * d.dtype.type(2.0 / d.shape[1])
    return [gx, -gx], []


# Per-column mean squared error mean_j (x_j - y_j)^2 over the n elements of a column; the
# window's mean over its T*S columns is then the mean over all T*S*n elements: PyTorch's
# nn.MSELoss(reduction="mean").
register(Op("mse", "loss", _mse_shape, _mse_forward, _mse_vjp, cuda_loss=("run_mse", "run_mse_grad")))
