"""levels: dependency levels inside one timestep of each loop SCC.

Assumes: fuse has run. Guarantees: ``plan.level_of`` maps every loop node to its level (1-based)
within one timestep; ops on one level may run concurrently, and a level ends with a grid sync.
A node starts a new level when it reads, through a delay-0 edge from its own loop, values that
other blocks of a persistent kernel produce: a GEMM (a product over the whole vector), a row
reduction (layer norm), a gather or loss, or an index-shuffling pointwise op (slice, concat)
that is not aligned to the loop's hidden units. Pointwise ops on a block's own units stay on
their producer's level (each block owns some hidden units and all of their gate rows). Values
from earlier timesteps, from other loops or from once-per-window phases are ready at level 1.
Fused kernels of ``plan.groups`` that span several levels are split at the level boundaries.
"""
from __future__ import annotations

import math

from ..ir import Node
from .plan import WHOLE_VECTOR, Plan


def hidden_unit(plan: Plan, names) -> int:
    """The width by which blocks split a loop's vectors: the gcd of its state sizes (1 if none)."""
    sizes = [plan.graph.by_name[s.node].size for s in plan.graph.states if s.node in set(names)]
    return math.gcd(*sizes) if sizes else 1


def _aligned(node: Node, plan: Plan, unit: int) -> bool:
    """Whether a pointwise node maps element e of its output to elements of its inputs owned by the same hidden unit."""
    if node.op == "slice":
        return node.attr["start"] % unit == 0
    if node.op == "concat":
        offsets, total = [], 0
        for r in node.args:
            offsets.append(total)
            total += plan.graph.by_name[r.node].size
        return all(o % unit == 0 for o in offsets)
    return True


def needs_sync(plan: Plan, node: Node, unit: int) -> bool:
    """Whether ``node`` reads values that other blocks produce (so a grid sync must precede it)."""
    return plan.kind(node.name) in WHOLE_VECTOR or not _aligned(node, plan, unit)


def node_levels(plan: Plan, nodes: list[Node], same_tick, unit: int) -> dict[str, int]:
    """Levels of ``nodes`` (in a valid order) for one timestep; ``same_tick(consumer, ref)`` says
    whether an edge carries a value produced in the same timestep of the same body."""
    level: dict[str, int] = {}
    for n in nodes:
        preds = [level[r.node] for r in n.args if r.node in level and same_tick(n, r)]
        if not preds:
            level[n.name] = 1
        else:
            level[n.name] = max(preds) + (1 if needs_sync(plan, n, unit) else 0)
    return level


def split_by_level(groups, level_of: dict) -> tuple[tuple[str, ...], ...]:
    """Split each group whose members (in order) lie on several levels into one group per level."""
    out = []
    for grp in groups:
        if grp[0] not in level_of:
            out.append(grp)
            continue
        by_level: dict[int, list[str]] = {}
        for m in grp:
            by_level.setdefault(level_of[m], []).append(m)
        out.extend(tuple(by_level[k]) for k in sorted(by_level))
    return tuple(out)


def levels(plan: Plan) -> Plan:
    """Fill ``level_of`` and split ``groups`` (see the module docstring)."""
    level_of: dict[str, int] = {}
    for k, members in enumerate(plan.loops):
        nodes = [plan.graph.by_name[m] for m in members]
        same = lambda n, r, k=k: r.delay == 0 and plan.loop_of.get(r.node) == k
        level_of.update(node_levels(plan, nodes, same, hidden_unit(plan, members)))
    return plan.replace(level_of=level_of, groups=split_by_level(plan.groups, level_of))


def backward_levels(plan: Plan, nodes: list[Node], same_tick, unit: int) -> dict[str, int]:
    """Levels of the gradient computation of ``nodes`` in one reverse timestep.

    A node's VJP runs once every consumer in the same timestep has pushed its gradient, and one
    level later when the VJP reads the whole gradient vector (the transposed product of a GEMM,
    a row reduction's backward): the mirror of :func:`node_levels` with edges reversed.
    """
    inside = {n.name for n in nodes}
    consumers: dict[str, list[str]] = {m: [] for m in inside}
    for n in nodes:
        for r in n.args:
            if r.node in inside and same_tick(n, r):
                consumers[r.node].append(n.name)
    level: dict[str, int] = {}
    for n in reversed(nodes):
        succ = [level[c] for c in consumers[n.name]]
        level[n.name] = (max(succ) + (1 if needs_sync(plan, n, unit) else 0)) if succ else 1
    return level
