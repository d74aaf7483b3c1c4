"""Cells the tests need beyond rg.cells.STANDARD."""
import rnngraph as rg
from rnngraph.trace import layer_norm, linear, tanh


@rg.cell
def prenorm_rnn(x, h: rg.State, *, hidden: int):
    """A tanh RNN with a layer norm on the recurrent input: h' = tanh(W x + b + U LN(h[t-1])).
    The layer norm's row, last timestep's h, is written a whole timestep before it: its row sums
    are taken at the start of its own level, before a reduction sync (passes/row_sums.py)."""
    h_next = tanh(linear(x, hidden, name="W") + linear(layer_norm(h, name="ln"), hidden, bias=False, name="U"))
    return h_next, {"h": h_next}
