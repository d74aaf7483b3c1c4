"""Flagged words of the persistent loop kernels (passes/flag_exchange.py): a float32 value and
its tag in one 64-bit word, stored by the value's writer and polled by the GEMMs that read it,
instead of a grid sync between them. Imported by generated loop modules that flag a value.

A flag buffer ``F`` (uint64, the shape (R, S, n) of the value's buffer) holds at [r, s, j] the
word ``(r + 1) << 32 | bits(x[r, s, j])``: tag r + 1 (0 means "not written yet"; the kernel
zeroes its flag buffers at its start), value bits low. A 64-bit aligned store is single-copy
atomic, so a reader that sees the tag sees the value stored with it: no fence between data and
flag (NCCL's low-latency protocol stores 8 bytes of data and flag in the same way).

On the GPU the words are stored with ``st.relaxed.gpu`` and read with ``ld.relaxed.gpu`` (from L2,
coherent at GPU scope, never a stale L1 line; inline PTX with side effects, codegen/ptx.py's,
never hoisted out of the poll loop). The instructions name the global state space and take the array's generic
address, which for global memory is the same address on these GPUs (what the H200 ran,
bench/results/h200-20261201-flags-gpu-final.log); the generic forms (no ``.global``) would not rely on that. A reader
polls at most ``SPIN_LIMIT`` times, then executes ``trap`` (the launch
fails with an error instead of hanging the GPU; it would mean a missing write, a bug). In the
CUDA simulator (NUMBA_ENABLE_CUDASIM=1) the same functions are plain Python over the host arrays,
raising RuntimeError instead of the trap.
"""
from __future__ import annotations

import os

import numpy as np

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
#: polls of one word group before a reader gives up (GPU: about 2^24 L2 round trips, seconds;
#: the simulator, where a Python poll takes tens of microseconds: 2^20)
SPIN_LIMIT = 1 << 20 if SIMULATOR else 1 << 24

if SIMULATOR:
    def flag_store(F, r, s, j, value):
        """Store x[r, s, j] = ``value`` (float32) with its tag r + 1 into flag buffer ``F``."""
        F[r, s, j] = (np.uint64(r + 1) << np.uint64(32)) | np.uint64(np.float32(value).view(np.uint32))

    def flag_load(F, r, s, j):
        """The word at F[r, s, j] (uint64)."""
        return np.uint64(F[r, s, j])

    def flag_tag(word):
        """The tag of a word (uint32; r + 1 for buffer row r, 0 before its store)."""
        return np.uint32(np.uint64(word) >> np.uint64(32))

    def flag_value(word):
        """The float32 value of a word."""
        return np.uint32(np.uint64(word) & np.uint64(0xFFFFFFFF)).view(np.float32)

    def flag_wait(spins):
        """One more failed poll (returns spins + 1); raises RuntimeError after SPIN_LIMIT."""
        if spins >= SPIN_LIMIT:
            raise RuntimeError(f"flagged exchange: a word's tag did not come after {SPIN_LIMIT} polls "
                               "(a value its writer never stored: codegen/flag_exchange.py)")
        return spins + 1
else:
    from llvmlite import ir
    from numba import cuda, types, uint32, uint64
    from numba.cuda.extending import intrinsic

    # inline PTX (codegen/ptx.py): ld/st.relaxed.gpu of F[r, s, j], trap
    from .ptx import load_relaxed_gpu_u64 as flag_load
    from .ptx import store_relaxed_gpu_u64 as _store_word
    from .ptx import trap as _trap

    @intrinsic
    def _bits(typingctx, value):
        """The bits of a float32, as uint64 (high half zero)."""
        def codegen(context, builder, sig, args):
            f = context.cast(builder, args[0], sig.args[0], types.float32)
            return builder.zext(builder.bitcast(f, ir.IntType(32)), ir.IntType(64))
        return types.uint64(value), codegen

    @intrinsic
    def flag_value(typingctx, word):
        """The float32 value of a word."""
        def codegen(context, builder, sig, args):
            w = context.cast(builder, args[0], sig.args[0], types.uint64)
            return builder.bitcast(builder.trunc(w, ir.IntType(32)), ir.FloatType())
        return types.float32(word), codegen

    @cuda.jit(device=True, inline=True)
    def flag_store(F, r, s, j, value):
        """Store x[r, s, j] = ``value`` (float32) with its tag r + 1 into flag buffer ``F``."""
        _store_word(F, r, s, j, (uint64(r + 1) << uint64(32)) | _bits(value))

    @cuda.jit(device=True, inline=True)
    def flag_tag(word):
        """The tag of a word (uint32; r + 1 for buffer row r, 0 before its store)."""
        return uint32(word >> uint64(32))

    @cuda.jit(device=True, inline=True)
    def flag_wait(spins):
        """One more failed poll (returns spins + 1); ``trap`` after SPIN_LIMIT."""
        if spins >= SPIN_LIMIT:
            _trap()
        return spins + 1
