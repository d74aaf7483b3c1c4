"""PyTorch's packed sequences for :class:`rnngraph.torch.RNN`: a ``PackedSequence`` in as a
padded window with per-stream lengths, the padded output back out as a ``PackedSequence`` laid
out as the input was (the layout ``nn.LSTM`` returns: the input's ``batch_sizes``,
``sorted_indices`` and ``unsorted_indices``).

Both directions are one index operation over the flattened (T * B) rows, with one index tensor
per call moved to the device without synchronising it (pinned memory, ``non_blocking``):
``torch.nn.utils.rnn.pad_packed_sequence`` copies step by step (one launch per distinct batch
size, forward and backward), and a pageable host-to-device copy waits for the device.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import PackedSequence

__all__ = ["Packing", "PackedSequence", "unpack"]


@dataclass(frozen=True)
class Packing:
    """Where a PackedSequence's rows sit in its padded window: ``rows`` (N,) int64 on the data's
    device, row k of the packed data at flattened padded row ``t * B + b``; ``like`` the input."""

    rows: torch.Tensor
    T: int
    B: int
    like: PackedSequence

    def pack(self, y: torch.Tensor) -> PackedSequence:
        """The padded time-major ``y`` (T, B, n) as a PackedSequence with the input's layout
        (differentiable: an index_select)."""
        data = y.reshape(self.T * self.B, y.shape[-1]).index_select(0, self.rows)
        return PackedSequence(data, self.like.batch_sizes, self.like.sorted_indices, self.like.unsorted_indices)


def unpack(x: PackedSequence) -> tuple[torch.Tensor, torch.Tensor, Packing]:
    """(padded (T, B, *) time-major in the original batch order with zeros past each length,
    lengths (B,) int64 on the CPU, the Packing that packs an output back); T the longest
    sequence, as ``pad_packed_sequence`` gives them. Differentiable (an index_copy)."""
    sizes = x.batch_sizes  # (T,) int64 on the CPU, as PyTorch keeps it
    T, B = len(sizes), int(sizes[0])
    steps = torch.repeat_interleave(torch.arange(T), sizes)
    rank = torch.arange(int(sizes.sum())) - (torch.cumsum(sizes, 0) - sizes)[steps]
    streams = rank if x.sorted_indices is None else x.sorted_indices.cpu()[rank]
    lengths = torch.zeros(B, dtype=torch.int64).index_add_(0, streams, torch.ones_like(streams))
    rows = steps * B + streams
    if x.data.is_cuda:
        rows = rows.pin_memory().to(x.data.device, non_blocking=True)
    flat = x.data.new_zeros((T * B,) + tuple(x.data.shape[1:])).index_copy(0, rows, x.data)
    return flat.view((T, B) + tuple(x.data.shape[1:])), lengths, Packing(rows, T, B, x)
