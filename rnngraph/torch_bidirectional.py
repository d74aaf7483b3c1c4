"""Bidirectional layers of :class:`rnngraph.torch.RNN` (``bidirectional=True``), as ``nn.LSTM``
defines them.

Layer k is one compiled network, ``pairs[k]``: ``rg.Bidirectional(cell)`` (rnngraph/
bidirectional.py), the forward and the reverse direction as two independent loop SCCs that the
schedule runs side by side. Its input is the layer's input and the same input with each sequence
reversed over its own length (x[L-1], ..., x[0], then the padding, which lengths keep out),
concatenated; its output's second half, the reverse direction's, is put back in time order the
same way. The layer's output is the two directions concatenated, (T, B, 2H): the next layer's
input (after dropout, when training, as nn.LSTM). Final states come per state argument as
(2 * layers, B, H), rows in nn.LSTM's order: layer 0 forward, layer 0 reverse, layer 1 forward,
...; the reverse direction's is its state after reading t = 0.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .bidirectional import Bidirectional
from .network import Sequential
from .torch import RNN

__all__ = ["LayerPair", "forward", "reverse", "reverse_index"]


class LayerPair(RNN):
    """One bidirectional layer: an RNN over ``rg.Sequential(rg.Bidirectional(cell))`` whose
    graph input is (T, B, 2I) and output (T, B, 2H) (see the module docstring); its states per
    state argument (2 * depth, B, H), forward then reverse. Parameters ``layer0_*`` (forward) and
    ``layer0_reverse_*``. Made by RNN(bidirectional=True), run by :func:`forward`."""

    def _network(self, cells_: list, input_size: int, dropout: float) -> Sequential:
        return Sequential(Bidirectional(cells_[0]), input_size=input_size)

    def _groups(self) -> list[list[str]]:
        return [[f"layer0.{arg}", f"layer0_reverse.{arg}"] for arg, _ in self.state_args]


def reverse_index(lengths, T: int, B: int, device) -> torch.Tensor | None:
    """(T, B) int64 on ``device``: at (t, b) the step that lands at t when sequence b is reversed
    over its own length L_b — L_b - 1 - t for t < L_b, t after (the padding stays); its own
    inverse. None without lengths (reverse the whole window: torch.flip)."""
    if lengths is None:
        return None
    t = torch.arange(T)[:, None]
    L = torch.as_tensor(lengths, dtype=torch.int64)[None, :]
    idx = torch.where(t < L, L - 1 - t, t)
    return idx.pin_memory().to(device, non_blocking=True) if torch.device(device).type == "cuda" else idx


def reverse(x: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    """``x`` (T, B, n) with each sequence reversed over its own length (differentiable)."""
    if idx is None:
        return torch.flip(x, [0])
    return x.gather(0, idx[:, :, None].expand(x.shape))


def _pair_states(pair: LayerPair, states: list | None, k: int) -> list | None:
    """Layer k's initial states in ``pair``'s graph order, each (depth, B, H), from per state
    argument (2 * layers * depth, B, H) tensors (rows: layer 0 forward, layer 0 reverse, ...)."""
    if states is None:
        return None
    rows = {}
    for (arg, depth), t, group in zip(pair.state_args, states, pair._state_groups):
        for d, name in enumerate(group):
            j = 2 * k + d
            rows[name] = t[j * depth:(j + 1) * depth].contiguous()
    return [rows[name] for name in pair.state_names]


def forward(module: RNN, x: torch.Tensor, states: list | None, lengths) -> tuple[torch.Tensor, list]:
    """(y (T, B, 2H), per state argument (2 * layers * depth, B, H)) of a bidirectional RNN
    ``module`` on time-major ``x`` (T, B, I); ``states`` per state argument or None; ``lengths``
    None or checked (B,) int64 (``RNN.forward`` checks them: rnngraph/lengths.py ``check_lengths``)."""
    T, B = x.shape[:2]
    idx = reverse_index(lengths, T, B, x.device)
    H = module.hidden
    finals, inp = [], x
    for k, pair in enumerate(module.pairs):
        both = torch.cat([inp, reverse(inp, idx)], dim=-1).contiguous()
        y, stacked = pair._forward(both, _pair_states(pair, states, k), lengths)
        inp = torch.cat([y[..., :H], reverse(y[..., H:], idx)], dim=-1)
        if module.dropout and k < module.layers - 1:
            inp = F.dropout(inp, module.dropout, module.training)
        finals.append(stacked)
    return inp, [torch.cat([f[i] for f in finals]) for i in range(len(module.state_args))]
