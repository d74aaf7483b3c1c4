"""hoist: every node outside a loop SCC runs once over all T*S columns of the window.

Assumes: recurrence has run. Guarantees: ``plan.phase_of`` maps each node outside the loops to
its phase k = 1 + the largest index of a loop it depends on (through any chain of edges, any
delay), 0 when it depends on none: phase 0 is the prologue (input projections, embeddings),
phase len(loops) the epilogue (output layer, loss); a phase between two loops holds what
connects them (layer l's output projected for layer l+1). A node's phase is never after a loop
that reads it. In backward, the weight-gradient GEMMs of in-loop products run once per window
after the reverse loop (the lower pass places them).
"""
from __future__ import annotations

import networkx as nx

from .plan import Plan
from .recurrence import folded_graph


def hoist(plan: Plan) -> Plan:
    """Fill ``phase_of`` (see the module docstring)."""
    folded = folded_graph(plan.graph)
    after: dict[str, int] = {}
    cond = nx.condensation(folded)
    for c in nx.topological_sort(cond):
        members = cond.nodes[c]["members"]
        preds = {p for m in members for p in folded.predecessors(m)} - members
        k = max((after[p] for p in preds), default=0)
        loop = {plan.loop_of.get(m) for m in members} - {None}
        value = (loop.pop() + 1) if loop else k
        for m in members:
            after[m] = value
    return plan.replace(phase_of={n: after[n] for n in after if n not in plan.loop_of})
