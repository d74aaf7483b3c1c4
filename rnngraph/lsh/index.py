"""The LSH index of one output layer: its hash functions, bucket tables, padding order and
rebuild clock, used the way G-SLIDE's ``SoftmaxLayer`` uses its ``LSH`` (Pan et al., IEEE TPDS
2022): build from the initial weights; per batch, query the active sets of the layer's inputs
(with the labels in training); after each update, rebuild from the current weights when the
clock says so, with new bins (and a new padding order) every ``redraw_every`` samples.

Memory: the tables are ``LSHConfig.table_bytes()`` (6.8 GB with G-SLIDE's K = 6, L = 50 and
buckets of 128, as the exact 3-bit hashes give 262,144 buckets a table); the NumPy index is for
small K and tests, the specification of the GPU one.
"""
from __future__ import annotations

import numpy as np

from ..errors import positive_int
from .active import active_sets, draw_pad_order
from .config import LSHConfig, RebuildClock
from .hashing import DWTAHash
from .ragged import Ragged
from .tables import BucketTables


class LSHIndex:
    """Hashing, tables and active sets for a layer of ``classes`` neurons over inputs of ``dim``.

    Attributes:
        config: the :class:`LSHConfig`. hasher: the current :class:`DWTAHash`.
        tables: the :class:`BucketTables`. pad_order: (classes,) int32 padding permutation.
        clock: the :class:`RebuildClock`.

    All draws come from ``np.random.default_rng(seed)``: the same seed, weights and batches give
    the same active sets.

    Raises:
        ValueError: naming the argument when dim or classes is not a positive integer.
    """

    def __init__(self, config: LSHConfig, dim: int, classes: int, seed: int = 0):
        self.config = config
        self.dim, self.classes = positive_int(dim, "dim"), positive_int(classes, "classes")
        self.rng = np.random.default_rng(seed)
        self.hasher = self.draw_hasher()
        self.tables = BucketTables(config.L, self.hasher.num_buckets, config.capacity)
        self.pad_order = draw_pad_order(self.classes, self.rng)
        self.clock = RebuildClock(config)

    def draw_hasher(self) -> DWTAHash:
        c = self.config
        return DWTAHash.draw(self.dim, c.K, c.L, bin_size=c.bin_size, densify=c.densify,
                             max_probes=c.max_probes, seed=int(self.rng.integers(2**63)))

    def rebuild(self, weight, redraw: bool = False) -> None:
        """Refills the tables from ``weight`` (classes, dim); with ``redraw``, new bins and a new
        padding order first (G-SLIDE's ``LSH::build(weights, reshuffle)``).

        Raises:
            ValueError: naming ``weight`` when it is not (classes, dim) finite floats.
        """
        weight = np.asarray(weight)
        if weight.ndim != 2 or weight.shape[0] != self.classes:
            raise ValueError(f"weight must have shape ({self.classes}, {self.dim}), got {weight.shape}")
        if redraw:
            self.hasher = self.draw_hasher()
            self.pad_order = draw_pad_order(self.classes, self.rng)
        self.tables.build(self.hasher, weight)

    def query(self, x, labels: Ragged | None = None) -> Ragged:
        """The active sets of the inputs ``x`` (N, dim): :func:`rnngraph.lsh.active_sets` with
        the config's threshold, minimum and ``batch_labels``, the labels (N lists, training)
        included.

        Raises:
            ValueError: naming ``x`` or ``labels`` (shapes, non-finite inputs, labels out of range).
        """
        return active_sets(self.tables, self.hasher.hash(x, "x"), classes=self.classes,
                           min_active=self.config.min_active, pad_order=self.pad_order, rng=self.rng,
                           labels=labels, threshold=self.config.threshold,
                           batch_labels=self.config.batch_labels)

    def after_batch(self, n: int, weight) -> tuple[bool, bool]:
        """After the update of a batch of ``n`` samples: rebuilds from ``weight`` when due (new
        bins when due too); returns (rebuilt, redrawn)."""
        rebuild, redraw = self.clock.after_batch(n)
        if rebuild:
            self.rebuild(weight, redraw)
        return rebuild, redraw
