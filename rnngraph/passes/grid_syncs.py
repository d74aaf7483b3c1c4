"""grid_syncs: the levels of a persistent loop after which the grid must sync.

Assumes: a lowered Loop (kernels with levels, stages, reads and writes as ``name`` or
``name[t-d]``, ``d.`` for gradients); every value has its own storage row per timestep (the
(D + T, S, n) buffers of codegen/program.py: nothing is overwritten within a window); the
accesses *within* one level need no grid sync (the levels pass's guarantee, passes/levels.py);
the code generator splits each level's work by passes/ownership.py's ``level_unit`` (so the
same unit means the same block for the same element). Guarantees: ``grid_syncs(g, loop)``
lists the levels (1-based, in tick order; the last level's sync is the one between timesteps)
whose end needs a grid-wide barrier; after every other level a block only waits for its own
threads (``cuda.syncthreads()``).

A level boundary needs a grid sync when something the next level does touches an element that
another block touched since the last grid sync, one of the two being a write (read after
write, write after read, or write after write, of the same value at the same timestep). Who touches what
(passes/ownership.py): pointwise kernels, layer norms and GEMM outputs touch the block's own
elements, the same elements in every level with the same unit; a GEMM reads its whole input
vector. A layer norm's row sums read the summed row at the block's own elements and, forward,
the shift x[t-1, s, 0] of every row (a whole-vector read, codegen/layer_norm_fused.py's ``ln_shift``),
and every block adds into the sums (``sums:<layer norm>``, a whole-vector write). They are
taken either at the end of the level before the layer norm's (``Loop.early_sums``,
passes/row_sums.py: accesses of that level, with its unit; the layer norm then reads the
sums whole) or in a row-sum phase at the start of its level, which ends with its own
(reduction) sync that also orders everything before it.

Example, LSTM backward (levels: 1 = the pointwise VJP writing the gate gradients dG[t],
2 = the GEMM dh[t-1] += U^T dG[t]): level 2 reads all of dG[t], written by every block in
level 1: a sync after level 1. Level 1 of the next timestep reads dh[t-1] at its own units,
which its own block wrote in level 2, and writes dG[t-1], a row no block reads before the
next sync: no grid sync after level 2. One sync per timestep instead of two.

The decision is checked by simulating the ticks: accesses at timestep t - d of a stage with
offset o, seen from tick k, touch timestep k - o - d forward (in the backward the timestep counts
down: T - 1 - k + o - d); two accesses collide when they name the same value at the same timestep.
Boundaries are added until a simulation of enough ticks for any two accesses that could collide
finds no collision (the analysis assumes every stage active in every tick: a superset of the
real accesses). numba's CUDA simulator runs a cooperative kernel as one block (tests split its
threads into virtual blocks, but there a grid sync and a block's ``syncthreads`` are the same
barrier), so CPU tests cannot show a missing sync: tests/test_grid_syncs.py checks the result
with an element-level race check, and the GPU tier (tests/test_gpu.py) checks the kernels'
numbers on 132 blocks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import Graph
from ..ops import is_row_reduction
from ..schedule import Loop
from .ownership import level_unit
from .row_sums import summed_row

_REF = re.compile(r"^(?P<name>.+?)(?:\[t-(?P<d>\d+)\])?$")


@dataclass(frozen=True)
class Access:
    """One kernel's access to one value: ``value`` (``d.`` prefix for a gradient) at tick
    coordinate tick + ``rel`` (see the module docstring), ``write``, ``whole`` (every block reads
    the whole vector) or owned elements split by ``unit``."""

    value: str
    rel: int
    write: bool
    whole: bool
    unit: int


def value_ref(ref: str) -> tuple[str, int]:
    """(value, delay) of a kernel's read or write ``name`` / ``name[t-d]``."""
    m = _REF.match(ref)
    return m["name"], int(m["d"] or 0)


def _access(ref: str, offset: int, reverse: bool, write: bool, whole: bool, unit: int) -> Access:
    name, d = value_ref(ref)
    return Access(name, -offset + (d if reverse else -d), write, whole, unit)


def _collide(a: Access, ta: int, b: Access, tb: int) -> bool:
    """Whether ``a`` at tick ``ta`` and ``b`` at tick ``tb`` may touch one element from two blocks."""
    return (a.value == b.value and ta + a.rel == tb + b.rel and (a.write or b.write)
            and (a.whole or b.whole or a.unit != b.unit))


def level_accesses(g: Graph, loop: Loop, recompute: dict | None = None, flagged=()) -> list[tuple[list, list]]:
    """Per level (index 0 = level 1): (row-sum phase reads, kernel accesses) as Access lists.
    The row-sum phase is empty for a level without layer norms summed at its start; a layer
    norm in ``loop.early_sums`` adds its row-sum accesses to the previous level's instead
    (passes/row_sums.py), and its level reads the finished sums. A GEMM's whole-vector read of
    a value in ``flagged`` (passes/flag_exchange.py: its readers poll each element's timestep
    tag) is left out: it needs no barrier."""
    units, out = {}, []
    for level in range(1, loop.levels + 1):
        ks = [k for k in loop.kernels if k.level == level]
        units[level] = level_unit(g, ks, loop.reverse, recompute) if ks else 0
        out.append(([], []))
    for k in loop.kernels:
        u, (phase, body) = units[k.level], out[k.level - 1]
        gemm = k.kind == "gemm"
        for m, op in zip(k.ops, k.op_names):
            if is_row_reduction(op):
                early = m in loop.early_sums
                where, unit = (out[k.level - 2][1], units[k.level - 1]) if early else (phase, u)
                where += _row_sum_accesses(g, m, k.stage, loop.reverse, unit)
                if early:
                    body.append(_access(f"sums:{m}", k.stage, loop.reverse, False, True, u))
        body += [_access(r, k.stage, loop.reverse, False, gemm, u) for r in k.reads
                 if not (gemm and value_ref(r)[0] in flagged)]
        body += [_access(w, k.stage, loop.reverse, True, False, u) for w in k.writes]
    return out


def _row_sum_accesses(g: Graph, name: str, stage: int, reverse: bool, unit: int) -> list[Access]:
    """What the row sums of layer norm ``name`` touch, taken by blocks split by ``unit``: the
    summed row at the block's own elements; forward, the shift x[t-1, s, 0] of every row (a
    whole-vector read, codegen/layer_norm_fused.py's ``ln_shift``); and the sums themselves, added by
    every block (``sums:<name>``, a whole-vector write)."""
    row = summed_row(g, name, reverse)
    acc = [_access(row, stage, reverse, False, False, unit),
           _access(f"sums:{name}", stage, reverse, True, True, unit)]
    if not reverse:
        ref = g.by_name[name].args[0]
        acc.append(_access(f"{ref.node}[t-{ref.delay + 1}]", stage, reverse, False, True, unit))
    return acc


def _first_collision(levels: list[tuple[list, list]], syncs: set[int], ticks: int) -> int | None:
    """Simulate ``ticks`` ticks syncing after the levels in ``syncs``; return the level after
    which a missing sync lets two blocks collide (None: no collision)."""
    # accesses since the last grid sync, with their tick, by (value, tick + rel): only accesses of one
    # value at one timestep can collide, so a new access looks at those alone (comparing every
    # pair made a 100-layer wavefront's schedule take 2.4 s, quadratic in the layers)
    pending: dict[tuple[str, int], list[tuple[Access, int]]] = {}
    n = len(levels)

    def hits(new: Access, tick: int) -> bool:
        return any(_collide(p, tp, new, tick) for p, tp in pending.get((new.value, tick + new.rel), ()))
    for tick in range(ticks):
        for i, (phase, body) in enumerate(levels):
            before = i if i else n  # the boundary before level i+1 (after level i; level n for i = 0)
            if any(hits(new, tick) for new in phase):
                return before
            if phase:
                pending = {}  # the row-sum phase ends with the reduction sync
            if any(hits(new, tick) for new in body):
                return before
            for a in body:
                pending.setdefault((a.value, tick + a.rel), []).append((a, tick))
            if i + 1 in syncs:
                pending = {}
    return None


def grid_syncs(g: Graph, loop: Loop, recompute: dict | None = None, flagged=()) -> tuple[int, ...]:
    """The levels of ``loop`` after which its persistent kernel's grid syncs (see the module
    docstring); ``recompute``: node -> ops of the forward kernel computing it (backward loops);
    ``flagged``: values whose GEMM reads poll timestep tags instead (passes/flag_exchange.py).
    A loop in graph mode syncs after every level (each launch ends at a kernel boundary)."""
    if loop.mode != "persistent":
        return tuple(range(1, loop.levels + 1))
    return sync_levels(level_accesses(g, loop, recompute, flagged))


def sync_levels(levels: list[tuple[list, list]]) -> tuple[int, ...]:
    """The levels after which to sync, for per-level (row-sum phase reads, kernel accesses) as
    :func:`level_accesses` gives them: boundaries are added until the simulation finds no
    collision."""
    rels = [a.rel for phase, body in levels for a in phase + body] or [0]
    ticks = max(rels) - min(rels) + 3  # long enough for any two accesses that could collide to meet
    syncs: set[int] = set()
    while (level := _first_collision(levels, syncs, ticks)) is not None:
        syncs.add(level)
    return tuple(sorted(syncs))
