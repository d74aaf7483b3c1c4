"""Hypothesis properties of the compiler over random cells (1 to 3 blocks, so several loop SCCs):
running the Schedule equals naive time-stepping (forward values and every gradient), every
unrolled dependency is respected, no two writers share a concurrent group."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rnngraph as rg
from rnngraph.executor import ScheduleExecutor
from rnngraph.passes import schedule
from rnngraph.passes.verify import check_schedule
from random_cells import random_graphs

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,  # the same examples every run
                    suppress_health_check=[HealthCheck.too_slow])
PLANS = st.sampled_from(["wavefront", "scc-sequential", "naive", None])


def _compile(g, plan, T=4, S=2):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rg.UnusedWarning)
        return schedule(g, T, S, "float64", plan)


def _run(g, executor, seed=0, T=4, S=2):
    rng = np.random.default_rng(seed)
    params = rg.init_params(g, seed)
    inputs = {"x": rng.normal(size=(T, S, g.node("x").size))}
    states = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()}
    dy = {o: rng.normal(size=(T, S, g.node(o).size)) for o in g.outputs}
    ds = {k: rng.normal(size=v.shape) for k, v in states.items()}
    f = executor.forward(params, inputs, states)
    return f, executor.backward(f, dy, ds)


@SETTINGS
@given(random_graphs(max_blocks=3, max_nodes=5), PLANS)
def test_schedule_execution_equals_naive_time_stepping(g, plan):
    s = _compile(g, plan)
    f1, g1 = _run(s.graph, rg.Reference(s.graph))
    f2, g2 = _run(s.graph, ScheduleExecutor(s))
    for name in f1.values:
        np.testing.assert_allclose(f2.values[name], f1.values[name], atol=1e-12, err_msg=name)
    for a, b in ((g1.params, g2.params), (g1.states, g2.states), (g1.inputs, g2.inputs)):
        for name in a:
            np.testing.assert_allclose(b[name], a[name], atol=1e-11, err_msg=name)


@SETTINGS
@given(random_graphs(max_blocks=3, max_nodes=5), PLANS, st.integers(1, 5))
def test_every_unrolled_dependency_is_respected(g, plan, T):
    s = _compile(g, plan)
    assert check_schedule(s, T) == []


@SETTINGS
@given(random_graphs(max_blocks=3, max_nodes=5), PLANS)
def test_each_node_in_exactly_one_forward_kernel(g, plan):
    s = _compile(g, plan)
    ops = [m for k in s.kernels("forward") for m in k.ops]
    computed = [n.name for n in s.graph.nodes if n.op not in ("input", "param")]
    assert sorted(ops) == sorted(computed)


@pytest.mark.parametrize("plan", ["wavefront", "scc-sequential"])
def test_checker_catches_a_race_and_a_misordered_kernel(plan):
    """The checker is not vacuous: break a sound schedule in two ways and it objects."""
    from dataclasses import replace
    from rnngraph.schedule import Loop

    net = rg.Sequential(rg.cells.lstm(hidden=2), rg.cells.lstm(hidden=2), input_size=2)
    s = schedule(net.graph, 3, 1, plan=plan)
    assert check_schedule(s) == []
    loop_i = next(i for i, st_ in enumerate(s.forward) if isinstance(st_, Loop))
    loop = s.forward[loop_i]
    reordered = replace(loop, kernels=tuple(reversed(loop.kernels)))  # pointwise before its GEMM
    bad = replace(s, forward=s.forward[:loop_i] + (reordered,) + s.forward[loop_i + 1:])
    assert any("reads" in p for p in check_schedule(bad))
    bloop_i = next(i for i, st_ in enumerate(s.backward) if isinstance(st_, Loop))
    bl = s.backward[bloop_i]
    flat = replace(bl, kernels=tuple(replace(k, level=1, stage=k.stage) for k in bl.kernels), levels=1)
    bad = replace(s, backward=s.backward[:bloop_i] + (flat,) + s.backward[bloop_i + 1:])
    assert check_schedule(bad)
