"""param_grad_sums: the layer norms of a persistent backward loop whose gain and bias gradients are
summed after the loop.

Assumes: a lowered backward Loop (kernels with ``reads`` as ``d.name`` / ``d.name[t-d]`` for the
gradients they take from memory). Guarantees: ``post_loop_sums(g, loop, streams)`` names, in kernel
order, the layer norms of a persistent backward loop whose output gradient is complete in its
gradient buffer once the loop is done (:func:`grad_in_memory`), when the schedule's
``options.post_loop_sums`` is on (the default; rnngraph/schedule_options.py). For each, lower adds
a ``reduce`` kernel to the phase after
the loop, which sums ``d gain = sum_{t,s} g * xhat`` and ``d bias = sum_{t,s} g`` over the window
(codegen/ln_param_grads.py on the GPU, the layer norm's VJP over the window in the NumPy backend),
and the loop computes only the layer norm's input gradient.

Why: inside the loop each block added its own elements' terms every timestep, and numba's float
atomics on shared memory are compare-and-swap loops on the H200 (``ATOMS.CAST.SPIN``), which retry
when lanes of a warp share an address and the values change. Measured on the H200 (bench/kernel_trace.py --modes,
bench/results/h200-20261201-lngrad-trace-modes.json): layernorm_lstm
S=64's backward loop at 4.35 ms with real gradients and 3.45 ms with an all-zero output gradient
(bench/kernel_trace.py --modes); with the sums after the loop, fwd+bwd went from 8.36 to 6.99 ms.
"""
from __future__ import annotations

from ..ir import Graph
from ..ops import is_row_reduction
from ..schedule import Loop, gradient_inputs
from ..schedule_options import ScheduleOptions


def grad_in_memory(g: Graph, ops, writes, node: str) -> bool:
    """Whether a backward kernel over ``ops`` finds the whole gradient of ``node`` in its gradient
    buffer: the node's gradient comes from other kernels (``writes``, the nodes whose gradient
    buffers it reads) and no op of the kernel reads the node at delay 0 (such an op adds to the
    gradient in a register, never stored). Delayed reads inside the kernel add into the buffer
    at the earlier timestep, before the reverse sweep gets there."""
    return node in writes and not any(r.node == node and r.delay == 0 for m in ops for r in g.by_name[m].args)


def post_loop_sums(g: Graph, loop: Loop, options: ScheduleOptions) -> tuple[str, ...]:
    """The layer norms of backward ``loop`` whose gain and bias gradients are summed after it (see
    the module docstring); () for a forward or graph-mode loop, or without ``options.post_loop_sums``."""
    if not loop.reverse or loop.mode != "persistent" or not options.post_loop_sums:
        return ()
    return tuple(m for k in loop.kernels for m, op in zip(k.ops, k.op_names)
                 if is_row_reduction(op) and grad_in_memory(g, k.ops, gradient_inputs(k), m))
