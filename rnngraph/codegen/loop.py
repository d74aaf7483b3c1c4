"""Emit one persistent cooperative kernel per loop of the schedule (forward or backward): the driver.

Two steps: :func:`~.loop_plan.plan_loop_kernel` decides everything (a ``LoopKernelPlan``:
shared memory, work items, early loads, flag buffers, arguments), then :func:`emit_loop_kernel`
writes it through one ``Source`` builder (codegen/source.py), calling the emitter of each
construct: codegen/loop_prologue.py (start and end of the kernel), loop_gemm.py (GEMM rows),
loop_pointwise.py (pointwise kernels), loop_layer_norm.py (row sums), loop_prefetch.py (early
loads). This module holds the time loop. What the kernel does:

The kernel runs the whole window: for each tick, for each level, every stage whose timestep
t = tick - offset is inside the window runs its kernels, and the grid syncs at the end of the
level (``cuda.cg.this_grid().sync()``, or codegen/grid_barrier.py's inline barrier, ``barrier=1``:
the default from S=2). Work is split by *ownership*: a level has a unit
u_L (the gcd of its kernels' units and GEMM sizes) and block b owns units
[b*u_L/B, (b+1)*u_L/B); it computes the GEMM rows of those units (a warp per work item of
``rows`` rows x ``cols`` streams, lanes striding over the inner dimension, the partial sums
reduced across the warp with shuffles, by a tree per sum or the transpose butterfly of
codegen/warp_reduce.py (``xreduce``); one thread per work item in the simulator, which has no
shuffles), syncs its threads, then runs the fused pointwise code for the same units. So a level
costs at most one grid sync (plus the reduction sync of a level with layer norms, below): the
values a block reads within a level are its own. The loop's
``syncs`` (passes/grid_syncs.py) say which levels end with one; the others end with
``cuda.syncthreads()`` (e.g. the LSTM backward's GEMM level: the next timestep's pointwise VJP
reads the rows of dh its own block just wrote).
A loop with ``flagged`` values (passes/flag_exchange.py, ``flagged_exchange``: the default at S=1,
and up to S=8 for the backward loops) has no
such sync for them: their writer also stores each element as a (value, tag) word into a flag
buffer ``F<i>`` (codegen/flag_exchange.py; zeroed at kernel start, a forward loop's initial-state
rows flagged there, then one grid sync), and the GEMMs poll those words (codegen/loop_gemm.py).
Recurrent weights are copied once per launch into shared memory where ``smem_kib`` allows (the
block's own rows), past it into dynamic shared memory where ``dsmem_kib`` allows, else read from
global memory, where they stay resident in the 50 MB L2.
Code-shape knobs: ``LoopTuning`` (codegen/tuning.py), given to the plan as a value; the emitters
read only the plan.

Backward: the same structure in reverse time; a GEMM's VJP adds W^T g into the gradient of its
input (``G[x] += ...``), each block for the input units it owns.

Layer norms (``persistent_layer_norms``, rnngraph/schedule_options.py; the default up to S=64): each layer norm's row sums
per column s are added across blocks with ``cuda.atomic.add`` into a global float32 buffer
indexed (t, s, 2), and a grid sync orders them before the normalisation, which is one more op
of the fused pointwise code (codegen/pointwise.py). Where the summed row (forward: the input x;
backward: the gradient of the output) is written by the level just before the layer norm's
(``Loop.early_sums``, passes/row_sums.py), each block sums the elements it has just written at
the end of that level, after a block barrier, and that level's grid sync completes the sums;
otherwise a *reduction phase* at the start of the layer norm's level sums the block's own
elements and ends with an extra grid sync (the "reduction sync" of the schedule dump).
Indexing the sums by t means one zeroing per launch (a grid-strided loop at kernel start, then a
grid sync), none inside the time loop; the backward reads the forward's sums (kept to the end of
the window) to recompute mean and rstd, so the forward row statistics are never recomputed.
- forward sums: sum(x - K) and sum((x - K)^2) with the shift K = x[t-1, s, 0] (0 at t = 0,
  layer_norm_fused.ln_shift), which every block can read before row t is complete. One pass instead
  of the two-pass mean-then-variance (which would need a second sync per layer norm): the shift
  keeps var = E[(x-K)^2] - E[x-K]^2 from cancelling catastrophically when |mean| >> std (the
  plain sum-of-squares failure mode), as long as consecutive rows are alike.
- backward sums: sum(g * gain) and sum(g * gain * xhat) over the row. The gain and bias
  gradients (sums over t and s of g * xhat and g) of the loop's ``post_sums`` layer norms
  (``post_loop_sums``, the default; passes/param_grad_sums.py) are left to the ``reduce`` kernels of
  the phase after the loop (codegen/ln_param_grads.py); the others go into global buffers with
  atomics, or (``lnsum=1|2``) into the block's shared-memory sums ``Z<i>`` over the whole
  window, added to the global buffers once at kernel end (each block owns the same elements
  every timestep) -- compare-and-swap loops on the H200, which retry when lanes of a warp share
  an address: layernorm_lstm S=64's backward 4.35 ms with them (H200,
  bench/results/h200-20261201-lngrad-trace-modes.json).
- code shapes of the row sums (``lnsum``): 0, a warp per column with lanes over the block's
  elements and shuffles (the columns run one after another: latency-bound when S is large);
  1, every thread over (element, column) pairs, columns fastest, several pairs' loads in flight,
  partial sums added into shared memory by atomics, one thread per column adding the block's
  sums (layernorm_lstm S=64 fwd+bwd 10.5 vs 17.6 ms, bench/results/h200-20261201-lnsum-*);
  2, a column per thread (bdim // S threads a column), its elements summed in registers, the
  threads' partial sums meeting in shared memory without atomics (numba's float atomics on
  shared memory are compare-and-swap loops on the H200): the default from S=2 (10.16 -> 9.84 ms,
  bench/results/h200-20261201-lnsum2-sweep-lnsum2.json).
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import ops
from ..ir import Graph
from ..schedule import Kernel, Loop
from .loop_gemm import emit_rows
from .loop_items import GemmItem
from .loop_plan import BARRIER_FUNCTIONS, SIM_THREADS, LoopKernelPlan, plan_loop_kernel
from .loop_pointwise import device_function, emit_pointwise, timestep
from .loop_prefetch import emit_prefetch
from .loop_prologue import decorator, emit_epilogue, emit_prologue, imports
from .row_reductions import row_code
from .source import Source
from .tuning import LoopTuning

__all__ = ["BARRIER_FUNCTIONS", "SIM_THREADS", "LoopEmitter", "emit_loop_kernel", "persistent_supported"]

SUPPORTED = ("gemm", "pointwise")


def _row_reduction_kernel(k: Kernel) -> bool:
    """A fused kernel of pointwise ops and row reductions with CUDA code (``cuda_row``: layer norm)."""
    return k.kind == "reduction" and all(ops.REGISTRY[op].kind == "pointwise" or
                                         (ops.is_row_reduction(op) and ops.REGISTRY[op].cuda_row is not None)
                                         for op in k.op_names)


def persistent_supported(loop: Loop) -> bool:
    """Whether every kernel of the loop is a GEMM, a fused pointwise kernel or a fused kernel with
    layer norms (the persistent emitter's scope; the pipeline pass marks loops with layer norms
    persistent when the schedule's ``options.persistent_layer_norms`` allows it: by default up to S=64)."""
    return all(k.kind in SUPPORTED or _row_reduction_kernel(k) for k in loop.kernels)


def emit_loop_kernel(g: Graph, plan: LoopKernelPlan, recompute: dict | None = None) -> tuple[str, list[str]]:
    """(module text: imports, device functions and the persistent kernel ``plan.name``; its buffer
    arguments in order) of ``plan.loop`` as ``plan`` (:func:`~.loop_plan.plan_loop_kernel`) says;
    ``recompute`` as given to the plan. The kernel's parameters are ``plan.args``: (T, S, [BAR],
    [flag buffers], *buffers)."""
    recompute = recompute or {}
    fns = imports(plan) + [device_function(g, plan.loop, plan, item, recompute)
                           for lv in plan.levels for st in lv.stages for item in st.items if not isinstance(item, GemmItem)]
    src = Source()
    src(decorator(plan))
    with src.block(f"def {plan.name}({', '.join(plan.args)}):"):
        emit_prologue(src, g, plan)
        _time_loop(src, g, plan)
        emit_epilogue(src, plan)
    return "\n\n".join(fns) + "\n\n" + src.text() + "\n", list(plan.buffers)


def _time_loop(src: Source, g: Graph, plan: LoopKernelPlan) -> None:
    """The early loads of the first tick, then ``for tick``: each level's reduction phase, early
    loads, stages (each stage's kernels at its timestep t), the next level's early row sums, and
    the grid sync (or block barrier) that ends it."""
    prefetch = dict(plan.prefetch)
    for k, p in plan.prefetch:
        src(f"pf_{k} = {p.fn}_load(0, 0, 0, {', '.join(p.args)})  # (typing: any valid element)")
        if p.shift:  # issued in the previous tick: the first tick's here
            emit_prefetch(src, p, "0")

    @contextmanager
    def at_timestep(offset: int):
        src(f"t = {timestep(offset, plan.reverse)}")
        with src.block("if t >= 0 and t < T:"):
            yield
            if knocked:  # the body may be empty
                src("pass")

    knocked = plan.knockout & {"gemm", "pointwise", "ln-sums"}
    row_sums = (lambda sums, uL: None) if "ln-sums" in plan.knockout else \
        (lambda sums, uL: row_code(g.by_name[sums.node].op).loop_sums(src, g, plan, sums, uL))

    with src.block(f"for tick in range(T + {plan.top}):"):
        for lv in plan.levels:
            if not lv.unit:  # a level without kernels
                if lv.sync:
                    src(plan.grid_sync)
                continue
            uL = lv.unit
            src(f"# level {lv.level}: unit {uL}", f"j0 = (bid * {uL}) // nblocks", f"nj = ((bid + 1) * {uL}) // nblocks - j0")
            if lv.reduction:
                src("# reduction phase: layer norm row sums, then the level's reduction sync")
                for sums in lv.reduction:
                    with at_timestep(sums.offset):
                        row_sums(sums, uL)
                src(plan.grid_sync)
            for k in lv.prefetch:
                p = prefetch[k]
                emit_prefetch(src, p, f"tick + {p.shift}" if p.shift else "tick")
            for stage in lv.stages:
                src(f"# stage {stage.offset}: {stage.label}")
                with at_timestep(stage.offset):
                    for j, item in enumerate(stage.items):
                        if j:
                            src("cuda.syncthreads()")
                        if isinstance(item, GemmItem) and "gemm" not in plan.knockout:
                            for rows in item.rows:
                                src(rows.comment)
                                emit_rows(src, rows, plan.coop, "vector-loads" not in plan.knockout)
                        elif not isinstance(item, GemmItem) and "pointwise" not in plan.knockout:
                            emit_pointwise(src, item, uL, plan.reverse)
            if lv.early:
                src("cuda.syncthreads()", "# the next level's layer norm row sums, over the elements this block just wrote")
                for sums in lv.early:
                    with at_timestep(sums.offset):
                        row_sums(sums, uL)
            src(plan.grid_sync if lv.sync else "cuda.syncthreads()  # no grid sync needed here")


class LoopEmitter:
    """Source of the persistent kernel ``{name}`` for ``loop`` (``loop.reverse`` = backward): its
    plan (:func:`~.loop_plan.plan_loop_kernel`, made here, raising NotImplementedError where the
    loop is out of scope), then :meth:`source` (device functions + kernel source, sorted buffer
    names). ``coop``: warp-cooperative GEMM rows with shuffles (GPU); False for the simulator;
    the other arguments: see plan_loop_kernel."""

    def __init__(self, g: Graph, loop: Loop, name: str, coop: bool = True, recompute: dict | None = None,
                 streams: int = 1, nblocks: int = 1, tuning: LoopTuning | None = None, virtual_blocks: int = 0,
                 precision: str = "fp32"):
        self.g, self.loop, self.recompute = g, loop, recompute or {}
        self.plan = plan_loop_kernel(g, loop, name, coop, self.recompute, streams, nblocks, tuning, virtual_blocks,
                                     precision)

    @property
    def barrier(self) -> bool:
        """Whether the kernel takes the inline barriers' counters BAR (a zeroed uint32 array
        (BARRIER_COUNTERS,): the grid's, or one a stream group)."""
        return bool(self.plan.barrier)

    @property
    def flag_buffers(self) -> dict[str, str]:
        """Value buffer -> its flag buffer F<i> (uint64, the value's shape), in argument order."""
        return dict(self.plan.flag_buffers)

    @property
    def transposed(self) -> frozenset:
        """The parameters whose transposed copies T<k> the kernel reads (backward GEMMs)."""
        return self.plan.transposed

    @property
    def prefetch_plans(self) -> dict:
        """Pointwise kernel -> where its early loads go (codegen/loop_prefetch.py's Prefetch)."""
        return dict(self.plan.prefetch)

    def source(self) -> tuple[str, list[str]]:
        """(device functions + the persistent kernel, its buffer arguments in order). The kernel's
        arguments are (T, S, [BAR if ``self.barrier``], [the flag buffers of ``flag_buffers``],
        *buffers)."""
        return emit_loop_kernel(self.g, self.plan, self.recompute)
