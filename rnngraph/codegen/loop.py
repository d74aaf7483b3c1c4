"""Emit one persistent cooperative kernel per loop of the schedule (forward or backward).

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
A loop with ``flagged`` values (passes/flag_exchange.py, ``flagged_exchange``: the S=1 default) has no
such sync for them: their writer also stores each element as a (value, tag) word into a flag
buffer ``F<i>`` (codegen/flag_exchange.py; zeroed at kernel start, a forward loop's initial-state
rows flagged there, then one grid sync), and the GEMMs poll those words (:meth:`LoopEmitter._poll`).
Recurrent weights are copied once per launch into shared memory where ``smem_kib`` allows (the
block's own rows), else read from global memory, where they stay resident in the 50 MB L2.
Code-shape knobs: ``LoopTuning`` (codegen/tuning.py), given to the emitter as a value.

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
  pointwise.ln_shift), which every block can read before row t is complete. One pass instead
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

from dataclasses import dataclass

from .. import ops
from ..ir import Graph
from ..passes.ownership import kernel_unit, level_unit
from ..schedule import Kernel, Loop, gradient_inputs
from .pointwise import Names, PointwiseEmitter, buffer_key, ln_moments, ln_row, ln_shift, local_grad
from .tuning import LoopTuning
from .warp_reduce import transpose_reduce, tree_reduce

SUPPORTED = ("gemm", "pointwise")
#: partial sums a lane of a GEMM work item holds at most (rows x streams; the transpose butterfly
#: of codegen/warp_reduce.py reduces up to 32 at once)
GEMM_ACCUMULATORS = 32
#: (element, column) pairs whose loads a thread issues before adding them (``lnsum=1``)
LN_SUM_UNROLL = 4
#: per-column shared-memory values of ``lnsum=1``: 3 (shift, or the moments mu, m, rs) + 2 sums
_LN_SMEM_FLOATS = 5
#: knob ``barrier`` (codegen/tuning.py) -> the function of codegen/grid_barrier.py (GPU only) a
#: generated module imports as ``grid_barrier``
BARRIER_FUNCTIONS = {1: "grid_barrier", 2: "grid_barrier_backoff", 3: "grid_barrier_red"}
#: threads a simulated block runs with (codegen/program.py launches the simulator's loop kernels so)
SIM_THREADS = 8


def owned_row(place: str, row: str, reps: int, uL: int, jj: str = "jj", j0: str = "j0") -> list[str]:
    """Lines setting ``row`` to the element at ``place`` among a block's owned ones: a block owns
    units [j0, j0 + nj) of a level with unit ``uL``, each ``reps`` times (rows j, j + uL, ...),
    numbered unit-major (place = jj * reps + rep); ``jj`` and ``j0`` name the variables used."""
    return [f"{jj} = {place} // {reps}", f"{row} = {j0} + {jj} + ({place} - {jj} * {reps}) * {uL}"]


def _layer_norm_kernel(k: Kernel) -> bool:
    """A fused kernel of pointwise ops and layer norms (no other row reduction)."""
    return k.kind == "reduction" and all(op == "layer_norm" or ops.REGISTRY[op].kind == "pointwise"
                                         for op in k.op_names)


def persistent_supported(loop: Loop) -> bool:
    """Whether every kernel of the loop is a GEMM, a fused pointwise kernel or a fused kernel with
    layer norms (the persistent emitter's scope; the pipeline pass marks loops with layer norms
    persistent when the schedule's ``options.persistent_layer_norms`` allows it: by default up to S=64)."""
    return all(k.kind in SUPPORTED or _layer_norm_kernel(k) for k in loop.kernels)


@dataclass(frozen=True)
class Prefetch:
    """Where pointwise kernel ``kernel``'s early loads are issued (:meth:`LoopEmitter._prefetch_plans`):
    at the start of ``level``, for the kernel's run ``shift`` ticks later; ``offset`` is the
    kernel's stage, ``buffers`` those it may load early, ``args`` the buffers of its early loads,
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


class LoopEmitter:
    """Source of the persistent kernel ``{name}`` for ``loop`` (``loop.reverse`` = backward).

    Call :meth:`source` to get (device functions + kernel source, sorted buffer names).
    ``coop``: emit warp-cooperative GEMM rows with shuffles (GPU); False for the simulator.
    """

    def __init__(self, g: Graph, loop: Loop, name: str, coop: bool = True, recompute: dict | None = None,
                 streams: int = 1, nblocks: int = 1, tuning: LoopTuning | None = None, virtual_blocks: int = 0):
        self.g, self.loop, self.name, self.coop = g, loop, name, coop
        self.nblocks = nblocks  # the grid the kernel must be launched with (sizes the shared arrays)
        # simulator tests only: split one block into this many "blocks" of its threads (the
        # simulator runs a cooperative grid of one block; this exercises multi-block ownership and
        # cross-block atomics, grid.sync being the block's barrier); no shared-memory weights
        self.virtual_blocks = virtual_blocks
        self.tuning = tuning or LoopTuning()
        self.smem_left = 0 if virtual_blocks else self.tuning.smem_kib * 1024  # bytes of shared memory still free
        self.ln_zero: list[str] = []  # row-sum buffers (T, S, 2) this kernel accumulates into: zeroed at start
        # shared-memory sums Z<i> of layer-norm gain/bias gradients -> (Q<i>, level unit, reps,
        # kernel unit, chunks): zeroed at kernel start, added into Q<i> at its end (``lnsum=1|2``)
        self.local_grads: dict[str, tuple] = {}
        self.prologue: list[str] = []  # kernel-start code: weight rows into shared memory
        self.smem: dict[tuple, str] = {}  # (weight, reps, unit, inner) -> its shared array
        self.streams = streams  # S: the kernel is launched for exactly this many streams
        self.stream_block = max(1, min(streams, self.tuning.cols))  # streams per GEMM work item at most
        self.transposed: set[str] = set()  # weights read transposed (backward)
        self.ksplit_arrays: list[tuple[str, int, int]] = []  # (name, rows, columns): split partial sums
        self.recompute = recompute or {}  # node -> ops of the forward kernel computing it
        self.names = Names(g)
        self.buffers: set[str] = set()
        self.prefetch_plans: dict[str, Prefetch] = {}  # pointwise kernel -> where its early loads go
        self._writes: dict[str, set[str]] = {}  # kernel -> the buffers it stores to (:meth:`_kernel_writes`)
        self.device_fns: list[str] = []
        self.body: list[str] = []
        # the grid sync between levels: numba's, or the inline barrier on the counter BAR
        # (codegen/grid_barrier.py; the caller passes BAR, a zeroed uint32 array (1,), after S)
        self.barrier = bool(coop and self.tuning.barrier and not virtual_blocks)
        self.ln_smem = self._reserve_ln_smem()
        # value buffer -> its flag buffer F<i> (uint64, the value's shape; ``Loop.flagged``,
        # passes/flag_exchange.py): the caller passes them after BAR, in this order
        values = [self.names.grad(v[2:]) if v.startswith("d.") else self.names.value(v) for v in loop.flagged]
        self.flag_buffers = {b: "F" + b[1:] for b in values}
        self.grid_sync = ("grid.sync()" if not self.barrier else "grid_barrier(BAR, nblocks)" if self.tuning.barrier < 3
                          else "bphase = grid_barrier(BAR, nblocks, bphase)")

    def _reserve_ln_smem(self) -> bool:
        """Whether the layer norms' row sums take a shared-memory shape (``lnsum=1|2`` and the
        loop has layer norms); its arrays (lnsum=1: 5 floats a stream; 2: 2 floats a thread slot,
        :meth:`_ln_slots`) are taken from the
        ``smem_kib`` budget before any weight rows; a GPU kernel whose budget is too small for
        them (e.g. ``smem_kib=0``) keeps the warp shape."""
        if not self.tuning.lnsum or not any(self.g.by_name[m].op == "layer_norm" for k in self.loop.kernels
                                            for m in k.ops):
            return False
        per_block = self.streams * _LN_SMEM_FLOATS if self.tuning.lnsum == 1 else self._ln_slots() * 2
        size = max(1, self.virtual_blocks) * per_block * 4
        if self.virtual_blocks or not self.coop:  # the simulator: no budget
            return True
        if size > self.smem_left:
            return False
        self.smem_left -= size
        return True

    def _ln_slots(self) -> int:
        """Rows of ``lnsum=2``'s shared partial sums ``lnp``: a slot per thread, at least one a column."""
        return max(self.tuning.threads, self.streams)

    # ------------------------------------------------------------------ units
    def level_unit(self, ks: list[Kernel]) -> int:
        """The unit by which the blocks split this level's work (passes/ownership.py)."""
        return level_unit(self.g, ks, self.loop.reverse, self.recompute)

    # ------------------------------------------------------------------ emit helpers
    def emit(self, line: str, depth: int) -> None:
        self.body.append("    " * depth + line)

    def pointwise(self, k: Kernel, uL: int, depth: int) -> None:
        norms = [self.g.by_name[m] for m in k.ops if self.g.by_name[m].op == "layer_norm"]
        # gain and bias gradients summed after the loop (``Loop.post_sums``, passes/param_grad_sums.py)
        deferred = [n.name for n in norms if n.name in self.loop.post_sums]
        norms = [n for n in norms if n.name not in deferred]
        grads = [self.names.param_grad(p) for n in norms for p in n.params]
        # the gain and bias gradients summed in shared memory (``lnsum=1``; not in simulated
        # blocks, which share one block's memory; not for a parameter two layer norms share; only
        # while what is left of the smem_kib budget holds them, else global atomics)
        local = bool(self.loop.reverse and norms and self.ln_smem and not self.virtual_blocks
                     and not any(local_grad(q) in self.local_grads for q in grads) and len(set(grads)) == len(grads))
        if local:
            u = kernel_unit(self.g, self.recompute.get(k.ops[0]) or k.ops)
            size = sum(-(-uL // self.nblocks) * (u // uL) * (n.size // u) * 4 * len(n.params) for n in norms)
            local = size <= self.smem_left or not self.coop  # the simulator has no budget
            self.smem_left -= size if local and self.coop else 0
        plan = self.prefetch_plans.get(k.name)
        e = self._pointwise_emitter(k, local, deferred, plan.buffers if plan else ())
        src = e.backward() if self.loop.reverse else e.forward()
        fn = f"{k.name}_{'bwd' if self.loop.reverse else 'fwd'}"
        if plan:
            # the loads the plan's _load call passes buffers for (its kernel's, made the same way)
            assert tuple(e.early_buffers()) == plan.args, (k.name, e.early_buffers(), plan.args)
            src += "\n\n" + e.prefetch_functions(fn)
        reps = e.u // uL
        if local:
            for n in norms:
                for p in n.params:
                    q = self.names.param_grad(p)
                    self.local_grads[local_grad(q)] = (q, uL, reps, e.u, e.chunks(n.name))
                    self.buffers.add(q)
        if self.tuning.fast:
            src = src.replace("@cuda.jit(device=True, inline=True)", "@cuda.jit(device=True, inline=True, fastmath=True)")
        self.device_fns.append(src)
        self.buffers |= e.buffers
        args = ", ".join(sorted(e.buffers, key=buffer_key))
        self.emit(f"# {k.name}: pointwise, {len(k.ops)} ops, unit {e.u}", depth)
        self.emit(f"item = tid", depth)
        self.emit(f"while item < S * nj * {reps}:", depth)
        self.emit(f"s = item // (nj * {reps})", depth + 1)
        self.emit(f"rem = item - s * (nj * {reps})", depth + 1)
        for line in owned_row("rem", "j", reps, uL):
            self.emit(line, depth + 1)
        call = f"(t, s, j, {'rem, ' if local else ''}{args})"
        if plan:  # the thread's first item: its loads were issued a level early (:meth:`_prefetch`)
            self.emit("if item == tid:", depth + 1)
            self.emit(f"{fn}_pre{call.replace('(t, s, j, ', f'(t, s, j, pf_{k.name}, ')}", depth + 2)
            self.emit("else:", depth + 1)
            self.emit(f"{fn}{call}", depth + 2)
        else:
            self.emit(f"{fn}{call}", depth + 1)
        self.emit("item += bdim", depth + 1)

    def _pointwise_emitter(self, k: Kernel, local: bool = False, deferred=(), prefetch=()) -> PointwiseEmitter:
        return PointwiseEmitter(self.g, k.name, k.ops, gradient_inputs(k) if self.loop.reverse else k.writes,
                                self.recompute.get(k.ops[0]) if self.loop.reverse else None, local_param_grads=local,
                                deferred=deferred, prefetch=prefetch, flagged=self.flag_buffers)

    # ------------------------------------------------------------------ early loads (``prefetch``)
    def _kernel_writes(self, k: Kernel) -> set[str]:
        """The buffers kernel ``k`` stores to in this loop (a GEMM: its outputs, or in the backward
        the gradient of its input; a pointwise kernel: what its device function stores)."""
        if k.name not in self._writes:
            nodes = [self.g.by_name[m] for m in k.ops]
            if k.kind != "gemm":
                self._writes[k.name] = self._emitted(k).written
            elif self.loop.reverse:
                self._writes[k.name] = {self.names.grad(nodes[0].args[0].node)}
            else:
                self._writes[k.name] = {self.names.value(n.name) for n in nodes}
        return self._writes[k.name]

    def _emitted(self, k: Kernel, prefetch=()) -> PointwiseEmitter:
        """A pointwise emitter of ``k`` that has made its device function (to read what it loads
        and stores; the loop's own emitter is made in :meth:`pointwise`)."""
        e = self._pointwise_emitter(k, deferred=[m for m in k.ops if m in self.loop.post_sums], prefetch=prefetch)
        e.backward() if self.loop.reverse else e.forward()
        return e

    def _prefetch_plans(self) -> dict[str, Prefetch]:
        """Which pointwise kernels issue some of their loads a level early (``prefetch=1``), and
        where. A kernel K with other kernels before it in its level issues them at the start of
        its level (the forward LSTM: the input projection and the old cell state load while the
        block computes its gate rows); the first kernel of its level at the start of the previous
        level with kernels (the backward LSTM: the forward values and old gradients of timestep
        t-1 during timestep t's product), where a grid sync comes right before that level. The
        early loads are those of buffers no kernel between that point and K stores to (each
        thread's first item, :meth:`pointwise`); the others stay where they were. Only kernels
        whose loads left in place (through PointwiseEmitter.load) are all of products (GEMM
        outputs) get a plan, and no kernel with a layer-norm op: a kernel that would still wait on
        another pointwise kernel's output (peephole_lstm's gates, after the peephole products) or
        on its layer norm's row sums gains nothing and was slower with early loads (S=1 fwd+bwd
        on the H200, bench/results/h200-20261201-prefetch-sweep-*.json: peephole_lstm 1.269 -> 1.334 ms,
        layernorm_lstm 2.506 -> 2.720). A backward
        kernel that only recomputes a forward layer norm keeps its moments' reads in place (the
        forward's row sums and shift, which the backward never writes) and may get a plan."""
        if not self.tuning.prefetch:
            return {}
        loop = self.loop
        levels = [lv for lv in range(1, loop.levels + 1) if any(k.level == lv for k in loop.kernels)]
        at_level = {lv: [(offset, k) for offset, _ in loop.stages for k in loop.at(lv, offset)] for lv in levels}
        plans = {}
        for lv in levels:
            for pos, (offset, k) in enumerate(at_level[lv]):
                if k.kind == "gemm":
                    continue
                if pos:
                    where, shift, between = lv, 0, [x for _, x in at_level[lv][:pos]]
                else:
                    i = levels.index(lv)
                    where = levels[i - 1]
                    before = where - 1 if where > 1 else loop.levels  # the level ending right before it
                    # (a loop without grid syncs, e.g. with flags: no other block touches K's elements)
                    if where == lv or before not in loop.sync_after and loop.sync_after:
                        continue
                    shift, between = int(where > lv), [x for _, x in at_level[where]]
                if any(self.g.by_name[m].op == "layer_norm" for m in k.ops):
                    continue  # its row moments' loads stay where they are (layernorm_lstm S=1 slower)
                written = set().union(*(self._kernel_writes(x) for x in between))
                products = set().union(*(self._kernel_writes(x) for x in between if x.kind == "gemm"))
                early = frozenset(self._emitted(k).buffers - written)
                e = self._emitted(k, early)
                late = {buf for line, buf in e.loaded.items() if line not in e.early}
                if e.early and late <= products:  # else it waits on another kernel's output anyway
                    plans[k.name] = Prefetch(k.name, where, shift, offset, early, tuple(e.early_buffers()),
                                             self.level_unit([x for _, x in at_level[lv]]), e.u, loop.reverse)
        return plans

    def _prefetch(self, plan: Prefetch, tick: str, depth: int) -> None:
        """Issue ``plan``'s early loads for its kernel's run at tick ``tick`` (an expression): thread
        tid's first item (s, j) of that kernel's level, into the tuple ``pf_<kernel>``."""
        e = lambda line, d=0: self.emit(line, depth + d)
        uK, reps = plan.level_unit, plan.unit // plan.level_unit
        step = self._timestep(plan.offset).replace("tick", f"({tick})")
        e(f"# {plan.fn}: the early loads of its run at tick {tick}")
        e(f"pj0 = (bid * {uK}) // nblocks")
        e(f"pnj = ((bid + 1) * {uK}) // nblocks - pj0")
        e(f"tn = {step}")
        e(f"if tn >= 0 and tn < T and tid < S * pnj * {reps}:")
        e(f"ps = tid // (pnj * {reps})", 1)  # as in :meth:`pointwise`, for item = tid
        e(f"prem = tid - ps * (pnj * {reps})", 1)
        for line in owned_row("prem", "pj", reps, uK, jj="pjj", j0="pj0"):
            e(line, 1)
        e(f"pf_{plan.kernel} = {plan.fn}_load(tn, ps, pj, {', '.join(plan.args)})", 1)

    def gemm(self, k: Kernel, uL: int, depth: int) -> None:
        """One GEMM kernel's owned rows: forward y[r] = W[r,:] . x (+ b[r]); backward
        dx[c] += sum_m W_m[:,c] . g_m, reading the transposed weights ``T<k>`` (kept in sync by
        the runtime) so that lanes read consecutive addresses."""
        nodes = [self.g.by_name[m] for m in k.ops]
        ref = nodes[0].args[0]
        x = ref.node
        K = self.g.by_name[x].size
        xrow = f"{self.names.depth(x) - ref.delay} + t"
        if not self.loop.reverse:
            for n in nodes:
                w = self.names.param(n.params[0])
                b = self.names.param(n.params[1]) if len(n.params) == 2 else None
                out, X = self.names.value(n.name), self.names.value(x)
                self.buffers |= {w, out, X} | ({b} if b else set())
                self.emit(f"# {k.name}: {n.name} = {n.params[0]} @ {ref}{' + bias' if b else ''}", depth)
                reps = n.size // uL
                self._rows(depth, reps, uL, K, [(self._weight(w, reps, uL, K), f"{X}[{xrow}, {{s}}, {{k}}]",
                                                 self._flag(X, xrow))],
                           f"{out}[{self.names.depth(n.name)} + t, {{s}}, {{r}}] = {{acc}}" + (f" + {b}[{{r}}]" if b else ""))
        else:
            GX, terms = self.names.grad(x), []
            self.buffers.add(GX)
            R = nodes[0].size
            if any(n.size != R for n in nodes):
                raise NotImplementedError("merged GEMM members of different sizes in a backward loop")
            for n in nodes:
                wt = "T" + self.names.param(n.params[0])[1:]
                gy = self.names.grad(n.name)
                self.buffers |= {wt, gy}
                self.transposed.add(n.params[0])
                row = f"{self.names.depth(n.name)} + t"
                terms.append((self._weight(wt, K // uL, uL, R), f"{gy}[{row}, {{s}}, {{k}}]", self._flag(gy, row)))
            self.emit(f"# {k.name}: d.{ref} += sum W^T d.({', '.join(k.ops)})", depth)
            self._rows(depth, K // uL, uL, R, terms, f"{GX}[{xrow}, {{s}}, {{r}}] += {{acc}}")

    def _flag(self, buf: str, row: str) -> tuple[str, str] | None:
        """(flag buffer, row expression) of a GEMM's vector ``buf`` read at ``row`` when the loop
        flags it (passes/flag_exchange.py), else None."""
        return (self.flag_buffers[buf], row) if buf in self.flag_buffers else None

    def layer_norm_sums(self, name: str, uL: int, depth: int) -> None:
        """The reduction phase of layer norm ``name`` at timestep t (see the module docstring):
        this block's partial row sums per column, added into the (t, s, 2) sums buffer, by one
        of two code shapes (``lnsum`` of codegen/tuning.py): :meth:`_ln_sums_by_warp` or
        :meth:`_ln_sums_in_smem`."""
        n = self.g.by_name[name]
        X = self.names.value(n.args[0].node)
        if self.loop.reverse:
            out = self.names.ln_grad_sums(name)
            self.buffers |= {X, self.names.param(n.params[0]), self.names.grad(name), self.names.ln_sums(name)}
            what = "sum(g * gain), sum(g * gain * xhat)"
        else:
            out = self.names.ln_sums(name)
            self.buffers.add(X)
            what = "sum(x - K), sum((x - K)^2), K = x[t-1, s, 0]"
        self.buffers.add(out)
        self.ln_zero.append(out)
        self.emit(f"# {name}: layer norm row sums of the owned elements ({what})", depth)
        shape = {1: self._ln_sums_in_smem, 2: self._ln_sums_in_registers}.get(self.tuning.lnsum) if self.ln_smem else None
        (shape or self._ln_sums_by_warp)(n, out, uL, depth)

    def _ln_terms(self, n, s: str, place: str, reps: int, uL: int, column) -> tuple[list[str], str, str]:
        """(lines, first term, second term) of the block's owned element at ``place`` (its row r:
        :func:`owned_row`) of column s: forward x - K and its square, backward g * gain and
        g * gain * xhat; ``column(v)`` reads the column's value v (K, or the moments mu, m, rs)."""
        r = "r"
        X, row = self.names.value(n.args[0].node), f"{ln_row(self.names, n.args[0])} + t"
        index = owned_row(place, r, reps, uL)
        if not self.loop.reverse:
            return index + [f"d = {X}[{row}, {s}, {r}] - {column('k')}"], "d", "d * d"
        G, P = self.names.grad(n.name), self.names.param(n.params[0])
        return index + [f"xh = (({X}[{row}, {s}, {r}] - {column('mu')}) - {column('m')}) * {column('rs')}",
                f"gg = {G}[{self.names.depth(n.name)} + t, {s}, {r}] * {P}[{r}]"], "gg", "gg * xh"

    def _ln_column_values(self, n, emit) -> list[tuple[str, str]]:
        """Emit the per-column values the sums need at column ``s``; returns (name, local) pairs:
        the shift K (forward) or the moments mu, m, rs (backward, from the forward sums)."""
        if not self.loop.reverse:
            emit(f"kx = {ln_shift(self.names, n.args[0])}")
            return [("k", "kx")]
        tag = str(self.names.idx(n.name))
        ln_moments(self.names, n, emit, tag)
        return [("mu", f"mu{tag}"), ("m", f"m{tag}"), ("rs", f"rs{tag}")]

    def _ln_sums_by_warp(self, n, out: str, uL: int, depth: int) -> None:
        """A warp per column (a thread in the simulator), lanes over the block's elements of the
        row, shuffles, one atomic add per sum: few loads in flight when S is large (the columns
        run one after another in each warp)."""
        reps = n.size // uL
        e = lambda line, d=0: self.emit(line, depth + d)
        start, step, estart, estep = ("warp", "nwarps", "lane", 32) if self.coop else ("tid", "bdim", "0", 1)
        e(f"item = {start}")
        e("while item < S:")
        e("s = item", 1)
        values = dict(self._ln_column_values(n, lambda line: e(line, 1)))
        e("p1 = float32(0.0)", 1)
        e("p2 = float32(0.0)", 1)
        e(f"el = {estart}", 1)
        e(f"while el < nj * {reps}:", 1)
        lines, a, b = self._ln_terms(n, "s", "el", reps, uL, values.get)
        for line in lines:
            e(line, 2)
        e(f"p1 += {a}", 2)
        e(f"p2 += {b}", 2)
        e(f"el += {estep}", 2)
        if self.coop:
            self._warp_sum(["p1", "p2"], depth + 1)
        e(f"if {'lane == 0 and ' if self.coop else ''}nj > 0:", 1)
        e(f"cuda.atomic.add({out}, (t, s, 0), p1)", 2)
        e(f"cuda.atomic.add({out}, (t, s, 1), p2)", 2)
        e(f"item += {step}", 1)

    def _ln_sums_in_smem(self, n, out: str, uL: int, depth: int) -> None:
        """Every thread over (element, column) pairs, columns fastest (the lanes of a warp add into
        different shared-memory sums when S >= 32), LN_SUM_UNROLL pairs' loads issued before their
        adds; the block's per-column values (shift or moments) and partial sums live in shared
        memory (``lnv``, ``lns``), and one thread per column adds the block's sums into the global
        buffer. Three block barriers; the loads of a phase are about one round trip."""
        reps, U = n.size // uL, LN_SUM_UNROLL
        vb = "bid, " if self.virtual_blocks else ""  # simulated blocks share the one real block's memory
        e = lambda line, d=0: self.emit(line, depth + d)
        e("c = tid")
        e("while c < S:")
        e("s = c", 1)
        values = self._ln_column_values(n, lambda line: e(line, 1))
        for i, (_, local) in enumerate(values):
            e(f"lnv[{vb}c, {i}] = {local}", 1)
        e(f"lns[{vb}c, 0] = float32(0.0)", 1)
        e(f"lns[{vb}c, 1] = float32(0.0)", 1)
        e("c += bdim", 1)
        e("cuda.syncthreads()")
        e(f"npairs = S * nj * {reps}")
        e("item = tid")
        e("while item < npairs:")
        index = {name: i for i, (name, _) in enumerate(values)}
        for u in range(U):
            e(f"it = min(item + {u} * bdim, npairs - 1)", 1)
            e(f"s{u} = it % S", 1)
            e(f"el = it // S", 1)
            lines, a, b = self._ln_terms(n, f"s{u}", "el", reps, uL, lambda v, u=u: f"lnv[{vb}s{u}, {index[v]}]")
            for line in lines:
                e(line, 1)
            e(f"a{u} = {a}", 1)
            e(f"b{u} = {b}", 1)
        for u in range(U):
            e(f"if item + {u} * bdim < npairs:", 1)
            e(f"cuda.atomic.add(lns, ({vb}s{u}, 0), a{u})", 2)
            e(f"cuda.atomic.add(lns, ({vb}s{u}, 1), b{u})", 2)
        e(f"item += {U} * bdim", 1)
        e("cuda.syncthreads()")
        e("c = tid")
        e("while c < S and nj > 0:")
        e(f"cuda.atomic.add({out}, (t, c, 0), lns[{vb}c, 0])", 1)
        e(f"cuda.atomic.add({out}, (t, c, 1), lns[{vb}c, 1])", 1)
        e("c += bdim", 1)
        e("cuda.syncthreads()  # lns and lnv are reused by the next layer norm")

    def _ln_sums_in_registers(self, n, out: str, uL: int, depth: int) -> None:
        """Each thread keeps one column s = v % S (R = bdim // S threads a column, at least 1; a
        thread serves slots v = tid, tid + bdim, ... < S * R) and adds that column's elements
        el = v // S, + R, ... in registers (LN_SUM_UNROLL elements' loads in flight), reading the
        column's shift or moments itself; the R partial sums of a column meet in shared memory
        (``lnp``, no atomics: a slot per thread) and one thread per column adds them into the
        global buffer. Two block barriers."""
        reps, U = n.size // uL, LN_SUM_UNROLL
        vb = "bid, " if self.virtual_blocks else ""
        e = lambda line, d=0: self.emit(line, depth + d)
        e("nrep = max(1, bdim // S)  # threads a column")
        e(f"nel = nj * {reps}")
        e("v = tid")
        e("while v < S * nrep:")
        e("s = v % S", 1)
        values = dict(self._ln_column_values(n, lambda line: e(line, 1)))
        e("p1 = float32(0.0)", 1)
        e("p2 = float32(0.0)", 1)
        e("el = v // S", 1)
        for unroll, cond in ((U, f"el + {U - 1} * nrep < nel"), (1, "el < nel")):
            e(f"while {cond}:", 1)
            for u in range(unroll):
                lines, a, b = self._ln_terms(n, "s", f"(el + {u} * nrep)" if u else "el", reps, uL, values.get)
                for line in lines:
                    e(line, 2)
                e(f"a{u} = {a}", 2)
                e(f"b{u} = {b}", 2)
            e("p1 += " + " + ".join(f"a{u}" for u in range(unroll)), 2)
            e("p2 += " + " + ".join(f"b{u}" for u in range(unroll)), 2)
            e(f"el += {unroll} * nrep", 2)
        e(f"lnp[{vb}v, 0] = p1", 1)
        e(f"lnp[{vb}v, 1] = p2", 1)
        e("v += bdim", 1)
        e("cuda.syncthreads()")
        e("c = tid")
        e("while c < S and nj > 0:")
        e(f"q1 = lnp[{vb}c, 0]", 1)
        e(f"q2 = lnp[{vb}c, 1]", 1)
        e("v = c + S", 1)
        e("while v < S * nrep:", 1)
        e(f"q1 += lnp[{vb}v, 0]", 2)
        e(f"q2 += lnp[{vb}v, 1]", 2)
        e("v += S", 2)
        e(f"cuda.atomic.add({out}, (t, c, 0), q1)", 1)
        e(f"cuda.atomic.add({out}, (t, c, 1), q2)", 1)
        e("c += bdim", 1)
        e("cuda.syncthreads()  # lnp is reused by the next layer norm")

    def _warp_sum(self, names: list[str], depth: int) -> None:
        """Tree-reduce the per-lane values ``names`` across the warp with shuffles (lane 0 ends
        with the sums; codegen/warp_reduce.py)."""
        for line in tree_reduce(names):
            self.emit(line, depth)

    def _weight(self, w: str, reps: int, uL: int, inner: int) -> str:
        """The read of weight buffer ``w`` at (owned row {r}, column {k}): from a shared-memory copy of
        the block's rows when they fit in what is left of ``tuning.smem_kib``, else from global
        memory. The copy's row index is the row's place {rem} (= jj * reps + rep) among the block's, filled once at
        kernel start by the prologue."""
        key = (w, reps, uL, inner)
        if key in self.smem:
            return f"{self.smem[key]}[{{rem}}, {{k}}]"
        rows = -(-uL // self.nblocks) * reps
        if rows * inner * 4 > self.smem_left:
            return f"{w}[{{r}}, {{k}}]"
        self.smem_left -= rows * inner * 4
        sw = self.smem[key] = f"sw{len(self.smem)}"
        p = lambda line, d=0: self.prologue.append("    " * (1 + d) + line)
        p(f"# {w}: the block's {reps} x {-(-uL // self.nblocks)} owned rows into shared memory")
        p(f"{sw} = cuda.shared.array(({rows}, {inner}), float32)")
        p(f"j0 = (bid * {uL}) // nblocks")
        p(f"nj = ((bid + 1) * {uL}) // nblocks - j0")
        p("i = tid")
        p(f"while i < nj * {reps} * {inner}:")
        p(f"lr = i // {inner}", 1)
        p(f"kk = i - lr * {inner}", 1)
        p(f"jj = lr // {reps}", 1)
        p(f"{sw}[lr, kk] = {w}[j0 + jj + (lr - jj * {reps}) * {uL}, kk]", 1)
        p("i += bdim", 1)
        self.buffers.add(w)
        return f"{sw}[{{rem}}, {{k}}]"

    def _item_shape(self, block_rows: int) -> tuple[int, int]:
        """(streams, rows) of a GEMM work item when a block owns at most ``block_rows`` rows: up to
        ``tuning.rows`` rows (no more than the block has), then up to ``tuning.cols`` streams (no
        more than S) within GEMM_ACCUMULATORS partial sums a lane. E.g. the H=512 LSTM on 132
        blocks at S=64 with rows=8, cols=8: forward 16 rows a block -> 8 rows x 4 streams,
        backward 4 rows -> 4 x 8; with the defaults from S=2 (rows=8, cols=4) 8 x 4 and 4 x 4."""
        RB = max(1, min(self.tuning.rows, block_rows))
        return max(1, min(self.stream_block, GEMM_ACCUMULATORS // RB)), RB

    def _ksplit(self, items: int, parts_max: int, sums: int) -> int:
        """How many workers (warps on the GPU, threads in the simulator) share one GEMM work item
        by splitting its inner dimension (``ksplit`` of codegen/tuning.py): as many as the block's
        idle workers allow when it has fewer work items (``items``, at most) than workers, no more
        than ``tuning.ksplit`` nor ``parts_max`` (each part at least one chunk of the inner
        dimension), and 1 when the partial sums' shared array (items x parts x ``sums`` floats)
        does not fit in what is left of the ``smem_kib`` budget (or in simulated blocks)."""
        workers = self.tuning.threads // 32 if self.coop else SIM_THREADS
        parts = max(1, min(self.tuning.ksplit, parts_max, workers // max(1, items)))
        if parts == 1 or self.virtual_blocks or items * parts * sums * 4 > self.smem_left:
            return 1
        self.smem_left -= items * parts * sums * 4
        return parts

    def _rows(self, depth: int, reps: int, uL: int, inner: int, terms, store: str) -> None:
        """Loop over the block's owned rows, RB rows x SB streams per work item (a warp on the GPU,
        a thread in the simulator), reducing sum_m W_m[r, kk] * v_m[s, kk] over kk < inner.
        ``terms`` are (weight read with {r}, {rem}, {k}; vector read with {s}, {k}; flag) triples and
        ``store`` the statement with {r}, {s} and {acc}. A term whose flag is (F, row) reads its
        vector from flag buffer F (passes/flag_exchange.py): each trip first loads all its words,
        then polls until every word carries the tag row + 1, and takes the values from them. Register blocking: a weight element is
        loaded once for SB streams and a vector element once for RB rows; the kk loop is unrolled
        ``tuning.unroll`` times (independent loads in flight), with a remainder loop. The column
        index is cast to uint64 (it is never negative): numba wraps a negative signed index (a
        sign test and an add per read, in 64 bits), and that wrap kept ptxas from folding the
        unrolled offsets kk + 32 * u (u < unroll) into the loads' immediates; the cast took the
        S=64 LSTM's inner loop from 417 to 250 SASS instructions a trip (128 of them FFMA;
        bench/results/cpu-20261201-u64-sass-inner-loop.txt).

        Split inner dimension (:meth:`_ksplit`, KS > 1, e.g. the S=1 LSTM backward: 4 rows a
        block, 2 work items for 8 warps): worker kw takes part kw % KS of item kw // KS, i.e. the
        inner chunks part, part + KS, ...; its reduced partial sums go to the shared array
        ``kp<n>`` (one per call site: stages of a level run without a block barrier between them),
        and after a block barrier thread (item, row, stream) adds the item's KS partial sums and
        stores the output."""
        e = lambda line, d=0: self.emit(line, depth + d)
        block_rows = -(-uL // max(1, self.virtual_blocks or self.nblocks)) * reps
        SB, RB = self._item_shape(block_rows)
        start, step, kstep = ("warp", "nwarps", 32) if self.coop else ("tid", "bdim", 1)
        items = -(-self.streams // SB) * -(-block_rows // RB)
        KS = self._ksplit(items, max(1, inner // kstep), RB * SB)
        kp = f"kp{len(self.ksplit_arrays)}"
        if KS > 1:
            self.ksplit_arrays.append((kp, items * KS, RB * SB))
        e(f"nrows = nj * {reps}")
        e(f"ngroups = (nrows + {RB - 1}) // {RB}")
        if KS > 1:
            e(f"kw = {start}")
            e(f"while kw < ((S + {SB - 1}) // {SB}) * ngroups * {KS}:")
            e(f"item = kw // {KS}", 1)
        else:
            e(f"item = {start}")
            e(f"while item < ((S + {SB - 1}) // {SB}) * ngroups:")
        e("sb = item // ngroups", 1)
        e(f"g0 = (item - sb * ngroups) * {RB}", 1)
        for a in range(RB):
            e(f"rem{a} = min(g0 + {a}, nrows - 1)", 1)
            for line in owned_row(f"rem{a}", f"r{a}", reps, uL):
                e(line, 1)
        for i in range(SB):
            e(f"s{i} = min(sb * {SB} + {i}, S - 1)", 1)
            for a in range(RB):
                e(f"acc{a}_{i} = float32(0.0)", 1)
        flagged = [(m, flag) for m, (_, _, flag) in enumerate(terms) if flag]
        for m, (_, row) in flagged:
            e(f"ftag{m} = uint32({row}) + uint32(1)", 1)
        first = "lane" if self.coop else "0"
        e(f"kk = {first}" + (f" + (kw - item * {KS}) * {kstep}" if KS > 1 else ""), 1)
        stride = kstep * KS
        U = max(1, min(self.tuning.unroll, inner // stride))
        loops = [(U, f"kk + {(U - 1) * stride} < {inner}")] + ([(1, f"kk < {inner}")] if U > 1 else [])
        for unroll, cond in loops:
            e(f"while {cond}:", 1)
            kof = lambda u: f"uint64(kk + {u * stride})" if u else "uint64(kk)"
            if flagged:
                self._poll(flagged, unroll, SB, kof, depth + 2)
            for u in range(unroll):
                k = kof(u)
                for m, (w, vec, flag) in enumerate(terms):
                    for a in range(RB):
                        e(f"w{m}_{a}_{u} = {w.format(r=f'r{a}', rem=f'rem{a}', k=k)}", 2)
                    for i in range(SB):
                        e(f"v = {f'flag_value(fw{m}_{i}_{u})' if flag else vec.format(s=f's{i}', k=k)}", 2)
                        for a in range(RB):
                            e(f"acc{a}_{i} += w{m}_{a}_{u} * v", 2)
            e(f"kk += {unroll * stride}", 2)
        accs = [(a, i) for a in range(RB) for i in range(SB)]
        if self.coop and self.tuning.xreduce and len(accs) <= 32:
            lines, index, leader = transpose_reduce([f"acc{a}_{i}" for a, i in accs])
            for line in lines:
                e(line, 1)
            e(f"ix = {index}", 1)
            if KS > 1:
                e(f"if {leader} and ix < {len(accs)}:", 1)
                e(f"{kp}[kw, ix] = red", 2)
            else:
                e(f"aa = ix // {SB}", 1)
                e(f"ii = ix - aa * {SB}", 1)
                e("rsel = r0", 1)
                e("ssel = s0", 1)
                for a in range(1, RB):
                    e(f"rsel = r{a} if aa == {a} else rsel", 1)
                for i in range(1, SB):
                    e(f"ssel = s{i} if ii == {i} else ssel", 1)
                e(f"if {leader} and ix < {len(accs)} and g0 + aa < nrows and sb * {SB} + ii < S:", 1)
                e(store.format(r="rsel", s="ssel", acc="red"), 2)
        else:
            if self.coop:
                for a, i in accs:
                    self._warp_sum([f"acc{a}_{i}"], depth + 1)
            for a, i in accs:
                if KS > 1:
                    put = f"{kp}[kw, {a * SB + i}] = acc{a}_{i}"
                    e(f"if lane == 0: {put}" if self.coop else put, 1)
                    continue
                e(f"{'if lane == 0 and ' if self.coop else 'if '}g0 + {a} < nrows and sb * {SB} + {i} < S:", 1)
                e(store.format(r=f"r{a}", s=f"s{i}", acc=f"acc{a}_{i}"), 2)
        if KS == 1:
            e(f"item += {step}", 1)
            return
        e(f"kw += {step}", 1)
        e("cuda.syncthreads()")
        e("# the items' split partial sums: a thread per (item, row, stream)")
        e("i = tid")
        e(f"while i < ((S + {SB - 1}) // {SB}) * ngroups * {RB * SB}:")
        e(f"item = i // {RB * SB}", 1)
        e(f"c = i - item * {RB * SB}", 1)
        e(f"aa = c // {SB}", 1)
        e("sb = item // ngroups", 1)
        e(f"rem = (item - sb * ngroups) * {RB} + aa", 1)
        e(f"ss = sb * {SB} + c - aa * {SB}", 1)
        e("if rem < nrows and ss < S:", 1)
        for line in owned_row("rem", "rr", reps, uL):
            e(line, 2)
        e(f"acc = {' + '.join(f'{kp}[item * {KS} + {p}, c]' for p in range(KS))}", 2)
        e(store.format(r="rr", s="ss", acc="acc"), 2)
        e("i += bdim", 1)

    def _poll(self, flagged, unroll: int, SB: int, kof, depth: int) -> None:
        """A trip's loads of its flagged vector words ``fw<m>_<i>_<u>`` (term m, stream i, unroll
        step u at column ``kof(u)``), repeated until every tag is ``ftag<m>``; a reader polling
        for too long traps (codegen/flag_exchange.py)."""
        e = lambda line, d=0: self.emit(line, depth + d)
        words = [(m, F, row, i, u) for m, (F, row) in flagged for i in range(SB) for u in range(unroll)]
        e("fspin = 0")
        e("while True:")
        for m, F, row, i, u in words:
            e(f"fw{m}_{i}_{u} = flag_load({F}, {row}, s{i}, {kof(u)})", 1)
        e(f"if ({' | '.join(f'(flag_tag(fw{m}_{i}_{u}) ^ ftag{m})' for m, F, row, i, u in words)}) == 0:", 1)
        e("break", 2)
        e("fspin = flag_wait(fspin)", 1)

    # ------------------------------------------------------------------ kernel
    def _timestep(self, offset: int) -> str:
        """The timestep a stage with ``offset`` works on at ``tick`` (backward: counting down)."""
        return f"T - 1 - (tick - {offset})" if self.loop.reverse else f"tick - {offset}"

    def source(self) -> tuple[str, list[str]]:
        """(device functions + the persistent kernel, its buffer arguments in order). The kernel's
        arguments are (T, S, [BAR if ``self.barrier``], [the flag buffers of ``flag_buffers``],
        *buffers)."""
        loop = self.loop
        top = max(o for o, _ in loop.stages)
        self.prefetch_plans = self._prefetch_plans()
        for k, plan in self.prefetch_plans.items():
            self.buffers |= set(plan.args)
            self.emit(f"pf_{k} = {plan.fn}_load(0, 0, 0, {', '.join(plan.args)})  # (typing: any valid element)", 1)
            if plan.shift:  # issued in the previous tick: the first tick's here
                self._prefetch(plan, "0", 1)
        self.emit(f"for tick in range(T + {top}):", 1)
        for level in range(1, loop.levels + 1):
            ks_level = [k for k in loop.kernels if k.level == level]
            if not ks_level:
                if level in loop.sync_after:
                    self.emit(self.grid_sync, 2)
                continue
            uL = self.level_unit(ks_level)
            self.emit(f"# level {level}: unit {uL}", 2)
            self.emit(f"j0 = (bid * {uL}) // nblocks", 2)
            self.emit(f"nj = ((bid + 1) * {uL}) // nblocks - j0", 2)
            norms = [(offset, m) for offset, _ in loop.stages for k in loop.at(level, offset)
                     for m in k.ops if self.g.by_name[m].op == "layer_norm" and m not in loop.early_sums]
            if norms:
                self.emit("# reduction phase: layer norm row sums, then the level's reduction sync", 2)
                for offset, m in norms:
                    self.emit(f"t = {self._timestep(offset)}", 2)
                    self.emit("if t >= 0 and t < T:", 2)
                    self.layer_norm_sums(m, uL, 3)
                self.emit(self.grid_sync, 2)
            for plan in self.prefetch_plans.values():
                if plan.level == level:
                    self._prefetch(plan, f"tick + {plan.shift}" if plan.shift else "tick", 2)
            for offset, label in loop.stages:
                ks = loop.at(level, offset)
                if not ks:
                    continue
                self.emit(f"# stage {offset}: {label}", 2)
                self.emit(f"t = {self._timestep(offset)}", 2)
                self.emit("if t >= 0 and t < T:", 2)
                for j, k in enumerate(ks):
                    if j:
                        self.emit("cuda.syncthreads()", 3)
                    (self.gemm if k.kind == "gemm" else self.pointwise)(k, uL, 3)
            early = [(offset, m) for offset, _ in loop.stages for k in loop.at(level + 1, offset)
                     for m in k.ops if m in loop.early_sums]
            if early:
                self.emit("cuda.syncthreads()", 2)
                self.emit("# the next level's layer norm row sums, over the elements this block just wrote", 2)
                for offset, m in early:
                    self.emit(f"t = {self._timestep(offset)}", 2)
                    self.emit("if t >= 0 and t < T:", 2)
                    self.layer_norm_sums(m, uL, 3)
            no_sync = "cuda.syncthreads()  # no grid sync needed here"
            self.emit(self.grid_sync if level in loop.sync_after else no_sync, 2)
        flags = list(self.flag_buffers.values())
        args = sorted(self.buffers - set(self.local_grads) - set(flags), key=buffer_key)
        head = [
            self._decorator(),
            f"def {self.name}(T, S, {'BAR, ' if self.barrier else ''}{''.join(f + ', ' for f in flags)}{', '.join(args)}):",
            "    grid = cuda.cg.this_grid()",
        ]
        if self.virtual_blocks:
            head += [f"    bdim = cuda.blockDim.x // {self.virtual_blocks}",
                     "    tid = cuda.threadIdx.x % bdim",
                     "    bid = cuda.threadIdx.x // bdim",
                     f"    nblocks = {self.virtual_blocks}"]
        else:
            head += ["    tid = cuda.threadIdx.x",
                     "    bdim = cuda.blockDim.x",
                     "    bid = cuda.blockIdx.x",
                     "    nblocks = cuda.gridDim.x"]
        if self.coop:
            head += ["    lane = tid % 32", "    warp = tid // 32", "    nwarps = bdim // 32"]
        if self.ln_zero:
            head += ["    # zero the layer-norm row sums (indexed by t: no zeroing inside the time loop)",
                     "    i = bid * bdim + tid",
                     "    while i < T * S * 2:",
                     "        tz = i // (S * 2)",
                     "        sz = (i // 2) % S"]
            head += [f"        {b}[tz, sz, i % 2] = float32(0.0)" for b in dict.fromkeys(self.ln_zero)]
            head += ["        i += nblocks * bdim", "    grid.sync()"]
        vshape = f"{self.virtual_blocks}, " if self.virtual_blocks else ""
        if self.ln_smem and self.tuning.lnsum == 2:
            head += [f"    lnp = cuda.shared.array(({vshape}{self._ln_slots()}, 2), float32)  # per thread: a column's partial sums"]
        elif self.ln_smem:
            shape = vshape + str(self.streams)
            head += [f"    lnv = cuda.shared.array(({shape}, {_LN_SMEM_FLOATS - 2}), float32)  # per column: shift or moments",
                     f"    lns = cuda.shared.array(({shape}, 2), float32)  # per column: the block's two partial sums"]
        head += [f"    {kp} = cuda.shared.array(({n}, {m}), float32)  # split GEMM partial sums"
                 for kp, n, m in self.ksplit_arrays]
        head += self._local_grad_sums_start()
        if self.prologue or self.local_grads:
            head += self.prologue + ["    cuda.syncthreads()"]
        if self.flag_buffers:
            head += self._flag_start()
        elif self.barrier and not self.ln_zero:  # numba launches cooperatively (co-resident blocks)
            head.append("    grid.sync()")  # only kernels that call grid.sync(): codegen/grid_barrier.py
        if self.barrier and self.tuning.barrier == 3:
            head.append("    bphase = barrier_phase(BAR)  # the counter's top bit before the first barrier")
        fns = ([f"from rnngraph.codegen.grid_barrier import {BARRIER_FUNCTIONS[self.tuning.barrier]} as grid_barrier"
                + (", barrier_phase" if self.tuning.barrier == 3 else "")] if self.barrier else [])
        if self.flag_buffers:
            fns.append("from numba import uint32\n"
                       "from rnngraph.codegen.flag_exchange import flag_load, flag_store, flag_tag, flag_value, flag_wait")
        fns += self.device_fns
        text = "\n\n".join(fns) + "\n\n" + "\n".join(head + self.body + self._local_grad_sums_end()) + "\n"
        return text, args

    def _flag_start(self) -> list[str]:
        """Kernel-start lines of the flag buffers: every word zeroed (no tag: not written yet), but
        a forward loop's rows before the window (the initial state) flagged from the value buffer;
        then a grid sync (no block stores a word of this launch before every block has zeroed)."""
        lines = []
        for X, F in self.flag_buffers.items():
            kind, node = X[0], self.g.nodes[int(X[1:])]
            D, n = (0 if self.loop.reverse else self.names.depth(node.name)), node.size
            lines += [f"    # {F}: the flag words of {X}" + (f", its {D} rows before the window flagged" if D else ""),
                      "    i = bid * bdim + tid",
                      f"    while i < {F}.shape[0] * S * {n}:",
                      f"        fr = i // (S * {n})",
                      f"        fs = (i // {n}) % S",
                      f"        fk = i % {n}"]
            lines += ([f"        if fr < {D}:", f"            flag_store({F}, fr, fs, fk, {X}[fr, fs, fk])", "        else:",
                       f"            {F}[fr, fs, fk] = uint64(0)"] if D else [f"        {F}[fr, fs, fk] = uint64(0)"])
            lines.append("        i += nblocks * bdim")
        return lines + ["    grid.sync()"]

    def _decorator(self) -> str:
        """The kernel's ``@cuda.jit`` line with the tuning's compile options (``fast``; on the GPU
        also ``bounds``: launch bounds of ``threads``, so that the compiler keeps the registers
        within what that many threads may use, and ``carveout``, the shared-memory carveout)."""
        opts = ["fastmath=True"] if self.tuning.fast else []
        if self.coop and self.tuning.bounds:
            opts.append(f"launch_bounds=({self.tuning.threads}, 1)")
        if self.coop and self.tuning.carveout >= 0:
            opts.append(f"shared_memory_carveout={self.tuning.carveout}")
        return f"@cuda.jit({', '.join(opts)})" if opts else "@cuda.jit"

    def _local_grad_sums_start(self) -> list[str]:
        """Kernel-start lines declaring and zeroing the shared-memory gradient sums."""
        lines = []
        for z, (_, uL, reps, _, chunks) in self.local_grads.items():
            size = -(-uL // self.nblocks) * reps * chunks
            lines += [f"    {z} = cuda.shared.array({size}, float32)  # the block's layer-norm parameter gradient sums",
                      "    i = tid", f"    while i < {size}:", f"        {z}[i] = float32(0.0)", "        i += bdim"]
        return lines

    def _local_grad_sums_end(self) -> list[str]:
        """Kernel-end lines adding the block's shared-memory gradient sums (over the window and its
        streams) into the global gradient buffers: one atomic add per owned element."""
        if not self.local_grads:
            return []
        lines = ["    cuda.syncthreads()", "    # the layer norms' gain and bias gradients of the window: the block's sums"]
        for z, (q, uL, reps, u, chunks) in self.local_grads.items():
            lines += [f"    j0 = (bid * {uL}) // nblocks", f"    nj = ((bid + 1) * {uL}) // nblocks - j0",
                      "    i = tid", f"    while i < nj * {reps * chunks}:",
                      f"        rem = i // {chunks}", f"        jj = rem // {reps}",
                      f"        j = j0 + jj + (rem - jj * {reps}) * {uL} + (i - rem * {chunks}) * {u}",
                      f"        cuda.atomic.add({q}, j, {z}[i])", "        i += bdim"]
        return lines
