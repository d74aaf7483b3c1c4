"""The graph IR: small immutable data types, a deterministic text printer and its parser.

A :class:`Graph` is the per-timestep dataflow graph of a whole network (the *cell* of
Hwang & Sung 2015, generalised to a stack of layers). Every value is a :class:`Node`: one
vector of ``size`` elements per column (a column is one stream at one timestep). An edge is a
:class:`Ref` from a consumer to a producer with an integer ``delay``: the consumer at
timestep t reads the producer at t - delay. A node read with delay >= 1 holds a
:class:`State`; the state's initial history (the values at t = -depth .. -1) is an input of
the window. Parameters (:class:`Param`) are matrices or vectors shared by all columns.

The text form (``print(graph)`` / :func:`parse`) names everything by the user's names, never
by object ids, and round-trips exactly::

    graph lstm
      param layer0.W.weight [32, 8] uniform(0.17677669529663687)
      node x : float[8] = input()
      node layer0.z : float[32] = linear(x) [layer0.W.weight, layer0.W.bias]
      node layer0.f : float[8] = mul(layer0.f_gate, layer0.c_next[t-1])
      state layer0.c = layer0.c_next depth 1
      output layer0.h_next
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .errors import DelayError, GraphError

FLOAT = "float"
INDEX = "index"
# attributes of graph inputs that are data no one differentiates: a dropout mask, a loss's float
# targets, a variable-length mask
DATA_INPUTS = ("dropout", "target", "lengths")


@dataclass(frozen=True)
class Init:
    """How a parameter is initialised.

    kind: ``"uniform"`` (U(-scale, scale), PyTorch's RNN default with scale = 1/sqrt(H)),
    ``"normal"`` (N(0, scale^2)), ``"constant"`` (every element = scale).
    offsets: ``(start, stop, value)`` triples added to elements ``start:stop`` of the flat
    parameter after sampling (e.g. a forget-gate bias of +1 on the f rows of an LSTM bias).
    """

    kind: str = "uniform"
    scale: float = 0.1
    offsets: tuple[tuple[int, int, float], ...] = ()

    def sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draw a float64 array of ``shape`` from ``rng``.

        Raises ValueError for an unknown kind or an offset outside the array.
        """
        if self.kind == "uniform":
            a = rng.uniform(-self.scale, self.scale, size=shape)
        elif self.kind == "normal":
            a = rng.normal(0.0, self.scale, size=shape)
        elif self.kind == "constant":
            a = np.full(shape, float(self.scale))
        else:
            raise ValueError(f"unknown initialiser kind {self.kind!r} (uniform, normal, constant)")
        flat = a.reshape(-1)
        for start, stop, value in self.offsets:
            if not 0 <= start < stop <= flat.size:
                raise ValueError(f"initialiser offset {start}:{stop} outside a parameter of shape {shape}")
            flat[start:stop] += value
        return a

    def __str__(self) -> str:
        text = f"{self.kind}({self.scale!r})"
        for start, stop, value in self.offsets:
            text += f" add({start}:{stop}={value!r})"
        return text


@dataclass(frozen=True)
class Param:
    """A trainable array shared by every column: ``shape`` is (rows, cols) or (n,)."""

    name: str
    shape: tuple[int, ...]
    init: Init = Init()


@dataclass(frozen=True)
class Ref:
    """An edge: read node ``node`` at timestep t - ``delay`` (delay 0 = same timestep)."""

    node: str
    delay: int = 0

    def __str__(self) -> str:
        return self.node if self.delay == 0 else f"{self.node}[t-{self.delay}]"


@dataclass(frozen=True)
class Node:
    """One vector value per column, computed by ``op`` from ``args`` and ``params``.

    size: elements per column; dtype: ``"float"`` or ``"index"`` (token ids, one per column).
    attrs: sorted ``(key, value)`` pairs of the op's constant attributes.
    """

    name: str
    op: str
    args: tuple[Ref, ...] = ()
    params: tuple[str, ...] = ()
    attrs: tuple[tuple[str, object], ...] = ()
    size: int = 1
    dtype: str = FLOAT

    @property
    def attr(self) -> dict:
        """The attributes as a dict."""
        return dict(self.attrs)


@dataclass(frozen=True)
class State:
    """A named recurrent state: the history of ``node`` kept across timesteps and windows.

    depth: the largest delay with which ``node`` is read; the state's value is an array of
    shape (depth, S, size), oldest first (entry depth-k holds the node at t = -k).
    """

    name: str
    node: str
    depth: int = 1


@dataclass(frozen=True)
class Graph:
    """A network's per-timestep dataflow graph.

    nodes are listed in an order where every delay-0 argument comes before its consumer
    (guaranteed by the tracer and the parser; checked by validation). ``outputs`` name the
    nodes returned over the window, ``loss`` the per-column loss node (or None).
    """

    name: str
    params: tuple[Param, ...] = ()
    nodes: tuple[Node, ...] = ()
    states: tuple[State, ...] = ()
    outputs: tuple[str, ...] = ()
    loss: str | None = None

    @cached_property
    def by_name(self) -> dict[str, Node]:
        """Node name -> Node."""
        return {n.name: n for n in self.nodes}

    @cached_property
    def param_by_name(self) -> dict[str, Param]:
        """Param name -> Param."""
        return {p.name: p for p in self.params}

    @cached_property
    def state_of_node(self) -> dict[str, State]:
        """Node name -> the State that keeps its history."""
        return {s.node: s for s in self.states}

    @cached_property
    def seeded(self) -> frozenset[str]:
        """The nodes whose gradients a caller seeds besides backpropagation: the outputs (their
        window's gradient), the loss and the states' nodes (the final states' gradient)."""
        return frozenset(self.outputs) | {s.node for s in self.states} | ({self.loss} if self.loss else frozenset())

    def node(self, name: str) -> Node:
        """The node called ``name``; raises GraphError naming it when absent."""
        try:
            return self.by_name[name]
        except KeyError:
            raise GraphError(f"graph {self.name!r} has no node {name!r}") from None

    @property
    def inputs(self) -> tuple[Node, ...]:
        """The per-timestep input nodes (op ``input``), in order."""
        return tuple(n for n in self.nodes if n.op == "input")

    def differentiable(self, name: str) -> bool:
        """Whether backpropagation through a generated schedule computes the gradient of node
        ``name``: float nodes, except inputs that are data no one differentiates — a dropout
        mask (an ``input`` carrying a ``dropout`` attribute, rnngraph.network.Dropout), a
        variable-length mask (``lengths``, rnngraph/lengths.py) and a loss's float targets (an
        ``input`` carrying ``target``, rnngraph.heads.MSE)."""
        n = self.by_name[name]
        return n.dtype == FLOAT and not (n.op == "input" and any(a in n.attr for a in DATA_INPUTS))

    def consumers(self) -> dict[str, list[tuple[Node, Ref]]]:
        """Node name -> list of (consumer node, edge) reading it (computed once per graph)."""
        return self._consumers

    @cached_property
    def _consumers(self) -> dict[str, list[tuple[Node, Ref]]]:
        out: dict[str, list] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for r in n.args:
                out.setdefault(r.node, []).append((n, r))
        return out

    def __str__(self) -> str:
        return format_graph(self)


def format_graph(g: Graph) -> str:
    """The deterministic text form of ``g`` (see the module docstring); :func:`parse` inverts it."""
    lines = [f"graph {g.name}"]
    for p in g.params:
        lines.append(f"  param {p.name} {list(p.shape)} {p.init}")
    for n in g.nodes:
        args = ", ".join(str(a) for a in n.args)
        text = f"  node {n.name} : {n.dtype}[{n.size}] = {n.op}({args})"
        if n.params:
            text += " [" + ", ".join(n.params) + "]"
        if n.attrs:
            text += " {" + ", ".join(f"{k}={v!r}" for k, v in n.attrs) + "}"
        lines.append(text)
    for s in g.states:
        lines.append(f"  state {s.name} = {s.node} depth {s.depth}")
    for o in g.outputs:
        lines.append(f"  output {o}")
    if g.loss is not None:
        lines.append(f"  loss {g.loss}")
    return "\n".join(lines) + "\n"


_NAME = r"[A-Za-z_][\w.]*"
_NODE_RE = re.compile(
    rf"node (?P<name>{_NAME}) : (?P<dtype>\w+)\[(?P<size>\d+)\] = (?P<op>\w+)\((?P<args>[^)]*)\)"
    r"(?: \[(?P<params>[^\]]*)\])?(?: \{(?P<attrs>.*)\})?$"
)
_REF_RE = re.compile(rf"^(?P<node>{_NAME})(?:\[t-(?P<delay>-?\d+)\])?$")
_PARAM_RE = re.compile(rf"param (?P<name>{_NAME}) \[(?P<shape>[\d, ]*)\] (?P<init>.*)$")
_INIT_RE = re.compile(r"^(?P<kind>\w+)\((?P<scale>[^)]*)\)(?P<rest>.*)$")
_OFFSET_RE = re.compile(r" add\((\d+):(\d+)=([^)]*)\)")
_STATE_RE = re.compile(rf"state (?P<name>{_NAME}) = (?P<node>{_NAME}) depth (?P<depth>-?\d+)$")


def _parse_ref(text: str, lineno: int) -> Ref:
    m = _REF_RE.match(text.strip())
    if not m:
        raise GraphError(f"line {lineno}: cannot read the argument {text.strip()!r}")
    return Ref(m["node"], int(m["delay"] or 0))


def _parse_attrs(text: str, lineno: int) -> tuple[tuple[str, object], ...]:
    try:
        tree = ast.parse(f"dict({text})", mode="eval")
        value = {kw.arg: ast.literal_eval(kw.value) for kw in tree.body.keywords}
    except (SyntaxError, ValueError) as e:
        raise GraphError(f"line {lineno}: cannot read the attributes {{{text}}}: {e}") from None
    return tuple(sorted(value.items()))


def _parse_init(text: str, lineno: int) -> Init:
    m = _INIT_RE.match(text)
    if not m:
        raise GraphError(f"line {lineno}: cannot read the initialiser {text!r}")
    offsets = tuple((int(a), int(b), float(v)) for a, b, v in _OFFSET_RE.findall(m["rest"]))
    return Init(m["kind"], float(m["scale"]), offsets)


def parse(text: str) -> Graph:
    """Read the text form written by :func:`format_graph` back into a Graph.

    Raises GraphError naming the line that cannot be read. The result is not validated: run
    :func:`rnngraph.passes.validate.validate` on it.
    """
    name, params, nodes, states, outputs, loss = None, [], [], [], [], None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word = line.split(" ", 1)[0]
        if word == "graph":
            name = line[len("graph "):].strip()
        elif word == "param":
            m = _PARAM_RE.match(line)
            if not m:
                raise GraphError(f"line {lineno}: cannot read the parameter {line!r}")
            shape = tuple(int(s) for s in m["shape"].split(",") if s.strip())
            params.append(Param(m["name"], shape, _parse_init(m["init"], lineno)))
        elif word == "node":
            m = _NODE_RE.match(line)
            if not m:
                raise GraphError(f"line {lineno}: cannot read the node {line!r}")
            args = tuple(_parse_ref(a, lineno) for a in m["args"].split(",") if a.strip())
            pnames = tuple(p.strip() for p in (m["params"] or "").split(",") if p.strip())
            attrs = _parse_attrs(m["attrs"], lineno) if m["attrs"] else ()
            nodes.append(Node(m["name"], m["op"], args, pnames, attrs, int(m["size"]), m["dtype"]))
        elif word == "state":
            m = _STATE_RE.match(line)
            if not m:
                raise GraphError(f"line {lineno}: cannot read the state {line!r}")
            states.append(State(m["name"], m["node"], int(m["depth"])))
        elif word == "output":
            outputs.append(line.split(" ", 1)[1].strip())
        elif word == "loss":
            loss = line.split(" ", 1)[1].strip()
        else:
            raise GraphError(f"line {lineno}: unknown entry {word!r} (graph, param, node, state, output, loss)")
    if name is None:
        raise GraphError("no 'graph NAME' line")
    return Graph(name, tuple(params), tuple(nodes), tuple(states), tuple(outputs), loss)


def check_delay(delay: object, where: str) -> int:
    """Return ``delay`` as an int, or raise DelayError naming ``where`` if it is negative or not an integer."""
    if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)):
        raise DelayError(f"{where}: delay {delay!r} is not an integer")
    if delay < 0:
        raise DelayError(f"{where}: delay {delay} is negative (a consumer can only read the past)")
    return int(delay)
