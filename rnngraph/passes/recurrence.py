"""recurrence: find the loop SCCs of the folded graph.

Assumes: a validated graph. Guarantees: ``plan.loops`` lists every strongly connected
component of the folded graph (delays ignored for connectivity, networkx's Tarjan-style SCCs)
that contains a cycle, in an order where a loop comes after every loop it reads from; each is
a tuple of node names in graph order; ``plan.loop_of`` maps their nodes to the loop index.
Raises CycleError if a cycle inside an SCC has delays summing to 0 (validate catches it first;
this pass re-checks because it is the pass that owns the property).
"""
from __future__ import annotations

import networkx as nx

from ..errors import CycleError
from .plan import Plan


def folded_graph(plan: Plan) -> nx.DiGraph:
    """Producer -> consumer edges of every reference, any delay (attribute ``delay``: the smallest)."""
    g = nx.DiGraph()
    g.add_nodes_from(n.name for n in plan.graph.nodes)
    for n in plan.graph.nodes:
        for r in n.args:
            if g.has_edge(r.node, n.name):
                g[r.node][n.name]["delay"] = min(g[r.node][n.name]["delay"], r.delay)
            else:
                g.add_edge(r.node, n.name, delay=r.delay)
    return g


def recurrence(plan: Plan) -> Plan:
    """Fill ``loops`` and ``loop_of`` (see the module docstring)."""
    folded = folded_graph(plan)
    position = {n.name: k for k, n in enumerate(plan.graph.nodes)}
    cond = nx.condensation(folded)
    loops = []
    for c in nx.lexicographical_topological_sort(cond, key=lambda c: min(position[m] for m in cond.nodes[c]["members"])):
        members = cond.nodes[c]["members"]
        if len(members) > 1 or any(folded.has_edge(m, m) for m in members):
            loops.append(tuple(sorted(members, key=position.__getitem__)))
    for members in loops:
        zero = nx.DiGraph((u, v) for u, v, d in folded.subgraph(members).edges(data="delay") if d == 0)
        if not nx.is_directed_acyclic_graph(zero):
            cycle = [u for u, _ in nx.find_cycle(zero)]
            raise CycleError(f"cycle with total delay 0: {' -> '.join(cycle + [cycle[0]])}")
    loop_of = {m: k for k, members in enumerate(loops) for m in members}
    return plan.replace(loops=tuple(loops), loop_of=loop_of)
