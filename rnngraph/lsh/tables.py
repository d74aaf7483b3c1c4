"""Fixed-capacity LSH bucket tables: (L, num_buckets, capacity) int32 ids and (L, num_buckets)
int32 fill counters, the layout a GPU kernel fills with one ``atomicAdd`` an insert.

Inserting id ``v`` into bucket ``b`` of table ``l`` takes slot ``fill[l, b] % capacity`` and
increments ``fill[l, b]``: the bucket fills in order and, once full, a new id overwrites the
oldest (a ring), as G-SLIDE's ``init_hash_knl`` does (Pan et al., IEEE TPDS 2022; SLIDE's
"FIFO" bucket policy, Chen et al., MLSys 2020). The counter keeps counting past the capacity;
a bucket holds ``min(fill, capacity)`` ids. Here inserts run in the order of the ids given (the
GPU's atomics run in any order, so which ids survive in an over-full bucket may differ there).
Empty slots hold -1.
"""
from __future__ import annotations

import numpy as np

from ..errors import positive_int
from .hashing import DWTAHash
from .ragged import Ragged


class BucketTables:
    """L hash tables of ``num_buckets`` buckets of ``capacity`` ids.

    Attributes:
        buckets: (L, num_buckets, capacity) int32, -1 where empty.
        fill: (L, num_buckets) int32, inserts into each bucket since the last :meth:`clear`.

    Raises:
        ValueError: naming the argument when L, num_buckets or capacity is not a positive integer.
    """

    def __init__(self, L: int, num_buckets: int, capacity: int = 128):
        L, num_buckets = positive_int(L, "L"), positive_int(num_buckets, "num_buckets")
        capacity = positive_int(capacity, "capacity")
        self.buckets = np.full((L, num_buckets, capacity), -1, dtype=np.int32)
        self.fill = np.zeros((L, num_buckets), dtype=np.int32)

    @property
    def L(self) -> int:
        return self.buckets.shape[0]

    @property
    def num_buckets(self) -> int:
        return self.buckets.shape[1]

    @property
    def capacity(self) -> int:
        return self.buckets.shape[2]

    def clear(self) -> None:
        """Every bucket empty, every counter 0."""
        self.buckets.fill(-1)
        self.fill.fill(0)

    def insert(self, ids, bucket_ids) -> None:
        """Inserts ``ids[i]`` into bucket ``bucket_ids[i, l]`` of every table l, in order of i.

        Args:
            ids: (V,) integers (the output neurons), fitting int32.
            bucket_ids: (V, L) integers in [0, num_buckets), as :meth:`DWTAHash.hash` gives.

        Raises:
            ValueError: naming the argument on a shape mismatch or a bucket id out of range.
        """
        ids, bucket_ids = np.asarray(ids), np.asarray(bucket_ids)
        if ids.ndim != 1 or bucket_ids.shape != (ids.size, self.L):
            raise ValueError(f"insert: ids must be (V,) and bucket_ids (V, {self.L}), got {ids.shape} "
                             f"and {bucket_ids.shape}")
        if bucket_ids.size and (bucket_ids.min() < 0 or bucket_ids.max() >= self.num_buckets):
            raise ValueError(f"insert: bucket_ids must be in [0, {self.num_buckets})")
        # one flat key a (table, bucket), entries in insertion order within a key
        keys = (np.arange(self.L, dtype=np.int64) * self.num_buckets + bucket_ids).ravel()
        values = np.repeat(ids.astype(np.int32), self.L)
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        counts = np.diff(np.r_[starts, keys.size])
        rank = np.arange(keys.size) - np.repeat(starts, counts)     # arrival within this call
        fill = self.fill.reshape(-1)
        before = np.repeat(fill[keys[starts]], counts).astype(np.int64)
        survives = rank >= counts.repeat(counts) - self.capacity    # not overwritten by a later one
        slots = (before + rank) % self.capacity
        flat = self.buckets.reshape(-1, self.capacity)
        flat[keys[survives], slots[survives]] = values[survives]
        fill[keys[starts]] += counts.astype(np.int32)

    def build(self, hasher: DWTAHash, weight, chunk: int = 4096) -> None:
        """Clears the tables and inserts every row of ``weight`` (V, d) (neuron v = row v) under
        its bucket ids (G-SLIDE's ``LSH::build``), hashing ``chunk`` rows at a time.

        Raises:
            ValueError: when the hasher's L or bucket count is not this table's, or from
                :meth:`DWTAHash.hash` naming ``weight``.
        """
        if hasher.L != self.L or hasher.num_buckets != self.num_buckets:
            raise ValueError(f"build: the hasher has L = {hasher.L} and {hasher.num_buckets} buckets a table, "
                             f"the tables L = {self.L} and {self.num_buckets}")
        self.clear()
        codes = hasher.hash(weight, "weight", chunk)
        self.insert(np.arange(len(codes), dtype=np.int32), codes)

    def bucket(self, table: int, bucket: int) -> np.ndarray:
        """The ids bucket ``bucket`` of table ``table`` holds (slot order; oldest first until the
        ring wraps)."""
        return self.buckets[table, bucket, :min(int(self.fill[table, bucket]), self.capacity)]

    def gather(self, query_buckets) -> Ragged:
        """Per query, its L buckets' contents concatenated (with repeats), as G-SLIDE's
        ``gather_buckets_knl``.

        Args:
            query_buckets: (N, L) integers in [0, num_buckets) (:meth:`DWTAHash.hash` of the queries).

        Returns:
            A :class:`Ragged` of N lists (ids int32, offsets int64 (N+1,)).

        Raises:
            ValueError: naming ``query_buckets`` on a bad shape or bucket id.
        """
        q = np.asarray(query_buckets)
        if q.ndim != 2 or q.shape[1] != self.L:
            raise ValueError(f"query_buckets must have shape (N, {self.L}), got {q.shape}")
        if q.size and (q.min() < 0 or q.max() >= self.num_buckets):
            raise ValueError(f"query_buckets must be in [0, {self.num_buckets})")
        tables = np.broadcast_to(np.arange(self.L), q.shape)
        sizes = np.minimum(self.fill[tables, q], self.capacity)          # (N, L)
        contents = self.buckets[tables, q]                               # (N, L, capacity)
        keep = np.arange(self.capacity) < sizes[..., None]
        offsets = np.zeros(len(q) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(sizes.sum(axis=1))
        return Ragged(contents[keep].astype(np.int32), offsets)
