"""verify: invariants checked between passes when RNNGRAPH_DEBUG >= 1.

Checks what the passes so far promise: loops are disjoint and cover exactly the nodes on
cycles; every other node has a phase; gemm groups partition the linear nodes; kernel groups
partition the computed nodes and respect delay-0 dependencies in order; every loop node has a
level. Raises AssertionError naming the pass and the broken invariant.
"""
from __future__ import annotations

from .levels import hidden_unit, needs_sync
from .plan import Plan


def verify(plan: Plan, after: str) -> None:
    """Check ``plan``'s filled fields; ``after`` names the pass that just ran (for the message)."""
    g = plan.graph
    names = [n.name for n in g.nodes]

    def check(ok: bool, what: str) -> None:
        if not ok:
            raise AssertionError(f"after pass {after!r}: {what}")

    if plan.loops:
        flat = [m for lp in plan.loops for m in lp]
        check(len(flat) == len(set(flat)), "a node is in two loops")
    if plan.phase_of:
        check(set(plan.phase_of) | set(plan.loop_of) == set(names), "a node has neither a loop nor a phase")
    if plan.gemm_groups:
        flat = [m for grp in plan.gemm_groups for m in grp]
        check(sorted(flat) == sorted(n.name for n in g.nodes if n.op == "linear"), "gemm groups do not partition the linears")
    if plan.groups:
        flat = [m for grp in plan.groups for m in grp]
        check(sorted(flat) == sorted(n.name for n in plan.computed()), "kernels do not partition the computed nodes")
        done = set()
        for grp in plan.groups:
            for m in grp:
                for r in g.by_name[m].args:
                    if r.delay == 0 and r.node in {n.name for n in plan.computed()}:
                        check(r.node in done or r.node in grp[:grp.index(m)],
                              f"kernel of {m!r} runs before the kernel computing {r.node!r}")
                done.add(m)
    if plan.level_of:
        check(all(m in plan.level_of for m in plan.loop_of), "a loop node has no level")


# ---------------------------------------------------------------------------- schedules
def _instances(steps, T: int, backward: bool = False):
    """(key, kernel, op, timesteps) of every kernel op execution, in schedule order.

    key = (step, tick, level, stage, kernel index, op position): a phase has tick -1 and covers
    every timestep; backward kernels run their ops' VJPs in reverse order.
    """
    from ..schedule import Phase

    for i, step in enumerate(steps):
        if isinstance(step, Phase):
            for j, k in enumerate(step.kernels):
                for pos, op in enumerate(k.ops):
                    yield (i, -1, 0, 0, j, -pos if backward else pos), k, op, range(T)
            continue
        top = max(o for o, _ in step.stages)
        for tick in range(T + top):
            for level in range(1, step.levels + 1):
                for offset, _ in step.stages:
                    t = tick - offset
                    if not 0 <= t < T:
                        continue
                    for j, k in enumerate(step.at(level, offset)):
                        for pos, op in enumerate(k.ops):
                            yield ((i, tick, level, offset, j, -pos if backward else pos), k, op,
                                   [T - 1 - t if step.reverse else t])


def _order(a, b) -> str:
    """'before', 'after', 'same' or 'concurrent' for two instance keys."""
    if a[0] != b[0]:
        return "before" if a[0] < b[0] else "after"
    if a[1:3] != b[1:3]:
        return "before" if a[1:3] < b[1:3] else "after"
    if a[3] != b[3]:
        return "concurrent"
    return "before" if a[4:] < b[4:] else "after" if a[4:] > b[4:] else "same"


def check_schedule(schedule, T: int | None = None) -> list[str]:
    """Violations of the schedule's promises when run for T timesteps (default: its window).

    Forward: every computed node is written by exactly one kernel, and every unrolled dependency
    (node n at t -> node m at t + d) has its write before the read. Backward: every gradient
    d.n at t is written (by the VJPs of n's consumers) before n's VJP or weight-gradient kernel
    reads it, and no two writers of one gradient element are in one concurrent group (same
    tick and level, different stages). Returns human-readable strings; empty means sound.
    """
    g, T = schedule.graph, T or schedule.window
    plan = Plan(g)
    unit = hidden_unit(plan, [n.name for n in g.nodes])
    whole = {n.name for n in g.nodes if n.op not in ("input", "param") and needs_sync(plan, n, unit)}

    def unsynced(wkey, rkey, op) -> bool:
        """A whole-vector read of a value written in the same level of the same tick (no grid sync between)."""
        return op in whole and rkey[1] >= 0 and wkey[:3] == rkey[:3] and wkey[3:5] != rkey[3:5]

    computed = {n.name for n in g.nodes if n.op not in ("input",)}
    problems: list[str] = []
    writes: dict = {}
    for key, k, op, ts in _instances(schedule.forward, T):
        for t in ts:
            if (op, t) in writes:
                problems.append(f"forward: {op}[t={t}] is written twice")
            writes[(op, t)] = key
    for n in g.nodes:
        if n.op not in ("input", "param") and (n.name, 0) not in writes:
            problems.append(f"forward: {n.name} is never computed")
    for key, k, op, ts in _instances(schedule.forward, T):
        for r in g.by_name[op].args:
            for t in ts:
                src = (r.node, t - r.delay)
                if src in writes and _order(writes[src], key) != "before":
                    problems.append(f"forward: {op}[t={t}] in {k.name} reads {r.node}[t={t - r.delay}] "
                                    f"({_order(writes[src], key)} its write)")
                elif src in writes and unsynced(writes[src], key, op):
                    problems.append(f"forward: {op}[t={t}] in {k.name} reads all of {r.node}[t={t - r.delay}] "
                                    f"in the level that writes it (no grid sync between)")
    gwrites: dict = {}
    greads: list = []
    for key, k, op, ts in _instances(schedule.backward, T, backward=True):
        if k.kind in ("wgrad", "reduce"):
            greads += [((op, t), key, k.name) for t in range(T)]
            continue
        for t in ts:
            greads.append(((op, t), key, k.name))
            for r in g.by_name[op].args:
                if r.node in computed and t - r.delay >= 0 and g.by_name[r.node].dtype == "float":
                    gwrites.setdefault((r.node, t - r.delay), []).append((key, k.name))
    for target, ws in gwrites.items():
        for a in range(len(ws)):
            for b in range(a + 1, len(ws)):
                if _order(ws[a][0], ws[b][0]) == "concurrent":
                    problems.append(f"backward: d.{target[0]}[t={target[1]}] written concurrently by "
                                    f"{ws[a][1]} and {ws[b][1]}")
    for target, key, name in greads:
        for wkey, wname in gwrites.get(target, ()):
            if _order(wkey, key) != "before":
                problems.append(f"backward: {name} reads d.{target[0]}[t={target[1]}] "
                                f"({_order(wkey, key)} {wname} writes it)")
            elif unsynced(wkey, key, target[0]):
                problems.append(f"backward: {name} reads all of d.{target[0]}[t={target[1]}] in the level "
                                f"where {wname} writes it (no grid sync between)")
    return problems
