"""flag_exchange: what a persistent loop hands between blocks through flagged words instead of a
grid barrier: the GEMM input vectors (``Loop.flagged``).

Assumes: a lowered Loop with its ``syncs`` (passes/grid_syncs.py; reads and writes as ``name`` or
``name[t-d]``, ``d.`` for gradients). Guarantees: ``flagged_values(g, loop, streams, recompute)``
names the values (``Loop.flagged``) whose every-block reads (a GEMM's whole input vector)
travel with their timestep: the one non-GEMM kernel of the loop that writes such a value (a
fused pointwise kernel, or one with a layer norm) also stores each element x[r, s, j] as one
64-bit word (the float32's bits and the tag r + 1, r its buffer row; codegen/flag_exchange.py),
and the GEMM polls those words until every tag it needs is there (the NCCL "LL" protocol's
idea: data and flag in one word, no fence between them). A grid sync that only made such a value whole is then left
out; ``grid_syncs(..., flagged)`` gives the syncs that remain. The lowering keeps the flags only
where syncs go away, when the schedule's ``options.flagged_exchange`` is on (by default up to
S = 8 outside tensor-core loops; ``options.flagged_forward``, by default at S = 1 only, False flags
the backward loops alone; rnngraph/schedule_options.py), for loops of one stage, where every flagged value:

- is written by exactly one kernel of the loop, not a GEMM, at delay 0 (each element once
  a timestep, complete when stored: a backward kernel also stores, with their tags, the chunks
  of a flagged gradient it adds nothing to, codegen/pointwise.py);
- is read by every GEMM that reads it after that write: at delay 0 by a GEMM on a later level
  of the same timestep, or (forward only) at delay d >= 1, the rows before the window (the
  initial state) being flagged by the kernel's prologue.

Example, layernorm_lstm at S = 1: h (written by the level-3 kernel with LN(c)) forward and d.U
(written by the level-3 kernel with LN_h's VJP) backward, read whole by the next level's GEMM:
3 grid syncs a timestep become 2 each way (the layer norms' row sums keep theirs; H = 512
fwd+bwd 2.521 -> 2.255 ms, bench/results/h200-20261204-ln-flags-sweep.json).

Not flagged: the layer norms' row sums. Tried at S = 1 as each block's partial sums in tagged
words (after a fence), polled and added by every block instead of the grid barrier after
their level, on top of the flagged h and d.U: H = 512 fwd+bwd 2.670 ms against 2.532 with
nothing flagged in the same process (and 12.0 against 6.9 ms at S = 64;
bench/results/h200-20261204-ln-sum-words-sweep.json), where h and d.U alone took 2.255 in an
earlier one. Likely cause (not measured): every block polls every block's words, where a
barrier has all of them add to one counter.

Why: at S=1 the LSTM's grid sync took 2.0-2.6 us of each ~5 us timestep (H200,
bench/results/h200-20261201-prefetch-prof-barrier*.json; bench/sync_micro.py, bench/loop_profile.py), one sync a
timestep forward and backward; with
the flags a block waits only for the words it reads, one L2 round trip after they are written.
Each buffer row is written once a launch, so the flag words need no reuse protocol; the kernel
zeroes them at its start (then one grid sync).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Graph
from ..schedule import Loop
from ..schedule_options import ScheduleOptions
from .grid_syncs import grid_syncs, value_ref as _ref


def flag_candidates(loop: Loop) -> tuple[str, ...]:
    """The GEMM inputs of ``loop`` that may be flagged (see the module docstring), in kernel order."""
    if loop.mode != "persistent" or len(loop.stages) != 1:
        return ()
    reads = [(k, *_ref(r)) for k in loop.kernels if k.kind == "gemm" for r in k.reads]
    out = []
    for name in dict.fromkeys(name for _, name, _ in reads):
        writers = {(x, _ref(w)[1]) for x in loop.kernels for w in x.writes if _ref(w)[0] == name}
        if len(writers) != 1:  # (a kernel writing slices of the value lists it once a slice)
            continue
        (x, wd), = writers
        # every GEMM read of the value polls its words: each must come after the write
        ordered = all(x.level < k.level if d == 0 else not loop.reverse for k, n, d in reads if n == name)
        if x.kind != "gemm" and wd == 0 and ordered:
            out.append(name)
    return tuple(out)


def flagged_values(g: Graph, loop: Loop, options: ScheduleOptions, recompute: dict | None = None) -> tuple[str, ...]:
    """The values of ``loop`` exchanged through flags (see the module docstring): its candidates
    when ``options.flagged_exchange`` is on (for a forward loop, ``options.flagged_forward`` too)
    and they remove at least one grid sync, else ()."""
    if not options.flagged_exchange or not (loop.reverse or options.flagged_forward):
        return ()
    names = flag_candidates(loop)
    if not names or len(grid_syncs(g, loop, recompute, names)) >= len(loop.sync_after):
        return ()
    return names


def with_flags(g: Graph, loop: Loop, options: ScheduleOptions, recompute: dict | None = None) -> Loop:
    """``loop`` with its :func:`flagged_values` and the grid syncs they leave (unchanged without)."""
    names = flagged_values(g, loop, options, recompute)
    return replace(loop, flagged=names, syncs=grid_syncs(g, loop, recompute, names)) if names else loop
