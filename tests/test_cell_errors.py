"""Errors in a user's cell function become one GraphError naming the cell and its source line
(the command line prints them as one line): NumPy applied to a traced value, any exception of the
cell's own code, a missing keyword argument."""
import numpy as np
import pytest

import rnngraph as rg


@rg.cell
def numpy_cell(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = np.tanh(z)
    return h_next, {"h": h_next}


@rg.cell
def broken_cell(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = z.no_such_method()
    return h_next, {"h": h_next}


@rg.cell
def gain_cell(x, h: rg.State, *, hidden: int, gain: float):
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")) * gain
    return h_next, {"h": h_next}


def _line(fn, text: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(fn.__wrapped__)
    return start + next(k for k, line in enumerate(lines) if text in line)


def test_numpy_on_a_traced_value_names_the_cell_line():
    with pytest.raises(rg.OpError, match=rf"NumPy's tanh .*test_cell_errors.py:{_line(numpy_cell, 'np.tanh')}\)"):
        rg.Sequential(numpy_cell(hidden=3), input_size=2).graph


def test_an_exception_in_the_cell_code_names_the_cell_and_line():
    with pytest.raises(rg.OpError, match=rf"cell 'broken_cell' raised AttributeError: .*no_such_method.*"
                                         rf"test_cell_errors.py:{_line(broken_cell, 'no_such_method')}\)"):
        rg.Sequential(broken_cell(hidden=3), input_size=2).graph


def test_a_missing_keyword_argument_is_named_when_the_cell_is_made():
    with pytest.raises(rg.GraphError, match="'gain_cell' needs the keyword argument\\(s\\) gain \\(given: hidden\\)"):
        gain_cell(hidden=3)
    assert rg.Sequential(gain_cell(hidden=3, gain=2.0), input_size=2).graph.states


@rg.cell
def sized_cell(x, h: rg.State(size=3)):
    """A cell that takes no hidden= (its state's size is fixed)."""
    h_next = rg.tanh(rg.linear(x, 3) + rg.linear(h, 3))
    return h_next, {"h": h_next}


def test_a_cell_without_hidden_is_told_that_stacks_pass_it():
    """rg.stacked (and the CLI's --hidden) pass hidden= to every cell: a cell without it hears why."""
    with pytest.raises(rg.GraphError, match="unexpected keyword argument 'hidden'; .*declare it as a keyword-only"):
        rg.stacked(sized_cell, 1, 3, input_size=2)
    assert rg.Sequential(sized_cell(), input_size=2).graph.states  # made without hidden= it traces


@rg.cell
def wide_third_tanh(x, h: rg.State, *, hidden: int):
    a = rg.tanh(rg.linear(x, hidden) + rg.linear(h, hidden, bias=False))
    b = rg.sigmoid(rg.tanh(a))
    z = rg.tanh(a) * rg.linear(x, hidden + 1, name="wide")
    return z + b, {"h": z}


def test_a_shape_error_deep_in_a_stack_names_its_layers_nodes():
    """An unnamed argument's provisional name counts the unnamed nodes of the same op before it in
    its layer alone (trace/builder.py's indexes; they replaced a scan of every node, which made
    tracing quadratic in the layers): the third tanh of layer 2 is ``layer2.tanh_2``."""
    net = rg.Sequential(rg.cells.lstm(hidden=4), rg.cells.lstm(hidden=4), wide_third_tanh(hidden=4), input_size=2)
    with pytest.raises(rg.ShapeError, match=r"node 'layer2.mul' \(op mul\): sizes differ: 'layer2.tanh_2' \[4\] "
                                            r"and 'layer2.wide' \[5\]"):
        net.graph


def test_numpy_scalars_count_as_numbers_on_either_side():
    """Before: ``np.float32(0.5) * z`` raised "NumPy's multiply was applied to a traced Value" (the
    scalar's own operator goes through NumPy), while ``z * np.float32(0.5)`` worked."""
    import numpy as np

    @rg.cell
    def scaled(x, h: rg.State, *, hidden: int):
        z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
        h_next = rg.tanh(np.float32(0.5) * z + (np.float32(3.0) - z) + (np.int64(2) + z) - z / np.float32(4.0))
        return h_next, {"h": h_next}

    @rg.cell
    def with_floats(x, h: rg.State, *, hidden: int):
        z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
        h_next = rg.tanh(0.5 * z + (3.0 - z) + (2.0 + z) - z / 4.0)
        return h_next, {"h": h_next}

    x = np.random.default_rng(0).normal(size=(4, 2, 2))
    y = [rg.compile_rnn(rg.Sequential(c(hidden=3), input_size=2), device="cpu", dtype="float64", seed=1)
         .forward(x, train=False)[0] for c in (scaled, with_floats)]
    np.testing.assert_array_equal(y[0], y[1])
    assert np.abs(y[0]).max() > 0.1

    @rg.cell
    def divided(x, h: rg.State, *, hidden: int):
        h_next = np.float32(2.0) / rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next}

    with pytest.raises(rg.OpError, match="NumPy's divide was applied to a traced Value"):
        rg.Sequential(divided(hidden=3), input_size=2).graph
