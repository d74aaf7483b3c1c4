"""The IR's text form: deterministic, user-named, and round-trips through the parser."""
import pytest

import rnngraph as rg

CELLS = sorted(rg.cells.STANDARD)


@pytest.mark.parametrize("name", CELLS)
def test_standard_cells_round_trip(name):
    g = rg.Sequential(rg.Embedding(9, 4), rg.cells.STANDARD[name](hidden=3), rg.SoftmaxCrossEntropy(9)).graph
    text = str(g)
    assert rg.parse(text) == g
    assert str(rg.parse(text)) == text


def test_names_come_from_the_users_code():
    g = rg.Sequential(rg.cells.peephole_lstm(hidden=3), input_size=2).graph
    names = {n.name for n in g.nodes}
    assert {"layer0.i_gate", "layer0.f_gate", "layer0.o_gate", "layer0.c_next", "layer0.h_next"} <= names
    assert {s.name: s.node for s in g.states} == {"layer0.h": "layer0.h_next", "layer0.c": "layer0.c_next"}
    assert "0x" not in str(g)  # no object ids


def test_printing_is_deterministic_across_traces():
    a = str(rg.Sequential(rg.cells.gru(hidden=3), rg.cells.gru(hidden=3), input_size=2).graph)
    b = str(rg.Sequential(rg.cells.gru(hidden=3), rg.cells.gru(hidden=3), input_size=2).graph)
    assert a == b


def test_skip_rnn_state_has_depth_two():
    g = rg.Sequential(rg.cells.skip_rnn(hidden=3), input_size=2).graph
    (s,) = g.states
    assert s.depth == 2
    assert "layer0.h_next[t-2]" in str(g)


def test_parse_error_names_the_line():
    with pytest.raises(rg.GraphError, match="line 2: cannot read the node"):
        rg.parse("graph g\n  node x : float[3] = \n")
    with pytest.raises(rg.GraphError, match="line 2: unknown entry 'edge'"):
        rg.parse("graph g\n  edge a b\n")


def test_state_passed_through_unchanged_gets_a_copy_node():
    @rg.cell
    def hold(x, h: rg.State, c: rg.State, *, hidden):
        h_next = rg.tanh(rg.linear(x, hidden) + c)
        return h_next, {"h": h_next, "c": c}  # c[t] = c[t-1]

    with pytest.warns(rg.UnusedWarning, match="state 'layer0.h' of graph 'hold' is never read"):
        g = rg.Sequential(hold(hidden=3), input_size=2).graph
    c_state = next(s for s in g.states if s.name == "layer0.c")
    node = g.node(c_state.node)
    assert node.op == "identity" and node.args[0].node == node.name and node.args[0].delay == 1


def test_a_local_variable_named_like_a_parameter_yields_to_it():
    """Regression: a local ``q`` holding rg.linear(rg.param("q", ...)) took the node name layer0.q
    that the parameter's node has explicitly, and tracing failed with "two nodes are named
    'layer0.q'"; the local's node now takes its op's name (the linear's name=, "Q"). The
    parameter reaches the product through an identity node (a product reads a whole vector)."""
    @rg.cell
    def queried(x, h: rg.State, *, hidden: int):
        q = rg.linear(rg.param("q", 3), hidden, name="Q")
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U") * q)
        return h_next, {"h": h_next}

    g = rg.stacked(queried, 1, 4, input_size=2).graph
    ops = {n.name: (n.op, [r.node for r in n.args]) for n in g.nodes}
    assert ops["layer0.q"] == ("param", [])
    assert ops["layer0.Q"] == ("linear", ["layer0.q_vector"]) and ops["layer0.q_vector"] == ("identity", ["layer0.q"])


def test_a_size_error_names_the_node_as_the_trace_will():
    """Regression: the shape error named the linear's output after the local ``q`` ('layer0.q'
    [8]), the parameter's name; it is the node the trace names 'layer0.Q'."""
    @rg.cell
    def mismatched(x, h: rg.State, *, hidden: int):
        q = rg.linear(rg.param("q", 3), hidden + 2, name="Q")
        return rg.tanh(rg.linear(x, hidden, name="W") + q), {"h": h}

    with pytest.raises(rg.ShapeError, match=r"sizes differ: 'layer0.W' \[4\] and 'layer0.Q' \[6\]"):
        rg.stacked(mismatched, 1, 4, input_size=2).graph


def test_a_parameter_size_that_is_not_an_integer_is_named():
    """Regression: rg.param("q", 3.0) failed with "TypeError: 'float' object is not iterable"."""
    @rg.cell
    def float_sized(x, h: rg.State, *, hidden: int):
        q = rg.param("q", 3.0)
        return h + q, {"h": h}

    with pytest.raises(rg.ShapeError, match=r"rg.param 'q': shape=3.0 must be a positive integer"):
        rg.stacked(float_sized, 1, 3, input_size=2).graph


def test_a_size_error_tells_two_nodes_of_one_op_apart():
    """Regression: the second add of a cell was named like the first in its own shape error
    ("sizes differ: 'layer0.add' [4] and ..." for node 'layer0.add'); it is 'layer0.add_1', the name
    the trace gives it."""
    @rg.cell
    def three_terms(x, h: rg.State, *, hidden: int):
        return rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
                       + rg.param("b2", hidden + 1)), {"h": h}

    with pytest.raises(rg.ShapeError, match=r"node 'layer0.add_1' \(op add\): sizes differ: 'layer0.add' \[4\]"):
        rg.stacked(three_terms, 1, 4, input_size=2).graph
