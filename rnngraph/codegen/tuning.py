"""LoopTuning: the code shape of the persistent loop kernels (``codegen/loop.py``), as one value.

``CudaProgram`` takes it (default: :meth:`LoopTuning.defaults` for the schedule's S);
``rg.compile``, ``rg.compile_rnn`` and ``rnngraph.torch.RNN`` pass theirs (``tuning=``) or build it
from ``RNNGRAPH_LOOP``, which only the API reads (rnngraph/loop_env.py). What the passes decide
(persistent layer norms, the flagged exchange, post-loop gradient sums) is
``rnngraph.schedule_options.ScheduleOptions``. This module loads no numba (the API imports it).

The knobs, each with its defaults (S = 1 / S >= 2; ``prefetch`` 2 and ``threads`` 256 for S = 2 to 8,
``groups`` 4 from S = 64), the reason in one line and the results file behind it (H200, forward+backward ms, H=512
T=100, bench/loop_sweep.py; files in bench/results/;
how each default came to be: bench/HISTORY.md):

threads   threads a block (a multiple of 32, at most 1024); the grid is one block a multiprocessor
          (unless ``blocks``).
          A kernel whose registers don't allow it is launched with half as many (and so on).
          256 / 512: at S=1 512 was slower (LSTM 1.052 vs 0.986, h200-20261201-ksplit-sweep-ksplit.json);
          512 with ``bounds`` (16 warps an SM; see bounds) was measured at S = 64; 256 for S = 2 to 8
          (``SMALL_BLOCK_STREAMS``; under ``bounds`` a lane may then hold 255 registers, not 128: fewer
          spills, inferred, not profiled): the
          2 x 512 char-LM step on an H100, ms unread, 512 / 256 threads: LSTM S = 2 1.941 / 1.853,
          S = 4 2.507 / 2.081, S = 8 2.815 / 2.516 (128: 2.651, 384: 2.728), S = 16 3.666 / 3.659 (so
          512 from there), GRU S = 8 2.520 / 2.444, peephole LSTM 3.466 / 3.110, layer-norm LSTM
          8.264 / 7.075 (h100-20261206-lm-step-threads-s2-s16.json).
unroll    inner-product iterations a loop trip (independent loads in flight a lane).
          16 / 8: S=1 LSTM 0.945 vs 0.963 with 8 (h200-20261201-prefetch-sweep-lstm1.json);
          S=64 LSTM 4.93 vs 5.21 with 4 (h200-20261201-launch-bounds-sweep-unroll.json).
rows      GEMM rows a work item at most (each vector element loaded once serves this many rows; an
          item is rows x cols streams, reduced across a warp); a GEMM whose blocks own fewer rows
          takes that many. 4 / 8: S=1 LSTM with flags 0.752 vs 0.754 with 8, 0.997 without flags
          (h200-20261201-flags-sweep-flags-rows.json); S=64 LSTM 4.31 vs 4.61 with 4
          (h200-20261201-launch-bounds-sweep-lstm64.json against h200-20261201-launch-bounds-sweep-unroll.json).
cols      GEMM streams a work item at most (and at most S and GEMM_ACCUMULATORS // the item's rows):
          each weight element loaded once serves this many streams. 8 / 4: no effect at S=1 (an
          item takes at most S streams); S=64 LSTM 4.31 vs 5.23 with 2
          (h200-20261201-launch-bounds-sweep-lstm64.json).
smem_kib  shared memory (KiB, static: at most 48) a block may fill with its owned rows of the
          recurrent weights, loaded once a launch; GEMMs whose rows don't fit read them from L2
          every timestep; 0: off. 44: S=64 LSTM 6.15 vs 6.34 without
          (h200-20261130-loop-kernels-xreduce.log).
dsmem_kib dynamic shared memory (KiB; the kernel opts in to it) a loop kernel may fill
          with the owned weight rows that ``smem_kib`` cannot hold (a tensor-core kernel's in
          their operand format); 0: off (those rows are read from L1/L2 every timestep; a
          tensor-core fragment load then touches eight rows' cache lines). The H200 gives a
          block at most 227 KiB of shared memory in all; CudaProgram lowers the value to what
          the device allows. 0 / 176: LSTM H = 1024 (a block's 32 forward rows or 8 backward
          rows: 128 KiB, 128.5 in TF32) at S = 64, tf32 5.96 against 9.66 ms
          (h200-20261204-precision-h1024-dynamic-smem.json, -s64-tf32-mma-no-dsmem.json), fp32
          11.14 against 14.53; at S = 1 fp32 1.27 against 1.21 (h200-20261204-fp32-dynamic-smem.json,
          -fp32-no-dynamic-smem.json; 4 x 512, whose rows mostly fit the static budget, alike).
fast      1: numba's ``fastmath=True`` (approximate exp and division, flush-to-zero,
          reassociation). 0: GRU S=1 1.60 vs 1.46 and layernorm_lstm S=1 outside the GPU tier's
          float32 tolerance (h200-20261130-loop-kernels-sweep-fast.json,
          h200-20261130-loop-kernels-gpu-tests.log).
xreduce   1: a work item's partial sums (at most 32) are summed across the warp by the transpose
          butterfly (codegen/warp_reduce.py: 31 shuffles for 32 sums) instead of a 5-step tree a
          sum. 0 / 1: S=1 LSTM 1.50 vs 1.84 with it, S=64 8.59 vs 9.48 without
          (h200-20261130-loop-kernels-xreduce.log).
barrier   the grid syncs between levels: 0, numba's ``grid.sync()``; 1, codegen/grid_barrier.py's
          barrier inlined (an atomic add and a polled relaxed load a block, on the kernel's own
          counter); 2, the same with a ~32 ns sleep between polls; 3, arriving with
          ``red.release.gpu`` and the phase kept by the block. The simulator always runs
          ``grid.sync()``. 0 / 1: S=1 LSTM 1.20 vs 1.51 with 1, S=64 5.38 vs 5.59 with 0
          (h200-20261201-lnsum2-sweep-barrier.json).
lnsum     the layer norms' row sums in persistent loops: 0, a warp a column, shuffles; 1, all
          threads over (element, column) pairs, partial sums added into shared memory by atomics;
          2, a column a thread (bdim // S threads a column), sums in registers, meeting in shared
          memory without atomics. For layer norms whose gain and bias gradients stay in the loop
          (``post_loop_sums`` off, or an output gradient not complete in memory), 1 and 2 also sum
          those over the window in shared memory. Their arrays come out of ``smem_kib`` first; a
          kernel whose budget cannot hold them keeps the warp shape (or global atomics).
          0 / 2: layernorm_lstm S=1 3.51 vs 4.20 with 1 (h200-20261201-lnsum-sweep-lnsum.json);
          S=64 9.84 vs 10.16 with 1 (h200-20261201-lnsum2-sweep-lnsum2.json).
bounds    1: numba's ``launch_bounds`` of ``threads`` a block, so the compiler holds the registers
          to what that many threads may use (it spills the rest) instead of the launcher halving
          the block. 0 / 1: the S=1 shape was measured without; from S=2 with cols=4 (an item's
          accumulators fit) LSTM S=64 4.61 vs 5.21 (h200-20261201-launch-bounds-sweep-unroll.json).
carveout  the share of the L1/shared-memory array given to shared memory, in percent (numba's
          ``shared_memory_carveout``); -1: the driver's choice. -1: 0 made no difference (LSTM S=64
          5.340 vs 5.344, h200-20261201-signed-index-sweep-bounds-carveout.json).
ksplit    at most this many warps of a block share one GEMM work item when the block has fewer
          items than warps, each taking every KS-th chunk of 32 of the inner dimension, their sums
          meeting in a small shared array; 1: off. 8: S=1 LSTM 0.986 vs 1.106 with 1
          (h200-20261201-ksplit-sweep-ksplit.json); at S=64 a block has as many items as warps.
prefetch  1: a persistent loop's pointwise kernels issue the loads that nothing between can
          change a level early, into registers (codegen/loop_prefetch.py ``prefetch_plans``; only kernels
          whose loads left in place are GEMM outputs, none with a layer norm of its own).
          1 / 0: S=1 LSTM 0.945 vs 0.984, GRU 0.932 vs 0.993 (h200-20261201-prefetch-sweep-defaults.json);
          S=64 LSTM 4.71 vs 4.15 (h200-20261201-prefetch-sweep-lstm64.json). 2: also where a flagged
          exchange took the grid sync before a level's start away (the S=1 layer-norm loops' GEMM
          levels, the backward loops' of S = 2 to 8), with early loads of what no kernel stores after
          the last grid sync (the forward values and old gradients a backward reads); where a
          flagged loop keeps no grid sync (the LSTM, GRU and peephole backward) it plans what 1 does.
          2 for S = 2 to 8 (``EARLY_LOAD_STREAMS``; with the backward loops flagged, ScheduleOptions),
          0 above: the 2 x 512 char-LM step on an H100, ms unread, default / prefetch=1 / the backward
          flagged with prefetch=2: LSTM S=2 2.278 / 2.245 / 1.948, S=4 2.635 / 2.545 / 2.517, S=8
          2.929 / 2.831 / 2.835, GRU S=8 2.896 / 2.605 / 2.520, peephole LSTM S=8 3.647 / 3.592 /
          3.485, layer-norm LSTM S=8 8.360 / 8.385 / 8.312 (h100-20261206-lm-step-early-loads-*.json).
pipeline  1: a tensor-core row loop's whole chunks (codegen/loop_mma.py ``chunked``) load the next
          chunk's vectors before this chunk's products, so that a warp has a chunk's L2 loads in
          flight while its products run (the vectors' registers twice: 8 more a stream tile in
          TF32, 16 in bf16). 0: off, the default: LSTM H = 1024 fwd+bwd with pipeline=1 took
          5.89 / 5.21 ms (tf32 / bf16, S = 64) and 9.21 / 7.81 (S = 128)
          (h200-20261204-precision-h1024-pipelined.json) against 5.96 / 5.19 and 9.37 / 8.02 without,
          in another process (h200-20261204-precision-h1024-dynamic-smem.json); back to back on
          one H100 5.883 / 5.223 and 9.238 / 7.527 against 5.674 / 5.134 and 8.903 / 7.725 ms
          (h100-20261206-precision-h1024-pipeline-1.json, -0.json): faster only in bf16 at S = 128.
skip      1: in the loops of a variable-length graph (rnngraph/lengths.py) the GEMM work items
          take the streams in the buffers' stream order (longest first when the caller sets it
          from the lengths, codegen/buffers.py) and at each step run only over the streams still
          within their lengths; the forward outputs the others would store are zeroed before the
          kernel, and in the backward they would add zero. Exact: a padded step's values are
          only held or zeroed, and no gradient reaches it. Graphs without lengths get
          the same code either way (cpu-20261203-loop-skip-source-identity.json). 1 / 0: LSTM
          B=64, lengths in [30, 100), forward + backward 4.58 vs 4.81 ms (padded without lengths
          4.43 / 4.42; h200-20261203-torch-lengths-varlen-lstm-skip.json, -noskip.json).
tiles     1: the FFMA row loops as lane-owned tiles (codegen/loop_tiles.py: a lane computes up to 16
          outputs, e.g. 4 rows x 4 streams, over a slice of the inner dimension, reading 4 columns
          with 16-byte loads; the slices' sums meet in shared memory, no warp reduction) where a row
          loop allows it; 0: the work items of codegen/loop_gemm.py. 0: at S = 64, H = 512 on the
          H100 the tiles took 29.2 / 27.6 us a timestep (LSTM forward / backward) against 13.1 /
          15.7 as work items (h100-20261205-loop-tiles-lstm-s64.json): their 16-byte vector loads
          (a lane's streams 2 KiB apart) left the warps waiting on L1 (61.8 % of the stalls) and
          the shared loads had 3.4-way bank conflicts
          (h100-20261205-loop-ncu-lstm-s64-h512-fwd-tiles.txt).
groups    G > 1: the persistent loop kernel's blocks in G stream groups (codegen/loop_plan.py
          ``stream_groups``): block b works for group b // (blocks / G) on its S / G streams as one
          of blocks / G, so that a block owns G times the rows (more shared memory) and reads only
          its group's vectors from L2 (the S = 64 LSTM backward reads all 64 x 2,048 gate gradients
          into every block, 69 MB a timestep); where S and the grid divide by G, in loops without
          layer norms (unless ``lngroups``), flagged values, early loads, lengths or tensor-core products, and where a
          block's G times the weight rows fit its shared memory (LSTM H = 1024 in fp32 does not), else 1.
          4 from S = 64 (``GROUP_STREAMS``), else 1: at S = 64, H = 512 on the H100 the backward
          loop kernels took 13.5 / 17.2 / 11.5 us a timestep (LSTM / peephole LSTM / GRU) against
          15.7 / 20.6 / 12.9 with 1, the forwards 13.5 / 14.4 / 13.6 against 13.1 / 14.5 / 14.4;
          2: backward 13.9 / 17.8 (h100-20261205-loop-tiles-*-s64.json,
          h100-20261205-loop-groups-*-s64.json); the 2 x 512 S = 64 char LM's step 7.60 against
          7.90 ms (h100-20261205-startup-and-step-s64-groups-4.json, -items.json).
lngroups  1: stream groups (``groups``) also in loops with layer norms: each group's blocks own all
          of a row's elements for the group's streams, so the row sums index the group's streams
          past ``sbase`` (codegen/loop_layer_norm.py) and the sums buffer is zeroed by each group for
          its streams; where the layer norms' gain and bias gradients are summed in the loop
          (``post_loop_sums`` off) the plan keeps one group. 1 from S = 64 (with ``groups``): the
          layer-norm LSTM's S = 64, H = 512 loop kernels on the H100 took 22.9 / 31.2 us a timestep
          (forward / backward) in four groups with ``groupbar``, against 25.0 / 32.4 in one group,
          and 25.0 / 32.7 in four groups with one barrier over the grid
          (h100-20261206-loop-groupbar-layernorm_lstm-s64.json: two runs each).
fwdgroups 0: the forward loop kernels take ``groups`` as the backward ones do; 1, 2, 4 or 8: the
          stream groups of the forward loop kernels without layer norms (the backward's, and
          forward loops with layer norms, keep ``groups``). 1 from S = 64: the 2 x 512 S = 64 char
          LM's step on the H100 took 7.38 ms against 7.65 with the forward in four groups (PyTorch
          7.79 / 7.80 ms in the same runs; its forward loop kernels 1.28 against 1.39 ms each,
          h100-20261206-startup-and-step-s64-fwdgroups-1.json, -fwd-4-groups.json,
          h100-20261206-lm-step-trace-2x512-s64-fwdgroups-1.json, -fwd-4-groups.json), and the PyTorch
          layer's LSTM 2 x 512 at B = 64 8.28 against 8.48 ms (h100-20261206-torch-layer-b64-*.json).
          Not every cell's forward gains: at S = 64, H = 512 the GRU's forward loop kernel took
          14.58 us a timestep in one group against 13.65 in four with ``groupbar``, the peephole
          LSTM's 14.78 against 14.72 (h100-20261206-loop-fwdgroups-gru-s64.json,
          -peephole_lstm-s64.json); the layer-norm LSTM's 25.0 against 22.9
          (h100-20261206-loop-groupbar-layernorm_lstm-s64.json), hence its exception. Why the
          LSTM's forward is faster in one group is not yet known (the grouped kernel's product
          loop is shorter in PTX, both read the weights from shared memory).
groupbar  1: in stream groups (``groups`` > 1) with an inline barrier (``barrier`` > 0), a level
          ends with a barrier among the group's blocks only, on the group's own counter
          (codegen/grid_barrier.py ``group_barrier``): the groups never read each other's values
          in the time loop; 0: one barrier over the grid. 1 from S = 64 (with ``groups``): the
          LSTM's S = 64, H = 512 backward loop kernel on the H100 took 14.40 / 14.05 us a timestep
          against 14.75 / 14.46 with one barrier over the grid, its forward 15.49 / 15.53 against
          15.23 / 15.60 (h100-20261206-loop-groupbar-lstm-s64.json; the same forward took 14.17 in
          one group there: groups cost the LSTM's forward, not its backward).
blocks    B > 0: the persistent loop kernels' grid has B blocks where the device has more
          multiprocessors (each block then owns more units: more of its warps share the pointwise work
          at small S, fewer blocks meet at each grid barrier); 0: one block a multiprocessor. 0: the
          2 x 512 LSTM char-LM step at S = 8 on an H100 (132 multiprocessors) took 2.815 ms unread,
          3.158 / 2.982 / 3.257 with 66 / 88 / 110 blocks
          (h100-20261206-lm-step-loop-knobs-2x512-s8-blocks-threads.json).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..schedule_options import check_streams

#: Streams up to which a loop kernel takes the small-S code shape.
SMALL_SHAPE_STREAMS = 1
#: Streams up to which the loop kernels of S >= 2 run 256 threads a block (512 above)
SMALL_BLOCK_STREAMS = 8
#: Streams from which the layer norms' row sums take the register code shape (``lnsum=2``).
LN_SMEM_SUM_STREAMS = 2
#: Streams up to which the loop kernels of S >= 2 issue their early loads, flagged levels included
#: (``prefetch=2``)
EARLY_LOAD_STREAMS = 8
#: Streams from which the loop kernels run in four stream groups (``groups=4``, with ``lngroups``
#: and ``groupbar``; measured at S = 64 only: larger S read more vectors a timestep, which the
#: groups divide).
GROUP_STREAMS = 64

#: knob -> (what its value must be, the check): the ranges of the module docstring
_RANGES = {
    "threads": ("a multiple of 32 in [32, 1024]", lambda v: v % 32 == 0 and 32 <= v <= 1024),
    "unroll": ("in [1, 16]", lambda v: 1 <= v <= 16),
    "rows": ("in [1, 16]", lambda v: 1 <= v <= 16),
    "cols": ("in [1, 16]", lambda v: 1 <= v <= 16),
    "smem_kib": ("in [0, 48] (static shared memory)", lambda v: 0 <= v <= 48),
    "dsmem_kib": ("in [0, 176] (KiB of dynamic shared memory beside smem_kib's static)", lambda v: 0 <= v <= 176),
    "fast": ("0 or 1", lambda v: v in (0, 1)),
    "xreduce": ("0 or 1", lambda v: v in (0, 1)),
    "barrier": ("0, 1, 2 or 3", lambda v: v in (0, 1, 2, 3)),
    "lnsum": ("0, 1 or 2", lambda v: v in (0, 1, 2)),
    "bounds": ("0 or 1", lambda v: v in (0, 1)),
    "carveout": ("-1 (the driver's choice) or a percentage in [0, 100]", lambda v: -1 <= v <= 100),
    "ksplit": ("in [1, 32]", lambda v: 1 <= v <= 32),
    "prefetch": ("0, 1 or 2", lambda v: v in (0, 1, 2)),
    "skip": ("0 or 1", lambda v: v in (0, 1)),
    "pipeline": ("0 or 1", lambda v: v in (0, 1)),
    "tiles": ("0 or 1", lambda v: v in (0, 1)),
    "groups": ("1, 2, 4 or 8", lambda v: v in (1, 2, 4, 8)),
    "lngroups": ("0 or 1", lambda v: v in (0, 1)),
    "groupbar": ("0 or 1", lambda v: v in (0, 1)),
    "fwdgroups": ("0 (as groups), 1, 2, 4 or 8", lambda v: v in (0, 1, 2, 4, 8)),
    "blocks": ("0 (one a multiprocessor) or in [1, 1024]", lambda v: 0 <= v <= 1024),
}


def knob_problem(name: str, value) -> str | None:
    """What is wrong with ``value`` for knob ``name`` (e.g. ``"rows must be in [1, 16], got 17"``),
    or None when it is allowed. KeyError for an unknown knob."""
    what, ok = _RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} must be an integer {what}, got {value!r}"
    return None if ok(value) else f"{name} must be {what}, got {value}"


@dataclass(frozen=True)
class LoopTuning:
    """The persistent loop kernels' code shape: the knobs of the module docstring, each an int.
    The class defaults are the shape of S in (8, 64) (for S = 2 to 8 ``prefetch`` is 2 and
    ``threads`` 256; from S = 64
    ``groups`` is 4, ``lngroups`` and ``groupbar`` 1); :meth:`defaults` gives that of any S.
    Raises ValueError naming the knob and the value for one out of its range."""

    threads: int = 512
    unroll: int = 8
    rows: int = 8
    cols: int = 4
    smem_kib: int = 44
    dsmem_kib: int = 176
    fast: int = 0
    xreduce: int = 1
    barrier: int = 1
    lnsum: int = 2
    bounds: int = 1
    carveout: int = -1
    ksplit: int = 8
    prefetch: int = 0
    skip: int = 1
    pipeline: int = 0
    tiles: int = 0
    groups: int = 1
    lngroups: int = 0
    groupbar: int = 0
    fwdgroups: int = 0
    blocks: int = 0

    def __post_init__(self):
        for f in fields(self):
            problem = knob_problem(f.name, getattr(self, f.name))
            if problem:
                raise ValueError(f"LoopTuning.{problem}")

    @classmethod
    def defaults(cls, streams: int) -> "LoopTuning":
        """The measured best shape for loops over ``streams`` streams (see the module docstring).
        ValueError unless ``streams`` is a positive integer."""
        if check_streams(streams) <= SMALL_SHAPE_STREAMS:
            return cls(threads=256, unroll=16, rows=4, cols=8, xreduce=0, barrier=0, bounds=0, prefetch=1, dsmem_kib=0,
                       lnsum=0 if streams < LN_SMEM_SUM_STREAMS else 2)
        grouped = streams >= GROUP_STREAMS
        small = streams <= SMALL_BLOCK_STREAMS
        return cls(lnsum=0 if streams < LN_SMEM_SUM_STREAMS else 2, groups=4 if grouped else 1, lngroups=int(grouped),
                   groupbar=int(grouped), fwdgroups=int(grouped), prefetch=2 if streams <= EARLY_LOAD_STREAMS else 0,
                   threads=256 if small else 512)

    def replace(self, **changes) -> "LoopTuning":
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)

    def changed(self, streams: int) -> dict[str, int]:
        """The knobs that differ from :meth:`defaults` for ``streams``, knob -> this value."""
        base = LoopTuning.defaults(streams)
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}
