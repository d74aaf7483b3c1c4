"""rg.Bidirectional in rg.Sequential: a cell and its reverse direction as one layer, two
independent loop SCCs the schedule runs in one loop, and the errors of misplacing it."""
import numpy as np
import pytest

import rnngraph as rg
from rnngraph.schedule import Loop


def test_the_two_directions_are_independent_sccs_in_one_loop():
    net = rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=4)), input_size=3)
    g = net.graph
    assert g.by_name["x"].size == 6 and g.by_name[g.outputs[0]].size == 8
    assert [s.name for s in g.states] == ["layer0.h", "layer0.c", "layer0_reverse.h", "layer0_reverse.c"]
    assert {"layer0.U.weight", "layer0_reverse.U.weight"} <= {p.name for p in g.params}
    sched = rg.compile_rnn(net, device="cpu").schedule(5, 1)
    loops = [st for st in sched.forward if isinstance(st, Loop)]
    assert len(loops) == 1  # both directions step in the same loop
    gemms = {op for k in loops[0].kernels if k.kind == "gemm" for op in k.ops}
    assert gemms == {"layer0.U", "layer0_reverse.U"}


def test_each_direction_reads_its_half_of_the_input():
    """The forward half of the output depends on the first half of the input only, the reverse
    half on the second only."""
    rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.gru(hidden=2)), input_size=2),
                         device="cpu", dtype="float64")
    x = np.random.default_rng(0).standard_normal((3, 1, 4))
    y, _ = rnn.forward(x)
    x2 = x.copy()
    x2[..., 2:] += 1.0
    y2, _ = rnn.forward(x2)
    np.testing.assert_array_equal(y2[..., :2], y[..., :2])
    assert np.abs(y2[..., 2:] - y[..., 2:]).max() > 1e-3


@pytest.mark.parametrize("layers, match", [
    ((rg.Bidirectional(rg.cells.lstm(hidden=2)), rg.cells.lstm(hidden=2)), "only recurrent layer"),
    ((rg.Embedding(5, 3), rg.Bidirectional(rg.cells.lstm(hidden=2))), "only recurrent layer, on float inputs"),
    ((rg.Bidirectional(rg.cells.lstm(hidden=2)), rg.MSE()), "a loss head cannot follow rg.Bidirectional"),
])
def test_a_bidirectional_layer_must_be_the_only_recurrent_layer(layers, match):
    with pytest.raises(rg.GraphError, match=match):
        rg.Sequential(*layers, input_size=3)


def test_bidirectional_takes_a_configured_cell():
    with pytest.raises(rg.GraphError, match="configured cell"):
        rg.Bidirectional(rg.cells.lstm)


def test_an_undoubled_input_is_named():
    rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=4)), input_size=3), device="cpu")
    with pytest.raises(rg.ShapeError, match=r"\(T, S, 6\) .*doubled for rg.Bidirectional: \[x, x reversed"):
        rnn.forward(np.zeros((5, 2, 3), np.float32))
