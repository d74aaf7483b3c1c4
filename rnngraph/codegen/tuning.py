"""Launch and code-shape parameters of the persistent loop kernels (``codegen/loop.py``).

Defaults are the H200 measurements' best, per number of streams S (bench/loop_sweep.py and the
grid, bench/results/h200-2026113*-*.json; LSTM and layernorm_lstm H=512 T=100 fwd+bwd):

- code shape, S = 1 (``SMALL_SHAPE_STREAMS``): threads=256, unroll=2, rows=2, smem_kib=44,
  xreduce=0 (LSTM 1.73 ms vs 1.94 with session 3's large-S shape, measured twice; xreduce=1 is
  slower here: 1.84 vs 1.50 ms, bench/results/h200-20261130-session4-xreduce.log).
  S >= 2: threads=512, unroll=4, rows=4, smem_kib=44, xreduce=1 (session 4: LSTM S=64 fwd+bwd
  6.15 ms vs 9.48 with session 3's rows=1, smem_kib=0, tree reductions; 8.59 with xreduce=1
  alone, 8.13 rows=2, 6.34 rows=4 without the weights in shared memory, 7.22 with unroll=2).
  With the tree reductions rows > 1 had been slower (S=64 11.1-20.5 ms with rows=2). A block of
  512 threads does not fit the registers of 4 rows x 8 streams of accumulators: those kernels
  run with 256.
- layer norms, ``ln=1`` for S <= 64 (``LN_PERSISTENT_STREAMS``), with ``lnsum=1`` from S=2
  (``LN_SMEM_SUM_STREAMS``). Session 6 (bench/results/h200-20261201-session6-sweep-*.json,
  layernorm_lstm fwd+bwd): S=64 graph mode 18.5 ms, persistent with lnsum=0 17.6, lnsum=1 10.5,
  and 10.3 once the row sums moved a level early (passes/row_sums.py); S=16 15.6 / 10.0 / 6.2 /
  6.2; S=1 13.9 graph mode, persistent 3.5 with lnsum=0 (2.9 with the early sums) vs 4.2 with
  lnsum=1, the warp shape's one column being all the work there is. Earlier: S=1 / 8 / 16
  4.49 / 7.65 / 9.49 ms persistent vs 14.2 / 15.9 / 16.6 graph mode (session 3).

Tried and dropped: copying each timestep's GEMM input vectors into shared memory before the
inner products (commit c14f0ec, ``stage=1``; correct on the H200 but LSTM S=1 1.83 vs 1.73 ms,
bench/results/h200-20261130-stage-sweep.*): the vector loads are not what the S=1 timestep waits on.

``RNNGRAPH_LOOP`` overrides them key by key for tuning runs (the keys it leaves out keep the
default for the step's S), e.g. ``RNNGRAPH_LOOP="threads=256,unroll=2,rows=2,smem_kib=44"``:

threads   threads per block of a persistent kernel (a multiple of 32, at most 1024); the grid is
          one block per multiprocessor, so this is the number of warps an SM works with. A kernel
          whose registers don't allow it is launched with half as many (and so on).
unroll    inner-product iterations per loop trip (independent loads in flight per lane).
rows      GEMM rows per work item (register blocking: each vector element loaded once serves
          this many rows; a work item is rows x cols streams, reduced across a warp).
cols      GEMM streams (columns) per work item (default 8, at most S): each weight element loaded
          once serves this many streams. A block reads its vectors (rows / block) / rows times
          over, its shared-memory weight rows S / cols times; rows x cols is at most 64.
smem_kib  shared memory (KiB, static: at most 48) a block may fill with its owned rows of the
          recurrent weights, loaded once per launch; GEMMs whose rows don't fit read the weights
          from global memory (L2) every timestep. 0 turns it off (default 44).
ln        1: loops with a layer norm in the recurrence (e.g. ``layernorm_lstm``) run as one
          persistent kernel too (blocks add partial row sums with atomics, a grid sync, then
          each normalises its own units: the sums are taken at the end of the level before
          where that level writes the row, else with an extra "reduction" sync; see
          codegen/loop.py and passes/row_sums.py); read by the pipeline pass, which marks such
          loops persistent (validated on the H200 by tests/test_gpu.py). 0: they run per
          timestep (graph mode), which had been faster at S=64 before session 6's row sums.
fast      1: compile the persistent loop kernels with numba's ``fastmath=True`` (approximate exp
          and division in the gate functions, flush-to-zero, reassociation): LSTM S=1 forward
          kernel 4.3 vs 4.9 us a timestep, backward 8.7 vs 9.4 (bench/loop_profile.py); but GRU
          S=1 fwd+bwd is slower (1.60 vs 1.46 ms) and layernorm_lstm S=1 falls outside the GPU
          tier's float32 tolerance (bench/results/h200-20261130-session4-gpu-tests.log): off.
xreduce   1: a GEMM work item's rows x streams partial sums (at most 32) are summed across the
          warp by the transpose butterfly (codegen/warp_reduce.py: 31 shuffles for 32 sums, stored
          by 32 lanes at once) instead of one 5-step tree per sum (160 shuffles, lane 0 storing).
barrier   1: the grid syncs between levels are codegen/grid_barrier.py's barrier inlined into the
          kernel (one atomic add and a polled relaxed load per block, on the kernel's own
          counter) instead of numba's ``grid.sync()``, a call into the CUDA device runtime; 2:
          the same with a ~32 ns sleep between polls. The simulator always runs ``grid.sync()``.
          Session 6 (inline, bench/results/h200-20261201-session6-sweep-*.json, fwd+bwd ms,
          barrier 0 / 1 / 2): LSTM S=64 5.60 / 5.39 / 5.34, GRU S=1 1.29 / 1.24 / 1.23,
          layernorm_lstm S=1 3.26 / 3.02 / 2.99, but LSTM S=1 1.19 / 1.49 / 1.52 (its backward
          kernel 9.7 vs 7.1 us a timestep, 6.9 vs 4.3 even with every barrier knocked out: not the
          barrier's own cost; cause unknown). With the defaults of the end of session 6:
          layernorm_lstm S=64 10.27 / 9.97, S=16 6.22 / 6.10, S=1 2.92 / 3.17. Off by default:
          the gains are 2-5 % and the GPU tier has not yet run with it beyond
          tests/test_gpu.py's inline-barrier cases (which pass) and one layernorm_lstm S=16
          case (just outside its float32 error bound, see the session's closing note).
lnsum     the code shape of the layer norms' row sums in persistent loops (codegen/loop.py):
          0, a warp per column, shuffles; 1, all threads over (element, column) pairs with the
          partial sums in shared memory, and the layer norms' gain and bias gradients summed
          over the window in shared memory (one global atomic per element per block at the
          end instead of one per element, timestep and column). Its shared arrays come out of
          the ``smem_kib`` budget first (5 floats a stream, then the gradient sums); a kernel
          whose budget cannot hold them keeps the warp shape (or global gradient atomics).
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
    unroll: int = 4
    rows: int = 4
    cols: int = 8
    smem_kib: int = 44
    ln: int = 0
    fast: int = 0
    xreduce: int = 1
    barrier: int = 0
    lnsum: int = 1

    def __post_init__(self):
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            raise ValueError(f"{_ENV}: threads must be a multiple of 32 in [32, 1024], got {self.threads}")
        if not 1 <= self.unroll <= 16:
            raise ValueError(f"{_ENV}: unroll must be in [1, 16], got {self.unroll}")
        if not 1 <= self.rows <= 16:
            raise ValueError(f"{_ENV}: rows must be in [1, 16], got {self.rows}")
        if not 1 <= self.cols <= 16:
            raise ValueError(f"{_ENV}: cols must be in [1, 16], got {self.cols}")
        if self.rows * self.cols > 64:
            raise ValueError(f"{_ENV}: rows x cols (accumulators per lane) must be at most 64, "
                             f"got {self.rows} x {self.cols}")
        if not 0 <= self.smem_kib <= 48:
            raise ValueError(f"{_ENV}: smem_kib must be in [0, 48] (static shared memory), got {self.smem_kib}")
        if self.barrier not in (0, 1, 2):
            raise ValueError(f"{_ENV}: barrier must be 0, 1 or 2, got {self.barrier}")
        for knob in ("ln", "fast", "xreduce", "lnsum"):
            if getattr(self, knob) not in (0, 1):
                raise ValueError(f"{_ENV}: {knob} must be 0 or 1, got {getattr(self, knob)}")


def default_tuning(streams: int | None = None) -> LoopTuning:
    """The measured best shape for a loop over ``streams`` streams (None: the large-S one)."""
    small = streams is not None and streams <= SMALL_SHAPE_STREAMS
    shape = LoopTuning(threads=256, unroll=2, rows=2, smem_kib=44, xreduce=0) if small else LoopTuning()
    return replace(shape, ln=int(streams is not None and streams <= LN_PERSISTENT_STREAMS),
                   lnsum=int(streams is None or streams >= LN_SMEM_SUM_STREAMS))


def loop_tuning(streams: int | None = None) -> LoopTuning:
    """:func:`default_tuning` for ``streams``, overridden key by key by
    ``RNNGRAPH_LOOP="key=value,..."`` (keys: threads, unroll, rows, cols, smem_kib, ln, fast, xreduce, barrier, lnsum)."""
    base = default_tuning(streams)
    text = os.environ.get(_ENV, "").strip()
    if not text:
        return base
    known = {f.name for f in fields(LoopTuning)}
    values = {}
    for item in filter(str.strip, text.split(",")):  # empty items (a trailing comma) are ignored
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or key not in known:
            raise ValueError(f"{_ENV}={text!r}: expected key=value pairs with keys {sorted(known)}, got {item!r}")
        try:
            values[key] = int(val)
        except ValueError:
            raise ValueError(f"{_ENV}={text!r}: {key} must be an integer, got {val!r}") from None
    return replace(base, **values)
