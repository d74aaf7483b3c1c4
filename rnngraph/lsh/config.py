"""The LSH output layer's settings (G-SLIDE's defaults; the batch's labels in every active set,
``batch_labels``, are an option beyond G-SLIDE) and the clock
that says when to rebuild the tables and redraw the bins.

G-SLIDE (Pan et al., IEEE TPDS 2022; its ``amazon.json``): K = 6, L = 50, bins of 8, buckets
of 128, a neuron active when it is in at least 1 of the sample's buckets, at least 1,500 active
neurons a sample, the tables rebuilt from the weights every 6,400 samples and the bins redrawn
every 128,000 (its ``rebuild_period``/``reshuffle_period``, counted in batches of
``max_batch_size`` after each update). WikiLSHTC-325K uses K = 5, L = 350.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from numbers import Integral

from ..errors import positive_int
from .hashing import bucket_bits


@dataclass(frozen=True)
class LSHConfig:
    """What the hashing, the tables and the active sets take.

    Attributes:
        K: hash functions a table (bucket id = K values of ``bits`` bits).
        L: tables.
        bin_size: input dimensions a hash function compares (8: 3-bit values).
        capacity: ids a bucket holds; when full the oldest is overwritten.
        threshold: a neuron is active for a sample when it is in at least this many of the
            sample's L buckets (G-SLIDE's ``threshold``).
        min_active: active neurons a sample at least (padding with random ones; capped at the
            number of classes).
        rebuild_every: samples between rebuilds of the tables from the current weights.
        redraw_every: samples between new draws of the bins (a rebuild with new hash functions).
        densify: densified WTA for all-zero bins (SLIDE's CPU hashing); G-SLIDE does not.
        max_probes: with ``densify``, other bins an empty bin tries before it gives up (value 0).
        batch_labels: in training, every sample's active set also holds the labels of all the
            samples of its batch (in-batch negatives, as sampled-softmax recommenders train:
            Yi et al., RecSys 2019); they count toward ``min_active``. Each sample's target is
            still its own labels. Recommended for classification: on a long-tailed set random
            padding rarely draws the frequent labels as negatives, so their logits are seldom
            pushed down; in-batch labels are negatives in proportion to their frequency.
            Amazon-670K's shape with long-tailed labels, batches of 256, 3 epochs: P@1 0.887
            against G-SLIDE's 0.752 and a dense bf16 layer's 0.863, at the same epoch time as
            G-SLIDE's (bench/results/h100-20261205-lsh-gpu-batch-labels-skew1.1.json; NumPy at
            1/20 of the shape: cpu-20261204-lsh-batch-labels-p-at-1.txt). Off by default (G-SLIDE's
            sets) because its cost grows with the square of the batch: each of n samples' sets
            holds all n labels, so the sets' scratch and the sparse loss's work grow with n**2 --
            an ``rg.LSHSoftmax`` head's batch is every column of a call (T * S): a word LM of
            35 x 1024 columns at V = 100,000 would need about 50 GB of set scratch with it, 6.5
            GB without.

    Raises:
        ValueError: naming the field: a count that is not a positive integer (Python's or
            NumPy's; ``min_active`` may be 0), ``densify`` or ``batch_labels`` not True or False,
            ``bin_size`` < 2, ``threshold`` > L, or K * bits over 31 (an int32 bucket id).
    """

    K: int = 6
    L: int = 50
    bin_size: int = 8
    capacity: int = 128
    threshold: int = 1
    min_active: int = 1500
    rebuild_every: int = 6400
    redraw_every: int = 128_000
    densify: bool = False
    max_probes: int = 100
    batch_labels: bool = False

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("densify", "batch_labels"):
                if not isinstance(value, bool):
                    raise ValueError(f"LSHConfig.{f.name} must be True or False, got {value!r}")
            elif f.name == "min_active":
                if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                    raise ValueError(f"LSHConfig.min_active must be a non-negative integer, got {value!r}")
                object.__setattr__(self, f.name, int(value))   # NumPy integers as Python's
            else:
                object.__setattr__(self, f.name, positive_int(value, f"LSHConfig.{f.name}"))
        if self.threshold > self.L:
            raise ValueError(f"LSHConfig.threshold ({self.threshold}) must be at most L ({self.L}): a neuron is in at "
                             f"most one bucket a table, so none would ever be active by its buckets")
        bucket_bits(self.K, self.bin_size)

    @property
    def bits(self) -> int:
        """Bits of a bucket id: K * ceil(log2(bin_size))."""
        return bucket_bits(self.K, self.bin_size)

    def table_bytes(self) -> int:
        """Bytes of the bucket tables: L * 2**bits * capacity int32 ids plus L * 2**bits int32
        fill counters (6.8 GB for the defaults: 262,144 buckets a table)."""
        return 4 * self.L * (1 << self.bits) * (self.capacity + 1)


class RebuildClock:
    """Counts training samples and says when the tables are due for a rebuild or new bins.

    ``after_batch(n)`` (after the update of a batch of n samples) answers ``(rebuild, redraw)``:
    ``rebuild`` when the count crossed a multiple of ``rebuild_every``, ``redraw`` when it
    crossed one of ``redraw_every`` (a redraw implies a rebuild). With batches of B dividing
    both periods this is G-SLIDE's ``(iteration + 1) % (period / B) == 0``.
    """

    def __init__(self, config: LSHConfig):
        self.config = config
        self.samples = 0

    def after_batch(self, n: int) -> tuple[bool, bool]:
        """(rebuild, redraw) after ``n`` more samples; ValueError when n is not a positive integer."""
        n = positive_int(n, "n (samples in the batch)")
        before, self.samples = self.samples, self.samples + n
        redraw = self.samples // self.config.redraw_every > before // self.config.redraw_every
        rebuild = redraw or self.samples // self.config.rebuild_every > before // self.config.rebuild_every
        return rebuild, redraw
