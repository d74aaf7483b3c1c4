"""Launch and code-shape parameters of the persistent loop kernels (``codegen/loop.py``).

Defaults are the H200 measurements' best, per number of streams S (bench/loop_sweep.py and the
grid, bench/results/h200-2026113*-*.json and h200-20261201-*; LSTM and layernorm_lstm H=512 T=100 fwd+bwd):

- code shape, S = 1 (``SMALL_SHAPE_STREAMS``): threads=256, unroll=16, rows=4, cols=8, smem_kib=44,
  bounds=0, xreduce=0, barrier=0, lnsum=0, prefetch=1, flags=1 (LSTM 1.73 ms vs 1.94 with the large-S shape of
  2026-11-30, measured twice; xreduce=1 is
  slower here: 1.84 vs 1.50 ms, bench/results/h200-20261130-loop-kernels-xreduce.log; unroll=2 until
  prefetch=1 came, see below; rows=2 and no flags before flags=1, see flags).
  S >= 2: threads=512, unroll=8, rows=8, cols=4, bounds=1, smem_kib=44, xreduce=1, barrier=1. Both: ksplit=8.
  Launch bounds (bench/results/h200-20261201-launch-bounds-sweep-*.json, fwd+bwd ms, cuDNN fp32 5.50 at
  S=64): launch bounds (at most 128 registers: 16 warps an SM instead of 8), 4 streams an item and
  unroll 8 took the LSTM S=64 from 5.21 to 4.61 ms, and rows=8 to 4.31 (4.33 as the default;
  unroll=16 4.32, cols=2 5.23); layernorm_lstm S=64 8.92 -> 8.61 -> 8.51, peephole_lstm S=64 5.51
  -> 5.12 -> 4.96, GRU S=64 4.21 -> 3.97 -> 4.04, LSTM S=16 2.69 -> 2.15 -> 2.09, S=8 1.79 (rows=4
  1.72; the old default not run), layernorm_lstm S=16 5.08 -> 5.21 -> 5.32 (the one case slower than before). The GPU
  tier passes with it (h200-20261201-launch-bounds-gpu.log). Before (2026-11-30 to the launch bounds):
  threads=512, unroll=4, rows=4, cols=8, smem_kib=44, xreduce=1, barrier=1 (bench/results/h200-20261130-loop-kernels-*:
  LSTM S=64 fwd+bwd 6.15 ms vs 9.48 with the earlier rows=1, smem_kib=0, tree reductions; 8.59
  with xreduce=1 alone, 8.13 rows=2, 6.34 rows=4 without the weights in shared memory, 7.22 with
  unroll=2). With the tree reductions rows > 1 had been slower (S=64 11.1-20.5 ms with rows=2).
  A block of 512 threads does not fit the registers of 32 accumulators: those kernels run with
  256. Work-item shape (bench/results/h200-20261201-lnsum2-sweep-*.json): a work item of 8 rows x 4
  streams instead of 4 x 8 (the block reads each timestep's input vectors half as often) took
  the LSTM S=64 forward from 2.63 to 2.42 ms (16 x 2: 2.43), but the backward, whose blocks own
  4 rows, slowed down with 4 streams an item (fwd+bwd 6.33 vs 5.60): so rows and cols are upper
  bounds, a GEMM taking min(rows, the block's rows) and then up to GEMM_ACCUMULATORS // rows
  streams (codegen/loop.py; rows=8: forward 8 x 4, backward 4 x 8). rows=8 stayed off then: with
  barrier=1 the LSTM S=64 forward took 3.57 ms (twice, in two runs) against 2.42 with barrier=0
  and 2.36 with rows=4 (same registers, 130, no spills; cause unknown), though layernorm_lstm S=64
  was fastest with it (9.18 ms vs 9.48 with rows=4). With the uint64 column index and
  the launch bounds the LSTM S=64 forward is fastest with rows=8 (1.67 ms vs 1.96).
- layer norms, ``ln=1`` for S <= 64 (``LN_PERSISTENT_STREAMS``), with ``lnsum=2`` from S=2
  (``LN_SMEM_SUM_STREAMS``). lnsum=2 (row sums in registers, no shared-memory
  atomics) took layernorm_lstm S=64 from 10.16 to 9.84 ms (9.48 with barrier=1), S=16 from 6.27
  to 5.61 (5.38; bench/results/h200-20261201-lnsum2-sweep-lnsum2.json). Before that
  (bench/results/h200-20261201-lnsum-sweep-*.json,
  layernorm_lstm fwd+bwd): S=64 graph mode 18.5 ms, persistent with lnsum=0 17.6, lnsum=1 10.5,
  and 10.3 once the row sums moved a level early (passes/row_sums.py); S=16 15.6 / 10.0 / 6.2 /
  6.2; S=1 13.9 graph mode, persistent 3.5 with lnsum=0 (2.9 with the early sums) vs 4.2 with
  lnsum=1, the warp shape's one column being all the work there is. Earlier: S=1 / 8 / 16
  4.49 / 7.65 / 9.49 ms persistent vs 14.2 / 15.9 / 16.6 graph mode (2026-11-30, bench/results/h200-20261130-grid.json).

Tried and dropped: copying each timestep's GEMM input vectors into shared memory before the
inner products (commit c14f0ec, ``stage=1``; correct on the H200 but LSTM S=1 1.83 vs 1.73 ms,
bench/results/h200-20261130-stage-sweep.*): the vector loads are not what the S=1 timestep waits on.

``RNNGRAPH_LOOP`` overrides them key by key for tuning runs (the keys it leaves out keep the
default for the step's S), e.g. ``RNNGRAPH_LOOP="threads=256,unroll=2,rows=2,smem_kib=44"``:

threads   threads per block of a persistent kernel (a multiple of 32, at most 1024); the grid is
          one block per multiprocessor, so this is the number of warps an SM works with. A kernel
          whose registers don't allow it is launched with half as many (and so on).
unroll    inner-product iterations per loop trip (independent loads in flight per lane).
rows      GEMM rows per work item at most (register blocking: each vector element loaded once
          serves this many rows; a work item is rows x cols streams, reduced across a warp); a
          GEMM whose blocks own fewer rows takes that many.
cols      GEMM streams (columns) per work item at most (and at most S and GEMM_ACCUMULATORS // the
          item's rows): each weight element loaded once serves this many streams. A block reads
          its vectors (its rows / rows) times a timestep, its shared-memory weight rows S / cols times.
smem_kib  shared memory (KiB, static: at most 48) a block may fill with its owned rows of the
          recurrent weights, loaded once per launch; GEMMs whose rows don't fit read the weights
          from global memory (L2) every timestep. 0 turns it off (default 44).
ln        1: loops with a layer norm in the recurrence (e.g. ``layernorm_lstm``) run as one
          persistent kernel too (blocks add partial row sums with atomics, a grid sync, then
          each normalises its own units: the sums are taken at the end of the level before
          where that level writes the row, else with an extra "reduction" sync; see
          codegen/loop.py and passes/row_sums.py); read by the pipeline pass, which marks such
          loops persistent (validated on the H200 by tests/test_gpu.py). 0: they run per
          timestep (graph mode), which had been faster at S=64 before the row sums of ``lnsum=1``.
fast      1: compile the persistent loop kernels with numba's ``fastmath=True`` (approximate exp
          and division in the gate functions, flush-to-zero, reassociation): LSTM S=1 forward
          kernel 4.3 vs 4.9 us a timestep, backward 8.7 vs 9.4 (bench/loop_profile.py); but GRU
          S=1 fwd+bwd is slower (1.60 vs 1.46 ms) and layernorm_lstm S=1 falls outside the GPU
          tier's float32 tolerance (bench/results/h200-20261130-loop-kernels-gpu-tests.log): off.
xreduce   1: a GEMM work item's rows x streams partial sums (at most 32) are summed across the
          warp by the transpose butterfly (codegen/warp_reduce.py: 31 shuffles for 32 sums, stored
          by 32 lanes at once) instead of one 5-step tree per sum (160 shuffles, lane 0 storing).
barrier   1: the grid syncs between levels are codegen/grid_barrier.py's barrier inlined into the
          kernel (one atomic add and a polled relaxed load per block, on the kernel's own
          counter) instead of numba's ``grid.sync()``, a call into the CUDA device runtime; 2:
          the same with a ~32 ns sleep between polls; 3: arriving with ``red.release.gpu`` (no
          returned value: the poll starts at once) and the phase kept by the block. Measured
          (bench/loop_profile.py, kernels alone, us a timestep, barrier 0 / 1 / 3, one run each,
          bench/results/h200-20261201-prefetch-prof*-barrier*.json): LSTM S=1 forward 4.81 /
          5.14 / 5.76, backward 5.25 / 5.38 / 6.03, a loop of grid syncs alone 2.0-2.6 us with
          each of them; LSTM S=64 (barrier 1 / 3) forward 14.29 / 13.81, backward 16.97 / 16.72
          (the whole forward, prologue included, 1.656 / 1.683 ms): not better at S=1, perhaps at
          S=64 (not run end to end nor in the GPU tier yet).
          The simulator always runs ``grid.sync()``.
          Inline (bench/results/h200-20261201-lnsum-sweep-barrier.json, fwd+bwd ms,
          barrier 0 / 1 / 2): LSTM S=64 5.60 / 5.39 / 5.34, GRU S=1 1.29 / 1.24 / 1.23,
          layernorm_lstm S=1 3.26 / 3.02 / 2.99, but LSTM S=1 1.19 / 1.49 / 1.52 (its backward
          kernel 9.7 vs 7.1 us a timestep, 6.9 vs 4.3 even with every barrier knocked out: not the
          barrier's own cost; cause unknown). With the lnsum=1 defaults of then:
          layernorm_lstm S=64 10.27 / 9.97, S=16 6.22 / 6.10, S=1 2.92 / 3.17. The default from
          S=2 (LSTM S=64 5.38 vs 5.59 in a first run, 5.35 in a last one,
          bench/results/h200-20261201-lnsum2-sweep-*.json; layernorm_lstm S=64 9.48 vs 9.84 with lnsum=2, S=16 5.38
          vs 5.61; the GPU tier's
          S=64 cases pass with it); off at S=1, where the LSTM is slower with it.
bounds    1: compile the persistent loop kernels with launch bounds of ``threads`` threads a block
          (numba's ``launch_bounds``), so the compiler holds the registers to what that many
          threads may use (65536 / threads; it spills the rest) instead of the launcher halving
          the block (e.g. the S=64 LSTM forward kernel takes 130 registers: 256 threads run, not
          512). Default from S=2 (with cols=4, so that an item's accumulators fit:
          bounds=1 alone spilled, LSTM S=64 5.87 vs 5.34 ms,
          bench/results/h200-20261201-signed-index-sweep-bounds-carveout.json).
carveout  the share of the L1/shared-memory array given to shared memory, in percent (numba's
          ``shared_memory_carveout``; -1, the default: the driver's choice). The GEMMs read each
          timestep's vectors through L1; a small carveout leaves L1 more room. carveout=0 made no
          difference (LSTM S=64 5.340 vs 5.34 ms, bench/results/h200-20261201-signed-index-sweep-bounds-carveout.json).
lnsum     the code shape of the layer norms' row sums in persistent loops (codegen/loop.py):
          0, a warp per column, shuffles; 1, all threads over (element, column) pairs with the
          partial sums added into shared memory by atomics (compare-and-swap loops on the GPU);
          2, a column per thread (bdim // S threads a column), sums in registers, the partial
          sums meeting in shared memory without atomics (two block barriers instead of three).
          For the layer norms whose gain and bias gradients stay in the loop (``lngrad=0``, or an
          output gradient not complete in memory), 1 and 2 also sum them over the window in
          shared memory (one global atomic per element per block at the end instead of one per
          element, timestep and column). Their shared arrays come out of the ``smem_kib`` budget
          first (lnsum=1: 5 floats a stream; 2: 2 floats a thread, at least a stream), then the
          gradient sums; a kernel whose budget cannot hold them keeps the warp shape (or global
          gradient atomics).
lngrad    where a persistent backward loop takes its layer norms' gain and bias gradients (sums
          over t and s of g * xhat and of g): 1 (default), after the loop, by a column-sum kernel
          over the window wherever the layer norm's output gradient is complete in its gradient
          buffer (the schedule's ``reduce`` kernels after the loop, passes/param_grad_sums.py;
          codegen/ln_param_grads.py); 0, inside the loop (shared-memory sums with ``lnsum``,
          else global atomics). Shared-memory float atomics are compare-and-swap loops on the H200
          (``ATOMS.CAST.SPIN``): with 8 lanes of a warp on one address they retried enough to cost
          the layernorm_lstm S=64 backward 0.9 ms of its 4.35 (bench/results/h200-20261201-lngrad-trace-modes.json,
          bench/kernel_trace.py
          --modes: 3.45 ms with an all-zero output gradient, whose adds never change the value).
          Read when the schedule is built (``Loop.post_sums``), not by the loop emitter.
ksplit    at most this many warps of a block share one GEMM work item of a persistent loop when
          the block has fewer work items than warps: KS = min(ksplit, warps // work items), each
          of the KS warps taking every KS-th chunk of 32 of the inner dimension (e.g. the S=1 LSTM
          backward: a block owns 4 rows of the transposed recurrent weights, 2048 long, i.e. 2
          work items of rows=2 for 8 warps, so 6 warps idled and each busy lane walked 64
          elements; now KS = 4); the warps' reduced partial sums meet in a small shared array
          (out of the ``smem_kib`` budget) and, after a block barrier, a thread per output adds
          them. 1: off. Default 8 (bench/results/h200-20261201-ksplit-*, fwd+bwd:
          S=1 LSTM 1.106 -> 0.986 ms, GRU 1.039 -> 0.996, peephole_lstm 1.374 -> 1.279,
          layernorm_lstm 2.638 -> 2.527, with rows=4 or threads=512 slower but for GRU; S=16 LSTM
          2.032 -> 1.884, measured with ksplit=4, whose code is the same as 8's there (forward 2
          ways, backward 4), the two figures from two runs; S=2 to 8 split too, not measured; at
          S=64 a block has as many work items as warps: no split, the same code as before).
prefetch  1: a persistent loop's pointwise kernels issue the loads that nothing between can
          change a level early, into registers (codegen/loop.py ``_prefetch_plans``): the forward
          LSTM's input projection and old cell state before the block's gate rows, the backward
          LSTM's forward values and old gradients of timestep t-1 during timestep t's product
          (after the grid sync). Only kernels whose loads left in place are GEMM outputs (and, in
          the backward, the recomputed layer norms' moments), and no kernel with a layer norm of
          its own. Measured (bench/results/h200-20261201-prefetch-*, S=1 fwd+bwd ms, each pair
          from one run): LSTM 0.994 -> 0.958 with prefetch, 0.945 with unroll=16 too (0.963 with
          unroll=8; 0.970 with a "loads first" reordering of the unrolled trips that compiles to
          the same PTX: run-to-run noise is about 1 %), GRU 1.008 -> 0.942; on every kernel
          (before the rule above) peephole_lstm 1.269 -> 1.334 and layernorm_lstm 2.506 -> 2.720,
          LSTM S=64 4.146 -> 4.707. With the rule, the S=1 defaults against the earlier shape
          (prefetch=0, unroll=2) in one run: LSTM 0.945 vs 0.984, GRU 0.932 vs 0.993,
          peephole_lstm 1.230 vs 1.260, layernorm_lstm 2.464 vs 2.503 (their forwards alone: GRU
          0.452 vs 0.442, peephole_lstm 0.558 vs 0.539, slower). On at S=1 only. Kernels alone
          (bench/loop_profile.py): the generated S=1 LSTM loops with it 4.81 / 5.25 us a
          timestep forward / backward; hand-written variants (bench/experiments/lstm_s1_hand_variants/gen.py) with
          the same
          early loads took 4.6-4.7 backward against 5.3-5.8 for the generated code without them,
          and 4.3-4.4 forward with each lane's 16 vector loads unrolled.
flags     1: a persistent loop's GEMM input vectors written by one pointwise kernel of the loop
          (the LSTM's h forward, its gate gradients backward) are also stored as 64-bit words of
          (value, timestep tag), and the GEMMs poll those words instead of waiting at a grid sync
          (passes/flag_exchange.py, codegen/flag_exchange.py; read when the schedule is built,
          ``Loop.flagged``, where it removes grid syncs: loops of one stage without layer norms).
          Measured (bench/results/h200-20261201-flags-*, S=1 fwd+bwd ms, one run each):
          with rows=2 LSTM 0.950 -> 0.991 (its forward 0.430 -> 0.564: every warp of a block
          polled the whole h from L2 where the plain loads had hit L1), GRU 0.953 -> 0.834,
          peephole_lstm 1.242 -> 1.184; with rows=4 (fewer, split work items: each block reads
          h four times a timestep instead of eight) LSTM 0.947 -> 0.752, GRU 0.939 -> 0.693,
          peephole_lstm 1.237 -> 1.090 (rows=8 about the same; rows=8 without flags slower).
          Kernels alone (bench/loop_profile.py, flags=1,rows=8, ...-flags-prof-flags-rows8.json):
          LSTM forward 3.81, backward 4.21 us a timestep (before flags: 4.81 / 5.25,
          ...-prefetch-prof-barrier0.json); with rows=4 on the next machine 3.83 / 5.21
          (...-flags-prof-defaults.json; the backward's code is the same for rows 4 and 8:
          its blocks own 4 rows; kernels alone vary between machines), in the step 3.2 / 3.5
          (bench/kernel_trace.py, ...-flags-trace-final.json). On at S=1, with rows=4, which
          costs layernorm_lstm S=1 (no flags: its layer norms keep their syncs) 3 %: 2.466 ->
          2.542 ms (...-flags-sweep-defaults.json).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

_ENV = "RNNGRAPH_LOOP"
#: Streams up to which a loop kernel takes the small-S code shape (see the module docstring).
SMALL_SHAPE_STREAMS = 1
#: Streams up to which layer norms run inside the persistent kernel by default.
LN_PERSISTENT_STREAMS = 64
#: Streams from which the layer norms' row sums take the shared-memory code shape (``lnsum``).
LN_SMEM_SUM_STREAMS = 2


@dataclass(frozen=True)
class LoopTuning:
    """See the module docstring. Raises ValueError (naming ``RNNGRAPH_LOOP``) for bad values."""

    threads: int = 512
    unroll: int = 8
    rows: int = 8
    cols: int = 4
    smem_kib: int = 44
    ln: int = 0
    fast: int = 0
    xreduce: int = 1
    barrier: int = 1
    lnsum: int = 2
    bounds: int = 1
    carveout: int = -1
    lngrad: int = 1
    ksplit: int = 8
    prefetch: int = 0
    flags: int = 0

    def __post_init__(self):
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            raise ValueError(f"{_ENV}: threads must be a multiple of 32 in [32, 1024], got {self.threads}")
        if not 1 <= self.unroll <= 16:
            raise ValueError(f"{_ENV}: unroll must be in [1, 16], got {self.unroll}")
        if not 1 <= self.rows <= 16:
            raise ValueError(f"{_ENV}: rows must be in [1, 16], got {self.rows}")
        if not 1 <= self.cols <= 16:
            raise ValueError(f"{_ENV}: cols must be in [1, 16], got {self.cols}")
        if not 0 <= self.smem_kib <= 48:
            raise ValueError(f"{_ENV}: smem_kib must be in [0, 48] (static shared memory), got {self.smem_kib}")
        if self.barrier not in (0, 1, 2, 3):
            raise ValueError(f"{_ENV}: barrier must be 0, 1, 2 or 3, got {self.barrier}")
        if self.lnsum not in (0, 1, 2):
            raise ValueError(f"{_ENV}: lnsum must be 0, 1 or 2, got {self.lnsum}")
        if not 1 <= self.ksplit <= 32:
            raise ValueError(f"{_ENV}: ksplit must be in [1, 32], got {self.ksplit}")
        if not -1 <= self.carveout <= 100:
            raise ValueError(f"{_ENV}: carveout must be -1 (the driver's choice) or a percentage in [0, 100], "
                             f"got {self.carveout}")
        for knob in ("ln", "fast", "xreduce", "bounds", "lngrad", "prefetch", "flags"):
            if getattr(self, knob) not in (0, 1):
                raise ValueError(f"{_ENV}: {knob} must be 0 or 1, got {getattr(self, knob)}")


def default_tuning(streams: int | None = None) -> LoopTuning:
    """The measured best shape for a loop over ``streams`` streams (None: the large-S one)."""
    small = streams is not None and streams <= SMALL_SHAPE_STREAMS
    shape = LoopTuning(threads=256, unroll=16, rows=4, cols=8, smem_kib=44, xreduce=0, barrier=0, bounds=0,
                       prefetch=1, flags=1) if small else LoopTuning()
    return replace(shape, ln=int(streams is not None and streams <= LN_PERSISTENT_STREAMS),
                   lnsum=2 if streams is None or streams >= LN_SMEM_SUM_STREAMS else 0)


def loop_tuning(streams: int | None = None) -> LoopTuning:
    """:func:`default_tuning` for ``streams``, overridden key by key by
    ``RNNGRAPH_LOOP="key=value,..."`` (keys: threads, unroll, rows, cols, smem_kib, ln, fast, xreduce, barrier, lnsum, bounds, carveout,
    lngrad, ksplit, prefetch, flags)."""
    base = default_tuning(streams)
    text = os.environ.get(_ENV, "").strip()
    if not text:
        return base
    known = {f.name for f in fields(LoopTuning)}
    values = {}
    for item in filter(str.strip, text.split(",")):  # empty items (a trailing comma) are ignored
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"{_ENV}={text!r}: expected key=value pairs with keys {sorted(known)}, got {item!r}")
        if key not in known:
            raise ValueError(f"{_ENV}={text!r}: unknown key {key!r} (keys: {sorted(known)})")
        try:
            values[key] = int(val)
        except ValueError:
            raise ValueError(f"{_ENV}={text!r}: {key} must be an integer, got {val!r}") from None
    try:
        return replace(base, **values)
    except ValueError as e:  # a value out of range: name the variable's whole text, as parse errors do
        raise ValueError(f"{_ENV}={text!r}: {str(e).removeprefix(_ENV + ': ')}") from None
