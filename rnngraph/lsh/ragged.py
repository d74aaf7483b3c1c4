"""Compact per-sample lists of ids: ``ids`` concatenated, ``offsets`` (N+1,) delimiting them.

The form every per-sample list of the package takes (a sample's true labels, its active output
neurons): the flat arrays a GPU kernel reads with one block a sample, as G-SLIDE's
``CscActNodes`` (Pan et al., IEEE TPDS 2022) does; sample ``i``'s ids are
``ids[offsets[i]:offsets[i + 1]]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Ragged:
    """N lists of ids in CSR form.

    Attributes:
        ids: (E,) int32, the lists concatenated.
        offsets: (N+1,) int64, ``offsets[0] == 0``, non-decreasing, ``offsets[-1] == E``.

    Raises:
        ValueError: naming ``what``, when the arrays are not of that form (see :meth:`of`).
    """

    ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, ids, offsets, what: str = "ragged ids") -> Ragged:
        """Checked and converted: ``ids`` any 1-D integers, ``offsets`` (N+1,) integers.

        Raises:
            ValueError: naming ``what``: not 1-D, not integers, offsets not starting at 0,
                decreasing, or not ending at ``len(ids)``.
        """
        ids, offsets = np.asarray(ids), np.asarray(offsets)
        for name, a in (("ids", ids), ("offsets", offsets)):
            if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
                raise ValueError(f"{what}: {name} must be a 1-D integer array, got shape {a.shape} "
                                 f"dtype {a.dtype}")
        if offsets.size == 0 or offsets[0] != 0 or offsets[-1] != ids.size or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{what}: offsets must start at 0, never decrease and end at len(ids) = "
                             f"{ids.size}, got {offsets[:4].tolist()}...{offsets[-2:].tolist()}")
        if ids.size and (ids.min() < np.iinfo(np.int32).min or ids.max() > np.iinfo(np.int32).max):
            raise ValueError(f"{what}: ids must fit int32")
        return cls(ids.astype(np.int32), offsets.astype(np.int64))

    @classmethod
    def from_lists(cls, lists, what: str = "ragged ids") -> Ragged:
        """From N sequences of ints (``[[3, 1], [], [7]]``)."""
        lists = [np.asarray(x, dtype=np.int64).ravel() for x in lists]
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([x.size for x in lists])
        ids = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
        return cls.of(ids, offsets, what)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, i: int) -> np.ndarray:
        """Sample ``i``'s ids, a view."""
        return self.ids[self.offsets[i]:self.offsets[i + 1]]

    @property
    def sizes(self) -> np.ndarray:
        """(N,) int64, each list's length."""
        return np.diff(self.offsets)

    @property
    def rows(self) -> np.ndarray:
        """(E,) int64, the sample each entry of ``ids`` belongs to."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.sizes)

    def check_range(self, bound: int, what: str) -> None:
        """Raises ValueError naming ``what``, the sample and the id when an id is outside [0, bound)."""
        bad = np.flatnonzero((self.ids < 0) | (self.ids >= bound))
        if bad.size:
            e = int(bad[0])
            sample = int(np.searchsorted(self.offsets, e, side="right") - 1)
            raise ValueError(f"{what}: id {int(self.ids[e])} of sample {sample} is outside [0, {bound})")
