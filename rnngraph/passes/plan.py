"""The Plan: a Graph plus what the passes have found so far (every pass returns a new Plan).

Fields are filled in pipeline order; a pass may read only fields filled before it:
- recurrence: ``loops`` (loop SCCs, in dependency order, each a tuple of node names in graph
  order) and ``loop_of`` (node -> loop index);
- hoist: ``phase_of`` (non-loop node -> the phase it runs in: phase k runs once per window after
  loop k-1 and before loop k; phase len(loops) is the epilogue);
- merge_gemms: ``gemm_groups`` (linear nodes that run as one GEMM);
- fuse: ``groups`` (kernels: tuples of nodes, in execution order);
- levels: ``level_of`` (loop node -> dependency level in one timestep, 1-based) and ``groups``
  split where a grid sync is needed;
- pipeline: ``plan`` ("wavefront" or "scc-sequential"), ``stage_of`` (node -> stage offset in the
  wavefront body), ``body`` (nodes inside the loop body), ``mode`` (loop index -> "persistent" or
  "graph"), ``reason`` (the cost model's comparison, for the dump).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import ops
from ..ir import Graph, Node
from ..schedule_options import ScheduleOptions

#: op kinds that are not computed by kernels: inputs are given, vector params are read in place
NOT_KERNELS = ("input", "param")
#: op kinds that read a whole vector of a column (values other blocks of a persistent kernel own)
WHOLE_VECTOR = ("gemm", "row_reduction", "gather", "loss")


@dataclass(frozen=True)
class Plan:
    """A graph being compiled for windows of ``window`` timesteps over ``streams`` streams, with
    ``options`` (what the passes decide beyond the graph; None: the defaults for ``streams``)."""

    graph: Graph
    window: int = 1
    streams: int = 1
    dtype: str = "float32"
    force_plan: str | None = None
    options: ScheduleOptions | None = None
    loops: tuple[tuple[str, ...], ...] = ()
    loop_of: dict = field(default_factory=dict)
    phase_of: dict = field(default_factory=dict)
    gemm_groups: tuple[tuple[str, ...], ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    level_of: dict = field(default_factory=dict)
    plan: str | None = None
    stage_of: dict = field(default_factory=dict)
    body: frozenset = frozenset()
    mode: dict = field(default_factory=dict)
    reason: str = ""

    def __post_init__(self):
        if self.options is None:
            object.__setattr__(self, "options", ScheduleOptions.defaults(self.streams))

    def replace(self, **changes) -> "Plan":
        """A copy with ``changes`` (dataclasses.replace)."""
        return replace(self, **changes)

    def kind(self, name: str) -> str:
        """The op kind of node ``name`` (ops.Op.kind)."""
        return ops.REGISTRY[self.graph.by_name[name].op].kind

    def region(self, name: str) -> tuple[str, int]:
        """Where node ``name`` runs: ("loop", k) or ("phase", k)."""
        if name in self.loop_of:
            return ("loop", self.loop_of[name])
        return ("phase", self.phase_of[name])

    def computed(self) -> list[Node]:
        """The nodes kernels compute (not inputs, not vector params), in graph order."""
        return [n for n in self.graph.nodes if ops.REGISTRY[n.op].kind not in NOT_KERNELS]
