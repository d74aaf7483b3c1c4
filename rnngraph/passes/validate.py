"""validate: check a Graph and put its nodes in dependency order.

Assumes: nothing (it is the first pass and runs on parsed or hand-made graphs too).
Guarantees: names are unique and every reference resolves; delays are integers >= 0; no
cycle has delays summing to 0; every node's size and dtype agree with its op's shape rule;
each node read with a delay >= 1 holds exactly one State whose depth is its largest read
delay; outputs and loss exist; nodes are listed so that every delay-0 argument comes first.
Warns UnusedWarning for an input or parameter that nothing reads.
"""
from __future__ import annotations

import warnings
from collections import Counter

import networkx as nx

from .. import ops
from ..errors import CycleError, GraphError, ShapeError, StateError, UnusedWarning
from ..ir import FLOAT, Graph, check_delay


def _unique(names, what: str) -> None:
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise GraphError(f"{what} {dup[0]!r} is defined more than once")


def _check_refs(g: Graph) -> None:
    _unique([n.name for n in g.nodes], "node")
    _unique([p.name for p in g.params], "parameter")
    for n in g.nodes:
        for r in n.args:
            check_delay(r.delay, f"node {n.name!r} reading {r.node!r}")
            if r.node not in g.by_name:
                raise GraphError(f"node {n.name!r} (op {n.op}) reads {r.node!r}, which is not a node")
        for p in n.params:
            if p not in g.param_by_name:
                raise GraphError(f"node {n.name!r} (op {n.op}) uses parameter {p!r}, which is not declared")
    for o in g.outputs + ((g.loss,) if g.loss else ()):
        if o not in g.by_name:
            raise GraphError(f"output {o!r} is not a node")


def _zero_delay_order(g: Graph) -> list[str]:
    """Node names in an order respecting delay-0 edges; CycleError printing a zero-delay cycle."""
    dag = nx.DiGraph()
    position = {n.name: k for k, n in enumerate(g.nodes)}
    dag.add_nodes_from(position)
    dag.add_edges_from((r.node, n.name) for n in g.nodes for r in n.args if r.delay == 0)
    try:
        return list(nx.lexicographical_topological_sort(dag, key=position.__getitem__))
    except nx.NetworkXUnfeasible:
        cycle = [u for u, _ in nx.find_cycle(dag)]
        path = " -> ".join(cycle + [cycle[0]])
        raise CycleError(f"cycle with total delay 0: {path}; a value cannot depend on itself within one "
                         f"timestep; read one of these with a delay (make it a rg.State)") from None


def _check_shapes(g: Graph) -> None:
    for n in g.nodes:
        args = [g.by_name[r.node] for r in n.args]
        size, dtype = ops.infer(n, args, [g.param_by_name[p] for p in n.params])
        if (size, dtype) != (n.size, n.dtype):
            raise ShapeError(f"node {n.name!r} (op {n.op}) is declared {n.dtype}[{n.size}] but its op gives "
                             f"{dtype}[{size}]")


def _check_states(g: Graph) -> None:
    by_name = Counter(s.name for s in g.states)
    for s in g.states:
        if by_name[s.name] > 1:
            nodes = [t.node for t in g.states if t.name == s.name]
            raise StateError(f"state {s.name!r} is updated twice: by nodes {nodes[0]!r} and {nodes[1]!r}")
        if s.node not in g.by_name:
            raise StateError(f"state {s.name!r} is never updated: its node {s.node!r} does not exist")
    holders = Counter(s.node for s in g.states)
    for node, c in holders.items():
        if c > 1:
            names = [s.name for s in g.states if s.node == node]
            raise StateError(f"node {node!r} holds {c} states {names}; one node keeps one state history")
    need: dict[str, int] = {}
    for n in g.nodes:
        for r in n.args:
            if r.delay >= 1:
                need[r.node] = max(need.get(r.node, 0), r.delay)
                if r.node not in g.state_of_node:
                    raise StateError(f"node {n.name!r} reads {r.node!r} with delay {r.delay}, but no state keeps "
                                     f"the history of {r.node!r}")
                if g.by_name[r.node].dtype != FLOAT:
                    raise StateError(f"node {n.name!r} reads {r.node!r} with a delay; only float values can be states")
    for s in g.states:
        if s.node not in need and s.depth >= 1:
            warnings.warn(f"state {s.name!r} of graph {g.name!r} is never read", UnusedWarning, stacklevel=3)
        elif s.depth != need.get(s.node, 0):
            raise StateError(f"state {s.name!r} has depth {s.depth}, but its node {s.node!r} is read with "
                             f"largest delay {need.get(s.node, 0)}; depth must equal it (and be >= 1)")


def _warn_unused(g: Graph) -> None:
    read_nodes = {r.node for n in g.nodes for r in n.args}
    read_params = {p for n in g.nodes for p in n.params}
    for n in g.inputs:
        if n.name not in read_nodes and n.name not in g.outputs:
            warnings.warn(f"input {n.name!r} of graph {g.name!r} is never read", UnusedWarning, stacklevel=3)
    for p in g.params:
        if p.name not in read_params:
            warnings.warn(f"parameter {p.name!r} of graph {g.name!r} is never used", UnusedWarning, stacklevel=3)


def validate(g: Graph) -> Graph:
    """Check ``g`` (see the module docstring) and return it with nodes in dependency order.

    Raises GraphError / ShapeError / DtypeError / CycleError / StateError / DelayError, each
    naming the offending node, op, parameter or state.
    """
    _check_refs(g)
    order = _zero_delay_order(g)
    if g.loss is not None and g.by_name[g.loss].size != 1:
        raise ShapeError(f"loss node {g.loss!r} must have size 1 per column, not {g.by_name[g.loss].size}")
    if order != [n.name for n in g.nodes]:
        g = Graph(g.name, g.params, tuple(g.by_name[n] for n in order), g.states, g.outputs, g.loss)
    _check_shapes(g)
    _check_states(g)
    _warn_unused(g)
    return g
