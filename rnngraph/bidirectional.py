"""``rg.Bidirectional(cell)``: a cell and its reverse direction as one layer of ``rg.Sequential``,
two independent loop SCCs the schedule runs side by side.

The layer's graph input holds each step's input twice, (T, S, 2I): ``[x[t], x_rev[t]]``, where
``x_rev`` is each sequence reversed over its own length (x[L-1], ..., x[0], then the padding);
the caller builds it (``rnngraph.torch.RNN(bidirectional=True)`` does, with torch ops). The
forward direction ``layerK.`` reads the first half, the reverse direction ``layerK_reverse.`` (its
own parameters and states, named as PyTorch's ``_reverse`` weights) the second, and the output
is ``[y[t], y_rev[t]]`` (T, S, 2H): the reverse direction's outputs in reversed time, for the
caller to put back in order. Reversal crosses timesteps, so a graph holds no more than this
one recurrent layer; stacks of bidirectional layers are one graph per layer
(rnngraph/torch_bidirectional.py).
"""
from __future__ import annotations

import numpy as np

from .errors import GraphError, ShapeError
from .lengths import check_lengths
from .trace import Builder, Cell, Value

__all__ = ["Bidirectional"]


class Bidirectional:
    """A cell in both directions (PyTorch's ``bidirectional=True`` for one layer).

    ``rg.Sequential(rg.Bidirectional(cell), input_size=I)``: the network's only recurrent layer,
    without a loss head. Its input x is (T, S, 2I): ``x[t] = [x_fwd[t], x_rev[t]]``, x_rev each
    sequence reversed over its own length L (x_fwd[L-1], ..., x_fwd[0], then the padding);
    ``input_size`` is I, each direction's width. Its output y (T, S, 2H) is ``[y_fwd[t],
    y_rev[t]]`` with y_rev in reversed time, and the second half of dx likewise: the caller
    reverses them back (``rnngraph.torch.RNN(bidirectional=True)`` does all of this). States and
    parameters: ``layer0.*`` forward, ``layer0_reverse.*`` reverse. ``cell``: a configured cell
    (``rg.cells.lstm(hidden=64)``); GraphError for anything else."""

    @staticmethod
    def reverse(x, lengths=None) -> np.ndarray:
        """``x`` (T, S, ...) with each stream reversed over its own length L (x[L-1], ..., x[0],
        then its padding where it was), as the layer's reverse half of the input is laid out and
        its output's second half comes back; its own inverse. ``lengths`` (S,) integers in
        [0, T] (default: T each). Host arrays (NumPy, or anything np.asarray takes); the torch
        module does the same on the device. Raises ShapeError for ``x`` of fewer than two axes,
        and as :func:`rnngraph.lengths.check_lengths` for bad lengths.

        ``xx = np.concatenate([x, rg.Bidirectional.reverse(x, lengths)], axis=-1)`` is the layer's
        input; ``y[..., H:]`` reversed again is the reverse direction's output in time order."""
        x = np.asarray(x)
        if x.ndim < 2:
            raise ShapeError(f"rg.Bidirectional.reverse: x must be (T, S, ...), got shape {x.shape}")
        T, S = x.shape[:2]
        L = np.full(S, T, dtype=np.int64) if lengths is None else check_lengths(lengths, T, S)
        t = np.arange(T)[:, None]
        index = np.where(t < L[None, :], L[None, :] - 1 - t, t)
        return np.take_along_axis(x, index.reshape(T, S, *([1] * (x.ndim - 2))), axis=0)

    def __init__(self, cell: Cell):
        if not isinstance(cell, Cell):
            raise GraphError(f"rg.Bidirectional takes a configured cell (e.g. rg.cells.lstm(hidden=64)), got {cell!r}")
        self.cell = cell
        self.name = f"bidirectional_{cell.name}"

    def trace(self, b: Builder, x: Value, k: int) -> Value:
        """Trace both directions as layer ``k`` on the doubled input ``x`` (2I,); returns the
        concatenated output (2H,)."""
        half = x.size // 2
        outs = []
        for prefix, start in ((f"layer{k}.", 0), (f"layer{k}_reverse.", half)):
            b.prefix = prefix
            part = b.add("slice", [x], attrs={"start": start, "stop": start + half}, name=f"{prefix}x")
            outs.append(self.cell.trace(b, part))
        b.prefix = f"layer{k}."
        y = b.add("concat", outs, name=f"layer{k}.y_both")
        b.name_layer({})
        return y

    def __repr__(self):
        return f"Bidirectional({self.cell!r})"
