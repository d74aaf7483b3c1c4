"""Bidirectional layers of :class:`rnngraph.torch.RNN` (``bidirectional=True``), as ``nn.LSTM``
defines them.

Layer k has two one-layer RNNs (``directions[2k]`` forward, ``directions[2k + 1]`` reverse) with
their own parameters. The forward one reads the layer's input as it is; the reverse one reads
each sequence reversed over its own length (x[L-1], ..., x[0], then the padding, which lengths
keep out), and its outputs are put back in time order the same way. The layer's output is the
two concatenated, (T, B, 2H): the next layer's input (after dropout, when training, as nn.LSTM).
Final states come per state argument as (2 * layers, B, H), rows in nn.LSTM's order: layer 0
forward, layer 0 reverse, layer 1 forward, ...; the reverse direction's is its state after
reading t = 0.

The two directions of a layer are independent, but they run one after the other here (each
RNN's program on its own stream, each call ordered after torch's current stream).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .lengths import check_lengths


def reverse_index(lengths: torch.Tensor | None, T: int, B: int, device) -> torch.Tensor | None:
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


def split_states(states: list | None, directions: int, single: bool) -> list:
    """Per direction module j, its h0 in RNN's form (a tensor or a tuple), from per state
    argument (2 * layers * depth, B, H) tensors; [None, ...] without states."""
    if states is None:
        return [None] * directions
    out = []
    for j in range(directions):
        parts = tuple(s.chunk(directions)[j] for s in states)
        out.append(parts[0] if single else parts)
    return out


def forward(module, x: torch.Tensor, states: list | None, lengths) -> tuple[torch.Tensor, list]:
    """(y (T, B, 2H), per state argument (2 * layers * depth, B, H)) of a bidirectional RNN
    ``module`` on time-major ``x`` (T, B, I), ``states`` as :func:`split_states` reads them."""
    T, B = x.shape[:2]
    if lengths is not None:
        lengths = check_lengths(lengths, T, B)
    idx = reverse_index(lengths, T, B, x.device)
    single = len(module.state_args) == 1
    h0 = split_states(states, len(module.directions), single)
    finals, inp = [], x
    for k in range(module.layers):
        fwd, rev = module.directions[2 * k], module.directions[2 * k + 1]
        yf, hf = fwd(inp, h0[2 * k], lengths=lengths)
        yr, hr = rev(reverse(inp, idx), h0[2 * k + 1], lengths=lengths)
        inp = torch.cat([yf, reverse(yr, idx)], dim=-1)
        if module.dropout and k < module.layers - 1:
            inp = F.dropout(inp, module.dropout, module.training)
        finals += [hf, hr]
    stacked = [torch.cat([h if single else h[i] for h in finals]) for i in range(len(module.state_args))]
    return inp, stacked
