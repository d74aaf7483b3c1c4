"""The op registry: one entry per op holding its shape rule, NumPy forward and gradient rule.

Values are per-column vectors; the NumPy functions work on a batch of N columns at once, so an
argument of size n is an array of shape (N, n) (float32 or float64; token ids are int64 of
shape (N, 1)). Parameters are arrays of their declared shape. Gradient (VJP) rules follow
JAX's habit of writing a derivative next to its primitive and, for sigmoid and tanh, in terms
of the output.

The registry's machinery (the :class:`Op` entry and its fields, ``register``, ``get``,
``is_row_reduction``, ``infer``) is in :mod:`rnngraph.ops_registry`, the loss ops (and
``IGNORE_INDEX_MIN``, ``chunk_bounds``, ``chunking``) in :mod:`rnngraph.ops_losses`, the LSH
head's op (``LSH_OP``, ``lsh_setting``, ``lsh_text``, ``active_estimate``) in
:mod:`rnngraph.ops_lsh`; all are re-exported here, and importing this module fills the registry.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .errors import DtypeError, GraphError, ShapeError
from .ir import FLOAT, INDEX
from .ops_losses import IGNORE_INDEX_MIN, chunk_bounds, chunking
from .ops_lsh import LSH_OP, active_estimate, lsh_setting, lsh_text
from .ops_registry import REGISTRY, Op, floats, get, infer, is_row_reduction, n_args, node_label, register, same_size

__all__ = ["IGNORE_INDEX_MIN", "LAYER_NORM_EPS", "LSH_OP", "REGISTRY", "Op", "active_estimate", "chunk_bounds", "chunking",
           "get", "infer", "is_row_reduction", "lsh_setting", "lsh_text", "register"]

LAYER_NORM_EPS = 1e-5  # PyTorch nn.LayerNorm's default


# ---------------------------------------------------------------------------- pointwise
def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function without overflow for any x (exp of -|x| only)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _pointwise(name: str, arity: int, fwd: Callable, grads: Callable, cuda: tuple[str, tuple[str, ...]]) -> Op:
    """A pointwise op: ``grads(g, y, xs, attrs)`` returns the list of argument gradients;
    ``cuda`` holds the CUDA (numba) expression templates of the forward value and of each
    argument's gradient, over ``{x0}``, ``{x1}`` (arguments), ``{y}`` (output), ``{g}`` (output
    gradient) and ``{value}`` (the scalar attribute, emitted as a float32 constant)."""

    def shape(node, args, params):
        n_args(node, args, arity)
        return same_size(node, args, params)

    return register(Op(name, "pointwise", shape, lambda xs, ps, at: fwd(*xs, **at),
                       lambda g, y, xs, ps, at: (grads(g, y, xs, at), []), cuda=cuda))


_pointwise("add", 2, lambda a, b: a + b, lambda g, y, xs, at: [g, g], ("{x0} + {x1}", ("{g}", "{g}")))
_pointwise("sub", 2, lambda a, b: a - b, lambda g, y, xs, at: [g, -g], ("{x0} - {x1}", ("{g}", "-{g}")))
_pointwise("mul", 2, lambda a, b: a * b, lambda g, y, xs, at: [g * xs[1], g * xs[0]],
           ("{x0} * {x1}", ("{g} * {x1}", "{g} * {x0}")))
_pointwise("neg", 1, lambda a: -a, lambda g, y, xs, at: [-g], ("-{x0}", ("-{g}",)))
_pointwise("identity", 1, lambda a: a.copy(), lambda g, y, xs, at: [g], ("{x0}", ("{g}",)))
_pointwise("add_scalar", 1, lambda a, value: a + a.dtype.type(value), lambda g, y, xs, at: [g],
           ("{x0} + {value}", ("{g}",)))
_pointwise("mul_scalar", 1, lambda a, value: a * a.dtype.type(value),
           lambda g, y, xs, at: [g * g.dtype.type(at["value"])], ("{x0} * {value}", ("{g} * {value}",)))
_pointwise("sigmoid", 1, _sigmoid, lambda g, y, xs, at: [g * y * (1 - y)],
           ("sigmoid({x0})", ("{g} * {y} * (ONE - {y})",)))
_pointwise("tanh", 1, np.tanh, lambda g, y, xs, at: [g * (1 - y * y)],
           ("math.tanh({x0})", ("{g} * (ONE - {y} * {y})",)))
_pointwise("relu", 1, lambda a: np.maximum(a, 0), lambda g, y, xs, at: [g * (xs[0] > 0)],
           ("max({x0}, ZERO)", ("{g} if {x0} > ZERO else ZERO",)))
_pointwise("exp", 1, np.exp, lambda g, y, xs, at: [g * y], ("math.exp({x0})", ("{g} * {y}",)))


def _select_grads(g, y, xs, at):
    keep = xs[0] > 0
    zero = np.zeros_like(g)
    return [zero, np.where(keep, g, zero), np.where(keep, zero, g)]


# select(m, a, b): a where m > 0, else b — the mask of variable-length sequences (rnngraph/
# lengths.py): a padded step keeps the state it came in with and outputs zeros. Not m * a:
# whatever a padded step computes (inf, NaN) does not reach the kept value or its gradient.
_pointwise("select", 3, lambda m, a, b: np.where(m > 0, a, b), _select_grads,
           ("{x1} if {x0} > ZERO else {x2}",
            ("ZERO", "{g} if {x0} > ZERO else ZERO", "ZERO if {x0} > ZERO else {g}")))


# ---------------------------------------------------------------------------- slicing
def _slice_shape(node, args, params):
    n_args(node, args, 1)
    floats(node, args)
    start, stop = node.attr.get("start"), node.attr.get("stop")
    if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start < stop <= args[0].size):
        raise ShapeError(f"{node_label(node)}: slice {start}:{stop} is outside {args[0].name!r} [{args[0].size}]")
    return stop - start, FLOAT


def _slice_vjp(g, y, xs, ps, at):
    gx = np.zeros_like(xs[0])
    gx[:, at["start"]:at["stop"]] = g
    return [gx], []


register(Op("slice", "pointwise", _slice_shape,
            lambda xs, ps, at: xs[0][:, at["start"]:at["stop"]].copy(), _slice_vjp))


def _concat_shape(node, args, params):
    if not args:
        raise GraphError(f"{node_label(node)}: needs at least one argument")
    floats(node, args)
    return sum(a.size for a in args), FLOAT


def _concat_vjp(g, y, xs, ps, at):
    cuts = np.cumsum([x.shape[1] for x in xs])[:-1]
    return [part.copy() for part in np.split(g, cuts, axis=1)], []


register(Op("concat", "pointwise", _concat_shape,
            lambda xs, ps, at: np.concatenate(xs, axis=1), _concat_vjp))


# ---------------------------------------------------------------------------- parameters
def _param_shape(node, args, params):
    n_args(node, args, 0)
    (p,) = params
    if len(p.shape) != 1:
        raise ShapeError(f"{node_label(node)}: parameter {p.name!r} of shape {list(p.shape)} is not a vector; "
                         f"only vectors can be used as per-column values")
    return p.shape[0], FLOAT


register(Op("param", "param", _param_shape,
            lambda xs, ps, at: ps[0],  # (n,) broadcasts against (N, n)
            lambda g, y, xs, ps, at: ([], [g.reshape(-1, ps[0].shape[0]).sum(0)]), (1, 1)))


def _input_shape(node, args, params):
    n_args(node, args, 0)
    if node.dtype not in (FLOAT, INDEX):
        raise DtypeError(f"{node_label(node)}: input dtype {node.dtype!r} is neither {FLOAT!r} nor {INDEX!r}")
    if node.dtype == INDEX and node.size != 1:
        raise ShapeError(f"{node_label(node)}: token-id inputs hold one id per column, not {node.size}")
    return node.size, node.dtype


def _no_compute(*_):
    raise GraphError("input nodes are given, not computed")


register(Op("input", "input", _input_shape, _no_compute, _no_compute))


# ---------------------------------------------------------------------------- linear
def _linear_shape(node, args, params):
    n_args(node, args, 1)
    floats(node, args)
    (x,) = args
    w = params[0]
    if len(w.shape) != 2 or w.shape[1] != x.size:
        raise ShapeError(f"{node_label(node)}: weight {w.name!r} has shape {list(w.shape)} but the input "
                         f"{x.name!r} has size {x.size}; expected [{w.shape[0] if w.shape else '?'}, {x.size}]")
    if len(params) == 2 and params[1].shape != (w.shape[0],):
        raise ShapeError(f"{node_label(node)}: bias {params[1].name!r} has shape {list(params[1].shape)}, "
                         f"expected [{w.shape[0]}]")
    return w.shape[0], FLOAT


def _linear_forward(xs, ps, at):
    y = xs[0] @ ps[0].T  # PyTorch's convention: W has shape (out, in)
    return y + ps[1] if len(ps) == 2 else y


def _linear_vjp(g, y, xs, ps, at):
    gps = [g.T @ xs[0]] + ([g.sum(0)] if len(ps) == 2 else [])
    return [g @ ps[0]], gps


register(Op("linear", "gemm", _linear_shape, _linear_forward, _linear_vjp, (1, 2),
            vjp_args=lambda g, y, xs, ps, at: [g @ ps[0]]))


# ---------------------------------------------------------------------------- layer norm
def _layer_norm_shape(node, args, params):
    n_args(node, args, 1)
    floats(node, args)
    n = args[0].size
    for p in params:
        if p.shape != (n,):
            raise ShapeError(f"{node_label(node)}: {p.name!r} has shape {list(p.shape)}, expected [{n}]")
    return n, FLOAT


def _normalise(x):
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + x.dtype.type(LAYER_NORM_EPS))
    return xc * rstd, rstd


def _layer_norm_forward(xs, ps, at):
    xhat, _ = _normalise(xs[0])
    return xhat * ps[0] + ps[1]


def _layer_norm_vjp(g, y, xs, ps, at):
    xhat, rstd = _normalise(xs[0])
    gh = g * ps[0]
    gx = rstd * (gh - gh.mean(axis=1, keepdims=True) - xhat * (gh * xhat).mean(axis=1, keepdims=True))
    return [gx], [(g * xhat).sum(0), g.sum(0)]


# PyTorch nn.LayerNorm over the vector of one column: (x - mean) / sqrt(var + 1e-5) * gain + bias
register(Op("layer_norm", "row_reduction", _layer_norm_shape, _layer_norm_forward,
            _layer_norm_vjp, (2, 2), cuda_row="layer_norm"))


# ---------------------------------------------------------------------------- embedding
def _embedding_shape(node, args, params):
    n_args(node, args, 1)
    (ids,) = args
    if ids.dtype != INDEX:
        raise DtypeError(f"{node_label(node)}: argument {ids.name!r} holds floats; embedding needs token ids")
    e = params[0]
    if len(e.shape) != 2:
        raise ShapeError(f"{node_label(node)}: table {e.name!r} has shape {list(e.shape)}, expected [vocab, dim]")
    return e.shape[1], FLOAT


def _embedding_vjp(g, y, xs, ps, at):
    ge = np.zeros_like(ps[0])
    np.add.at(ge, xs[0][:, 0], g)
    return [None], [ge]


register(Op("embedding", "gather", _embedding_shape, lambda xs, ps, at: ps[0][xs[0][:, 0]],
            _embedding_vjp, (1, 1), ids=lambda g, n: {0: (g.param_by_name[n.params[0]].shape[0], None)}))
