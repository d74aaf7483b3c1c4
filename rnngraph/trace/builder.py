"""The :class:`Builder`: the nodes, parameters and states of a network while its layers are traced.

Cells record into it through the cell API; the layers that are not cells (rnngraph/network.py,
rnngraph/heads.py) record into it directly, inside ``with tracing(builder):``.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from .. import ops
from ..errors import GraphError, OpError, ShapeError, StateError
from ..ir import FLOAT, Graph, Init, Node, Param, Ref, State as IRState
from .active import _ACTIVE
from .value import Value


@dataclass
class _Pending:
    op: str
    args: list  # list of (id, delay)
    params: tuple
    attrs: tuple
    size: int
    dtype: str
    name: str | None  # explicit name (already prefixed) or None
    layer: str  # prefix of the layer that made it
    hint: str | None = None  # fallback name (unprefixed) used instead of the op's name


class _Nodes(dict):
    """id -> _Pending, in the order recorded (ids increase), with the indexes
    :meth:`Builder.provisional` needs for every argument of every node added: the ids of each
    explicit name, and the ids of the unnamed nodes of each (layer, hint or op), in order.
    Scanning every node there instead was tracing's main cost, quadratic in the layers (a 100-layer
    LSTM took 3.7 s on the CPU machine, 0.34 s since; smaller scans of every node once a layer
    remain). Nodes are only ever added; a copy or pickle re-adds them, rebuilding the indexes."""

    def __init__(self):
        super().__init__()
        self.named: dict[str, list[int]] = {}
        self.unnamed: dict[tuple[str, str], list[int]] = {}

    def __setitem__(self, vid: int, n: _Pending) -> None:
        if vid in self:
            raise KeyError(f"node id {vid} recorded twice")
        super().__setitem__(vid, n)
        if n.name:
            self.named.setdefault(n.name, []).append(vid)
        else:
            self.unnamed.setdefault((n.layer, n.hint or n.op), []).append(vid)

    def __reduce__(self):
        return type(self), (), None, None, iter(self.items())


class Builder:
    """Collects the nodes, params and states of a network while its layers are traced.

    The layers of rnngraph/network.py and rnngraph/heads.py record into one: make it with the
    network's name, and inside ``with tracing(builder):`` set ``prefix`` (``"layer0."``, ...)
    and ``hidden`` per layer, record nodes with :meth:`add` and parameters with :meth:`param`,
    name each layer's nodes with :meth:`name_layer`, and finally get the :class:`Graph` with
    :meth:`graph`. Errors: those of the op's shape rule (ShapeError, DtypeError, ...) from
    :meth:`add`, naming the node and, inside a cell, its source line; OpError from :meth:`add`
    outside :func:`tracing` of this builder."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: dict[int, _Pending] = _Nodes()
        self.params: dict[str, Param] = {}
        self.states: list[tuple[str, int, int]] = []  # (state name, placeholder id, depth)
        self.resolved: dict[int, int] = {}  # placeholder id -> producer id
        self.names: dict[int, str] = {}
        self.prefix = ""
        self.hidden: int | None = None
        self.frame = None  # the running cell's frame, for error messages
        self.counter = 0
        self.length_masks: dict | None = None  # size -> mask Value when tracing for lengths (rnngraph/lengths.py)

    def new_id(self) -> int:
        self.counter += 1
        return self.counter

    def provisional(self, vid: int) -> str:
        """A name for a node not yet named: the cell's local variable bound to it (unless another
        node has that name explicitly, as :meth:`name_layer` decides), or its op."""
        if vid in self.names:
            return self.names[vid]
        if self.frame is not None:
            for var, val in self.frame.f_locals.items():
                if isinstance(val, Value) and val.id == vid and not any(
                        i != vid for i in self.nodes.named.get(self.prefix + var, ())):
                    return self.prefix + var
        n = self.nodes[vid]
        if n.name:
            return n.name
        # as name_layer will (roughly): the op's name, _1, _2, ... for later nodes of the same op
        base = f"{n.layer}{n.hint or n.op}"
        k = bisect_left(self.nodes.unnamed[(n.layer, n.hint or n.op)], vid)  # unnamed ones before it
        return f"{base}_{k}" if k else base

    def add(self, op: str, args=(), params=(), attrs=None, size=None, dtype=FLOAT, name=None,
            hint=None) -> "Value":
        """Record one node; run its shape rule now so errors point at the user's line."""
        if not _ACTIVE or _ACTIVE[-1] is not self or any(a.builder is not self for a in args):
            raise OpError("this Value belongs to another network's tracing; a Value lives only while its "
                          "cell is traced (don't keep Values across networks)")
        refs = [(a.id, a.delay) for a in args]
        attrs = tuple(sorted((attrs or {}).items()))
        vid = self.new_id()
        pend = _Pending(op, refs, tuple(params), attrs, size or 1, dtype, name, self.prefix, hint)
        self.nodes[vid] = pend
        probe = Node(self.provisional(vid), op, tuple(Ref(self.provisional(i), d) for i, d in refs),
                     pend.params, attrs, pend.size, dtype)
        arg_nodes = [Node(self.provisional(i), self.nodes[i].op, size=self.nodes[i].size,
                          dtype=self.nodes[i].dtype) for i, _ in refs]
        try:
            pend.size, pend.dtype = ops.infer(probe, arg_nodes, [self.params[p] for p in params])
        except GraphError as e:
            raise type(e)(f"{e}{self.where()}") from None
        return Value(self, vid)

    def where(self) -> str:
        if self.frame is None:
            return ""
        code = self.frame.f_code
        return f" (in cell {code.co_name!r}, {code.co_filename}:{self.frame.f_lineno})"

    def param(self, name: str, shape: tuple[int, ...], init: Init) -> str:
        full = self.prefix + name
        if full in self.params:
            raise GraphError(f"parameter {full!r} is declared twice{self.where()}; give each a distinct name=")
        if any((not isinstance(s, int)) or s < 1 for s in shape):
            raise ShapeError(f"parameter {full!r}: shape {list(shape)} must be positive integers{self.where()}")
        self.params[full] = Param(full, tuple(shape), init)
        return full

    def default_init(self, fan_in: int) -> Init:
        """PyTorch's RNN init U(-1/sqrt(H), 1/sqrt(H)) inside a cell with ``hidden``; else nn.Linear's 1/sqrt(fan_in)."""
        return Init("uniform", 1.0 / math.sqrt(self.hidden or fan_in))

    # --------------------------------------------------------------------- finishing
    def name_layer(self, local_vars: dict) -> None:
        """Name this layer's unnamed nodes: explicit names, then locals, then op names."""
        taken = set(self.names.values())
        # explicit names (rg.param's, name=) first: a local variable of the same name yields to them
        explicit = {n.name for n in self.nodes.values() if n.layer == self.prefix and n.name is not None}
        for var, val in local_vars.items():
            if isinstance(val, Value) and val.id not in self.names and self.nodes[val.id].layer == self.prefix \
                    and self.nodes[val.id].name is None and val.delay == 0 and self.nodes[val.id].op != "__state__":
                cand = self.prefix + var
                if cand not in taken and cand not in explicit:
                    self.names[val.id] = cand
                    taken.add(cand)
        for vid, n in self.nodes.items():
            if n.layer != self.prefix or vid in self.names:
                continue
            if n.name is not None:
                if n.name in taken:
                    raise GraphError(f"two nodes are named {n.name!r}; names must be unique")
                cand = n.name
            else:
                base, k = f"{self.prefix}{n.hint or n.op}", 0
                cand = base
                while cand in taken:
                    k += 1
                    cand = f"{base}_{k}"
            self.names[vid] = cand
            taken.add(cand)

    def graph(self, outputs: list["Value"], loss: "Value | None") -> Graph:
        def resolve(vid):
            seen = set()
            while vid in self.resolved:
                if vid in seen:
                    raise StateError("states update each other in a loop with no computation")
                seen.add(vid)
                vid = self.resolved[vid]
            return vid

        nodes, states = [], []
        for vid, n in self.nodes.items():
            if n.op == "__state__":
                continue
            refs = tuple(Ref(self.names[resolve(i)], d) for i, d in n.args)
            nodes.append(Node(self.names[vid], n.op, refs, n.params, n.attrs, n.size, n.dtype))
        for sname, pid, depth in self.states:
            states.append(IRState(sname, self.names[resolve(pid)], depth))
        return Graph(self.name, tuple(self.params.values()), tuple(nodes), tuple(states),
                     tuple(self.names[o.id] for o in outputs), self.names[loss.id] if loss is not None else None)
