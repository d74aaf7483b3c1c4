"""Cells the tests need beyond rg.cells.STANDARD."""
import rnngraph as rg
from rnngraph.trace import layer_norm, linear, sigmoid, split, tanh


@rg.cell
def prenorm_rnn(x, h: rg.State, *, hidden: int):
    """A tanh RNN with a layer norm on the recurrent input: h' = tanh(W x + b + U LN(h[t-1])).
    The layer norm's row, last timestep's h, is written a whole timestep before it: its row sums
    are taken at the start of its own level, before a reduction sync (passes/row_sums.py)."""
    h_next = tanh(linear(x, hidden, name="W") + linear(layer_norm(h, name="ln"), hidden, bias=False, name="U"))
    return h_next, {"h": h_next}


@rg.cell
def slice_out_rnn(x, h: rg.State, *, hidden: int):
    """A gated RNN whose recurrent product has a third slice that leaves the loop as the cell's
    output: h' = tanh(W x + a * sigmoid(b)), y = c for (a, b, c) = split(U h[t-1], 3). In the
    backward loop the pointwise VJP adds nothing to d.c (its gradient comes from after the loop),
    yet the product dh += U^T d(a, b, c) reads all of it (regression: with flags the
    product waited forever for d.c's words)."""
    a, b, c = split(linear(h, 3 * hidden, name="U"), 3)
    return c, {"h": tanh(linear(x, hidden, name="W") + a * sigmoid(b))}
