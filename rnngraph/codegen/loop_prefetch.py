"""Early loads of a persistent loop's pointwise kernels (``prefetch=1``, codegen/tuning.py): which
kernels issue some loads a level early, and where (:func:`prefetch_plans`), and the code that
issues them (:func:`emit_prefetch`) into the tuple ``pf_<kernel>`` its ``_pre`` call takes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Graph
from ..ops import is_row_reduction
from ..passes.ownership import level_unit
from ..schedule import Kernel, Loop
from .loop_pointwise import made, owned_row, pointwise_emitter, timestep
from .pointwise import Names
from .source import Source
from .tuning import LoopTuning


@dataclass(frozen=True)
class Prefetch:
    """Where pointwise kernel ``kernel``'s early loads are issued (:func:`prefetch_plans`): at the
    start of ``level``, for the kernel's run ``shift`` ticks later; ``offset`` is the kernel's
    stage, ``buffers`` those it may load early, ``args`` the buffers of its early loads,
    ``level_unit`` and ``unit`` its level's and its own unit, ``reverse`` a backward loop's."""

    kernel: str
    level: int
    shift: int
    offset: int
    buffers: frozenset
    args: tuple
    level_unit: int
    unit: int
    reverse: bool

    @property
    def fn(self) -> str:
        """The kernel's device function (``{kernel}_fwd`` or ``_bwd``)."""
        return self.kernel + "_" + ("bwd" if self.reverse else "fwd")


def kernel_writes(g: Graph, loop: Loop, k: Kernel, recompute: dict, flagged: dict) -> set[str]:
    """The buffers kernel ``k`` stores to in ``loop`` (a GEMM: its outputs, or in the backward the
    gradient of its input; a pointwise kernel: what its device function stores)."""
    names = Names(g)
    nodes = [g.by_name[m] for m in k.ops]
    if k.kind != "gemm":
        return _emitted(g, loop, k, recompute, flagged).written
    if loop.reverse:
        return {names.grad(nodes[0].args[0].node)}
    return {names.value(n.name) for n in nodes}


def _emitted(g: Graph, loop: Loop, k: Kernel, recompute: dict, flagged: dict, prefetch=()):
    return made(pointwise_emitter(g, loop, k, recompute, flagged, deferred=[m for m in k.ops if m in loop.post_sums],
                                  prefetch=prefetch), loop.reverse)


def prefetch_plans(g: Graph, loop: Loop, recompute: dict, flagged: dict, tuning: LoopTuning) -> dict[str, Prefetch]:
    """Which pointwise kernels issue some of their loads a level early (``prefetch=1``), and where
    (kernel name -> Prefetch, in level order). A kernel K with other kernels before it in its
    level issues them at the start of its level (the forward LSTM: the input projection and the
    old cell state load while the block computes its gate rows); the first kernel of its level at
    the start of the previous level with kernels (the backward LSTM: the forward values and old
    gradients of timestep t-1 during timestep t's product), where a grid sync comes right before
    that level. The early loads are those of buffers no kernel between that point and K stores to
    (each thread's first item); the others stay where they were. Only kernels whose loads left in
    place (through PointwiseEmitter.load) are all of products (GEMM outputs) get a plan, and no
    kernel with a layer-norm op: a kernel that would still wait on another pointwise kernel's
    output (peephole_lstm's gates, after the peephole products) or on its layer norm's row sums
    gains nothing and was slower with early loads (S=1 fwd+bwd on the H200,
    bench/results/h200-20261201-prefetch-sweep-*.json: peephole_lstm 1.269 -> 1.334 ms,
    layernorm_lstm 2.506 -> 2.720). A backward kernel that only recomputes a forward layer norm
    keeps its moments' reads in place (the forward's row sums and shift, which the backward never
    writes) and may get a plan. ``flagged``: value buffer -> flag buffer of the loop.

    ``prefetch=2`` also plans a level's first kernel where no grid sync comes right before the
    previous level (a flagged exchange took it away: the S=1 layer-norm loops' GEMM levels, whose
    backward first kernel reads the forward values and its old gradients during the product): its
    early loads are then of the buffers that no kernel stores to after the last grid sync before
    that point (:func:`_unsynced_levels`), whose stores every block sees by then."""
    if not tuning.prefetch:
        return {}
    writes: dict[str, set[str]] = {}

    def written(x: Kernel) -> set[str]:
        if x.name not in writes:
            writes[x.name] = kernel_writes(g, loop, x, recompute, flagged)
        return writes[x.name]

    levels = [lv for lv in range(1, loop.levels + 1) if any(k.level == lv for k in loop.kernels)]
    at_level = {lv: [(offset, k) for offset, _ in loop.stages for k in loop.at(lv, offset)] for lv in levels}
    plans = {}
    for lv in levels:
        for pos, (offset, k) in enumerate(at_level[lv]):
            if k.kind == "gemm":
                continue
            unsynced = False  # early loads that no grid sync precedes (prefetch=2)
            if pos:
                where, shift, between = lv, 0, [x for _, x in at_level[lv][:pos]]
            else:
                i = levels.index(lv)
                where = levels[i - 1]
                before = where - 1 if where > 1 else loop.levels  # the level ending right before it
                # (a loop without grid syncs, e.g. with flags: no other block touches K's elements)
                unsynced = before not in loop.sync_after and bool(loop.sync_after)
                if where == lv or unsynced and tuning.prefetch < 2:
                    continue
                shift, between = int(where > lv), [x for _, x in at_level[where]]
            if any(is_row_reduction(g.by_name[m].op) for m in k.ops):
                continue  # its row moments' loads stay where they are (layernorm_lstm S=1 slower)
            if unsynced:
                hazards = _unsynced_levels(loop, where)
                between = [x for x in loop.kernels if x.level in hazards]
            stored = set().union(*(written(x) for x in between))
            products = set().union(*(written(x) for x in between if x.kind == "gemm"))
            early = frozenset(_emitted(g, loop, k, recompute, flagged).buffers - stored)
            e = _emitted(g, loop, k, recompute, flagged, early)
            late = {buf for line, buf in e.loaded.items() if line not in e.early}
            if e.early and late <= products:  # else it waits on another kernel's output anyway
                plans[k.name] = Prefetch(k.name, where, shift, offset, early, tuple(e.early_buffers()),
                                         level_unit(g, [x for _, x in at_level[lv]], loop.reverse, recompute),
                                         e.u, loop.reverse)
    return plans


def _unsynced_levels(loop: Loop, where: int) -> set[int]:
    """The levels whose stores a block may not see yet at the start of level ``where``: ``where``
    itself and the levels before it (cyclically, the previous tick's) back to the last one
    followed by a grid sync (``loop.sync_after``, which must not be empty)."""
    out, lv = {where}, where
    while True:
        lv = lv - 1 if lv > 1 else loop.levels
        if lv in loop.sync_after:
            return out
        out.add(lv)


def emit_prefetch(src: Source, plan: Prefetch, tick: str) -> None:
    """Issue ``plan``'s early loads for its kernel's run at tick ``tick`` (an expression): thread
    tid's first item (s, j) of that kernel's level, into the tuple ``pf_<kernel>``."""
    uK, reps = plan.level_unit, plan.unit // plan.level_unit
    step = timestep(plan.offset, plan.reverse).replace("tick", f"({tick})")
    src(f"# {plan.fn}: the early loads of its run at tick {tick}",
        f"pj0 = (bid * {uK}) // nblocks",
        f"pnj = ((bid + 1) * {uK}) // nblocks - pj0",
        f"tn = {step}")
    with src.block(f"if tn >= 0 and tn < T and tid < S * pnj * {reps}:"):
        src(f"ps = tid // (pnj * {reps})",  # as in a pointwise kernel's loop, for item = tid
            f"prem = tid - ps * (pnj * {reps})",
            *owned_row("prem", "pj", reps, uK, jj="pjj", j0="pj0"),
            f"pf_{plan.kernel} = {plan.fn}_load(tn, ps, pj, {', '.join(plan.args)})")
