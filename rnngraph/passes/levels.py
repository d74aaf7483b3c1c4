"""levels: dependency levels inside one timestep of each loop SCC.

Assumes: fuse has run. Guarantees: ``plan.level_of`` maps every loop node to its level (1-based)
within one timestep; ops on one level may run concurrently, and a level ends with a grid sync
where passes/grid_syncs.py (run by lower) finds one needed.
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


def split_groups(groups, key) -> tuple[tuple[str, ...], ...]:
    """Split each group into one group per value of ``key(node)`` (in order of the first member
    with each value; ints before None so a group's lower levels come first)."""
    out = []
    for grp in groups:
        parts: dict = {}
        for m in grp:
            parts.setdefault(key(m), []).append(m)
        out.extend(tuple(parts[k]) for k in sorted(parts, key=lambda k: (k is None, k if k is not None else 0)))
    return tuple(out)


def split_by_level(groups, level_of: dict) -> tuple[tuple[str, ...], ...]:
    """Split each group whose members lie on several levels (or partly outside the loops) into
    one group per level."""
    return split_groups(groups, level_of.get)


def levels(plan: Plan) -> Plan:
    """Fill ``level_of`` and split ``groups`` (see the module docstring)."""
    level_of: dict[str, int] = {}
    for k, members in enumerate(plan.loops):
        nodes = [plan.graph.by_name[m] for m in members]
        same = lambda n, r, k=k: r.delay == 0 and plan.loop_of.get(r.node) == k
        level_of.update(node_levels(plan, nodes, same, hidden_unit(plan, members)))
    return plan.replace(level_of=level_of, groups=split_by_level(plan.groups, level_of))


def backward_levels(plan: Plan, nodes: list[Node], same_tick, unit: int, stage: dict | None = None) -> dict[str, int]:
    """Levels of the gradient computation of ``nodes`` in one reverse timestep.

    A node's VJP runs once every consumer in the same timestep has pushed its gradient, and one
    level later when the VJP reads the whole gradient vector (the transposed product of a GEMM,
    a row reduction's backward): the mirror of :func:`node_levels` with edges reversed. With
    ``stage`` (backward stage offsets), a VJP that would add into the same gradient element as a
    VJP of another stage on the same level (stage s writes d.arg at timestep t_s - delay, and
    t_s - t_s' = s - s') moves to a later level: no two writers share a concurrent group.
    """
    inside = {n.name for n in nodes}
    consumers: dict[str, list[str]] = {m: [] for m in inside}
    for n in nodes:
        for r in n.args:
            if r.node in inside and same_tick(n, r):
                consumers[r.node].append(n.name)
    level: dict[str, int] = {}
    claimed: dict[tuple, int] = {}  # (gradient node, stage - delay, level) -> stage of its writer
    for n in reversed(nodes):
        succ = [level[c] for c in consumers[n.name]]
        lvl = (max(succ) + (1 if needs_sync(plan, n, unit) else 0)) if succ else 1
        if stage is not None:
            s = stage[n.name]
            targets = [(r.node, s - r.delay) for r in n.args]
            while any(claimed.get((node, key, lvl), s) != s for node, key in targets):
                lvl += 1
            for node, key in targets:
                claimed[(node, key, lvl)] = s
        level[n.name] = lvl
    return level
