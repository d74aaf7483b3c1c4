"""A grid-wide barrier for the persistent loop kernels, in PTX, linked into the generated module.

numba's ``cuda.cg.this_grid().sync()`` calls ``cudaCGSynchronize`` of the CUDA device runtime
(a separately compiled library call that first looks up the grid's workspace); the same
algorithm written out here is a handful of instructions (knob ``barrier`` of codegen/tuning.py):

1. ``bar.sync 0`` (the block's threads are done with the level);
2. thread 0 of each block: ``fence.acq_rel.gpu`` (publish the block's writes), then one atomic
   add on the loop kernel's own counter (a zeroed uint32 in global memory): 1 from every block
   but block 0, which adds 0x80000000 - (nblocks - 1); the adds of one barrier total 0x80000000,
   so the counter's top bit flips exactly when the last block arrives and its low bits come
   back to where they were (no reset, and no second word);
3. thread 0 spins on ``ld.acquire.gpu`` of the counter until its top bit differs from the value
   its own add returned, then fences again (the other blocks' writes become visible);
4. ``bar.sync 0`` (the block's other threads wait for thread 0).

This is the sense-reversing barrier of CUDA's cooperative groups (cg::details::sync_grids). A
block cannot pass the next barrier before every block has left this one (the next flip needs
all of them), so a slow block still sees the flip. Each loop kernel gets its own counter
(program.py), so concurrent loop kernels never share one. The kernel must still be launched
cooperatively (all blocks co-resident): it keeps one ``grid.sync()`` at its start, which also
makes numba launch it so. Not available in the CUDA simulator, which runs ``grid.sync()``.
"""
from __future__ import annotations

from .module import write_once

#: numba's foreign-function ABI (docs: "Calling foreign functions from Python kernels"):
#: int status = NAME(int32 *return_value, uint64 counter_address, int32 nblocks)
_FUNCTION = """
.visible .func (.param .b32 status) {name}(
    .param .b64 retp,
    .param .b64 counter,
    .param .b32 nblocks
)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<3>;

    bar.sync 0;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    ld.param.u64 %rd0, [counter];
    cvta.to.global.u64 %rd1, %rd0;
    ld.param.u32 %r2, [nblocks];
    mov.u32 %r4, 1;
    mov.u32 %r3, %ctaid.x;
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra ARRIVE;
    mov.u32 %r5, 0x80000001;
    sub.u32 %r4, %r5, %r2;
ARRIVE:
    fence.acq_rel.gpu;
    atom.global.add.u32 %r6, [%rd1], %r4;
SPIN:
    ld.acquire.gpu.global.u32 %r7, [%rd1];
    xor.b32 %r8, %r7, %r6;
    and.b32 %r9, %r8, 0x80000000;
    setp.ne.u32 %p3, %r9, 0;
    @%p3 bra LEAVE;{backoff}
    bra.uni SPIN;
LEAVE:
    fence.acq_rel.gpu;
DONE:
    bar.sync 0;
    ld.param.u64 %rd2, [retp];
    mov.u32 %r1, 0;
    st.u32 [%rd2], %r1;
    st.param.b32 [status], %r1;
    ret;
}}
"""

#: knob value (codegen/tuning.py ``barrier``) -> the PTX function: 1 polls the counter back to
#: back, 2 sleeps ~32 ns between polls (``nanosleep``: fewer loads queued at the counter's L2
#: slice ahead of the last block's add)
FUNCTIONS = {1: "rg_grid_barrier", 2: "rg_grid_barrier_backoff"}
PTX = ".version 7.8\n.target sm_70\n.address_size 64\n" + _FUNCTION.format(name=FUNCTIONS[1], backoff="") \
    + _FUNCTION.format(name=FUNCTIONS[2], backoff="\n    nanosleep.u32 32;")


def declaration(knob: int) -> str:
    """The generated module's line declaring the barrier of knob value ``knob`` as ``grid_barrier``
    (called as ``grid_barrier(counter_address, nblocks)``)."""
    return f'grid_barrier = cuda.declare_device("{FUNCTIONS[knob]}", "int32(uint64, int32)")'


def ptx_path() -> str:
    """The PTX file (content-hashed, in the kernel cache) to pass to ``@cuda.jit(link=[...])``."""
    return str(write_once(PTX, "rg_grid_barrier_", ".ptx"))
