"""verify: invariants checked between passes when RNNGRAPH_DEBUG >= 1.

Checks what the passes so far promise: loops are disjoint and cover exactly the nodes on
cycles; every other node has a phase; gemm groups partition the linear nodes; kernel groups
partition the computed nodes and respect delay-0 dependencies in order; every loop node has a
level. Raises AssertionError naming the pass and the broken invariant.
"""
from __future__ import annotations

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
