"""Each validation error names the offending node, op, parameter or state."""
import warnings

import pytest

import rnngraph as rg
from rnngraph.ir import Graph, Init, Node, Param, Ref, State


def _graph(nodes, states=(), params=(), outputs=None):
    return Graph("g", tuple(params), tuple(nodes), tuple(states), outputs or (nodes[-1].name,))


X = Node("x", "input", size=3)


def test_zero_delay_cycle_prints_the_cycle():
    g = _graph([X, Node("a", "add", (Ref("x"), Ref("b")), size=3), Node("b", "tanh", (Ref("a"),), size=3)])
    with pytest.raises(rg.CycleError, match=r"total delay 0: (a -> b -> a|b -> a -> b)"):
        rg.passes.validate(g)


def test_zero_delay_cycle_in_a_custom_cell():
    @rg.cell
    def bad(x, h: rg.State, *, hidden):
        a = rg.tanh(x + h)
        return a, {"h": a}

    # a cell cannot build a zero-delay cycle through states, so the IR is where one can appear
    text = str(rg.Sequential(bad(hidden=3), input_size=3).graph).replace("layer0.a[t-1]", "layer0.a")
    with pytest.raises(rg.CycleError, match="layer0.a -> layer0.add -> layer0.a|layer0.add -> layer0.a -> layer0.add"):
        rg.passes.validate(rg.parse(text))


def test_shape_mismatch_names_op_and_both_shapes():
    @rg.cell
    def mismatched(x, h: rg.State, *, hidden):
        wide = rg.linear(x, hidden + 1)
        h_next = rg.tanh(wide + h)
        return h_next, {"h": h_next}

    with pytest.raises(rg.ShapeError, match=r"op add.*'layer0.wide' \[4\] and 'layer0.h' \[3\]") as e:
        rg.Sequential(mismatched(hidden=3), input_size=2).graph
    assert "mismatched" in str(e.value)  # points at the cell's source line


def test_declared_size_disagrees_with_op():
    g = _graph([X, Node("a", "tanh", (Ref("x"),), size=4)])
    with pytest.raises(rg.ShapeError, match=r"node 'a' \(op tanh\) is declared float\[4\].*float\[3\]"):
        rg.passes.validate(g)


def test_state_never_updated():
    @rg.cell
    def forgetful(x, h: rg.State, c: rg.State, *, hidden):
        h_next = rg.tanh(rg.linear(x, hidden) + h + c)
        return h_next, {"h": h_next}

    with pytest.raises(rg.StateError, match="state 'c' of cell 'forgetful' is never updated"):
        rg.Sequential(forgetful(hidden=3), input_size=2).graph


def test_state_updated_twice():
    nodes = [X, Node("a", "tanh", (Ref("x"),), size=3), Node("b", "add", (Ref("a"), Ref("a", 1)), size=3)]
    states = [State("h", "a"), State("h", "b")]
    with pytest.raises(rg.StateError, match="state 'h' is updated twice: by nodes 'a' and 'b'"):
        rg.passes.validate(_graph(nodes, states))


def test_unknown_state_key():
    @rg.cell
    def typo(x, h: rg.State, *, hidden):
        h_next = rg.tanh(rg.linear(x, hidden) + h)
        return h_next, {"hh": h_next}

    with pytest.raises(rg.StateError, match=r"next values for \['hh'\], which are not its states \(h\)"):
        rg.Sequential(typo(hidden=3), input_size=2).graph


@pytest.mark.parametrize("delay", [-1, 1.5, "2"])
def test_bad_delay_in_ir(delay):
    g = _graph([X, Node("a", "tanh", (Ref("x", delay),), size=3)])
    with pytest.raises(rg.DelayError, match="node 'a' reading 'x'"):
        rg.passes.validate(g)


@pytest.mark.parametrize("delay", [0, -2])
def test_bad_state_delay_in_api(delay):
    with pytest.raises(rg.GraphError, match="delay"):
        rg.State(delay=delay)
    with pytest.raises(rg.DelayError, match="not an integer"):
        rg.State(delay=1.5)


def test_delayed_read_of_a_non_state():
    g = _graph([X, Node("a", "tanh", (Ref("x"),), size=3), Node("b", "add", (Ref("a"), Ref("a", 2)), size=3)])
    with pytest.raises(rg.StateError, match="node 'b' reads 'a' with delay 2, but no state keeps"):
        rg.passes.validate(g)


def test_dtype_mismatch_names_node_and_argument():
    ids = Node("x", "input", size=1, dtype="index")
    g = _graph([ids, Node("a", "tanh", (Ref("x"),), size=1)])
    with pytest.raises(rg.DtypeError, match=r"node 'a' \(op tanh\): argument 'x' holds index values"):
        rg.passes.validate(g)


def test_unused_input_and_parameter_warn():
    p = Param("unused_w", (3,), Init())
    g = _graph([X, Node("c", "param", (), ("unused_p",), size=3)], params=[p, Param("unused_p", (3,), Init())])
    with pytest.warns(rg.UnusedWarning) as record:
        rg.passes.validate(g)
    messages = " ".join(str(w.message) for w in record)
    assert "input 'x'" in messages and "parameter 'unused_w'" in messages


def test_unknown_op_and_missing_reference():
    with pytest.raises(rg.GraphError, match="node 'a': unknown op 'softplus'"):
        rg.passes.validate(_graph([X, Node("a", "softplus", (Ref("x"),), size=3)]))
    with pytest.raises(rg.GraphError, match="node 'a' \\(op tanh\\) reads 'nope'"):
        rg.passes.validate(_graph([X, Node("a", "tanh", (Ref("nope"),), size=3)]))


def test_layer_that_is_not_called():
    with pytest.raises(rg.GraphError, match="did you forget to call the cell"):
        rg.Sequential(rg.cells.lstm, input_size=3)
