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
  :func:`load_relaxed_gpu_u64`, :func:`store_relaxed_gpu_u64`; :func:`trap` ("trap").
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

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
