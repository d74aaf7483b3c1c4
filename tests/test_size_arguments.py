"""Size arguments of the network API must be positive integers, and the error names the
argument and the value: ``input_size=0`` built an input of size 1 and ``input_size=True`` one of
size True; a cell with ``hidden=0``, ``-2`` or ``2.5`` said it "has no size". NumPy integers
are taken as ints."""
import numpy as np
import pytest

import rnngraph as rg

BAD = [0, -2, 2.5, True, "4"]


@pytest.mark.parametrize("value", BAD)
def test_sequential_input_size(value):
    with pytest.raises(rg.GraphError, match=rf"rg.Sequential: input_size must be a positive integer, got {value!r}"):
        rg.Sequential(rg.cells.lstm(hidden=4), input_size=value)


@pytest.mark.parametrize("value", BAD)
def test_cell_hidden_is_refused_when_the_cell_is_made(value):
    with pytest.raises(rg.GraphError, match=rf"cell 'gru': hidden must be a positive integer, got {value!r}"):
        rg.cells.gru(hidden=value)


def test_a_cell_without_hidden_still_says_how_to_size_its_states():
    with pytest.raises(rg.StateError, match=r"state 'h' of cell 'lstm' has no size: give the cell a `hidden`"):
        rg.Sequential(rg.cells.lstm(hidden=None), input_size=3).graph


@pytest.mark.parametrize("value", BAD)
def test_state_size_embedding_and_stacked(value):
    with pytest.raises(rg.StateError, match=rf"rg.State: size must be a positive integer, got {value!r}"):
        rg.State(size=value)
    with pytest.raises(rg.GraphError, match=rf"rg.Embedding\(5, {value!r}\): dim must be a positive integer"):
        rg.Embedding(5, value)
    with pytest.raises(rg.GraphError, match=rf"rg.Embedding\({value!r}, 3\): vocab must be a positive integer"):
        rg.Embedding(value, 3)
    with pytest.raises(rg.GraphError, match=rf"rg.stacked: layers must be a positive integer, got {value!r}"):
        rg.stacked(rg.cells.lstm, value, 4, input_size=2)
    with pytest.raises(rg.GraphError, match=rf"rg.stacked: embed must be a positive integer, got {value!r}"):
        rg.stacked(rg.cells.lstm, 1, 4, vocab=5, embed=value)  # 0 fell back to hidden
    with pytest.raises(rg.GraphError, match=rf"input_size must be a positive integer, got {value!r}"):
        rg.stacked(rg.cells.lstm, 1, 4, input_size=value)  # 0 fell back to hidden


def test_numpy_integers_are_sizes():
    g = rg.Sequential(rg.cells.lstm(hidden=np.int64(4)), input_size=np.int32(3)).graph
    assert g.by_name["x"].size == 3 and type(g.by_name["x"].size) is int
    assert g.by_name["layer0.h_next"].size == 4 and g.params[0].shape == (16, 3)
    net = rg.stacked(rg.cells.gru, np.int64(2), 5, vocab=np.int64(7), embed=np.int16(3))
    assert net.graph.params[0].shape == (7, 3) and len(net.cells) == 2
    assert rg.State(size=np.int8(6)).size == 6
