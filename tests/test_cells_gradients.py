"""Central-difference gradient checks (float64, relative error < 1e-6) for every standard cell
and for 1- and 3-layer stacks with an embedding and a softmax head."""
import pytest

import rnngraph as rg
from gradcheck import check_graph

CELLS = sorted(rg.cells.STANDARD)


@pytest.mark.parametrize("name", CELLS)
def test_cell_gradients(name):
    g = rg.Sequential(rg.cells.STANDARD[name](hidden=3), input_size=2).graph
    check_graph(g, T=4, S=2, seed=3)


@pytest.mark.parametrize("name", ["lstm", "gru", "peephole_lstm", "layernorm_lstm", "skip_rnn"])
@pytest.mark.parametrize("layers", [1, 3])
def test_language_model_stack_gradients(name, layers):
    cells = [rg.cells.STANDARD[name](hidden=3) for _ in range(layers)]
    g = rg.Sequential(rg.Embedding(7, 4), *cells, rg.SoftmaxCrossEntropy(7)).graph
    check_graph(g, T=3, S=2, seed=layers, most=8)


def test_edge_sizes_t1_s1_hidden1():
    for name in CELLS:
        g = rg.Sequential(rg.cells.STANDARD[name](hidden=1), input_size=1).graph
        check_graph(g, T=1, S=1, seed=0)
