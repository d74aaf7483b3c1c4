"""The compiler: PIPELINE, the ordered passes, read top to bottom.

Each pass is a plain function with a docstring stating what it assumes and guarantees; all but
the last map a Plan (the graph plus what has been found) to a Plan, and ``lower`` ends with the
Schedule. With RNNGRAPH_DEBUG >= 1 the verifier runs between passes; with >= 2 a summary of the
plan after each pass is printed on stderr, under a line naming the graph, window, streams and
dtype, once per distinct compile: the same one again (a memory estimate, then the step, then an
evaluator of the same shape) prints that line only, ending ``as above``.
"""
from __future__ import annotations

import sys
from dataclasses import replace

from ..debug import debug_level
from ..ir import Graph
from ..precision import check_precision
from ..schedule import Schedule
from ..schedule_options import ScheduleOptions
from .fuse import fuse
from .hoist import hoist
from .levels import levels
from .lower import lower
from .merge_gemms import merge_gemms
from .naive import naive
from .pipeline import PLANS, pipeline
from .plan import Plan
from .recurrence import recurrence, recurrent_width
from .validate import validate
from .verify import verify

PIPELINE = (
    recurrence,   # loop SCCs of the folded graph; the zero-delay-cycle error
    hoist,        # everything else runs once per window over all T*S columns
    merge_gemms,  # linear ops reading the same value -> one GEMM
    fuse,         # pointwise ops and row reductions -> fused kernels
    levels,       # dependency levels inside one timestep (where a grid sync may be needed)
    pipeline,     # wavefront or scc-sequential, stage offsets, persistent or graph-replayed loops
)


def schedule(graph: Graph, window: int, streams: int, dtype: str = "float32", plan: str | None = None,
             options: ScheduleOptions | None = None, precision: str = "fp32") -> Schedule:
    """Compile ``graph`` into the Schedule of one training window of ``window`` timesteps over
    ``streams`` streams. ``plan`` forces "wavefront" or "scc-sequential" (default: the cost model),
    or asks for "naive" (one kernel per op per timestep: the baseline the passes are measured by).
    ``options``: what the passes decide beyond the graph (rnngraph/schedule_options.py; None:
    ``ScheduleOptions.defaults(streams, recurrent_width(graph), precision)``); the Schedule keeps them. ``precision``: the operand
    format of the once-per-window GEMMs (rnngraph/precision.py; the passes decide nothing by it,
    the Schedule records it for the backends and the dump).
    Raises GraphError (and subclasses) for an invalid graph; ValueError for window/streams < 1,
    an unknown precision or a reduced one with dtype float64 (one line naming it); TypeError for
    options that are not a ScheduleOptions."""
    check_precision(precision, dtype)
    for what, v in (("window", window), ("streams", streams)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{what} must be a positive integer, got {v!r}")
    if options is not None and not isinstance(options, ScheduleOptions):
        raise TypeError(f"options must be an rg.ScheduleOptions, got {type(options).__name__}")
    if options is None:
        options = ScheduleOptions.defaults(streams, recurrent_width(graph), precision)
    debug = debug_level()
    trace = debug >= 2 and _trace_heading(graph, window, streams, dtype, plan, options)
    state = Plan(validate(graph), window, streams, dtype, None if plan == "naive" else plan, options)
    for p in ((recurrence, naive) if plan == "naive" else PIPELINE):
        state = p(state)
        if debug >= 1:
            verify(state, p.__name__)
        if trace:
            print(f"    after {p.__name__:<12} {_summary(state)}", file=sys.stderr)
    sched = lower(state)
    return sched if precision == "fp32" else replace(sched, precision=precision)


_TRACED: set = set()  # the compiles whose passes RNNGRAPH_DEBUG=2 has printed


def _trace_heading(graph: Graph, window: int, streams: int, dtype: str, plan, options) -> bool:
    """Print the heading of a compile's pass summaries on stderr; whether to print them (not when
    the same compile was printed before: its heading then ends ``as above``)."""
    key = (str(graph), window, streams, dtype, plan, repr(options))
    again = key in _TRACED
    _TRACED.add(key)
    print(f"rnngraph: passes of {graph.name} window={window} streams={streams} {dtype}"
          + (f" plan={plan}" if plan else "") + (": as above" if again else ""), file=sys.stderr)
    return not again


def _summary(plan: Plan) -> str:
    return (f"loops={[len(lp) for lp in plan.loops]} phases={sorted(set(plan.phase_of.values()))} "
            f"gemm_groups={len(plan.gemm_groups)} kernels={len(plan.groups)} plan={plan.plan}")


__all__ = ["PIPELINE", "PLANS", "Plan", "ScheduleOptions", "schedule", "validate", "verify"] + [p.__name__ for p in PIPELINE] + [
    "lower", "naive"]
