"""LoopKernelPlan: every decision about one persistent loop kernel, as data, before any text.

:func:`plan_loop_kernel` computes it from the schedule's loop and the ``LoopTuning``, in one
pass over the loop's work in the order the kernel runs it; the emitters (codegen/loop.py and
the ``loop_*.py`` modules it calls) only write what the plan says. What it decides:

- **shared memory** (``smem``, :class:`SmemArray`): what gets an array out of the
  ``tuning.smem_kib`` budget, in this fixed priority:

  1. the layer norms' row-sum arrays (``lnsum=1``: ``lnv`` and ``lns``, 5 floats a stream;
     ``lnsum=2``: ``lnp``, 2 floats a thread slot) -- all or nothing: a GPU kernel whose budget
     cannot hold them keeps the warp shape (``ln_shape`` 0);
  2. then, in the order the kernel runs its work (level, stage, kernel), what each kernel asks
     for while something is left: a GEMM's weight rows (``sw<i>``, the block's owned rows, per
     member in order; a weight two GEMMs read the same way is copied once), then the split
     partial sums of each of its row loops (``kp<i>``; a tiled row loop's ``kt<i>``, which on
     the GPU may go to the dynamic shared memory), and a backward layer-norm kernel's gain
     and bias gradient sums (``Z<i>``, :class:`LocalGradSum`).

  What does not fit is read from global memory (weights), not split (K-split) or summed with
  global atomics (gradients) -- but on the GPU the weight rows first go to the **dynamic** shared
  memory (``dynamic_smem`` bytes, ``tuning.dsmem_kib``; WeightCopy ``offset``). In the simulator (``coop=False``) the layer-norm arrays and the
  gradient sums are not charged; with simulated blocks (``virtual_blocks``) the budget is 0.
- **work items** (:class:`GemmRows`): each GEMM row loop's item shape (rows x streams), its
  K-split and its weight reads; (:class:`PointwiseItem`) each pointwise kernel's device-function
  flavour (shared-memory gradient sums, deferred gain and bias gradients, early loads);
- **early loads** (``prefetch``, codegen/loop_prefetch.py), **flag buffers** (``flag_buffers``),
  the **grid sync** statement, the layer-norm sums zeroed at kernel start (``ln_zero``), the
  weights read transposed (``transposed``);
- **the kernel's arguments** (``args``): (T, S, [BAR], [flag buffers], *buffers), the order
  ``CudaProgram`` and the benchmark tools pass arrays in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph
from ..lengths import length_inputs
from ..ops import is_row_reduction
from ..passes.ownership import kernel_unit, level_unit
from ..schedule import Kernel, Loop
from .loop_items import GemmItem, GemmRows, GemmTerm, LevelPlan, PointwiseItem, RowSums, StagePlan, TileShape
from .loop_pointwise import made, pointwise_emitter
from .loop_prefetch import prefetch_plans
from .loop_tiles import TILE_STEP
from .mad_rows import MAX_ROWS
from .pointwise import STREAM_ORDER, VALID_STREAMS, Names, buffer_key, local_grad
from .tuning import LoopTuning

#: partial sums a lane of a GEMM work item holds at most (rows x streams; the transpose butterfly
#: of codegen/warp_reduce.py reduces up to 32 at once)
GEMM_ACCUMULATORS = 32
#: per-column shared-memory values of ``lnsum=1``: 3 (shift, or the moments mu, m, rs) + 2 sums
LN_SMEM_FLOATS = 5
#: threads a simulated block runs with (codegen/program.py launches the simulator's loop kernels so)
SIM_THREADS = 8
#: a tiled row loop's rows a lane at most, its partial sums a lane at most (rows x streams), and
#: the FMAs of a trip at most (codegen/loop_tiles.py): ``tuning.unroll`` steps of 4 columns a trip,
#: no more than make this many. Static SASS of the H = 512 S = 64 LSTM's loops (ptxas, 128
#: registers), instructions a FMA in the products' trip: as generated 1.34 forward (4 x 4 a lane,
#: two steps) and backward (4 x 2, four steps), no spills; hand variants with one step a trip
#: 1.52 (4 x 4) and 1.34 (4 x 2) (bench/results/cpu-20261205-loop-tiles-sass.txt)
TILE_ROWS, TILE_ACCUMULATORS, TILE_TRIP_FMAS = 4, 16, 128


def mma_row_words(words: int) -> int:
    """The row length (in 4-byte words) of a tensor-core shared weight copy whose rows hold
    ``words`` words: the next length that is 4 mod 8. A fragment load reads word (row g, column
    c + t) in lane 4g + t (g < 8, t < 4); with a row length W = 4 mod 8 the eight values g W mod 32
    are eight distinct multiples of 4, so the 32 lanes hit 32 distinct banks."""
    return words + (4 - words) % 8


#: columns (the inner dimension) one ``mma.sync`` step multiplies, by precision (codegen/ptx.py)
MMA_K = {"tf32": 8, "bf16": 16}
#: k-steps a tensor-core loop trip at most (``tuning.unroll`` bounds it too): a trip loads every
#: step's fragments before its products, 6 to 10 registers a step
MMA_UNROLL = 4
#: rows and streams of one ``mma.sync`` accumulator tile (m16n8)
MMA_ROWS, MMA_STREAMS = 16, 8
#: columns of a chunk of four k-steps whose vectors a lane reads with 16-byte loads (32 words:
#: TF32 one column a word, bf16 two): codegen/loop_mma.py
MMA_CHUNK = {"tf32": 32, "bf16": 64}


def chunk_word_order(o: str) -> str:
    """The expression (over the integer expression ``o``) of where word ``o`` of a row, counted in
    its chunk of 32 (its low 5 bits), is stored within that chunk in a tensor-core weight copy
    whose rows the chunked loops read (codegen/loop_mma.py; the prologue emits it,
    codegen/loop_prologue.py): a lane t reads the vector's words 4t..4t+3 and 16+4t..16+4t+3 of
    the chunk with two 16-byte loads and k-step j takes the j-th of each, so word 4t+j sits where
    k-step j's fragment load reads lane t's first word (8j+t), word 16+4t+j where it reads the
    second (8j+4+t)."""
    return f"((({o}) & 3) << 3) + (((({o}) >> 4) & 1) << 2) + ((({o}) >> 2) & 3)"
#: knob ``barrier`` (codegen/tuning.py) -> the function of codegen/grid_barrier.py (GPU only) a
#: generated module imports as ``grid_barrier``
BARRIER_FUNCTIONS = {1: "grid_barrier", 2: "grid_barrier_backoff", 3: "grid_barrier_red"}
#: the same for a barrier among a stream group's blocks (LoopTuning ``groupbar``), imported as ``group_barrier``
GROUP_BARRIER_FUNCTIONS = {1: "group_barrier", 2: "group_barrier_backoff", 3: "group_barrier_red"}
#: the inline barriers' counters a loop kernel takes (BAR): one a stream group, at most LoopTuning's 8
BARRIER_COUNTERS = 8


@dataclass(frozen=True)
class SmemArray:
    """One shared-memory array of the kernel: its variable ``name``, ``shape`` (float32), the
    bytes ``charged`` to the ``smem_kib`` budget (0 where the simulator does not count it) and
    ``use``: "layer-norm sums", "weight rows", "split partial sums", "tile partial sums" or
    "layer-norm gradients"."""

    name: str
    shape: tuple
    charged: int
    use: str


@dataclass(frozen=True)
class WeightCopy:
    """Weight ``weight``'s rows owned by a block (``reps`` rows a unit of the level's ``unit``,
    ``inner`` columns) copied into the shared array ``array`` of ``rows`` rows at kernel start.
    ``convert`` ("" for a plain float32 copy): the tensor-core operand format the copy is stored
    in -- "tf32", float32 values rounded with ``cvt.rna``; "bf16", uint32 words of two bf16 (columns
    2j, 2j + 1; a missing last column zero) -- its rows ``cols`` words long (``inner`` for a plain
    copy; :func:`mma_row_words` of the words for a converted one, so that an ``mma`` fragment load
    is free of bank conflicts: codegen/loop_mma.py). ``permuted``: each whole chunk of 32 words
    stored in :func:`chunk_word_order` (for a ``chunked`` row loop), the rest in order. ``offset``:
    the copy's first 4-byte word in the kernel's dynamic shared memory (a copy the static budget
    could not hold; LoopKernelPlan ``dynamic_smem``), -1 for an array of its own."""

    array: str
    weight: str
    reps: int
    unit: int
    inner: int
    rows: int
    convert: str
    cols: int
    permuted: bool = False
    offset: int = -1

    def at(self, row: str, col: str) -> str:
        """The copy's element (``row``, ``col``): a 2-D subscript, or for a view of the dynamic
        shared memory (a 1-D slice, indexed flat as uint64 so that the loads stay ``ld.shared``:
        a 2-D ``reshape`` of it compiled to generic loads)."""
        if self.offset < 0:
            return f"{self.array}[{row}, {col}]"
        return f"{self.array}[uint64({row}) * uint64({self.cols}) + uint64({col})]"


@dataclass(frozen=True)
class LocalGradSum:
    """A layer norm's gain or bias gradient ``grad`` (Q<i>) summed over the window in the block's
    shared array ``array`` (Z<i>; ``lnsum=1|2``): ``unit`` the level's unit, ``reps`` its rows a
    unit, ``kernel_unit`` and ``chunks`` the pointwise kernel's."""

    array: str
    grad: str
    unit: int
    reps: int
    kernel_unit: int
    chunks: int


@dataclass(frozen=True)
class LoopKernelPlan:
    """Everything :func:`plan_loop_kernel` decided about one persistent loop kernel (see the module
    docstring). ``barrier``: the inline barrier's variant (``tuning.barrier``), 0 for numba's grid
    sync; ``ln_shape``: the row sums' code shape (``lnsum``, 0 also when its arrays did not fit);
    ``smem_left``: the bytes of the budget nothing took; ``loop``: the schedule's loop it plans.
    ``knockout`` (bench/loop_profile.py's timing variants only; empty for every real kernel): the
    constructs the emitters leave out: "grid-sync" (the time loop's grid syncs become ``pass``),
    "gemm", "pointwise", "ln-sums" (those sections of each stage body, then ``pass``),
    "vector-loads" (a GEMM's vector load becomes a copy of a weight already in a register).
    ``unwritten``: (buffer, first row) of each forward GEMM output whose padded steps the work
    items skip (GemmRows ``skip``): the launcher zeroes its T rows from there before the kernel,
    so that those steps hold finite values (rnngraph/lengths.py). ``dynamic_smem``: the bytes of
    dynamic shared memory the launch must give each block (the weight copies with an ``offset``
    and the tiled row loops' partial sums with one, TileShape ``offset``; the kernel must be
    allowed them first: codegen/device.py ``allow_dynamic_shared_memory``). ``stream_groups`` (G,
    LoopTuning ``groups``): the blocks (or virtual blocks) in G groups of S / G streams each
    (:func:`stream_groups`)."""

    loop: Loop = field(repr=False, compare=False)
    name: str
    reverse: bool
    coop: bool
    streams: int
    nblocks: int
    virtual_blocks: int
    tuning: LoopTuning
    top: int
    barrier: int
    flag_buffers: tuple
    ln_shape: int
    ln_slots: int
    ln_zero: tuple
    smem: tuple
    smem_left: int
    weight_copies: tuple
    local_grads: tuple
    prefetch: tuple
    levels: tuple
    transposed: frozenset
    buffers: tuple
    knockout: frozenset = frozenset()
    unwritten: tuple = ()
    dynamic_smem: int = 0
    stream_groups: int = 1

    @property
    def args(self) -> tuple:
        """The kernel's parameters in order: T, S, [BAR], [the flag buffers], *buffers."""
        return ("T", "S") + (("BAR",) if self.barrier else ()) + tuple(f for _, f in self.flag_buffers) + self.buffers

    def zeroed(self, shape_of) -> dict[str, tuple]:
        """The arguments the caller passes zeroed, name -> (shape, dtype): BAR, the inline barriers'
        counters, (BARRIER_COUNTERS,) uint32 (the grid's, or one a stream group); each flag
        buffer, uint64 words of its value buffer's shape (``shape_of(value buffer)``). They come
        first in ``args``, after T and S."""
        out = {"BAR": ((BARRIER_COUNTERS,), "uint32")} if self.barrier else {}
        return out | {f: (tuple(shape_of(x)), "uint64") for x, f in self.flag_buffers}

    @property
    def jit_options(self) -> list[str]:
        """The kernel's ``@cuda.jit`` options: ``fast`` (numba's fastmath, the device functions'
        too); on the GPU also ``bounds`` (launch bounds of ``threads``: the compiler keeps the
        registers within what that many threads may use) and ``carveout`` (the shared-memory
        carveout)."""
        t = self.tuning
        return ((["fastmath=True"] if t.fast else []) + ([f"launch_bounds=({t.threads}, 1)"] if self.coop and t.bounds else [])
                + ([f"shared_memory_carveout={t.carveout}"] if self.coop and t.carveout >= 0 else []))

    @property
    def group_barriers(self) -> bool:
        """Whether the levels end with a barrier among a stream group's blocks (LoopTuning
        ``groupbar``, an inline barrier and more than one group), on the group's counter BAR[sgroup]."""
        return bool(self.barrier and self.stream_groups > 1 and self.tuning.groupbar)

    @property
    def grid_sync(self) -> str:
        """The statement of a grid sync between levels."""
        if "grid-sync" in self.knockout:
            return "pass"
        if not self.barrier:
            return "grid.sync()"
        if self.group_barriers:  # the group's blocks (the prologue made bid and nblocks the group's)
            call = "group_barrier(BAR, sgroup, bid, nblocks"
            return f"{call})" if self.barrier < 3 else f"bphase = {call}, bphase)"
        n = f"nblocks * {self.stream_groups}" if self.stream_groups > 1 else "nblocks"  # every block of the grid
        return f"grid_barrier(BAR, {n})" if self.barrier < 3 else f"bphase = grid_barrier(BAR, {n}, bphase)"

    def arrays(self, use: str) -> list[SmemArray]:
        """The shared arrays of one ``use`` (see :class:`SmemArray`), in the order they were taken."""
        return [a for a in self.smem if a.use == use]


class _Budget:
    """What is left of ``smem_kib``, and the arrays taken from it in order."""

    def __init__(self, nbytes: int):
        self.size, self.left, self.arrays = nbytes, nbytes, []

    @property
    def used(self) -> int:
        return self.size - self.left

    def take(self, nbytes: int) -> bool:
        if nbytes > self.left:
            return False
        self.left -= nbytes
        return True


def _walk(loop: Loop):
    """(level, kernels of the level, stages [(offset, label, kernels)]) in the kernel's order."""
    for level in range(1, loop.levels + 1):
        yield level, [k for k in loop.kernels if k.level == level], [(o, lab, loop.at(level, o)) for o, lab in loop.stages]


def plan_loop_kernel(g: Graph, loop: Loop, name: str, coop: bool = True, recompute: dict | None = None,
                     streams: int = 1, nblocks: int = 1, tuning: LoopTuning | None = None,
                     virtual_blocks: int = 0, precision: str = "fp32") -> LoopKernelPlan:
    """The plan of the persistent kernel ``name`` for ``loop`` (``loop.reverse``: backward).

    ``coop``: warp-cooperative GEMM rows with shuffles (the GPU); False for the simulator.
    ``recompute``: node -> ops of the forward kernel computing it (backward pointwise kernels
    recompute it). ``streams``: the S the kernel is launched for. ``nblocks``: the grid (one block
    a multiprocessor; it sizes the shared arrays). ``virtual_blocks`` (simulator tests): one
    block's threads split into this many "blocks". ``precision`` (rnngraph/precision.py): the
    in-loop products' operand format -- on the GPU "tf32" and "bf16" put them on tensor cores
    (GemmRows ``mma``), in the simulator the FFMA loop rounds them (``rounding``). Raises NotImplementedError for a backward GEMM whose merged
    members differ in size."""
    tuning, recompute, vb = tuning or LoopTuning(), recompute or {}, virtual_blocks
    names = Names(g)
    budget = _Budget(0 if vb else tuning.smem_kib * 1024)
    dynamic = _Budget(tuning.dsmem_kib * 1024 if coop and not vb else 0)  # weight rows, tile partial sums
    buffers: set[str] = set()
    flagged = [names.grad(v[2:]) if v.startswith("d.") else names.value(v) for v in loop.flagged]
    flag_buffers = {b: "F" + b[1:] for b in flagged}
    prefetch = prefetch_plans(g, loop, recompute, flag_buffers, tuning)
    G = stream_groups(g, loop, tuning, streams, vb or nblocks, bool(flag_buffers), precision != "fp32", bool(prefetch))
    # a block plans as one of its group's: nblocks / G blocks (or virtual blocks) over S / G streams
    ctx = _Context(g, loop, names, recompute, flag_buffers, tuning, coop, streams // G, nblocks if vb else nblocks // G,
                   vb // G, budget, buffers, precision, dynamic)
    ctx.grouped = G > 1

    # 1. the layer norms' row-sum arrays (a column per stream of the block's group)
    ln_slots = max(tuning.threads, streams // G)
    ln_shape = 0
    if tuning.lnsum and any(is_row_reduction(g.by_name[m].op) for k in loop.kernels for m in k.ops):
        vshape = (vb,) if vb else ()
        shapes = ([("lnv", (streams // G, LN_SMEM_FLOATS - 2)), ("lns", (streams // G, 2))] if tuning.lnsum == 1
                  else [("lnp", (ln_slots, 2))])
        size = max(1, vb) * 4 * sum(a * b for _, (a, b) in shapes)
        free = bool(vb or not coop)  # the simulator: no budget
        if free or budget.take(size):
            ln_shape = tuning.lnsum
            budget.arrays += [SmemArray(n, vshape + s, 0 if free else max(1, vb) * 4 * s[0] * s[1], "layer-norm sums")
                              for n, s in shapes]

    # 2. the work, in the kernel's order
    ctx.ln_shape = ln_shape
    for p in prefetch.values():
        buffers.update(p.args)
    levels, ln_zero = [], []
    for level, ks_level, stages in _walk(loop):
        if not ks_level:
            levels.append(LevelPlan(level, 0, (), (), (), (), level in loop.sync_after))
            continue
        uL = level_unit(g, ks_level, loop.reverse, recompute)
        reduction = tuple(ctx.row_sums(o, m) for o, _, ks in stages for k in ks for m in k.ops
                          if is_row_reduction(g.by_name[m].op) and m not in loop.early_sums)
        planned = tuple(StagePlan(o, label, tuple(ctx.gemm(k, uL) if k.kind == "gemm" else ctx.pointwise(k, uL, prefetch)
                                                  for k in ks))
                        for o, label, ks in stages if ks)
        early = tuple(ctx.row_sums(o, m) for o, _ in loop.stages for k in loop.at(level + 1, o)
                      for m in k.ops if m in loop.early_sums)
        ln_zero += [r.out for r in reduction + early]
        levels.append(LevelPlan(level, uL, reduction, tuple(k for k, p in prefetch.items() if p.level == level),
                                planned, early, level in loop.sync_after))
    if G > 1 and (ctx.global_weights and coop and not vb or ctx.local_grads):
        # a GPU block's G-fold rows past its shared memory: every block would read them from L2
        # each timestep, more than the group's vectors save (see stream_groups; the simulator
        # keeps no shared copies); or layer-norm parameter gradients summed in the loop (their
        # shared sums under groups are neither simulated nor measured: one group, as before)
        return plan_loop_kernel(g, loop, name, coop, recompute, streams, nblocks, tuning.replace(groups=1, fwdgroups=0),
                                virtual_blocks, precision)
    local = {z.array for z in ctx.local_grads}
    return LoopKernelPlan(
        loop=loop, name=name, reverse=loop.reverse, coop=coop, streams=streams, nblocks=nblocks, virtual_blocks=vb,
        tuning=tuning, top=max(o for o, _ in loop.stages),
        barrier=tuning.barrier if coop and tuning.barrier and not vb else 0,
        flag_buffers=tuple(flag_buffers.items()), ln_shape=ln_shape, ln_slots=ln_slots,
        ln_zero=tuple(dict.fromkeys(ln_zero)), smem=tuple(budget.arrays), smem_left=budget.left,
        weight_copies=tuple(ctx.copies.values()), local_grads=tuple(ctx.local_grads), prefetch=tuple(prefetch.items()),
        levels=tuple(levels), transposed=frozenset(ctx.transposed), unwritten=tuple(ctx.unwritten.items()),
        buffers=tuple(sorted(buffers - local - set(flag_buffers.values()), key=buffer_key)), dynamic_smem=dynamic.used,
        stream_groups=G)


def stream_groups(g: Graph, loop: Loop, tuning: LoopTuning, streams: int, blocks: int, flagged: bool,
                  reduced: bool, early: bool) -> int:
    """G, the stream groups of a loop kernel over ``streams`` streams on ``blocks`` blocks (or
    virtual blocks): ``tuning.groups`` (``tuning.fwdgroups`` where set for a forward loop without
    layer norms) where S
    and the grid divide by it and the loop has no layer norm (their row sums run over a column's
    blocks), no ``flagged`` values, no products in a
    ``reduced`` precision (tensor cores, or their simulator stand-in), no ``early`` loads and no
    lengths (the stream order); else 1. With ``tuning.lngroups`` layer norms are allowed: a group's
    blocks own whole rows of its streams. (:func:`plan_loop_kernel` then plans with 1 where a
    block's G times the rows do not fit its shared memory, or layer-norm parameter gradients are
    summed in the loop.) Block b then works for group b // (blocks / G) on streams
    [g S / G, (g + 1) S / G) as block b % (blocks / G) of its group (codegen/loop_prologue.py)."""
    norms = any(is_row_reduction(g.by_name[m].op) for k in loop.kernels for m in k.ops)
    G = tuning.fwdgroups if tuning.fwdgroups and not loop.reverse and not norms else tuning.groups
    if G == 1 or streams % G or blocks % G or flagged or reduced or early or length_inputs(g):
        return 1
    return 1 if norms and not tuning.lngroups else G


class _Context:
    """The state :func:`plan_loop_kernel` carries through the loop's work."""

    def __init__(self, g, loop, names, recompute, flag_buffers, tuning, coop, streams, nblocks, vb, budget, buffers,
                 precision, dynamic):
        self.g, self.loop, self.names, self.recompute, self.flag_buffers = g, loop, names, recompute, flag_buffers
        self.tuning, self.coop, self.streams, self.nblocks, self.vb = tuning, coop, streams, nblocks, vb
        self.budget, self.buffers, self.dynamic = budget, buffers, dynamic
        reduced = precision != "fp32"
        #: the products' tensor-core format (GPU) or the FFMA loop's operand rounding (simulator)
        self.mma = precision if reduced and coop and not vb else ""
        self.rounding = precision if reduced and not self.mma else ""
        self.copies: dict[tuple, WeightCopy] = {}  # (weight, reps, unit, inner, permuted) -> its shared copy
        self.local_grads: list[LocalGradSum] = []
        self.transposed: set[str] = set()
        self.nsplit = 0  # split partial-sum arrays so far
        self.ntiles = 0  # tile partial-sum arrays so far
        self.grouped = False  # the kernel runs in stream groups (LoopKernelPlan ``stream_groups``)
        self.global_weights = False  # some weight rows are read from global memory (no shared copy)
        self.ln_shape = 0  # the layer norms' row-sum shape, once their arrays are decided
        #: the FFMA row loops of a variable-length graph skip their padded steps (GemmRows ``skip``)
        self.skip = bool(length_inputs(g) and tuning.skip and not self.mma)
        self.unwritten: dict[str, int] = {}  # LoopKernelPlan ``unwritten``

    def row_sums(self, offset: int, name: str) -> RowSums:
        n, names = self.g.by_name[name], self.names
        self.buffers.add(names.value(n.args[0].node))
        if self.loop.reverse:
            out = names.ln_grad_sums(name)
            self.buffers.update((names.param(n.params[0]), names.grad(name), names.ln_sums(name)))
        else:
            out = names.ln_sums(name)
        self.buffers.add(out)
        return RowSums(offset, name, out)

    def pointwise(self, k: Kernel, uL: int, prefetch: dict) -> PointwiseItem:
        g, loop = self.g, self.loop
        norms = [g.by_name[m] for m in k.ops if is_row_reduction(g.by_name[m].op)]
        # gain and bias gradients summed after the loop (``Loop.post_sums``, passes/param_grad_sums.py)
        deferred = tuple(n.name for n in norms if n.name in loop.post_sums)
        norms = [n for n in norms if n.name not in deferred]
        grads = [self.names.param_grad(p) for n in norms for p in n.params]
        taken = {z.array for z in self.local_grads}
        # shared-memory gradient sums: not in simulated blocks (they share one block's memory), not
        # for a parameter two layer norms share, only while the budget holds them
        local = bool(loop.reverse and norms and self.ln_shape and not self.vb
                     and not any(local_grad(q) in taken for q in grads) and len(set(grads)) == len(grads))
        if local:
            u = kernel_unit(g, self.recompute.get(k.ops[0]) or k.ops)
            size = sum(-(-uL // self.nblocks) * (u // uL) * (n.size // u) * 4 * len(n.params) for n in norms)
            local = not self.coop or self.budget.take(size)
        plan = prefetch.get(k.name)
        e = made(pointwise_emitter(g, loop, k, self.recompute, self.flag_buffers, local, deferred,
                                   plan.buffers if plan else ()), loop.reverse)
        reps = e.u // uL
        if local:
            for n in norms:
                for p in n.params:
                    q = self.names.param_grad(p)
                    z = LocalGradSum(local_grad(q), q, uL, reps, e.u, e.chunks(n.name))
                    self.local_grads.append(z)
                    size = -(-uL // self.nblocks) * reps * z.chunks
                    self.budget.arrays.append(SmemArray(z.array, (size,), size * 4 if self.coop else 0,
                                                        "layer-norm gradients"))
                    self.buffers.add(q)
        self.buffers.update(e.buffers)
        return PointwiseItem(k, local, deferred, plan, e.u, reps, tuple(sorted(e.buffers, key=buffer_key)), self.grouped)

    def gemm(self, k: Kernel, uL: int) -> GemmItem:
        """forward y[r] = W[r,:] . x (+ b[r]) per member; backward dx[c] += sum_m W_m[:,c] . g_m,
        reading the transposed weights ``T<k>`` (kept in sync by the runtime: lanes read
        consecutive addresses)."""
        names, g = self.names, self.g
        nodes = [g.by_name[m] for m in k.ops]
        ref = nodes[0].args[0]
        x = ref.node
        K = g.by_name[x].size
        xrow = f"{names.depth(x) - ref.delay} + t"
        if not self.loop.reverse:
            rows = []
            folded = dict(self.loop.folded_biases)  # the window products whose bias the store adds too
            for n in nodes:
                w = names.param(n.params[0])
                biases = [names.param(n.params[1])] if len(n.params) == 2 else []
                if n.name in folded:
                    biases.append(names.param(g.by_name[folded[n.name]].params[1]))
                out, X = names.value(n.name), names.value(x)
                self.buffers.update({w, out, X, *biases})
                reps = n.size // uL
                also = f" + {folded[n.name]}'s bias" if n.name in folded else ""
                comment = f"# {k.name}: {n.name} = {n.params[0]} @ {ref}{' + bias' if len(n.params) == 2 else ''}{also}"
                flag = self._flag(X, xrow)
                weight, prepared = self._weight(w, reps, uL, K, self._chunked(K, [flag]))
                terms = (GemmTerm(weight, X, xrow, flag, prepared, self._weight4(w, reps, uL, K)),)
                store = f"{out}[{names.depth(n.name)} + t, {{s}}, {{r}}] = {{acc}}" + "".join(f" + {b}[{{r}}]" for b in biases)
                # padded steps skipped (not for an output read through flag words: its readers poll it)
                skip = self.skip and out not in self.flag_buffers
                if skip:
                    self.unwritten[out] = names.depth(n.name)
                rows.append(self._rows(comment, reps, uL, K, terms, store, skip))
            return GemmItem(k, tuple(rows))
        GX, terms = names.grad(x), []
        self.buffers.add(GX)
        R = nodes[0].size
        if any(n.size != R for n in nodes):
            raise NotImplementedError("merged GEMM members of different sizes in a backward loop")
        rows_of = {n.name: f"{names.depth(n.name)} + t" for n in nodes}
        chunked = self._chunked(R, [self._flag(names.grad(n.name), rows_of[n.name]) for n in nodes])
        for n in nodes:
            wt = "T" + names.param(n.params[0])[1:]
            gy = names.grad(n.name)
            self.buffers.update((wt, gy))
            self.transposed.add(n.params[0])
            row = rows_of[n.name]
            weight, prepared = self._weight(wt, K // uL, uL, R, chunked)
            terms.append(GemmTerm(weight, gy, row, self._flag(gy, row), prepared, self._weight4(wt, K // uL, uL, R)))
        comment = f"# {k.name}: d.{ref} += sum W^T d.({', '.join(k.ops)})"
        return GemmItem(k, (self._rows(comment, K // uL, uL, R, tuple(terms), f"{GX}[{xrow}, {{s}}, {{r}}] += {{acc}}",
                                       self.skip and GX not in self.flag_buffers),))

    def _flag(self, buf: str, row: str) -> tuple | None:
        return (self.flag_buffers[buf], row) if buf in self.flag_buffers else None

    def _chunked(self, inner: int, flags: list) -> bool:
        """Whether a tensor-core row loop over ``inner`` columns whose vectors have ``flags``
        reads whole chunks with 16-byte loads (GemmRows ``chunked``): vectors that are plain
        buffers (not polled from flag words) with rows of a multiple of 4 floats (so 16-byte
        aligned: codegen/buffers.py aligns the gradient arena's arrays), at least one chunk."""
        return bool(self.mma) and inner % 4 == 0 and inner >= MMA_CHUNK[self.mma] and not any(flags)

    def _weight(self, w: str, reps: int, uL: int, inner: int, permuted: bool = False) -> tuple[str, bool]:
        """(the read of weight ``w`` at (owned row {r} / its place {rem}, column {k}), whether it
        is ``prepared``: GemmTerm): from a shared copy of the block's rows while the budget holds it
        (for tensor-core products stored in their operand format, WeightCopy ``convert``; in a
        chunk's permuted order for a ``chunked`` row loop; past the static budget, in the dynamic
        shared memory while ``tuning.dsmem_kib`` holds it), else from global memory. A fragment
        load from global memory touches eight rows' cache lines: on the H200 (LSTM H = 1024, S = 64,
        tf32, T = 100) the forward loop kernel took 5.91 ms, 0.58 without its products
        (h200-20261203-loop-mma-profile-h1024.log)."""
        key = (w, reps, uL, inner, permuted)
        if key not in self.copies:
            rows = -(-uL // self.nblocks) * reps
            cols = (inner + 1) // 2 if self.mma == "bf16" else inner
            cols = mma_row_words(cols) if self.mma else cols
            offset, charged = -1, rows * cols * 4
            if not self.budget.take(charged):
                offset, charged = self.dynamic.used // 4, 0
                if not self.dynamic.take(rows * cols * 4):
                    self.global_weights = True
                    return f"{w}[{{r}}, {{k}}]", False
            sw = f"sw{len(self.copies)}"
            self.copies[key] = WeightCopy(sw, w, reps, uL, inner, rows, self.mma, cols, permuted, offset)
            self.budget.arrays.append(SmemArray(sw, (rows, cols), charged, "weight rows"))
        return self.copies[key].at("{rem}", "{k}"), bool(self.mma)

    def _weight4(self, w: str, reps: int, uL: int, inner: int) -> str:
        """GemmTerm ``weight4``: the 16-byte read of weight ``w``'s columns {k} .. {k} + 3 from its
        plain float32 shared copy (rows of a multiple of 4 floats: 16-byte aligned, the copy
        declared so on the GPU), "" without one (global rows are not known to be aligned) or in
        the simulator."""
        c = self.copies.get((w, reps, uL, inner, False))
        if not self.coop or c is None or c.convert or c.cols % TILE_STEP or max(c.offset, 0) % TILE_STEP:
            return ""
        if c.offset < 0:
            return f"load_f32x4_2d({c.array}, {{rem}}, {{k}})"
        return f"load_f32x4_1d({c.array}, uint64({{rem}}) * uint64({c.cols}) + uint64({{k}}))"

    def item_shape(self, block_rows: int) -> tuple[int, int]:
        """(streams, rows) of a GEMM work item when a block owns at most ``block_rows`` rows: up to
        ``tuning.rows`` rows (no more than the block has), then up to ``tuning.cols`` streams (no
        more than S) within GEMM_ACCUMULATORS partial sums a lane. E.g. the H=512 LSTM on 132
        blocks at S=64 with rows=8, cols=8: forward 16 rows a block -> 8 rows x 4 streams,
        backward 4 rows -> 4 x 8; with the defaults from S=2 (rows=8, cols=4) 8 x 4 and 4 x 4."""
        RB = max(1, min(self.tuning.rows, block_rows))
        return max(1, min(max(1, min(self.streams, self.tuning.cols)), GEMM_ACCUMULATORS // RB)), RB

    def _rows(self, comment: str, reps: int, uL: int, inner: int, terms: tuple, store: str,
              skip: bool = False) -> GemmRows:
        """A row loop's work items and K-split: ``ksplit`` workers (warps; threads in the
        simulator) share an item by splitting its inner dimension when the block has fewer items
        than workers, no more than ``tuning.ksplit`` nor one chunk (32 on the GPU) a part, and 1
        when the partial sums' array (items x parts x rows x streams floats) does not fit in what
        is left of the budget (or in simulated blocks). The inner loop is unrolled ``tuning.unroll``
        times, at most as often as a worker's stride fits in the inner dimension. ``skip``: the
        items skip the steps where their streams are padded (GemmRows ``skip``)."""
        block_rows = -(-uL // max(1, self.vb or self.nblocks)) * reps
        if self.mma:
            return self._mma_rows(comment, reps, uL, inner, terms, store, block_rows)
        if skip:
            self.buffers.update((STREAM_ORDER, VALID_STREAMS))
        tiled = self._tiles(comment, reps, uL, inner, terms, store, block_rows, skip)
        if tiled is not None:
            return tiled
        SB, RB = self.item_shape(block_rows)
        kstep = 32 if self.coop else 1
        items = -(-self.streams // SB) * -(-block_rows // RB)
        KS, kp = self._split(items, RB, SB, inner, kstep)
        unroll = max(1, min(self.tuning.unroll, inner // (kstep * KS)))
        butterfly = bool(self.coop and self.tuning.xreduce and RB * SB <= 32)
        return GemmRows(comment, terms, store, reps, uL, inner, SB, RB, items, KS, kp, unroll, butterfly,
                        rounding=self.rounding, skip=skip, grouped=self.grouped)

    def _tiles(self, comment: str, reps: int, uL: int, inner: int, terms: tuple, store: str,
               block_rows: int, skip: bool = False) -> GemmRows | None:
        """A tiled row loop (GemmRows ``tile``, codegen/loop_tiles.py) where ``tuning.tiles`` asks
        for one and the row loop allows it (not simulated blocks, no flagged vectors, ``inner`` a
        multiple of 4, on the GPU every weight in a plain shared copy) and its partial sums fit
        the static budget or, on the GPU, the dynamic one; else None. A lane takes TILE_ROWS rows
        (fewer where the block has fewer; more where the warp's lanes would not cover the block's
        rows) and as many row groups as the block's rows need (a power of two), then up to
        TILE_ACCUMULATORS partial sums of streams (at least one stream: a lane with more rows
        holds more); the warps split the inner dimension into as many slices as they have jobs
        beyond the warps that cover the streams. ``skip``: as GemmRows ``skip``, stream by
        stream."""
        lanes = 32 if self.coop else SIM_THREADS // 2  # the simulator: two "warps", so slices of k
        if (not self.tuning.tiles or self.vb or inner % TILE_STEP or any(t.flag for t in terms)
                or (self.coop and not all(t.weight4 for t in terms))):
            return None
        RT, RG = max(min(TILE_ROWS, block_rows), -(-block_rows // lanes)), 1
        while RG * RT < block_rows:
            RG *= 2
        if RT > MAX_ROWS:
            return None
        SGW = lanes // RG
        ST = max(1, min(TILE_ACCUMULATORS // RT, -(-self.streams // SGW)))
        WQ = -(-self.streams // (SGW * ST))
        warps = self.tuning.threads // 32 if self.coop else 2
        parts = max(1, min(warps // WQ, inner // TILE_STEP))
        per_part = -(-inner // parts)
        kslice = -(-per_part // TILE_STEP) * TILE_STEP
        KS = -(-inner // kslice)
        words = -(-(KS * RG * RT * WQ * SGW * ST) // TILE_STEP) * TILE_STEP
        offset = -1
        if not self.budget.take(words * 4):
            offset = self.dynamic.used // 4
            if not self.dynamic.take(words * 4):
                return None
        kp = f"kt{self.ntiles}"
        self.ntiles += 1
        self.budget.arrays.append(SmemArray(kp, (words,), 0 if offset >= 0 else words * 4, "tile partial sums"))
        fmas = RT * ST * TILE_STEP * len(terms)  # a step's
        unroll = max(1, min(self.tuning.unroll, TILE_TRIP_FMAS // fmas, kslice // TILE_STEP))
        return GemmRows(comment, terms, store, reps, uL, inner, ST, RT, WQ * KS, KS, kp, unroll, False,
                        rounding=self.rounding, skip=skip, tile=TileShape(RG, lanes, WQ, kslice, words, offset),
                        grouped=self.grouped)

    def _split(self, items: int, RB: int, SB: int, inner: int, kstep: int) -> tuple[int, str]:
        """(KS, the partial sums' array ``kp<n>``) of a row loop of ``items`` items of RB rows x SB
        streams: the workers (warps; threads in the simulator) a block has beyond its items share
        them, no more than ``tuning.ksplit`` nor one chunk of ``kstep`` columns a part, and 1 where
        the array (items x parts x RB x SB floats) does not fit in what is left of the budget or
        in simulated blocks."""
        workers = self.tuning.threads // 32 if self.coop else SIM_THREADS
        parts = max(1, min(self.tuning.ksplit, max(1, inner // kstep), workers // max(1, items)))
        kp = f"kp{self.nsplit}"
        KS = parts if parts > 1 and not self.vb and self.budget.take(items * parts * RB * SB * 4) else 1
        if KS > 1:
            self.nsplit += 1
            self.budget.arrays.append(SmemArray(kp, (items * KS, RB * SB), items * KS * RB * SB * 4, "split partial sums"))
        return KS, kp

    def _mma_rows(self, comment: str, reps: int, uL: int, inner: int, terms: tuple, store: str,
                  block_rows: int) -> GemmRows:
        """A tensor-core row loop (GemmRows ``mma``): items of one or two 16-row tiles (two where
        the block owns more than 16 rows: each B fragment then serves two products) by one 8-stream
        tile, so that a block has as many items as it can, or (``swapped``, a block of at most 8
        rows and more than 8 streams) of 8 rows x 16 streams; a K-split and unroll as
        :meth:`_rows`, in k-steps of MMA_K columns."""
        kstep = MMA_K[self.mma]
        # a block of at most 8 rows: a 16-row tile would compute 8 rows that are thrown away, so
        # the streams take the tile's 16 (swapped) where there are more than 8 of them
        swapped = block_rows <= 8 and self.streams > MMA_STREAMS
        RB = 8 if swapped else MMA_ROWS * (2 if block_rows > MMA_ROWS else 1)
        SB = 2 * MMA_STREAMS if swapped else MMA_STREAMS
        items = -(-self.streams // SB) * -(-block_rows // RB)
        chunked = self._chunked(inner, [t.flag for t in terms])
        # a chunked loop's workers split its chunks: no more parts than it has
        KS, kp = self._split(items, RB, SB, inner, MMA_CHUNK[self.mma] if chunked else kstep)
        unroll = max(1, min(self.tuning.unroll, MMA_UNROLL, inner // (kstep * KS)))
        return GemmRows(comment, terms, store, reps, uL, inner, SB, RB, items, KS, kp, unroll, False, mma=self.mma,
                        chunked=chunked, swapped=swapped, pipelined=chunked and bool(self.tuning.pipeline))

