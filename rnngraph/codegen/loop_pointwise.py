"""A persistent loop kernel's fused pointwise kernels: their device functions (codegen/pointwise.py)
and the loop over a block's owned (column, unit) items that calls them.

A block owns units [j0, j0 + nj) of a level with unit u_L (passes/ownership.py); a pointwise
kernel with unit u runs u // u_L items a level unit, each thread taking items tid, tid + bdim, ...
of the S x nj x reps (column, element) pairs, columns slowest. A kernel with early loads
(codegen/loop_prefetch.py) takes its thread's first item's values from the tuple ``pf_<kernel>``.
"""
from __future__ import annotations

from ..ir import Graph
from ..schedule import Kernel, Loop, gradient_inputs
from .pointwise import PointwiseEmitter, buffer_key
from .source import Source


def owned_row(place: str, row: str, reps: int, uL: int, jj: str = "jj", j0: str = "j0") -> list[str]:
    """Lines setting ``row`` to the element at ``place`` among a block's owned ones: a block owns
    units [j0, j0 + nj) of a level with unit ``uL``, each ``reps`` times (rows j, j + uL, ...),
    numbered unit-major (place = jj * reps + rep); ``jj`` and ``j0`` name the variables used."""
    return [f"{jj} = {place} // {reps}", f"{row} = {j0} + {jj} + ({place} - {jj} * {reps}) * {uL}"]


def timestep(offset: int, reverse: bool) -> str:
    """The timestep a stage with ``offset`` works on at ``tick`` (backward: counting down)."""
    return f"T - 1 - (tick - {offset})" if reverse else f"tick - {offset}"


def pointwise_emitter(g: Graph, loop: Loop, k: Kernel, recompute: dict, flagged: dict, local: bool = False,
                      deferred=(), prefetch=(), fastmath: bool = False) -> PointwiseEmitter:
    """The emitter of pointwise kernel ``k``'s device function in ``loop`` (backward: its VJP,
    recomputing the forward kernel ``recompute`` names); ``flagged``: value buffer -> flag buffer;
    ``local``, ``deferred``, ``prefetch``: see codegen/pointwise.py's PointwiseEmitter."""
    return PointwiseEmitter(g, k.name, k.ops, gradient_inputs(k) if loop.reverse else k.writes,
                            recompute.get(k.ops[0]) if loop.reverse else None, local_param_grads=local,
                            deferred=deferred, prefetch=prefetch, flagged=flagged, fastmath=fastmath)


def made(e: PointwiseEmitter, reverse: bool) -> PointwiseEmitter:
    """``e`` after it made its device function (its loads, stores and buffers are then known)."""
    e.backward() if reverse else e.forward()
    return e


def device_function(g: Graph, loop: Loop, plan, item, recompute: dict) -> str:
    """The device function(s) of pointwise ``item`` (a PointwiseItem of LoopKernelPlan ``plan``):
    ``{kernel}_fwd`` or ``_bwd``, and with early loads also its ``_load`` and ``_pre`` twins."""
    e = pointwise_emitter(g, loop, item.kernel, recompute, dict(plan.flag_buffers), item.local, item.deferred,
                          item.prefetch.buffers if item.prefetch else (), fastmath="fastmath=True" in plan.jit_options)
    text = e.backward() if loop.reverse else e.forward()
    if item.prefetch:
        # the loads the plan's _load call passes buffers for (its kernel's, made the same way)
        assert tuple(e.early_buffers()) == item.prefetch.args, (item.kernel.name, e.early_buffers(), item.prefetch.args)
        text += "\n\n" + e.prefetch_functions(fn_name(item.kernel, loop.reverse))
    assert tuple(sorted(e.buffers, key=buffer_key)) == item.args, item.kernel.name
    return text


def fn_name(k: Kernel, reverse: bool) -> str:
    """The device function of pointwise kernel ``k``: ``{name}_fwd`` or ``{name}_bwd``."""
    return f"{k.name}_{'bwd' if reverse else 'fwd'}"


def emit_pointwise(src: Source, item, uL: int, reverse: bool) -> None:
    """The loop over the block's owned items of pointwise ``item`` (a PointwiseItem) in a level of
    unit ``uL``, calling its device function (the ``_pre`` twin for a thread's first item when the
    kernel has early loads)."""
    k, reps, fn = item.kernel, item.reps, fn_name(item.kernel, reverse)
    src(f"# {k.name}: pointwise, {len(k.ops)} ops, unit {item.unit}", "item = int64(tid)")
    with src.block(f"while item < S * nj * {reps}:"):
        src(f"s = item // (nj * {reps})", f"rem = item - s * (nj * {reps})", *owned_row("rem", "j", reps, uL))
        s = "sbase + s" if item.grouped else "s"  # stream groups: the place among the group's streams
        rest = f"{'rem, ' if item.local else ''}{', '.join(item.args)})"
        call = f"(t, {s}, j, {rest}"
        if item.prefetch:  # the thread's first item: its loads were issued a level early
            src.branch("item == tid", [f"{fn}_pre(t, {s}, j, pf_{k.name}, {rest}"], [f"{fn}{call}"])
        else:
            src(f"{fn}{call}")
        src("item += bdim")
