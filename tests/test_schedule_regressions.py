"""Graphs hypothesis found that broke the passes (one file each in tests/regressions/), kept as
regression tests: each must compile under both plans, pass the schedule checker for T = 1..4,
and execute to the same values and gradients as naive time-stepping.

- fuse_delayed_edge_in_phase: a phase node read with a delay by an earlier-listed node was
  fused with it, making the kernel order cyclic;
- group_split_body_epilogue: a fused group straddled the wavefront body and the epilogue;
- concurrent_gradient_writers: two stages' VJPs added into one gradient on the same level;
- between_node_read_with_delay: a node between loops read with a delay by another stage in the
  same tick.
"""
import os
import warnings

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.executor import ScheduleExecutor
from rnngraph.passes import schedule
from rnngraph.passes.verify import check_schedule

HERE = os.path.join(os.path.dirname(__file__), "regressions")
CASES = sorted(f[:-4] for f in os.listdir(HERE) if f.endswith(".txt"))


@pytest.mark.parametrize("plan", ["wavefront", "scc-sequential"])
@pytest.mark.parametrize("case", CASES)
def test_regression_graph(case, plan):
    with open(os.path.join(HERE, case + ".txt")) as f:
        g = rg.parse(f.read())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rg.UnusedWarning)
        s = schedule(g, 4, 2, "float64", plan)
    for T in range(1, 5):
        assert check_schedule(s, T) == []
    rng = np.random.default_rng(0)
    params = rg.init_params(s.graph)
    x = {"x": rng.normal(size=(4, 2, 3))}
    st = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(s.graph, 2).items()}
    dy = {o: rng.normal(size=(4, 2, 3)) for o in s.graph.outputs}
    ref, ex = rg.Reference(s.graph), ScheduleExecutor(s)
    g1 = ref.backward(ref.forward(params, x, st), dy)
    g2 = ex.backward(ex.forward(params, x, st), dy)
    for name in g1.params:
        np.testing.assert_allclose(g2.params[name], g1.params[name], atol=1e-12)
    for name in g1.states:
        np.testing.assert_allclose(g2.states[name], g1.states[name], atol=1e-12)
