"""pipeline: choose how the loop SCCs run together, and their stage offsets.

Assumes: levels has run. Two plans (ARCHITECTURE.md):
- **scc-sequential**: each loop SCC runs its whole window in turn; what connects two loops (layer
  l's output projected for layer l+1) stays a hoisted GEMM over the window between them;
- **wavefront**: all loop SCCs run in one loop body; a loop SCC (or a node between loops) runs
  ``stage`` timesteps behind the units it reads with delay 0 (layer l+1 at t-1 beside layer l at
  t), so all stages of a timestep are independent; the products that connect loops move into
  the body. A stage offset s satisfies s(B) >= s(A) + 1 - d for a loop A read by B with delay
  d (A's value is ready at the end of a tick), and s(B) >= s(A) when a node A between loops is
  read with delay 0 (it runs in B's timestep, on an earlier level); with a delay d >= 1 such a
  read also needs s(B) >= s(A) + 1 - d. A pointwise node between loops that reads only one loop's
  values (a dropout mask multiplied onto a layer's output) runs in that loop's stage and counts
  as part of it (:func:`attached_to_loops`).
Guarantees: ``plan.plan``, ``plan.stage_of`` (every body node; 0 in scc-sequential),
``plan.body`` (nodes that run per timestep), ``plan.mode`` (loop step -> "persistent" when the
loop's weights fit on chip and its ops are GEMMs and pointwise ops — or layer norms, where
``plan.options.persistent_layer_norms`` allows them (by default S <= 64) — else "graph":
per-timestep kernels),
``plan.reason`` (the cost model's estimates), and levels/groups updated for the wavefront body.
With one loop SCC there is nothing to overlap and the plan is scc-sequential. The output
layer stays hoisted after the loop (one GEMM over the window at the cuBLAS rate).
"""
from __future__ import annotations

import networkx as nx

from ..errors import GraphError
from ..ops import REGISTRY
from .cost import DEFAULT, node_flops, param_bytes
from .levels import hidden_unit, node_levels, split_by_level
from .plan import Plan
from .recurrence import folded_graph

PLANS = ("wavefront", "scc-sequential")


def _between(plan: Plan) -> list[str]:
    """Nodes between loops that feed a later loop (they move into a wavefront body)."""
    folded, n_loops = folded_graph(plan.graph), len(plan.loops)
    out = []
    for n in plan.computed():
        p = plan.phase_of.get(n.name)
        if p is not None and 0 < p < n_loops:
            if any(plan.loop_of.get(d, -1) >= p for d in nx.descendants(folded, n.name)):
                out.append(n.name)
    return out


def attached_to_loops(plan: Plan, body: set[str]) -> dict[str, int]:
    """Between-loops pointwise nodes that read (with delay 0) only one loop's values, or other
    such nodes of the same loop, besides graph inputs: node -> that loop. A dropout mask
    multiplied onto a layer's output is one. In a wavefront they run in their loop's stage, on
    the units the loop's blocks own, so their consumers see them one tick later like the loop's
    own outputs, instead of costing those consumers a level."""
    attached: dict[str, int] = {}
    for n in plan.graph.nodes:  # topological order
        if n.name not in body or n.name in plan.loop_of or plan.kind(n.name) != "pointwise":
            continue
        owners = set()
        for r in n.args:
            if r.node not in body:
                continue  # a graph input (e.g. a dropout mask) or a hoisted value
            owner = plan.loop_of.get(r.node, attached.get(r.node))
            owners.add(None if owner is None or r.delay else owner)
        if len(owners) == 1 and None not in owners:
            attached[n.name] = owners.pop()
    return attached


def wavefront_stages(plan: Plan, body: set[str], reverse: bool = False) -> dict[str, int]:
    """Stage offsets of the body nodes (see the module docstring; nodes of
    :func:`attached_to_loops` share their loop's stage and count as part of it).

    With ``reverse`` the offsets of the backward loop: gradients flow from consumer to producer,
    so a producer's VJP runs ``1 - d`` stages behind a loop consumer's, and in the same stage as a
    between-loops consumer that reads it with delay 0 (whose transposed product runs in the
    producer's timestep, on an earlier level).
    """
    loop_of = {**attached_to_loops(plan, body), **plan.loop_of}
    unit = lambda m: ("loop", loop_of[m]) if m in loop_of else ("node", m)
    edges = [(r.node, n.name, r.delay) for n in plan.graph.nodes if n.name in body
             for r in n.args if r.node in body and unit(r.node) != unit(n.name)]
    inner = [(r.node, n.name) for n in plan.graph.nodes if n.name in body
             for r in n.args if r.node in body and unit(r.node) == unit(n.name)]
    if reverse:
        edges = [(dst, src, d) for src, dst, d in edges]
        inner = [(dst, src) for src, dst in inner]
    flow = nx.DiGraph()
    flow.add_nodes_from(body)
    flow.add_edges_from((u, v) for u, v, _ in edges)
    flow.add_edges_from(inner)
    into: dict[str, list] = {}
    for u, v, d in edges:
        into.setdefault(v, []).append((u, d))
    same_unit_into: dict[str, list] = {}
    for u, v in inner:
        same_unit_into.setdefault(v, []).append(u)
    stage: dict[str, int] = {}
    cond = nx.condensation(flow)
    for c in nx.topological_sort(cond):
        members = cond.nodes[c]["members"]
        s = max([0] + [stage[u] + (1 if u in loop_of or d else 0) - d
                       for m in members for u, d in into.get(m, ())]
                + [stage[u] for m in members for u in same_unit_into.get(m, ()) if u in stage])
        for m in members:
            stage[m] = s
    return stage


def _body_levels(plan: Plan, body: set[str], stage: dict[str, int]) -> dict[str, int]:
    nodes = [n for n in plan.graph.nodes if n.name in body]
    same = lambda n, r: r.delay == 0 and r.node in body and stage[r.node] == stage[n.name]
    return node_levels(plan, nodes, same, hidden_unit(plan, body))


def _tick_flops(plan: Plan, names) -> int:
    g = plan.graph
    return sum(node_flops(g, g.by_name[m]) for m in names if g.by_name[m].op == "linear") * plan.streams


def _weight_bytes(plan: Plan, names) -> int:
    return param_bytes(plan.graph, names, 4 if plan.dtype == "float32" else 8)


def _fits(plan: Plan, names) -> bool:
    """Whether a loop over ``names`` can be one persistent kernel: its weights fit on chip and its
    ops are GEMMs and pointwise ops (the persistent emitter's scope), or layer norms when
    ``plan.options.persistent_layer_norms`` allows them (a layer norm then costs an extra grid
    sync per timestep; without it a layer norm inside the recurrence runs per timestep, graph mode)
    and the row reduction has code for a persistent kernel (its registry entry's ``cuda_row``)."""
    ln_ok = _layer_norms(plan, names) > 0 and plan.options.persistent_layer_norms
    ops_ok = all(plan.kind(m) in ("gemm", "pointwise") or (ln_ok and plan.kind(m) == "row_reduction"
                                                           and REGISTRY[plan.graph.by_name[m].op].cuda_row)
                 for m in names)
    return ops_ok and _weight_bytes(plan, names) <= DEFAULT.on_chip_bytes


def _layer_norms(plan: Plan, names) -> int:
    """Layer norms among ``names``: each costs a persistent loop one extra grid sync a timestep."""
    return sum(plan.kind(m) == "row_reduction" for m in names)


def _loop_tick_us(plan: Plan, names, levels: int) -> float:
    """The cost model's time of one timestep of a loop body over ``names`` with ``levels`` levels:
    persistent (syncs, one more per layer norm) or graph mode (one replayed kernel per group)."""
    persistent = _fits(plan, names)
    syncs = levels + (_layer_norms(plan, names) if persistent else 0)
    return DEFAULT.tick_us(syncs, _tick_flops(plan, names), persistent,
                           kernels=len([g for g in plan.groups if g[0] in names]),
                           weight_bytes=_weight_bytes(plan, names), streams=plan.streams)


def pipeline(plan: Plan) -> Plan:
    """Fill ``plan``, ``stage_of``, ``body``, ``mode`` and ``reason`` (see the module docstring)."""
    if plan.force_plan is not None and plan.force_plan not in PLANS:
        raise GraphError(f"unknown plan {plan.force_plan!r} (choose from {', '.join(PLANS)}, naive)")
    T, cm = plan.window, DEFAULT
    loop_nodes = set(plan.loop_of)
    between = _between(plan)
    seq_us = sum(T * _loop_tick_us(plan, members, max(plan.level_of[m] for m in members)) for members in plan.loops)
    seq_us += cm.hoisted_us(sum(node_flops(plan.graph, plan.graph.by_name[m]) for m in between) * T * plan.streams,
                            len({g for g in plan.groups if set(g) & set(between)}))
    seq = plan.replace(plan="scc-sequential", stage_of={m: 0 for m in loop_nodes}, body=frozenset(loop_nodes),
                       mode={k: ("persistent" if _fits(plan, members) else "graph")
                             for k, members in enumerate(plan.loops)})
    if len(plan.loops) < 2:
        why = "one loop SCC: nothing to overlap" if plan.loops else "no loop SCC: everything is hoisted"
        return seq.replace(reason=why)
    body = loop_nodes | set(between)
    stage = wavefront_stages(plan, body)
    level_of = {**plan.level_of, **_body_levels(plan, body, stage)}
    depth = max(stage.values())
    fits = _fits(plan, body)
    wf_levels = max(level_of[m] for m in body)
    wf_us = (T + depth) * _loop_tick_us(plan, body, wf_levels)
    choice = plan.force_plan or ("wavefront" if wf_us < seq_us * (1 - cm.wavefront_lead) else "scc-sequential")
    how = "forced" if plan.force_plan else "cost model"
    reason = (f"{how}: wavefront {wf_us / 1000:.3g} ms vs scc-sequential {seq_us / 1000:.3g} ms "
              f"per forward window (estimates; a wavefront must lead by {100 * cm.wavefront_lead:.0f} %)")
    if choice == "scc-sequential":
        return seq.replace(reason=reason)
    return plan.replace(plan="wavefront", stage_of=stage, body=frozenset(body), level_of=level_of,
                        groups=split_by_level(plan.groups, level_of),
                        mode={0: "persistent" if fits else "graph"}, reason=reason)
