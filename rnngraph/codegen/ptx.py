"""Every inline-PTX instruction of rnngraph, as numba ``@intrinsic`` functions (``llvmlite.ir.InlineAsm``).

The project keeps all inline PTX in this one module: numba-cuda has entered maintenance mode,
and a port to its successor (numba-cuda-mlir, whose ``inline_ptx`` replaces these intrinsics)
should touch one file (tests/test_layering.py checks that no other module under rnngraph/ holds
``InlineAsm`` or ``asm(``). The device functions built on these instructions live with their
users: the grid barrier in codegen/grid_barrier.py, the flagged words in codegen/flag_exchange.py.

GPU only: numba's CUDA simulator cannot run inline PTX, so nothing imports this module there
(the simulator runs ``grid.sync()`` and flag_exchange.py's Python functions instead).

Instructions and their source, the NVIDIA PTX ISA (version 8.x, "Parallel Thread Execution ISA",
sections named below):

- memory consistency ("Memory Consistency Model", ``fence``, ``ld``, ``st``, ``red``):
  :func:`fence_acq_rel_gpu`, :func:`load_relaxed_gpu`, :func:`red_release_gpu_add`,
  :func:`load_relaxed_gpu_u64`, :func:`store_relaxed_gpu_u64`; :func:`trap` ("trap");
- 16-byte vector loads, :func:`load_f32x4` and its 2-D and 1-D forms (LLVM IR, not PTX text;
  the tensor-core loops' wide vector reads and the FFMA tile loops' reads, codegen/loop_tiles.py);
- tensor cores ("Warp Level Matrix Multiply-Accumulate Instructions", ``mma``; compute capability
  8.0 or higher, PTX ISA 7.0): :func:`mma_tf32_m16n8k8`, :func:`mma_bf16_m16n8k16`, with the
  operand conversions :func:`cvt_rna_tf32` and :func:`pack_bf16x2` ("cvt"); the loop kernels'
  tensor-core row loops call them (codegen/loop_mma.py, ``ScheduleOptions.loop_tensor_cores``).

Fragment layouts of the two ``mma`` shapes (PTX ISA, "Matrix Fragments for mma.m16n8k8" and
"Matrix Fragments for mma.m16n8k16 with floating point type"), in the terms of this module:
a warp's 32 lanes compute D = A B + C together, A (M x K, row-major), B (K x N, column-major:
``.row.col``), C and D (M x N, fp32); each lane holds a fixed few elements of each matrix in
its registers. With ``g = lane // 4`` (the lane's group, 0..7) and ``t = lane % 4`` (its place
in the group, 0..3):

- C and D (16 x 8, both shapes): four fp32 registers ``c0..c3``; ``c0, c1`` are row g,
  ``c2, c3`` row g + 8; the columns are 2t (``c0``, ``c2``) and 2t + 1 (``c1``, ``c3``). So a
  group of four lanes owns two whole rows, each lane two neighbouring columns of both.
- m16n8k8 TF32, A (16 x 8): four 32-bit registers, one TF32 element each: ``a0`` = A[g, t],
  ``a1`` = A[g + 8, t], ``a2`` = A[g, t + 4], ``a3`` = A[g + 8, t + 4].
- m16n8k8 TF32, B (8 x 8): two 32-bit registers: ``b0`` = B[t, g], ``b1`` = B[t + 4, g] (lane
  group g holds column g of B, i.e. row g of B's transpose, which is what a row-major weight
  matrix W with B = W^T gives directly).
- m16n8k16 bf16, A (16 x 16): four 32-bit registers of two bf16 each (element 2i in the low 16
  bits, 2i + 1 in the high 16): ``a0`` = A[g, 2t : 2t + 2], ``a1`` = A[g + 8, 2t : 2t + 2],
  ``a2`` = A[g, 2t + 8 : 2t + 10], ``a3`` = A[g + 8, 2t + 8 : 2t + 10].
- m16n8k16 bf16, B (16 x 8): two 32-bit registers of two bf16 each (the smaller k in the low
  half): ``b0`` = B[2t : 2t + 2, g], ``b1`` = B[2t + 8 : 2t + 10, g].

codegen/mma_fragments.py computes the same layouts with NumPy (the index tables, a matrix's
per-lane fragments and back, a reference of one warp's MMA); tests/test_ptx.py checks the
instructions in the compiled PTX (sm_90, on the CPU) and, on a GPU, the intrinsics against the
reference.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

#: the tensor-core instructions, as this module emits them (tests look for these strings)
MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
MMA_BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
CVT_TF32 = "cvt.rna.tf32.f32"
CVT_BF16X2 = "cvt.rn.bf16x2.f32"

_F32 = ir.FloatType()
_I32 = ir.IntType(32)


def _asm(builder, text: str, constraints: str, ret=None, args=(), arg_types=(), side_effect: bool = True):
    """Call inline PTX ``text`` (LLVM constraint string ``constraints``: ``=r``/``=f``/``=l``
    outputs, then ``r``/``f``/``l`` inputs, ``~{memory}`` for a memory clobber) returning ``ret``
    (an llvmlite type, a literal struct for several outputs; void by default)."""
    fn = ir.FunctionType(ret or ir.VoidType(), list(arg_types))
    return builder.call(ir.InlineAsm(fn, text, constraints, side_effect=side_effect), list(args))


# --- memory consistency: the grid barrier (codegen/grid_barrier.py) ---------------------------

def _uint32_vector(counter) -> bool:
    return isinstance(counter, types.Array) and counter.dtype == types.uint32 and counter.ndim == 1


@intrinsic
def fence_acq_rel_gpu(typingctx):
    """``fence.acq_rel.gpu``: release (earlier writes before later ones) and acquire at GPU scope."""
    def codegen(context, builder, sig, args):
        _asm(builder, "fence.acq_rel.gpu;", "~{memory}")
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def load_relaxed_gpu(typingctx, counter):
    """Element 0 of a uint32 array, read with ``ld.relaxed.gpu`` (coherent at GPU scope: not a
    stale L1 copy; never hoisted out of a loop)."""
    if not _uint32_vector(counter):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
        return _asm(builder, "ld.relaxed.gpu.u32 $0, [$1];", "=r,l,~{memory}", _I32, [data],
                    [data.type])
    return types.uint32(counter), codegen


@intrinsic
def red_release_gpu_add(typingctx, counter, value):
    """``red.release.gpu.global.add.u32`` of ``value`` to element 0 of a uint32 array: the add
    without a returned value, ordered after the thread's (and, through the block barrier before
    it, the block's) earlier writes at GPU scope."""
    if not _uint32_vector(counter):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
        val = context.cast(builder, args[1], sig.args[1], types.uint32)
        _asm(builder, "red.release.gpu.global.add.u32 [$0], $1;", "l,r,~{memory}", args=[data, val],
             arg_types=[data.type, _I32])
        return context.get_dummy_value()
    return types.void(counter, value), codegen


# --- memory consistency: the flagged words (codegen/flag_exchange.py) -------------------------

def _word_pointer(context, builder, sig, args):
    """The address of F[r, s, j] (no wraparound: the indices are never negative)."""
    aryty, inds = sig.args[0], [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:4], sig.args[1:4])]
    ary = context.make_array(aryty)(context, builder, value=args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, inds, wraparound=False)


def _word_array(F) -> bool:
    return isinstance(F, types.Array) and F.dtype == types.uint64 and F.ndim == 3


@intrinsic
def load_relaxed_gpu_u64(typingctx, F, r, s, j):
    """F[r, s, j] of a 3-D uint64 array, read with ``ld.relaxed.gpu.global.u64`` (from L2,
    coherent at GPU scope; a side effect, never hoisted out of a poll loop)."""
    if not _word_array(F):
        return None

    def codegen(context, builder, sig, args):
        ptr = _word_pointer(context, builder, sig, args)
        return _asm(builder, "ld.relaxed.gpu.global.u64 $0, [$1];", "=l,l,~{memory}", ir.IntType(64), [ptr],
                    [ptr.type])
    return types.uint64(F, r, s, j), codegen


@intrinsic
def store_relaxed_gpu_u64(typingctx, F, r, s, j, word):
    """F[r, s, j] = ``word`` (cast to uint64) of a 3-D uint64 array with ``st.relaxed.gpu.global.u64``."""
    if not _word_array(F):
        return None

    def codegen(context, builder, sig, args):
        w = context.cast(builder, args[4], sig.args[4], types.uint64)
        ptr = _word_pointer(context, builder, sig, args)
        _asm(builder, "st.relaxed.gpu.global.u64 [$0], $1;", "l,l,~{memory}", args=[ptr, w],
             arg_types=[ptr.type, w.type])
        return context.get_dummy_value()
    return types.void(F, r, s, j, word), codegen


@intrinsic
def trap(typingctx):
    """``trap``: abort the kernel (the launch fails with an error)."""
    def codegen(context, builder, sig, args):
        _asm(builder, "trap;", "~{memory}")
        return context.get_dummy_value()
    return types.void(), codegen


# --- wide loads: the tensor-core loops' vector fragments (codegen/loop_mma.py), the tile loops' ----

def _float32_c(a, ndim: int) -> bool:
    return isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == ndim and a.layout == "C"


def _load_f32x4(context, builder, sig, args):
    """The 16-byte load of ``args[0][args[1:]]`` and the next three floats, as a UniTuple."""
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], sig.args[1:])]
    ary = context.make_array(sig.args[0])(context, builder, value=args[0])
    ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, inds, wraparound=False)
    vec = builder.load(builder.bitcast(ptr, ir.VectorType(_F32, 4).as_pointer(ptr.type.addrspace)), align=16)
    return context.make_tuple(builder, sig.return_type,
                              [builder.extract_element(vec, ir.Constant(_I32, i)) for i in range(4)])


@intrinsic
def load_f32x4(typingctx, a, r, s, k):
    """``a[r, s, k : k + 4]`` of a C-contiguous 3-D float32 array as a UniTuple(float32, 4), read
    with one 16-byte vector load (an LLVM ``load <4 x float>, align 16``: PTX ``ld.v4.f32``). The
    address must be a multiple of 16 bytes (the caller's promise: codegen/loop_mma.py and
    codegen/loop_tiles.py read buffers whose rows are a multiple of 4 floats long, at columns that
    are multiples of 4; a misaligned address faults on the GPU). Indices are never negative (no
    wraparound). Not an inline-PTX instruction, but kept with them: the port to numba-cuda-mlir
    touches this module. Another array type (dtype, dimensions, a non-C layout) fails typing
    (numba's TypingError)."""
    if not _float32_c(a, 3) or not _integers(r, s, k):
        return None
    return types.UniTuple(types.float32, 4)(a, r, s, k), _load_f32x4


@intrinsic
def load_f32x4_2d(typingctx, a, r, k):
    """``a[r, k : k + 4]`` of a C-contiguous 2-D float32 array (a weight matrix, or a block's
    shared copy of its rows), as :func:`load_f32x4` reads a 3-D one, with the same promise."""
    if not _float32_c(a, 2) or not _integers(r, k):
        return None
    return types.UniTuple(types.float32, 4)(a, r, k), _load_f32x4


@intrinsic
def load_f32x4_1d(typingctx, a, i):
    """``a[i : i + 4]`` of a C-contiguous 1-D float32 array (a view of the dynamic shared
    memory), as :func:`load_f32x4` reads a 3-D one, with the same promise."""
    if not _float32_c(a, 1) or not _integers(i):
        return None
    return types.UniTuple(types.float32, 4)(a, i), _load_f32x4


# --- tensor cores -------------------------------------------------------------------------------

def _floats(*tys) -> bool:
    return all(isinstance(t, types.Float) for t in tys)


def _integers(*tys) -> bool:
    return all(isinstance(t, types.Integer) for t in tys)


def _mma(context, builder, sig, args, text: str, n_ab: int, ab_type):
    """Emit ``text {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3};`` (``n_ab`` = 6 A and B registers as
    .b32, from float32 bits (``ab_type`` float32) or uint32) and return D as a UniTuple(float32, 4)."""
    ab = []
    for v, t in zip(args[:n_ab], sig.args[:n_ab]):
        x = context.cast(builder, v, t, ab_type)
        ab.append(builder.bitcast(x, _I32) if ab_type == types.float32 else x)
    c = [context.cast(builder, v, t, types.float32) for v, t in zip(args[n_ab:], sig.args[n_ab:])]
    ret = ir.LiteralStructType([_F32] * 4)
    asm = f"{text} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, {{$10, $11, $12, $13}};"
    # side effect: like CUTLASS's ``asm volatile``, never moved (into divergent code) or merged
    d = _asm(builder, asm, ",".join(["=f"] * 4 + ["r"] * n_ab + ["f"] * 4), ret, ab + c,
             [_I32] * n_ab + [_F32] * 4)
    return context.make_tuple(builder, sig.return_type, [builder.extract_value(d, i) for i in range(4)])


@intrinsic
def mma_tf32_m16n8k8(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """One warp's D = A B + C with ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``:
    A 16 x 8 and B 8 x 8 in TF32, C and D 16 x 8 in fp32 (PTX ISA, "mma"; fragment layouts in the
    module docstring). Compute capability 8.0 or higher; every lane of the warp must call it
    together (converged, ``.aligned``) with its own fragments.

    a0..a3, b0, b1: float32 (any numba float, cast to float32) whose **bit patterns** go into
    the .b32 registers as TF32 (the PTX ISA asks for TF32 data there; fed raw fp32 bits, the
    tensor core uses the top 19 and ignores the low 13 mantissa bits, a truncation: what
    rnngraph/precision.py and the H200 test of issue 26 say); pass values through
    :func:`cvt_rna_tf32` first to round them. c0..c3: float32 (any numba float). Returns D as a
    UniTuple(float32, 4) (d0..d3, laid out as c0..c3). Arguments of other types fail typing
    (numba's TypingError)."""
    if not _floats(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        return None

    def codegen(context, builder, sig, args):
        return _mma(context, builder, sig, args, MMA_TF32, 6, types.float32)
    return types.UniTuple(types.float32, 4)(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), codegen


@intrinsic
def mma_bf16_m16n8k16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """One warp's D = A B + C with ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``:
    A 16 x 16 and B 16 x 8 in bf16, C and D 16 x 8 in fp32 (PTX ISA, "mma"; fragment layouts in
    the module docstring). Compute capability 8.0 or higher; every lane of the warp calls it
    together (converged) with its own fragments.

    a0..a3, b0, b1: uint32 (any numba integer, cast to uint32), each two bf16 encodings, the
    lower-indexed element in the low 16 bits (:func:`pack_bf16x2` makes one from two float32).
    c0..c3: float32 (any numba float). Returns D as a UniTuple(float32, 4) (laid out as c0..c3).
    Arguments of other types fail typing (numba's TypingError)."""
    if not (_integers(a0, a1, a2, a3, b0, b1) and _floats(c0, c1, c2, c3)):
        return None

    def codegen(context, builder, sig, args):
        return _mma(context, builder, sig, args, MMA_BF16, 6, types.uint32)
    return types.UniTuple(types.float32, 4)(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), codegen


@intrinsic
def cvt_rna_tf32(typingctx, x):
    """``x`` (a numba float, cast to float32) rounded to TF32 with ``cvt.rna.tf32.f32``: round to
    nearest, ties **away from zero** (PTX ISA, "cvt": ``.rna``; compute capability 8.0 or
    higher), returned as the float32 of the TF32 bit pattern (the low 13 mantissa bits zero),
    ready for :func:`mma_tf32_m16n8k8`. rnngraph/precision.py's ``round_tf32`` rounds ties to
    even: the two differ only where the low 13 bits are exactly 0x1000."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        f = context.cast(builder, args[0], sig.args[0], types.float32)
        bits = _asm(builder, f"{CVT_TF32} $0, $1;", "=r,f", _I32, [f], [_F32], side_effect=False)
        return builder.bitcast(bits, _F32)
    return types.float32(x), codegen


@intrinsic
def pack_bf16x2(typingctx, lo, hi):
    """Two float32 (numba floats, cast) rounded to bf16 (round to nearest, ties to even: ``.rn``)
    and packed into one uint32 with ``cvt.rn.bf16x2.f32``: ``lo``'s bf16 in the low 16 bits,
    ``hi``'s in the high 16 -- the element order of :func:`mma_bf16_m16n8k16`'s registers (PTX
    ISA, "cvt": the instruction's first source goes to the upper half, so ``hi`` is passed first;
    compute capability 8.0 or higher). Same encodings as rnngraph/precision.py's
    ``to_bf16_bits`` for finite values."""
    if not _floats(lo, hi):
        return None

    def codegen(context, builder, sig, args):
        lo_, hi_ = (context.cast(builder, v, t, types.float32) for v, t in zip(args, sig.args))
        return _asm(builder, f"{CVT_BF16X2} $0, $1, $2;", "=r,f,f", _I32, [hi_, lo_], [_F32, _F32],
                    side_effect=False)
    return types.uint32(lo, hi), codegen
