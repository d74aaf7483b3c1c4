"""The loss ops of the registry (rnngraph/ops.py registers them by importing this module):
``softmax_xent`` (per-column cross-entropy over class ids, with an optional ``ignore_index``),
``chunked_softmax_xent`` (the output layer and the same cross-entropy, computed a chunk of the
classes at a time) and ``mse`` (per-column mean squared error). Their GPU launchers are named
by ``cuda_loss`` in :mod:`rnngraph.codegen.losses`.

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


def _xent_args(node, args, classes: int) -> None:
    """The checks both cross-entropy ops share: a float first argument, class ids second, and
    an ignore_index (if any) in [IGNORE_INDEX_MIN, classes)."""
    n_args(node, args, 2)
    floats(node, args[:1])
    if args[1].dtype != INDEX:
        raise DtypeError(f"{node_label(node)}: target {args[1].name!r} holds floats; it must hold class ids")
    ignore = node.attr.get("ignore_index")
    if ignore is not None and (isinstance(ignore, bool) or not isinstance(ignore, int)
                               or not IGNORE_INDEX_MIN <= ignore < classes):
        raise ShapeError(f"{node_label(node)}: ignore_index {ignore!r} must be an integer in "
                         f"[{IGNORE_INDEX_MIN}, {classes}) (a class id or a negative marker such as -100)")


def _xent_shape(node, args, params):
    _xent_args(node, args, args[0].size if args else 0)
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


# ---------------------------------------------------------------------------- chunked
def chunk_bounds(classes: int, chunk: int) -> list[tuple[int, int]]:
    """The classes 0..classes-1 in consecutive chunks of ``chunk``: [(start, stop), ...], the
    last one shorter where ``chunk`` does not divide ``classes``."""
    return [(c, min(c + chunk, classes)) for c in range(0, classes, chunk)]


def chunking(g, node) -> tuple[int, int] | None:
    """(classes, chunk) of a node computed a chunk of its classes at a time (a
    ``chunked_softmax_xent``); None for any other node."""
    chunk = node.attr.get("chunk")
    if chunk is None or node.op != "chunked_softmax_xent":
        return None
    return g.param_by_name[node.params[0]].shape[0], chunk


def chunked_params(node, args, params):
    """The shape rule's checks of a loss with parameters W [classes, n] and b [classes] over an
    input of n (``chunked_softmax_xent``, ``lsh_softmax_xent``): returns (1, FLOAT)."""
    w, b = params
    _xent_args(node, args, w.shape[0] if len(w.shape) == 2 else 0)
    if len(w.shape) != 2 or w.shape[1] != args[0].size or b.shape != (w.shape[0],):
        raise ShapeError(f"{node_label(node)}: weight {w.name!r} {list(w.shape)} and bias {b.name!r} "
                         f"{list(b.shape)} must be [classes, {args[0].size}] and [classes] for the input "
                         f"{args[0].name!r} [{args[0].size}]")
    return 1, FLOAT


def _chunked_shape(node, args, params):
    chunked_params(node, args, params)
    chunk = node.attr.get("chunk")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ShapeError(f"{node_label(node)}: chunk {chunk!r} must be a positive integer (classes per chunk)")
    return 1, FLOAT


def chunked_forward(xs, ps, at):
    """Online softmax (Milakov & Gimelshein 2018): per chunk, logits z = h W_c^T + b_c, the
    running max m and sum s of exp(z - m) rescaled to the new max; loss = log s + m - z[y]."""
    h, ids = xs
    w, b = ps
    keep = _kept(ids, at)[:, 0]
    target = np.where(keep, ids[:, 0], 0)
    n = h.shape[0]
    m = np.full(n, -np.inf, h.dtype)
    s = np.zeros(n, h.dtype)
    zt = np.zeros(n, h.dtype)
    for c0, c1 in chunk_bounds(w.shape[0], at["chunk"]):
        z = h @ w[c0:c1].T + b[c0:c1]
        m_new = np.maximum(m, z.max(axis=1))
        s = s * np.exp(m - m_new) + np.exp(z - m_new[:, None]).sum(axis=1)
        m = m_new
        inside = (target >= c0) & (target < c1)
        zt[inside] = z[inside, target[inside] - c0]
    return np.where(keep, np.log(s) + m - zt, 0)[:, None].astype(h.dtype, copy=False)


def chunked_backward(g, y, xs, ps, at):
    """Per chunk again: p = exp(z - lse) with lse = loss + z[y] (the forward's log-sum-exp,
    from its output), p[y] -= 1, times the column's gradient (0 where ignored); then
    dh += p W_c, dW_c = p^T h, db_c = sum of p over the columns."""
    h, ids = xs
    w, b = ps
    keep = _kept(ids, at)[:, 0]
    target = np.where(keep, ids[:, 0], 0)
    zt = np.einsum("nh,nh->n", h, w[target]) + b[target]
    lse = np.where(keep, y[:, 0] + zt, np.inf)  # inf: an ignored column's p is 0
    scale = np.where(keep, g[:, 0], 0)[:, None]
    rows = np.arange(h.shape[0])
    gh, gw, gb = np.zeros_like(h), np.zeros_like(w), np.zeros_like(b)
    for c0, c1 in chunk_bounds(w.shape[0], at["chunk"]):
        p = np.exp(h @ w[c0:c1].T + b[c0:c1] - lse[:, None])
        inside = keep & (target >= c0) & (target < c1)
        p[rows[inside], target[inside] - c0] -= 1
        p *= scale
        gh += p @ w[c0:c1]
        gw[c0:c1] = p.T @ h
        gb[c0:c1] = p.sum(axis=0)
    return [gh, None], [gw, gb]


def chunked_ids(g, n):
    return {1: (g.param_by_name[n.params[0]].shape[0], n.attr.get("ignore_index"))}


# softmax_xent(linear(h, W, b), y) without the (N, classes) logits: params W (classes, n) and b
# (classes,), attribute chunk (classes per chunk) and optionally ignore_index (as softmax_xent).
# Memory O(N * chunk); the equations are softmax_xent's, the order of the sums the online
# softmax's (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax").
register(Op("chunked_softmax_xent", "loss", _chunked_shape, chunked_forward, chunked_backward, (2, 2),
            ids=chunked_ids, cuda_loss=("run_chunked_softmax_xent", "run_chunked_softmax_xent_grad")))


# Per-column mean squared error mean_j (x_j - y_j)^2 over the n elements of a column; the
# window's mean over its T*S columns is then the mean over all T*S*n elements: PyTorch's
# nn.MSELoss(reduction="mean").
register(Op("mse", "loss", _mse_shape, _mse_forward, _mse_vjp, cuda_loss=("run_mse", "run_mse_grad")))
