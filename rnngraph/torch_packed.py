"""PyTorch's packed sequences for :class:`rnngraph.torch.RNN`: a ``PackedSequence`` in as a
padded window with per-stream lengths, the padded output back out as a ``PackedSequence`` laid
out as the input was (the layout ``nn.LSTM`` returns: the input's ``batch_sizes``,
``sorted_indices`` and ``unsorted_indices``)."""
from __future__ import annotations

import torch
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

__all__ = ["PackedSequence", "pack_like", "unpack"]


def unpack(x: PackedSequence) -> tuple[torch.Tensor, torch.Tensor]:
    """(padded (T, B, *) time-major in the original batch order, lengths (B,) int64 on the
    CPU), T the longest sequence (``torch.nn.utils.rnn.pad_packed_sequence``)."""
    return pad_packed_sequence(x)


def pack_like(y: torch.Tensor, like: PackedSequence) -> PackedSequence:
    """The padded time-major ``y`` (T, B, n), B in the original batch order, as a
    PackedSequence with ``like``'s layout: step t holds the ``batch_sizes[t]`` longest
    sequences, in ``like.sorted_indices`` order (identity when None). Differentiable (an index)."""
    sizes = like.batch_sizes  # (T,) int64 on the CPU, as PyTorch keeps it
    steps = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    starts = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(int(sizes.sum())) - starts[steps]
    streams = rank if like.sorted_indices is None else like.sorted_indices.cpu()[rank]
    data = y[steps.to(y.device), streams.to(y.device)]
    return PackedSequence(data, sizes, like.sorted_indices, like.unsorted_indices)
