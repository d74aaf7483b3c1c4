"""recurrence: find the loop SCCs of the folded graph.

Assumes: a validated graph. Guarantees: ``plan.loops`` lists every strongly connected
component of the folded graph (delays ignored for connectivity, networkx's Tarjan-style SCCs)
that contains a cycle, in an order where a loop comes after every loop it reads from; each is
a tuple of node names in graph order; ``plan.loop_of`` maps their nodes to the loop index.
Raises CycleError if a cycle inside an SCC has delays summing to 0 (validate catches it first;
this pass re-checks because it is the pass that owns the property). :func:`recurrent_width` is
the widest matrix product inside those SCCs, by which the schedule options' defaults choose
(rnngraph/schedule_options.py).
"""
from __future__ import annotations

import networkx as nx

from ..errors import CycleError
from ..ir import Graph
from .plan import Plan


def folded_graph(graph: Graph) -> nx.DiGraph:
    """Producer -> consumer edges of every reference of ``graph``, any delay (attribute
    ``delay``: the smallest)."""
    g = nx.DiGraph()
    g.add_nodes_from(n.name for n in graph.nodes)
    for n in graph.nodes:
        for r in n.args:
            if g.has_edge(r.node, n.name):
                g[r.node][n.name]["delay"] = min(g[r.node][n.name]["delay"], r.delay)
            else:
                g.add_edge(r.node, n.name, delay=r.delay)
    return g


def _cyclic(folded: nx.DiGraph, members) -> bool:
    """Whether the strongly connected component ``members`` of ``folded`` holds a cycle (a loop)."""
    return len(members) > 1 or any(folded.has_edge(m, m) for m in members)


def recurrence(plan: Plan) -> Plan:
    """Fill ``loops`` and ``loop_of`` (see the module docstring)."""
    folded = folded_graph(plan.graph)
    position = {n.name: k for k, n in enumerate(plan.graph.nodes)}
    cond = nx.condensation(folded)
    loops = []
    for c in nx.lexicographical_topological_sort(cond, key=lambda c: min(position[m] for m in cond.nodes[c]["members"])):
        members = cond.nodes[c]["members"]
        if _cyclic(folded, members):
            loops.append(tuple(sorted(members, key=position.__getitem__)))
    for members in loops:
        zero = nx.DiGraph((u, v) for u, v, d in folded.subgraph(members).edges(data="delay") if d == 0)
        if not nx.is_directed_acyclic_graph(zero):
            cycle = [u for u, _ in nx.find_cycle(zero)]
            raise CycleError(f"cycle with total delay 0: {' -> '.join(cycle + [cycle[0]])}")
    loop_of = {m: k for k, members in enumerate(loops) for m in members}
    return plan.replace(loops=tuple(loops), loop_of=loop_of)


def recurrent_width(graph: Graph) -> int:
    """The inner dimension K of the widest matrix product inside a recurrence of ``graph``: the
    largest input size of a ``linear`` node in a strongly connected component with a cycle
    (an LSTM of hidden size H: H; 0 where no product is inside one). ScheduleOptions.defaults
    puts the loops' products on tensor cores by S and K (rnngraph/schedule_options.py
    ``loop_tensor_cores_by_default``)."""
    folded, by_name = folded_graph(graph), graph.by_name
    widest = 0
    for members in filter(lambda c: _cyclic(folded, c), nx.strongly_connected_components(folded)):
        for m in members:  # (a graph not yet validated may name nodes it lacks: skipped here)
            node = by_name.get(m)
            source = by_name.get(node.args[0].node) if node is not None and node.op == "linear" and node.args else None
            widest = max(widest, source.size if source is not None else 0)
    return widest
