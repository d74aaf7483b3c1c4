"""Declare a custom recurrent cell and train it: a minimal gated unit (MGU, Zhou et al. 2016).

    python examples/custom_cell.py            # a few seconds on a CPU

One forget gate does the work of a GRU's two gates:
    f  = sigmoid(W_f x + U_f h)
    h~ = tanh(W_h x + U_h (f * h))
    h' = (1 - f) * h + f * h~
The cell is an ordinary Python function; rnngraph traces it into a graph (printed below),
finds what can be hoisted out of the time loop, and trains it with BPTT. The same function
works from the command line:

    rnngraph train --cell examples/custom_cell.py:mgu --hidden 64 --steps 200 --device cpu
"""
import numpy as np

import rnngraph as rg
from rnngraph.data import CharVocab, batches


@rg.cell
def mgu(x, h: rg.State, *, hidden: int):
    f = rg.sigmoid(rg.linear(x, hidden, name="Wf") + rg.linear(h, hidden, bias=False, name="Uf"))
    h_tilde = rg.tanh(rg.linear(x, hidden, name="Wh") + rg.linear(f * h, hidden, bias=False, name="Uh"))
    h_next = (1 - f) * h + f * h_tilde
    return h_next, {"h": h_next}


# The opening of Pride and Prejudice (public domain), repeated: small enough to need no download.
TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, "
        "must be in want of a wife. However little known the feelings or views of such a man may be "
        "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
        "surrounding families, that he is considered the rightful property of some one or other of "
        "their daughters.\n") * 20


def main():
    vocab = CharVocab.build(TEXT)
    net = rg.Sequential(rg.Embedding(len(vocab), 16), mgu(hidden=64), rg.SoftmaxCrossEntropy(len(vocab)))
    print(net.graph)  # the traced cell: nodes, params, states (h read at t-1)
    step = rg.compile(net, window=32, streams=8, device="cpu", optimizer=rg.Adam(lr=1e-2), clip_norm=1.0)
    data = batches(vocab.encode(TEXT), window=32, streams=8)
    for k in range(1, 151):
        if data.index % data.windows_per_epoch == 0:
            step.reset_state()  # each epoch the streams restart at their offsets
        x, y = next(data)
        loss = step.train(x, y)
        if k % 25 == 0:
            print(f"step {k:3d}  loss {loss:.3f} nats  {loss / np.log(2):.3f} bits/char")


if __name__ == "__main__":
    main()
