"""passes/twin_biases.py: which biased linear nodes share their output gradient, so that one column
sum fills both bias gradients (codegen/library_launches.py); the GPU step's bias gradients with it
are checked in the simulator by tests/test_codegen_sim.py against the NumPy backend."""
import rnngraph as rg
from rnngraph.passes.twin_biases import twin_biases


def test_each_lstm_layer_sums_its_gate_gradient_once_for_both_biases():
    g = rg.stacked(rg.cells.lstm, 2, 4, vocab=7).graph
    assert twin_biases(g) == {"layer0.W": "layer0.U", "layer1.W": "layer1.U"}
    assert twin_biases(rg.stacked(rg.cells.peephole_lstm, 1, 4, input_size=3).graph) == {"layer0.W": "layer0.U"}


def test_cells_whose_products_meet_elsewhere_have_no_twins():
    # the GRU's products are split and meet in three adds, one of them through r * (U_n h)
    assert twin_biases(rg.stacked(rg.cells.gru, 1, 4, input_size=3).graph) == {}
    # the layer-norm LSTM normalises each product before the add
    assert twin_biases(rg.stacked(rg.cells.layernorm_lstm, 1, 4, input_size=3).graph) == {}


def test_a_product_read_beyond_the_add_or_without_a_bias_is_no_twin():
    @rg.cell
    def also_read(x, h: rg.State, *, hidden: int):
        wx = rg.linear(x, hidden, name="W")
        h_next = rg.tanh(wx + rg.linear(h, hidden, name="U")) * rg.sigmoid(wx)
        return h_next, {"h": h_next}

    @rg.cell
    def unbiased(x, h: rg.State, *, hidden: int):
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U"))
        return h_next, {"h": h_next}

    @rg.cell  # nn.RNN's tanh cell, with its two biases
    def elman(x, h: rg.State, *, hidden: int):
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next}

    assert twin_biases(rg.stacked(also_read, 1, 4, input_size=3).graph) == {}
    assert twin_biases(rg.stacked(unbiased, 1, 4, input_size=3).graph) == {}
    assert twin_biases(rg.stacked(elman, 1, 4, input_size=3).graph) == {"layer0.W": "layer0.U"}
