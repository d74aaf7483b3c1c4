"""naive: the baseline plan the other passes are measured against (Hwang & Sung 2015's point).

Assumes: recurrence has run (for the validated graph). Guarantees: one loop holding every
computed node, each node its own kernel on its own level (one kernel per op per timestep:
nothing hoisted, merged or fused), run per timestep (graph mode). Used by ``plan="naive"`` and
the ``rnngraph-naive`` benchmark.
"""
from __future__ import annotations

from .plan import Plan


def naive(plan: Plan) -> Plan:
    """Fill every field the lower pass reads with the naive plan (see the module docstring)."""
    computed = [n.name for n in plan.computed()]
    return plan.replace(
        loops=(tuple(computed),), loop_of=dict.fromkeys(computed, 0),
        phase_of={n.name: 0 for n in plan.graph.nodes if n.name not in set(computed)},
        gemm_groups=tuple((m,) for m in computed if plan.graph.by_name[m].op == "linear"),
        groups=tuple((m,) for m in computed), level_of={m: k + 1 for k, m in enumerate(computed)},
        plan="naive", stage_of=dict.fromkeys(computed, 0), body=frozenset(computed), mode={0: "graph"},
        reason="forced: one kernel per op per timestep, nothing hoisted, merged or fused (the baseline)")
