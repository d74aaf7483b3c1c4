"""The CUDA pieces of each row reduction (an op of kind ``row_reduction``: layer norm), keyed by
its registry entry's ``cuda_row`` (rnngraph/ops.py). The code generator reaches a row
reduction's code only through :func:`row_code`, so a new one (an RMSNorm) is an entry in the op
registry and one here; the passes know row reductions by their kind alone, and whether their
entry names CUDA pieces (passes/pipeline.py: a loop with one that names none runs per timestep).

A :class:`RowReductionCode` names, for one row reduction over a column's vector x with vector
parameters:

- ``library_forward(x, params, y, stream)`` / ``library_backward(x, params, gy, gx, param_grads,
  stream)``: the fixed kernels (codegen/library.py) for a row reduction outside a persistent loop,
  over (rows, n) views, over the window or at one timestep (codegen/program.py);
- ``forward(emitter, node, loaded)`` / ``backward(emitter, node, loaded, target)``: its code in a
  fused kernel of a persistent loop, written into a :class:`~.pointwise.PointwiseEmitter`'s
  device function from the column's row sums; its outputs only as the emitter's locals (forward)
  and its input gradients only through ``target`` (backward), never stored to a buffer directly:
  the emitter's ``store`` also writes the flag words of a flagged value (passes/flag_exchange.py);
- ``loop_sums(src, g, plan, sums, unit)``: a loop kernel block's partial row sums of the elements
  it owns (codegen/loop.py emits them where ``LoopKernelPlan`` puts them);
- ``param_grad_kernel(g, node, fn) -> (source, buffers)`` and ``param_grad_grid(size, rows)``:
  the kernel summing its parameter gradients over the window after a backward loop
  (``Loop.post_sums``, passes/param_grad_sums.py) and its launch grid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import ops
from . import layer_norm_fused, library
from .ln_param_grads import ln_param_grad_grid, ln_param_grad_kernel
from .loop_layer_norm import emit_row_sums


@dataclass(frozen=True)
class RowReductionCode:
    """The CUDA pieces of one row reduction (see the module docstring for the signatures)."""

    library_forward: Callable
    library_backward: Callable
    forward: Callable
    backward: Callable
    loop_sums: Callable
    param_grad_kernel: Callable
    param_grad_grid: Callable


ROW_REDUCTIONS: dict[str, RowReductionCode] = {
    "layer_norm": RowReductionCode(
        library_forward=lambda x, ps, y, stream: library.layer_norm_forward(x, ps[0], ps[1], y, stream=stream),
        library_backward=lambda x, ps, gy, gx, gps, stream: library.layer_norm_backward(
            x, ps[0], gy, gx, gps[0], gps[1], stream=stream),
        forward=layer_norm_fused.forward, backward=layer_norm_fused.backward, loop_sums=emit_row_sums,
        param_grad_kernel=ln_param_grad_kernel, param_grad_grid=ln_param_grad_grid),
}


def row_code(op: str) -> RowReductionCode:
    """The CUDA pieces of row reduction ``op``: the entry its registry entry's ``cuda_row`` names.
    NotImplementedError for an op without one (no GPU code), KeyError for an unknown op."""
    key = ops.REGISTRY[op].cuda_row
    if key is None:
        raise NotImplementedError(f"op {op!r} has no CUDA row-reduction code (cuda_row)")
    return ROW_REDUCTIONS[key]
