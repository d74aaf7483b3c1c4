"""Data parallelism's arithmetic, without any communication: which of the global S streams a
process trains, its columns of a global window, and the recurrent states split and joined.

Process ``rank`` of ``world`` owns the contiguous streams ``[rank*S//world, (rank+1)*S//world)``
of the global S (sizes differ by at most one), so the processes' windows, side by side in rank
order, are the global window one process would train, and joining their states along the stream
axis gives the global states (what a checkpoint stores; :func:`split_states` cuts them again for
any number of processes). rnngraph/distributed.py does the communication (torch.distributed).
"""
from __future__ import annotations

import numpy as np

from .data.batching import BatchIterator


def stream_range(streams: int, rank: int, world: int) -> tuple[int, int]:
    """The streams ``(lo, hi)`` (``hi`` exclusive) of the global ``streams`` that process ``rank``
    of ``world`` trains. Raises ValueError naming ``world`` (< 1), ``rank`` (outside [0, world))
    or ``streams`` (fewer than ``world``: a process would have none)."""
    if world < 1:
        raise ValueError(f"world (the number of processes) must be >= 1, got {world}")
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    if streams < world:
        raise ValueError(f"streams: {streams} global streams cannot be split over {world} processes "
                         f"(each needs at least one)")
    return rank * streams // world, (rank + 1) * streams // world


def split_states(states: dict[str, np.ndarray], world: int) -> list[dict[str, np.ndarray]]:
    """The global states (name -> (depth, S, n)) cut into ``world`` processes' states, by
    :func:`stream_range`: element r is process r's (depth, hi - lo, n) copies. ValueError as
    :func:`stream_range`, or when the states disagree on S (naming the state)."""
    sizes = {name: np.shape(v)[1] for name, v in states.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"states: every state must have the same number of streams (axis 1), got {sizes}")
    S = next(iter(sizes.values()), 0)
    ranges = [stream_range(S, r, world) for r in range(world)]
    return [{name: np.array(v[:, lo:hi]) for name, v in states.items()} for lo, hi in ranges]


def join_states(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The processes' states (in rank order, each name -> (depth, S_r, n)) joined along the
    stream axis: name -> (depth, sum S_r, n). ValueError when they name different states."""
    if not parts:
        raise ValueError("parts: no states to join")
    names = set(parts[0])
    if any(set(p) != names for p in parts):
        raise ValueError(f"parts: the processes' states have different names: {[sorted(p) for p in parts]}")
    return {name: np.concatenate([p[name] for p in parts], axis=1) for name in parts[0]}


class ShardedBatches:
    """A process's columns of :class:`rnngraph.data.batching.BatchIterator` windows: yields
    ``(inputs, targets)`` int32 arrays of shape (T, hi - lo), the streams ``lo:hi`` of the global
    window (see :func:`stream_range`). ``index``, ``windows_per_epoch`` and ``epoch`` are the
    global iterator's, so resuming at ``start=k`` is what it is in one process."""

    def __init__(self, batches: BatchIterator, lo: int, hi: int):
        if not 0 <= lo < hi <= batches.streams:
            raise ValueError(f"lo, hi: streams [{lo}, {hi}) are not a non-empty part of {batches.streams}")
        self.batches, self.lo, self.hi = batches, lo, hi
        self.windows_per_epoch = batches.windows_per_epoch

    def __iter__(self) -> ShardedBatches:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        x, y = next(self.batches)
        return x[:, self.lo:self.hi].copy(), y[:, self.lo:self.hi].copy()

    @property
    def index(self) -> int:
        """The global index of the window the next ``next()`` returns."""
        return self.batches.index

    @property
    def epoch(self) -> int:
        """The epoch of the window the next ``next()`` returns."""
        return self.batches.epoch
