"""A persistent loop kernel's start and end: the generated module's imports, the ``@cuda.jit``
line and signature, the thread and block ids, what is zeroed or filled before the time loop
(layer-norm sums, shared arrays, weight rows, flag words) and the block's gradient sums added
into global memory at the end -- all as the LoopKernelPlan says.
"""
from __future__ import annotations

from ..ir import Graph
from .loop_gemm import mad_function
from .loop_plan import BARRIER_FUNCTIONS, GROUP_BARRIER_FUNCTIONS, MMA_CHUNK, LoopKernelPlan, chunk_word_order
from .operand_rounding import ROUNDING
from .pointwise import Names
from .source import Source

#: a tensor-core loop kernel's imports by precision (codegen/ptx.py, GPU only)
MMA_IMPORTS = {"tf32": "from rnngraph.codegen.ptx import cvt_rna_tf32, load_f32x4, mma_tf32_m16n8k8",
               "bf16": "from numba import uint32\nfrom rnngraph.codegen.ptx import load_f32x4, mma_bf16_m16n8k16, pack_bf16x2"}


def imports(plan: LoopKernelPlan) -> list[str]:
    """The module-level imports the kernel needs: ``int64`` (the loop counters start as int64:
    ``i = tid`` is int32 and ``i += bdim`` int64, and a counter whose type widens at its loop's
    back edge costs numba's type inference one more pass over the whole kernel), the inline grid
    barrier's function (GPU, ``barrier``), the flag words' device functions
    (codegen/flag_exchange.py), the tensor-core intrinsics, the FFMA row loops' ``mad_rows<n>``
    (codegen/mad_rows.py) and the operand roundings."""
    out = ["from numba import int64"]
    if plan.barrier:
        functions, name, phase = ((GROUP_BARRIER_FUNCTIONS, "group_barrier", "group_barrier_phase") if plan.group_barriers
                                  else (BARRIER_FUNCTIONS, "grid_barrier", "barrier_phase"))
        out.append(f"from rnngraph.codegen.grid_barrier import {functions[plan.barrier]} as {name}"
                   + (f", {phase}" if plan.barrier == 3 else ""))
    if plan.flag_buffers:
        out.append("from numba import uint32\n"
                   "from rnngraph.codegen.flag_exchange import flag_load, flag_store, flag_tag, flag_value, flag_wait")
    rows = [r for lv in plan.levels for st in lv.stages for item in st.items for r in getattr(item, "rows", ())]
    for precision in sorted({r.mma for r in rows} - {""}):
        out.append(MMA_IMPORTS[precision])
    mads = sorted({mad_function(r, plan.coop) for r in rows} - {""}, key=lambda name: (len(name), name))  # 2 before 16
    if mads:
        out.append(f"from rnngraph.codegen.mad_rows import {', '.join(mads)}")
    if plan.coop and any(r.tile is not None for r in rows):
        out.append("from rnngraph.codegen.ptx import load_f32x4, load_f32x4_1d, load_f32x4_2d")
    rounding = {r.rounding for r in rows} - {""}
    if rounding:
        out.append(f"from rnngraph.codegen.operand_rounding import {', '.join(ROUNDING[p] for p in sorted(rounding))}")
    return out


def decorator(plan: LoopKernelPlan) -> str:
    """The kernel's ``@cuda.jit`` line with the plan's compile options (``jit_options``)."""
    return f"@cuda.jit({', '.join(plan.jit_options)})" if plan.jit_options else "@cuda.jit"


def emit_prologue(src: Source, g: Graph, plan: LoopKernelPlan) -> None:
    """Everything before the time loop, at the kernel body's depth: ids, the zeroed layer-norm sums
    (then a grid sync, unless the flag words' comes later: the same sync orders both), the shared
    arrays, the weight rows copied in, the flag words (then a grid sync), the barrier's phase."""
    vb = plan.virtual_blocks
    src("grid = cuda.cg.this_grid()")
    if vb:
        src(f"bdim = cuda.blockDim.x // {vb}", "tid = cuda.threadIdx.x % bdim", "bid = cuda.threadIdx.x // bdim",
            f"nblocks = {vb}", "vbid = bid  # the simulated block's slot in shared arrays (bid is the group's)")
    else:
        src("tid = cuda.threadIdx.x", "bdim = cuda.blockDim.x", "bid = cuda.blockIdx.x", "nblocks = cuda.gridDim.x")
    if plan.stream_groups > 1:  # block bid of the grid: block bid % (nblocks / G) of group bid // (nblocks / G)
        # what the plan keeps out of grouped kernels (their code indexes every stream of the grid)
        assert not (plan.flag_buffers or plan.prefetch or plan.local_grads), plan.name
        G = plan.stream_groups
        src(f"sgroup = bid // (nblocks // {G})", f"bid = bid - sgroup * (nblocks // {G})", f"nblocks = nblocks // {G}",
            f"sbase = sgroup * (S // {G})", f"S = S // {G}  # the group's streams")
    if plan.coop:
        src("lane = tid % 32", "warp = tid // 32", "nwarps = bdim // 32")
    if plan.ln_zero:
        src("# zero the layer-norm row sums (indexed by t: no zeroing inside the time loop)", "i = bid * bdim + tid")
        with src.block("while i < T * S * 2:"):
            sz = "sbase + sz" if plan.stream_groups > 1 else "sz"  # stream groups: each zeroes its streams
            src("tz = i // (S * 2)", "sz = (i // 2) % S", *(f"{b}[tz, {sz}, i % 2] = float32(0.0)" for b in plan.ln_zero),
                "i += nblocks * bdim")
        if not plan.flag_buffers:  # else the flag words' zeroing ends with the grid sync
            src("grid.sync()")
    for a in plan.arrays("layer-norm sums"):
        what = {"lnp": "per thread: a column's partial sums", "lnv": "per column: shift or moments",
                "lns": "per column: the block's two partial sums"}[a.name]
        src(f"{a.name} = cuda.shared.array(({', '.join(map(str, a.shape))}), float32)  # {what}")
    for a in plan.arrays("split partial sums"):
        src(f"{a.name} = cuda.shared.array(({a.shape[0]}, {a.shape[1]}), float32)  # split GEMM partial sums")
    aligned = _aligned(plan)
    for r in tiled_rows(plan):
        t = r.tile
        at = (f"cuda.shared.array({t.words}, float32)" if t.offset < 0 else
              f"cuda.shared.array(0, float32{aligned})[{t.offset}:{t.offset + t.words}]")
        src(f"{r.partials} = {at}  # tiled GEMM partial sums (slice, row, stream)")
    for z in plan.arrays("layer-norm gradients"):
        size = z.shape[0]
        src(f"{z.name} = cuda.shared.array({size}, float32)  # the block's layer-norm parameter gradient sums",
            "i = int64(tid)")
        with src.block(f"while i < {size}:"):
            src(f"{z.name}[i] = float32(0.0)", "i += bdim")
    for c in plan.weight_copies:
        _weight_copy(src, c, aligned)
    if plan.weight_copies or plan.local_grads:
        src("cuda.syncthreads()")
    if plan.flag_buffers:
        _flag_start(src, g, plan)
    elif plan.barrier and not plan.ln_zero:  # numba launches cooperatively (co-resident blocks)
        src("grid.sync()")  # only kernels that call grid.sync(): codegen/grid_barrier.py
    if plan.barrier == 3:  # the (group's) counter's top bit before the first barrier
        src("bphase = group_barrier_phase(BAR, sgroup)" if plan.group_barriers else "bphase = barrier_phase(BAR)")


def tiled_rows(plan: LoopKernelPlan) -> list:
    """The plan's tiled row loops (GemmRows ``tile``), in the kernel's order."""
    return [r for lv in plan.levels for st in lv.stages for item in st.items for r in getattr(item, "rows", ())
            if r.tile is not None]


def _aligned(plan: LoopKernelPlan) -> str:
    """The shared arrays' alignment argument: 16 bytes on the GPU where a tiled row loop reads
    them with 16-byte loads (numba aligns a float32 array to 4 bytes), else none (the simulator
    takes no alignment)."""
    return ", alignment=16" if plan.coop and tiled_rows(plan) else ""


def _weight_copy(src: Source, c, aligned: str = "") -> None:
    """The block's owned rows of weight ``c.weight`` into its shared array (a WeightCopy), in the
    format of its ``convert``: float32 as they are, TF32-rounded, or bf16 pairs (columns 2j and
    2j + 1 in word j, the lower column in the low half; past the last column a zero); a
    ``permuted`` copy's whole chunks in loop_plan.chunk_word_order. ``aligned``: the arrays'
    alignment argument (:func:`_aligned`)."""
    words = (c.inner + 1) // 2 if c.convert == "bf16" else c.inner
    what = {"": "", "tf32": ", rounded to TF32", "bf16": ", as bf16 pairs"}[c.convert]
    if c.permuted:
        what += ", each whole chunk of 32 words in its permuted order"
    dtype = "uint32" if c.convert == "bf16" else "float32"
    if c.offset < 0:
        array = f"{c.array} = cuda.shared.array(({c.rows}, {c.cols}), {dtype}{aligned})"
    else:  # a view of the dynamic shared memory (every dynamic array starts at its first byte)
        what += f", words {c.offset}.. of the dynamic shared memory"
        array = f"{c.array} = cuda.shared.array(0, {dtype}{aligned})[{c.offset}:{c.offset + c.rows * c.cols}]"
    src(f"# {c.weight}: the block's {c.reps} x {c.rows // c.reps} owned rows into shared memory{what}", array,
        f"j0 = (bid * {c.unit}) // nblocks", f"nj = ((bid + 1) * {c.unit}) // nblocks - j0", "i = int64(tid)")
    with src.block(f"while i < nj * {c.reps} * {words}:"):
        src(f"lr = i // {words}", f"kk = i - lr * {words}", f"jj = lr // {c.reps}")
        if not c.convert:
            src(f"{c.at('lr', 'kk')} = {c.weight}[j0 + jj + (lr - jj * {c.reps}) * {c.unit}, kk]", "i += bdim")
            return
        src(f"wr = j0 + jj + (lr - jj * {c.reps}) * {c.unit}")
        at = "kk"
        if c.permuted:  # within the whole chunks
            full = c.inner // MMA_CHUNK[c.convert] * 32
            src(f"pk = (kk - (kk & 31)) + {chunk_word_order('kk')} if kk < {full} else kk")
            at = "pk"
        if c.convert == "bf16":
            hi = f"{c.weight}[wr, 2 * kk + 1]"
            if c.inner % 2:
                hi = f"({c.weight}[wr, min(2 * kk + 1, {c.inner - 1})] if 2 * kk + 1 < {c.inner} else float32(0.0))"
            src(f"{c.at('lr', at)} = pack_bf16x2({c.weight}[wr, 2 * kk], {hi})")
        else:
            src(f"{c.at('lr', at)} = cvt_rna_tf32({c.weight}[wr, kk])")
        src("i += bdim")


def _flag_start(src: Source, g: Graph, plan: LoopKernelPlan) -> None:
    """The flag buffers at kernel start: every word zeroed (no tag: not written yet), but a forward
    loop's rows before the window (the initial state) flagged from the value buffer; then a grid
    sync (no block stores a word of this launch before every block has zeroed)."""
    names = Names(g)
    for X, F in plan.flag_buffers:
        node = g.nodes[int(X[1:])]
        D, n = (0 if plan.reverse else names.depth(node.name)), node.size
        src(f"# {F}: the flag words of {X}" + (f", its {D} rows before the window flagged" if D else ""),
            "i = bid * bdim + tid")
        with src.block(f"while i < {F}.shape[0] * S * {n}:"):
            src(f"fr = i // (S * {n})", f"fs = (i // {n}) % S", f"fk = i % {n}")
            if D:
                src.branch(f"fr < {D}", [f"flag_store({F}, fr, fs, fk, {X}[fr, fs, fk])"], [f"{F}[fr, fs, fk] = uint64(0)"])
            else:
                src(f"{F}[fr, fs, fk] = uint64(0)")
            src("i += nblocks * bdim")
    src("grid.sync()")


def emit_epilogue(src: Source, plan: LoopKernelPlan) -> None:
    """After the time loop: the block's shared-memory gradient sums (over the window and its
    streams) added into the global gradient buffers, one atomic add per owned element."""
    if not plan.local_grads:
        return
    src("cuda.syncthreads()", "# the layer norms' gain and bias gradients of the window: the block's sums")
    for z in plan.local_grads:
        src(f"j0 = (bid * {z.unit}) // nblocks", f"nj = ((bid + 1) * {z.unit}) // nblocks - j0", "i = int64(tid)")
        with src.block(f"while i < nj * {z.reps * z.chunks}:"):
            src(f"rem = i // {z.chunks}", f"jj = rem // {z.reps}",
                f"j = j0 + jj + (rem - jj * {z.reps}) * {z.unit} + (i - rem * {z.chunks}) * {z.kernel_unit}",
                f"cuda.atomic.add({z.grad}, j, {z.array}[i])", "i += bdim")
