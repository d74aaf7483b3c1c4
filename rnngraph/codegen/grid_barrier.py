"""A grid-wide barrier for the persistent loop kernels, inlined into them (knob ``barrier`` of
codegen/tuning.py; GPU only: built on the inline-PTX intrinsics of codegen/ptx.py and imported by
generated modules that use it, never in the CUDA simulator, which runs ``grid.sync()``).

numba's ``cuda.cg.this_grid().sync()`` calls ``cudaCGSynchronize`` of the CUDA device runtime,
a separately compiled library call that first looks up the grid's workspace. This is the same
algorithm, the sense-reversing barrier of CUDA's cooperative groups (cg::details::sync_grids),
written out so that it compiles into the kernel:

1. ``cuda.syncthreads()`` (the block's threads are done with the level);
2. thread 0 of each block: ``fence.acq_rel.gpu`` (publishes the block's writes), then one atomic
   add on the loop kernel's own counter (element 0 of a zeroed uint32 array): 1 from every
   block but block 0, which adds 0x80000000 - (nblocks - 1); the adds of one barrier total
   0x80000000, so the counter's top bit flips exactly when the last block arrives and its low
   bits come back to where they were (no reset, no second word);
3. thread 0 polls the counter with ``ld.relaxed.gpu`` (from L2, never a stale L1 copy) until its
   top bit differs from the value its own add returned (``grid_barrier_backoff`` sleeps ~32 ns
   between polls), then fences once more (acquire: the other blocks' writes, published before
   their adds, become visible to the block);
4. ``cuda.syncthreads()`` (the block's other threads wait for thread 0).

A block cannot pass the next barrier before every block has left this one (the next flip needs
all of them), so a slow block still sees the flip. The counter arithmetic is cooperative
groups'; its fences are written here as ``fence.acq_rel.gpu`` (CUDA's ``__threadfence()`` is the
stronger ``fence.sc.gpu``; release before the add and acquire after the poll is what a barrier
needs). The fences and the poll are inline PTX marked as having side effects and clobbering
memory, so the compiler neither hoists the poll out of its loop nor moves memory accesses across
them. The low bits of the counter must be zero at a launch: a launch that died inside a barrier
leaves the counter (and the CUDA context) unusable anyway. Each loop kernel gets its own
counter (codegen/program.py): concurrent loop kernels never share one. The kernel must still
be launched cooperatively (all blocks co-resident): it keeps one ``grid.sync()`` at its start,
which also makes numba launch it so.

``grid_barrier_red`` (``barrier=3``) arrives with ``red.release.gpu`` (an add that returns
nothing, with the release fence's ordering) instead of the fence and the returning atomic add:
thread 0 polls at once instead of after the add's round trip to L2, knowing the top bit to wait
for from the block's own count (``barrier_phase`` reads it once at kernel start, after the
initial ``grid.sync()``: partial sums never flip it, so any block reads the value before the
first barrier; each barrier flips it once). Measured slower than numba's grid sync (H200,
bench/results/h200-20261201-prefetch-prof*-barrier*.json)
for the S=1 LSTM; at S=64 the loop kernels alone were 3.4 % (forward) and 1.5 % (backward) faster
than with ``grid_barrier`` in one run, the whole forward 1.6 % slower (bench/HISTORY.md).

Stream groups (LoopTuning ``groups``, codegen/loop_plan.py ``stream_groups``) split the grid
into G groups of blocks that never read each other's values inside the time loop: a group's
blocks own its streams' rows, vectors and layer-norm sums. With LoopTuning ``groupbar`` a level
then ends with :func:`group_barrier`: the same algorithm among the group's blocks only, on the
group's own counter (element g of the array, one per group), so a barrier waits for
nblocks / G arrivals, and a group does not wait for a slower one.

History: measured on the H200 (bench/results/h200-20261201-bwd-sync-sweep-barrier.json), this algorithm as a linked
PTX function (a call, not inlined),
polling with ``ld.acquire.gpu``: faster at S=64 (LSTM 5.34 vs 5.58 ms fwd+bwd) but much slower
for the LSTM at S=1 (2.11 vs 1.36 ms). Why is not known: the call's saved registers are one
guess, but an earlier inline atomic-counter barrier (polled with atomics) was slower at S=1 too
(forward kernel 7.4 vs 4.9 us a timestep). This inline form: the default from S=2 (codegen/tuning.py).
"""
from __future__ import annotations

from numba import cuda, uint32

from .ptx import fence_acq_rel_gpu, load_relaxed_gpu, red_release_gpu_add  # inline PTX: codegen/ptx.py

TOP_BIT = 0x80000000


@cuda.jit(device=True, inline=True)
def _arrival(block, nblocks):
    """The block's add to the counter: 1, the first block (``block`` 0) TOP_BIT + 1 - nblocks (a
    barrier's adds total TOP_BIT)."""
    if block == 0:
        return uint32(TOP_BIT + 1 - nblocks)
    return uint32(1)


@cuda.jit(device=True, inline=True)
def _arrive(counter, block, nblocks):
    fence_acq_rel_gpu()
    return cuda.atomic.add(counter, 0, _arrival(block, nblocks))


@cuda.jit(device=True, inline=True)
def _flipped(counter, old):
    """Whether the counter's top bit differs from ``old``'s: every block has arrived."""
    return ((load_relaxed_gpu(counter) ^ old) & uint32(TOP_BIT)) != 0


@cuda.jit(device=True, inline=True)
def group_barrier(counter, group, block, nblocks):
    """Wait until the ``nblocks`` blocks of stream group ``group`` have called it, on the group's
    counter ``counter[group]`` (see the module docstring); ``block`` is the caller's place in its
    group (0 for one of them). counter: uint32 array of one element a group, zero before the
    first launch."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        mine = counter[group:]
        old = _arrive(mine, block, nblocks)
        while not _flipped(mine, old):
            pass
        fence_acq_rel_gpu()
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def grid_barrier(counter, nblocks):
    """Wait until all ``nblocks`` blocks of the grid have called it (see the module docstring).
    counter: uint32 array (element 0 is the grid's), zero before the first launch."""
    group_barrier(counter, 0, cuda.blockIdx.x, nblocks)


@cuda.jit(device=True, inline=True)
def group_barrier_backoff(counter, group, block, nblocks):
    """:func:`group_barrier` with a ~32 ns ``nanosleep`` between polls (fewer loads queued at the
    counter's L2 slice ahead of the last block's add)."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        mine = counter[group:]
        old = _arrive(mine, block, nblocks)
        while not _flipped(mine, old):
            cuda.nanosleep(uint32(32))
        fence_acq_rel_gpu()
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def grid_barrier_backoff(counter, nblocks):
    """:func:`grid_barrier` with the backoff of :func:`group_barrier_backoff`."""
    group_barrier_backoff(counter, 0, cuda.blockIdx.x, nblocks)


@cuda.jit(device=True, inline=True)
def group_barrier_phase(counter, group):
    """The top bit of group ``group``'s counter now (before the kernel's first
    :func:`group_barrier_red`)."""
    return load_relaxed_gpu(counter[group:]) & uint32(TOP_BIT)


@cuda.jit(device=True, inline=True)
def barrier_phase(counter):
    """The grid counter's top bit now (before the kernel's first :func:`grid_barrier_red`)."""
    return group_barrier_phase(counter, 0)


@cuda.jit(device=True, inline=True)
def group_barrier_red(counter, group, block, nblocks, phase):
    """:func:`group_barrier` arriving with ``red.release.gpu`` and polling at once for the top bit
    to leave ``phase`` (the value :func:`group_barrier_phase` or the previous call returned);
    returns the new phase."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        mine = counter[group:]
        red_release_gpu_add(mine, _arrival(block, nblocks))
        while not _flipped(mine, phase):
            pass
        fence_acq_rel_gpu()
    cuda.syncthreads()
    return phase ^ uint32(TOP_BIT)


@cuda.jit(device=True, inline=True)
def grid_barrier_red(counter, nblocks, phase):
    """:func:`grid_barrier` arriving as :func:`group_barrier_red` does; returns the new phase."""
    return group_barrier_red(counter, 0, cuda.blockIdx.x, nblocks, phase)
