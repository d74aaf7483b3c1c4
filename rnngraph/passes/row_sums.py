"""row_sums: the layer norms of a persistent loop whose row sums can be taken one level early.

Assumes: a lowered Loop (kernels with levels, stages, reads and writes as ``name`` or
``name[t-d]``, ``d.`` for gradients) and codegen/loop.py's ownership (a level's work split by
passes/ownership.py's ``level_unit``). Guarantees: ``early_row_sums(g, loop)`` names the layer
norms whose summed row (forward: the input x; backward: the gradient of the output) is written,
at the same timestep and stage, by a kernel of the level just before the layer norm's. There
each block, after its own threads' writes (a block barrier), adds the partial row sums of the
elements it just wrote; the grid sync that ends that level then also completes the sums, and
the layer norm's level needs no reduction sync of its own. A block reads only elements it
wrote itself, so nothing else has to be visible yet: in the forward the row is written once;
in the backward the level's writes are read-modify-writes (codegen/pointwise.py, loop.py) that
already hold every earlier contribution, as the layer norm's level would need them anyway.

The forward sums are shifted by K = x[t-1, s, 0] (0 at t = 0; codegen/layer_norm_fused.py's
``ln_shift``), known to every block before the level ends, where x[t, s, 0] of the one-pass
moments' usual shift is not yet. Example, layernorm_lstm (forward levels: 1 the GEMM U h,
2 LN_h and the gates, 3 LN_c): LN_h's sums are taken at the end of level 1 from the GEMM rows
each block just computed, LN_c's at the end of level 2; the backward's LN_c (level 2) and LN_h
(level 3) sum the gradients written at levels 1 and 2. Forward: 3 grid syncs a timestep instead
of 3 + 2 reduction syncs; backward: still 3 (after levels 1, 2 and 3 instead of after level 3
plus 2 reduction syncs), the row sums now taken without a separate phase. (At S = 1 the flagged
h and d.U take one more away each way: passes/flag_exchange.py.) (The schedule's
critical path counts reduction syncs as levels, so it drops by more than the syncs do.)
"""
from __future__ import annotations

from ..ir import Graph
from ..ops import is_row_reduction
from ..schedule import Loop


def summed_row(g: Graph, name: str, reverse: bool) -> str:
    """The value whose row sums layer norm ``name`` needs, as a kernel reads/writes entry:
    its input ``x`` (``x[t-d]`` when delayed) forward, the gradient ``d.name`` of its output
    backward."""
    return f"d.{name}" if reverse else str(g.by_name[name].args[0])


def early_row_sums(g: Graph, loop: Loop) -> tuple[str, ...]:
    """The layer norms of ``loop`` whose row sums are taken at the end of the level before
    theirs (see the module docstring); () in graph mode."""
    if loop.mode != "persistent":
        return ()
    early = []
    for k in loop.kernels:
        for m, op in zip(k.ops, k.op_names):
            if not is_row_reduction(op) or k.level < 2:
                continue
            row = summed_row(g, m, loop.reverse)
            if any(p.level == k.level - 1 and p.stage == k.stage and row in p.writes for p in loop.kernels):
                early.append(m)
    return tuple(early)
