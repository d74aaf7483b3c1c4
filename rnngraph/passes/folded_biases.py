"""folded_biases: a once-per-window product's bias added by the loop product it is summed with.

An LSTM's gates are ``linear(x, W, b_W) + linear(h, U, b_U)``. The input product runs once per
window before its loop (a phase GEMM over (T * S, 4H), then a kernel adding b_W to every row:
the whole output read and written once more), the recurrent one inside the loop, whose store
already adds b_U. When a two-argument ``add`` reads both products at delay 0 and nothing else
reads either (no other consumer, no delay, neither seeded by a caller: an output, the loss or a
state's node), only their sum is ever read, so the loop's store can add b_W as well and the
window's bias kernel goes away. The gates' values are the same sum, rounded in another order:
W x + ((U h + b_U) + b_W) instead of (W x + b_W) + (U h + b_U).

Only for persistent forward loops (their GEMM store is one generated line,
codegen/loop_plan.py); a window product whose partner runs in a per-timestep (graph mode) loop
keeps its bias kernel: there the fold would add a second bias kernel every timestep. A graph
whose values are all read back (``TrainingStep.forward(all_values=True)``,
codegen/program.py ``every_value_written``) runs without the folds.

Measured before it (H100, LSTM 2 x 512 S = 64 char-LM step): the two layers' bias kernels took
0.099 ms a step (bench/results/h100-20261206-lm-step-trace-2x512-s64.json); with the folds the
step took 0.09 ms less (bench/HISTORY.md section 20, which also has S = 1 and 8).

Assumes: the forward steps of lower (Phases and Loops with their kernels). Guarantees:
:func:`fold_biases` returns the steps with each persistent Loop's ``folded_biases`` set to its
(loop product, window product) pairs; :func:`loop_folded` gathers them for the code generator
(codegen/library_launches.py leaves out the window products' bias kernels, codegen/loop_plan.py
adds their biases in the loop products' stores).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Graph
from ..schedule import Loop, Phase
from .twin_biases import sole_add_pairs


def fold_biases(graph: Graph, forward: list) -> list:
    """``forward`` with each persistent Loop's ``folded_biases``: (loop product, window product)
    for every pair of passes/twin_biases.py's ``sole_add_pairs`` whose window product (biased) is
    a GEMM of a Phase and whose other product is a GEMM of that Loop."""
    window = {m for s in forward if isinstance(s, Phase) for k in s.kernels if k.kind == "gemm" for m in k.ops}
    # (loop product candidate, biased window product), found once: a 100-layer stack has 100 loops
    pairs = [(m, w) for a, b in sole_add_pairs(graph) for m, w in ((a, b), (b, a))
             if w in window and len(graph.by_name[w].params) == 2]
    out = []
    for step in forward:
        if isinstance(step, Loop) and step.mode == "persistent" and not step.reverse:
            inside = {m for k in step.kernels if k.kind == "gemm" for m in k.ops}
            step = replace(step, folded_biases=tuple((m, w) for m, w in pairs if m in inside))
        out.append(step)
    return out


def loop_folded(steps) -> dict[str, str]:
    """Loop product -> the window product whose bias its store adds, over every loop of ``steps``."""
    return {m: w for s in steps if isinstance(s, Loop) for m, w in s.folded_biases}
