"""A seeded synthetic extreme-classification data set with planted structure, of the shape of
the Extreme Classification Repository's sets (Amazon-670K: 135,909 features, 670,091 labels,
490,449 training samples), for when the real files are not at hand.

Each label owns a sparse *prototype*: ``prototype_features`` random feature indices with values
uniform in [0.5, 1.5]. A sample draws 1 to ``max_labels`` labels (uniformly, or long-tailed with
``label_skew`` below; a label drawn twice counts once), mixes their prototypes with random
positive weights summing to 1, keeps each prototype feature with probability ``keep``, multiplies
each kept value by (1 + ``noise`` * N(0, 1)) (clipped at 0), and adds ``noise_features`` random
features with values uniform in [0, ``noise``]. A feature drawn twice adds up. So a sample's
labels are recoverable but not trivially: with the defaults, 2,000 features and 10,000 labels, the
classifier that knows the prototypes (the label of the largest cosine) has P@1 0.90 (seeds 1, 2;
0.98 with keep 0.5, noise 0.7), chance 0.0002; about 37 features a sample.

Label frequencies: with ``label_skew`` s = 0 (the default) every label is equally likely, so at
Amazon-670K's shape a label has about 1.5 training samples and P@1 measures next to nothing. Real
extreme-classification sets are long-tailed; s > 0 draws the label of rank r (in a seeded random
order of the labels) with probability proportional to 1 / (r + 1) ** s, a Zipf law. Measured at
Amazon-670K's shape (490,449 training and the next 10,000 as test samples, seed 0):

  s    labels in training  test samples with a label in training: once  >= 20 times  top label's P@1
  0    515,197             0.894                                     0.000        0.000
  1.0  191,925             0.951                                     0.813        0.137
  1.1  124,583             0.969                                     0.896        0.237

(the last column: P@1 of always predicting the training set's most frequent label, the floor a
model must beat). Labels per sample fall a little as s grows (repeats count once): 2.00 at 0, 1.97 at
1.1. The generator takes about 6 s (s = 0) to 9 s (s = 1.1) on one CPU core at that shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..errors import positive_int
from .xc import XCDataset


@dataclass(frozen=True, eq=False)
class SyntheticXC:
    """A generated set and the prototypes it was made from.

    Attributes:
        data: the samples (:class:`XCDataset`).
        prototype_ids: (num_labels, prototype_features) int32, each label's feature indices.
        prototype_values: (num_labels, prototype_features) float32, their values.
    """

    data: XCDataset
    prototype_ids: np.ndarray
    prototype_values: np.ndarray

    def dense_prototypes(self) -> np.ndarray:
        """(num_labels, num_features) float32, the prototypes as dense rows."""
        out = np.zeros((len(self.prototype_ids), self.data.num_features), dtype=np.float32)
        np.add.at(out, (np.arange(len(out))[:, None], self.prototype_ids), self.prototype_values)
        return out


def synthetic_xc(num_samples: int, num_features: int, num_labels: int, *, seed: int = 0,
                 prototype_features: int = 16, max_labels: int = 3, keep: float = 0.4, noise: float = 0.8,
                 noise_features: int = 24, label_skew: float = 0.0) -> SyntheticXC:
    """Generates ``num_samples`` samples (module docstring), reproducibly from ``seed``.

    Args:
        label_skew: the Zipf exponent of the label frequencies, a finite float >= 0: label of rank
            r (in a random order drawn from ``seed``) with probability ∝ 1 / (r + 1) ** label_skew.
            0 draws uniformly, the same set, bit for bit, as before the argument existed.

    Returns:
        :class:`SyntheticXC`; its data's feature ids are sorted and distinct within a sample.

    Raises:
        ValueError: naming the argument: a count not a positive integer (``noise_features`` may
            be 0), ``prototype_features`` > num_features, ``keep`` outside (0, 1], ``noise`` < 0,
            ``label_skew`` negative, NaN, infinite or not a number.
    """
    n, f, c = (positive_int(v, name) for v, name in ((num_samples, "num_samples"),
                                                     (num_features, "num_features"), (num_labels, "num_labels")))
    p, m = positive_int(prototype_features, "prototype_features"), positive_int(max_labels, "max_labels")
    if p > f:
        raise ValueError(f"prototype_features ({p}) must be at most num_features ({f})")
    if not 0 < keep <= 1 or noise < 0 or noise_features < 0:
        raise ValueError(f"keep must be in (0, 1], noise >= 0 and noise_features >= 0, got {keep}, {noise}, "
                         f"{noise_features}")
    skew = check_label_skew(label_skew)
    rng = np.random.default_rng(seed)
    proto_ids = np.argsort(rng.random((c, f)), axis=1)[:, :p] if c * f <= 1 << 22 else \
        rng.integers(0, f, size=(c, p))                          # distinct when small; rare repeats add up
    proto_ids = proto_ids.astype(np.int32)
    proto_values = rng.uniform(0.5, 1.5, size=(c, p)).astype(np.float32)

    count = rng.integers(1, m + 1, size=n)
    labels = _draw_labels(rng, n, m, c, skew)
    used = np.arange(m) < count[:, None]                            # (n, m) the drawn labels
    weights = np.where(used, rng.random((n, m)) + 0.1, 0.0)
    weights /= weights.sum(axis=1, keepdims=True)

    rows = np.broadcast_to(np.arange(n)[:, None, None], (n, m, p))
    values = weights[:, :, None] * proto_values[labels] * (1 + noise * rng.standard_normal((n, m, p)))
    kept = used[:, :, None] & (rng.random((n, m, p)) < keep)
    noise_rows = np.repeat(np.arange(n), noise_features)
    sample = np.concatenate([rows[kept], noise_rows])
    feature = np.concatenate([proto_ids[labels][kept], rng.integers(0, f, size=n * noise_features)])
    value = np.concatenate([np.maximum(values[kept], 0.0), rng.uniform(0, noise, size=n * noise_features)])

    key = sample.astype(np.int64) * f + feature                    # merge repeats, sort ids in a sample
    unique, where = np.unique(key, return_inverse=True)
    merged = np.bincount(where, weights=value, minlength=unique.size)
    feature_offsets = np.searchsorted(unique // f, np.arange(n + 1)).astype(np.int64)

    ordered = np.sort(np.where(used, labels, c), axis=1)           # unused slots last (as c)
    distinct = (ordered < c) & np.r_["1", np.ones((n, 1), bool), ordered[:, 1:] != ordered[:, :-1]]
    label_offsets = np.zeros(n + 1, dtype=np.int64)
    label_offsets[1:] = np.cumsum(distinct.sum(axis=1))
    data = XCDataset(f"synthetic_xc(seed={seed})", f, c, feature_offsets, (unique % f).astype(np.int32),
                     merged.astype(np.float32), label_offsets, ordered[distinct].astype(np.int32))
    return SyntheticXC(data, proto_ids, proto_values)


def check_label_skew(value) -> float:
    """``value`` as a float; ValueError naming ``label_skew`` unless it is a finite real >= 0
    (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"label_skew must be a finite number >= 0, got {value!r}")
    return float(value)


def _draw_labels(rng: np.random.Generator, n: int, m: int, c: int, skew: float) -> np.ndarray:
    """(n, m) int64 label draws in [0, c): uniform (``rng.integers``, the draw of skew 0) or, for
    ``skew`` > 0, label ``order[r]`` with probability ∝ 1 / (r + 1) ** skew, ``order`` a random
    permutation of the labels (one ``rng.permutation``, then one ``rng.random`` of (n, m) looked up
    in the cumulative weights: no loop over the samples)."""
    if skew == 0:
        return rng.integers(0, c, size=(n, m))
    order = rng.permutation(c)
    cdf = np.cumsum(np.arange(1, c + 1, dtype=np.float64) ** -skew)
    rank = np.searchsorted(cdf, rng.random((n, m)) * cdf[-1], side="right")
    return order[np.minimum(rank, c - 1)]                        # the min: a rounding at the top end
