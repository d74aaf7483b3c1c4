"""merge_gemms: linear ops reading the same value become one GEMM.

Assumes: hoist has run. Guarantees: ``plan.gemm_groups`` partitions the linear nodes; the
members of a group read the same node with the same delay and run in the same region (loop or
phase), so one GEMM over their stacked weights computes all of them (four gate GEMMs written
separately become one 4H GEMM; likewise the recurrent side). Groups and members are in graph
order. The graph itself is not rewritten: parameters keep the names the user gave them.
"""
from __future__ import annotations

from .plan import Plan


def merge_gemms(plan: Plan) -> Plan:
    """Fill ``gemm_groups`` (see the module docstring)."""
    groups: dict[tuple, list[str]] = {}
    for n in plan.graph.nodes:
        if n.op == "linear":
            key = (n.args[0].node, n.args[0].delay, plan.region(n.name))
            groups.setdefault(key, []).append(n.name)
    return plan.replace(gemm_groups=tuple(tuple(v) for v in groups.values()))
