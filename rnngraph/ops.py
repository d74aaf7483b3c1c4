"""The op registry: one entry per op holding its shape rule, NumPy forward and gradient rule.

Values are per-column vectors; the NumPy functions work on a batch of N columns at once, so an
argument of size n is an array of shape (N, n) (float32 or float64; token ids are int64 of
shape (N, 1)). Parameters are arrays of their declared shape. Gradient (VJP) rules follow
JAX's habit of writing a derivative next to its primitive and, for sigmoid and tanh, in terms
of the output.

An :class:`Op` entry:
- ``shape(node, args, params) -> (size, dtype)``: the output size and dtype, or ShapeError /
  DtypeError naming the node, the op and the offending shapes;
- ``forward(xs, ps, attrs) -> y``: ``xs`` list of (N, n_i) arrays, ``ps`` list of param arrays;
- ``vjp(g, y, xs, ps, attrs) -> (gxs, gps)``: given dL/dy of shape (N, size), the gradients of
  every argument (None for token-id arguments) and every parameter;
- ``kind``: what the passes see — ``input``, ``param``, ``gemm``, ``pointwise``,
  ``row_reduction`` (needs the whole vector of a column: layer norm), ``gather``, ``loss``;
- ``ids(graph, node) -> {argument position: (limit, ignored)}``: for each token-id argument,
  how many ids it may hold and the id that marks a column left out of the loss (None: none);
  the backends check fed ids against it and a loss's mean divides by the columns not ignored;
- ``cuda_loss``: loss ops only, the names of the (forward, backward) launchers in
  :mod:`rnngraph.codegen.losses` that run it on the GPU;
- ``cuda_row``: row reductions only, the key of its CUDA pieces in :mod:`rnngraph.codegen.row_reductions`
  (nothing else tests its name: an RMSNorm would be one entry here and one there).

A loss op's per-column value is what one column adds to the window's loss; the training loss
is the sum over the window's columns divided by the columns that count (every column, less
those whose target is an ignored id): PyTorch's reduction="mean".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import DtypeError, GraphError, ShapeError
from .ir import FLOAT, INDEX, Node, Param

LAYER_NORM_EPS = 1e-5  # PyTorch nn.LayerNorm's default


@dataclass(frozen=True)
class Op:
    """One registry entry (see the module docstring for the signatures)."""

    name: str
    kind: str
    shape: Callable
    forward: Callable
    vjp: Callable
    n_params: tuple[int, int] = (0, 0)  # (least, most) parameters the op takes
    vjp_args: Callable | None = None  # argument gradients only (skips parameter gradients)
    cuda: tuple[str, tuple[str, ...]] | None = None  # pointwise ops: (forward, per-argument VJP) templates
    ids: Callable | None = None  # (graph, node) -> {token-id argument position: (limit, ignored id or None)}
    cuda_loss: tuple[str, str] | None = None  # loss ops: (forward, backward) launchers in codegen/losses.py
    cuda_row: str | None = None  # row reductions: the key of their CUDA pieces in codegen/row_reductions.py

    def arg_grads(self, g, y, xs, ps, attrs) -> list:
        """Gradients of the arguments only (a GEMM's weight gradient is left to a later kernel)."""
        if self.vjp_args is not None:
            return self.vjp_args(g, y, xs, ps, attrs)
        return self.vjp(g, y, xs, ps, attrs)[0]


REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Add ``op`` to the registry (its name must be new)."""
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    REGISTRY[op.name] = op
    return op


def get(name: str, where: str = "") -> Op:
    """The registry entry of op ``name``; GraphError naming ``where`` when there is none."""
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise GraphError(f"{where}unknown op {name!r} (known: {known})") from None


def is_row_reduction(name: str) -> bool:
    """Whether op ``name`` has kind ``row_reduction`` (layer norm); False for an unknown op."""
    return name in REGISTRY and REGISTRY[name].kind == "row_reduction"


# ---------------------------------------------------------------------------- shape helpers
def _where(node: Node) -> str:
    return f"node {node.name!r} (op {node.op})"


def _floats(node: Node, args: list[Node]) -> None:
    for a in args:
        if a.dtype != FLOAT:
            raise DtypeError(f"{_where(node)}: argument {a.name!r} holds {a.dtype} values (token ids), "
                             f"but the op needs floats; embed token ids first")


def _same_size(node: Node, args: list[Node], params: list[Param]):
    _floats(node, args)
    sizes = [a.size for a in args]
    if len(set(sizes)) != 1:
        shapes = " and ".join(f"{a.name!r} [{a.size}]" for a in args)
        raise ShapeError(f"{_where(node)}: sizes differ: {shapes}")
    return sizes[0], FLOAT


def _unary(node: Node, args: list[Node], params: list[Param]):
    return _same_size(node, args, params)


def _n_args(node: Node, args: list, n: int) -> None:
    if len(args) != n:
        raise GraphError(f"{_where(node)}: takes {n} argument(s), got {len(args)}")


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
        _n_args(node, args, arity)
        return _same_size(node, args, params)

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
    _n_args(node, args, 1)
    _floats(node, args)
    start, stop = node.attr.get("start"), node.attr.get("stop")
    if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start < stop <= args[0].size):
        raise ShapeError(f"{_where(node)}: slice {start}:{stop} is outside {args[0].name!r} [{args[0].size}]")
    return stop - start, FLOAT


def _slice_vjp(g, y, xs, ps, at):
    gx = np.zeros_like(xs[0])
    gx[:, at["start"]:at["stop"]] = g
    return [gx], []


register(Op("slice", "pointwise", _slice_shape,
            lambda xs, ps, at: xs[0][:, at["start"]:at["stop"]].copy(), _slice_vjp))


def _concat_shape(node, args, params):
    if not args:
        raise GraphError(f"{_where(node)}: needs at least one argument")
    _floats(node, args)
    return sum(a.size for a in args), FLOAT


def _concat_vjp(g, y, xs, ps, at):
    cuts = np.cumsum([x.shape[1] for x in xs])[:-1]
    return [part.copy() for part in np.split(g, cuts, axis=1)], []


register(Op("concat", "pointwise", _concat_shape,
            lambda xs, ps, at: np.concatenate(xs, axis=1), _concat_vjp))


# ---------------------------------------------------------------------------- parameters
def _param_shape(node, args, params):
    _n_args(node, args, 0)
    (p,) = params
    if len(p.shape) != 1:
        raise ShapeError(f"{_where(node)}: parameter {p.name!r} of shape {list(p.shape)} is not a vector; "
                         f"only vectors can be used as per-column values")
    return p.shape[0], FLOAT


register(Op("param", "param", _param_shape,
            lambda xs, ps, at: ps[0],  # (n,) broadcasts against (N, n)
            lambda g, y, xs, ps, at: ([], [g.reshape(-1, ps[0].shape[0]).sum(0)]), (1, 1)))


def _input_shape(node, args, params):
    _n_args(node, args, 0)
    if node.dtype not in (FLOAT, INDEX):
        raise DtypeError(f"{_where(node)}: input dtype {node.dtype!r} is neither {FLOAT!r} nor {INDEX!r}")
    if node.dtype == INDEX and node.size != 1:
        raise ShapeError(f"{_where(node)}: token-id inputs hold one id per column, not {node.size}")
    return node.size, node.dtype


def _no_compute(*_):
    raise GraphError("input nodes are given, not computed")


register(Op("input", "input", _input_shape, _no_compute, _no_compute))


# ---------------------------------------------------------------------------- linear
def _linear_shape(node, args, params):
    _n_args(node, args, 1)
    _floats(node, args)
    (x,) = args
    w = params[0]
    if len(w.shape) != 2 or w.shape[1] != x.size:
        raise ShapeError(f"{_where(node)}: weight {w.name!r} has shape {list(w.shape)} but the input "
                         f"{x.name!r} has size {x.size}; expected [{w.shape[0] if w.shape else '?'}, {x.size}]")
    if len(params) == 2 and params[1].shape != (w.shape[0],):
        raise ShapeError(f"{_where(node)}: bias {params[1].name!r} has shape {list(params[1].shape)}, "
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
    _n_args(node, args, 1)
    _floats(node, args)
    n = args[0].size
    for p in params:
        if p.shape != (n,):
            raise ShapeError(f"{_where(node)}: {p.name!r} has shape {list(p.shape)}, expected [{n}]")
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
    _n_args(node, args, 1)
    (ids,) = args
    if ids.dtype != INDEX:
        raise DtypeError(f"{_where(node)}: argument {ids.name!r} holds floats; embedding needs token ids")
    e = params[0]
    if len(e.shape) != 2:
        raise ShapeError(f"{_where(node)}: table {e.name!r} has shape {list(e.shape)}, expected [vocab, dim]")
    return e.shape[1], FLOAT


def _embedding_vjp(g, y, xs, ps, at):
    ge = np.zeros_like(ps[0])
    np.add.at(ge, xs[0][:, 0], g)
    return [None], [ge]


register(Op("embedding", "gather", _embedding_shape, lambda xs, ps, at: ps[0][xs[0][:, 0]],
            _embedding_vjp, (1, 1), ids=lambda g, n: {0: (g.param_by_name[n.params[0]].shape[0], None)}))




# ---------------------------------------------------------------------------- losses
#: The smallest ignore_index a softmax_xent takes: the GPU holds token ids as int32.
IGNORE_INDEX_MIN = -2 ** 31


def _xent_shape(node, args, params):
    _n_args(node, args, 2)
    logits, target = args
    _floats(node, [logits])
    if target.dtype != INDEX:
        raise DtypeError(f"{_where(node)}: target {target.name!r} holds floats; it must hold class ids")
    ignore = node.attr.get("ignore_index")
    if ignore is not None and (isinstance(ignore, bool) or not isinstance(ignore, int)
                               or not IGNORE_INDEX_MIN <= ignore < logits.size):
        raise ShapeError(f"{_where(node)}: ignore_index {ignore!r} must be an integer in "
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
    _n_args(node, args, 2)
    _floats(node, args)
    prediction, target = args
    if prediction.size != target.size:
        raise ShapeError(f"{_where(node)}: the prediction {prediction.name!r} [{prediction.size}] and the target "
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


def infer(node: Node, args: list[Node], params: list[Param]) -> tuple[int, str]:
    """Run ``node.op``'s shape rule; returns (size, dtype) or raises an error naming the node."""
    op = get(node.op, f"node {node.name!r}: ")
    lo, hi = op.n_params
    if not lo <= len(params) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise GraphError(f"{_where(node)}: takes {want} parameter(s), got {len(params)}")
    return op.shape(node, args, params)
