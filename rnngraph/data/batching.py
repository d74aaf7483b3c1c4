"""Truncated-BPTT batches: S parallel streams over one token array, cut into windows of T.

Layout, for ``N = len(ids)``, window ``T`` and streams ``S``:

- stream ``s`` starts at token ``offsets[s] = s * (N - 1) // S`` and is ``L = (N - 1) // S``
  input tokens long, so the streams tile the array without overlapping;
- an epoch is ``W = L // T`` windows (a stream's last ``L % T`` tokens are not used);
- window ``k`` (``j = k % W`` within its epoch) has ``inputs[t, s] = ids[offsets[s] + j*T + t]``
  and ``targets[t, s] = ids[offsets[s] + j*T + t + 1]``: the next token.

Window ``j + 1`` continues each stream where window ``j`` stopped, so recurrent states carry
from one window to the next; at each epoch start (``k % W == 0``) the streams jump back to
their offsets and states should be reset. Nothing is random: window ``k`` is the same in
every run, which is what makes resuming at ``start=k`` exact.
"""

from __future__ import annotations

import numpy as np

from .errors import CorpusError


class BatchIterator:
    """Iterator over ``(inputs, targets)`` windows, each an int32 array of shape ``(T, S)``.

    Args:
        ids: 1-D integer array of token ids (any integer dtype; copied to int32).
        window: T, timesteps per window (>= 1).
        streams: S, parallel streams (>= 1).
        start: global index of the first window to yield (for resuming); window ``k`` is
            window ``k % windows_per_epoch`` of epoch ``k // windows_per_epoch``.
        epochs: stop before window ``epochs * windows_per_epoch``; None cycles forever.
    Attributes:
        offsets: int64 array of shape (S,), each stream's first token.
        windows_per_epoch: W.
        index: global index of the window the next ``next()`` returns.
    Raises:
        CorpusError: window < 1, streams < 1, start < 0, epochs < 1, ids not 1-D integers,
            or fewer than ``window * streams + 1`` tokens (less than one window per stream).
    """

    def __init__(self, ids, window: int, streams: int, start: int = 0,
                 epochs: int | None = None):
        if window < 1 or streams < 1:
            raise CorpusError(f"window and streams must be >= 1, got window={window}, "
                              f"streams={streams}")
        if start < 0:
            raise CorpusError(f"start must be >= 0, got {start}")
        if epochs is not None and epochs < 1:
            raise CorpusError(f"epochs must be >= 1 or None, got {epochs}")
        ids = np.asarray(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise CorpusError(f"ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        n = len(ids)
        if n - 1 < window * streams:
            raise CorpusError(
                f"corpus of {n} tokens is shorter than one window per stream: window {window} "
                f"x {streams} streams needs at least {window * streams + 1} tokens")
        self.ids = ids.astype(np.int32)
        self.window, self.streams, self.epochs = window, streams, epochs
        self.offsets = np.arange(streams, dtype=np.int64) * (n - 1) // streams
        self.windows_per_epoch = ((n - 1) // streams) // window
        self.index = start
        self._steps = np.arange(window + 1, dtype=np.int64)[:, None]

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        if self.epochs is not None and self.index >= self.epochs * self.windows_per_epoch:
            raise StopIteration
        j = self.index % self.windows_per_epoch
        block = self.ids[self.offsets[None, :] + j * self.window + self._steps]
        self.index += 1
        return block[:-1].copy(), block[1:].copy()

    @property
    def epoch(self) -> int:
        """The epoch of the window the next ``next()`` returns."""
        return self.index // self.windows_per_epoch


def batches(ids, window: int, streams: int, start: int = 0,
            epochs: int | None = None) -> BatchIterator:
    """Truncated-BPTT windows over ``ids`` (see the module docstring for the layout).

    Yields ``(inputs, targets)``: int32 arrays of shape ``(window, streams)``, targets being
    the inputs shifted one token ahead. Cycles through epochs forever unless ``epochs`` is
    given; ``start=k`` yields exactly what skipping ``k`` windows would.

    Raises:
        CorpusError: as :class:`BatchIterator`.
    """
    return BatchIterator(ids, window, streams, start=start, epochs=epochs)
