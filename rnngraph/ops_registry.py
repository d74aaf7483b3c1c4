"""The op registry's machinery: the :class:`Op` entry, ``REGISTRY``, registering and looking up
ops, the shape checks the shape rules share, and :func:`infer`. The entries themselves are made
by :mod:`rnngraph.ops` (and the modules it imports, :mod:`rnngraph.ops_losses`): import
``rnngraph.ops`` for the filled registry; it re-exports every name used here.

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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import DtypeError, GraphError, ShapeError
from .ir import FLOAT, Node, Param


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
def node_label(node: Node) -> str:
    """How errors name a node: ``node 'h' (op tanh)``."""
    return f"node {node.name!r} (op {node.op})"


def floats(node: Node, args: list[Node]) -> None:
    """DtypeError unless every argument of ``node`` holds floats (not token ids)."""
    for a in args:
        if a.dtype != FLOAT:
            raise DtypeError(f"{node_label(node)}: argument {a.name!r} holds {a.dtype} values (token ids), "
                             f"but the op needs floats; embed token ids first")


def same_size(node: Node, args: list[Node], params: list[Param]):
    """The shape rule of an op whose float arguments and output share one size: (size, FLOAT)."""
    floats(node, args)
    sizes = [a.size for a in args]
    if len(set(sizes)) != 1:
        shapes = " and ".join(f"{a.name!r} [{a.size}]" for a in args)
        raise ShapeError(f"{node_label(node)}: sizes differ: {shapes}")
    return sizes[0], FLOAT


def n_args(node: Node, args: list, n: int) -> None:
    """GraphError unless ``node`` has ``n`` arguments."""
    if len(args) != n:
        raise GraphError(f"{node_label(node)}: takes {n} argument(s), got {len(args)}")


def infer(node: Node, args: list[Node], params: list[Param]) -> tuple[int, str]:
    """Run ``node.op``'s shape rule; returns (size, dtype) or raises an error naming the node."""
    op = get(node.op, f"node {node.name!r}: ")
    lo, hi = op.n_params
    if not lo <= len(params) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise GraphError(f"{node_label(node)}: takes {want} parameter(s), got {len(params)}")
    return op.shape(node, args, params)
