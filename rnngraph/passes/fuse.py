"""fuse: group the computed nodes of each region into kernels.

Assumes: merge_gemms has run. Guarantees: ``plan.groups`` partitions the computed nodes (not
inputs, not vector params) into kernels listed in an order that respects every dependency:
- each GEMM group is one kernel;
- pointwise ops and row reductions (layer norm) fuse: a fused kernel is a maximal set of them
  in one region, connected by delay-0 edges, with the same *barrier depth* (the number of
  non-fusible kernels — GEMM, gather, loss — on the longest path to them inside the region;
  inside a once-per-window phase an edge with a delay also counts as a barrier, since the
  kernel computes all timesteps at once). Equal depth makes the kernel graph acyclic;
- gathers and losses are kernels of their own.
Nodes inside a kernel are in graph order (a valid order for the kernel's own dependencies).
"""
from __future__ import annotations

import networkx as nx

from .plan import Plan

FUSIBLE = ("pointwise", "row_reduction")


def _region_order(plan: Plan, nodes) -> list:
    """``nodes`` of one region in an order where producers come first; inside a phase this
    includes delayed edges (graph order only guarantees it for delay-0 edges)."""
    if plan.region(nodes[0].name)[0] == "loop":
        return nodes
    position = {n.name: k for k, n in enumerate(nodes)}
    dag = nx.DiGraph()
    dag.add_nodes_from(position)
    dag.add_edges_from((r.node, n.name) for n in nodes for r in n.args if r.node in position)
    by_name = {n.name: n for n in nodes}
    return [by_name[m] for m in nx.lexicographical_topological_sort(dag, key=position.__getitem__)]


def _barrier_depth(plan: Plan, nodes) -> dict[str, int]:
    depth: dict[str, int] = {}
    for n in _region_order(plan, nodes):
        d = 0
        for r in n.args:
            if r.node not in depth:
                continue  # another region, an input or a param: available before this region runs
            hoisted_delay = r.delay > 0 and plan.region(n.name)[0] == "phase"
            if r.delay == 0 or hoisted_delay:
                barrier = plan.kind(r.node) not in FUSIBLE or hoisted_delay
                d = max(d, depth[r.node] + (1 if barrier else 0))
        depth[n.name] = d
    return depth


def fuse(plan: Plan) -> Plan:
    """Fill ``groups`` (see the module docstring)."""
    computed = plan.computed()
    gemm_of = {m: grp for grp in plan.gemm_groups for m in grp}
    by_region: dict[tuple, list] = {}
    for n in computed:
        by_region.setdefault(plan.region(n.name), []).append(n)
    kernel_of: dict[str, tuple] = {}
    for region, nodes in by_region.items():
        depth = _barrier_depth(plan, nodes)
        links = nx.Graph()
        for n in nodes:
            if plan.kind(n.name) in FUSIBLE:
                links.add_node(n.name)
                for r in n.args:
                    if (r.delay == 0 and r.node in depth and plan.kind(r.node) in FUSIBLE
                            and depth[r.node] == depth[n.name]):
                        links.add_edge(r.node, n.name)
        for comp in nx.connected_components(links):
            for m in comp:
                kernel_of[m] = ("fused", min(comp))
        for n in nodes:
            if n.name in gemm_of:
                kernel_of[n.name] = ("gemm", gemm_of[n.name])
            elif n.name not in kernel_of:
                kernel_of[n.name] = ("alone", n.name)
    return plan.replace(groups=order_kernels(plan, kernel_of))


def order_kernels(plan: Plan, kernel_of: dict[str, tuple]) -> tuple[tuple[str, ...], ...]:
    """Kernels (tuples of nodes in graph order) in a dependency-respecting order: a topological
    sort of the kernel graph over delay-0 edges (and delayed edges inside phases), ties broken by
    the graph position of each kernel's first node."""
    position = {n.name: k for k, n in enumerate(plan.graph.nodes)}
    members: dict[tuple, list[str]] = {}
    for n in plan.computed():
        members.setdefault(kernel_of[n.name], []).append(n.name)
    dag = nx.DiGraph()
    dag.add_nodes_from(members)
    for n in plan.computed():
        for r in n.args:
            if r.node in kernel_of and kernel_of[r.node] != kernel_of[n.name]:
                dag.add_edge(kernel_of[r.node], kernel_of[n.name])
    dag.remove_edges_from([(u, v) for u, v in dag.edges if _delayed_only(plan, members[u], members[v])])
    order = nx.lexicographical_topological_sort(dag, key=lambda k: position[members[k][0]])
    return tuple(tuple(members[k]) for k in order)


def _delayed_only(plan: Plan, producers, consumers) -> bool:
    """Whether every edge between two kernels of one loop has a delay (so it orders nothing within a timestep)."""
    prod = set(producers)
    edges = [r for c in consumers for r in plan.graph.by_name[c].args if r.node in prod]
    same_loop = plan.region(producers[0]) == plan.region(consumers[0]) and plan.region(consumers[0])[0] == "loop"
    return same_loop and all(r.delay > 0 for r in edges)
