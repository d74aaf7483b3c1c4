"""A seeded synthetic extreme-classification data set with planted structure, of the shape of
the Extreme Classification Repository's sets (Amazon-670K: 135,909 features, 670,091 labels,
490,449 training samples), for when the real files are not at hand.

Each label owns a sparse *prototype*: ``prototype_features`` random feature indices with values
uniform in [0.5, 1.5]. A sample draws 1 to ``max_labels`` labels (uniformly; a label drawn twice
counts once), mixes their prototypes with random positive weights summing to 1, keeps each
prototype feature with probability ``keep``, multiplies each kept value by (1 + ``noise`` *
N(0, 1)) (clipped at 0), and adds ``noise_features`` random features with values uniform in
[0, ``noise``]. A feature drawn twice adds up. So a sample's labels are recoverable but not
trivially: with the defaults, 2,000 features and 10,000 labels, the classifier that knows the
prototypes (the label of the largest cosine) has P@1 0.90 (seeds 1, 2; 0.98 with keep 0.5, noise
0.7), chance 0.0002; about 37 features a sample.
"""
from __future__ import annotations

from dataclasses import dataclass

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
                 noise_features: int = 24) -> SyntheticXC:
    """Generates ``num_samples`` samples (module docstring), reproducibly from ``seed``.

    Returns:
        :class:`SyntheticXC`; its data's feature ids are sorted and distinct within a sample.

    Raises:
        ValueError: naming the argument: a count not a positive integer (``noise_features`` may
            be 0), ``prototype_features`` > num_features, ``keep`` outside (0, 1], ``noise`` < 0.
    """
    n, f, c = (positive_int(v, name) for v, name in ((num_samples, "num_samples"),
                                                     (num_features, "num_features"), (num_labels, "num_labels")))
    p, m = positive_int(prototype_features, "prototype_features"), positive_int(max_labels, "max_labels")
    if p > f:
        raise ValueError(f"prototype_features ({p}) must be at most num_features ({f})")
    if not 0 < keep <= 1 or noise < 0 or noise_features < 0:
        raise ValueError(f"keep must be in (0, 1], noise >= 0 and noise_features >= 0, got {keep}, {noise}, "
                         f"{noise_features}")
    rng = np.random.default_rng(seed)
    proto_ids = np.argsort(rng.random((c, f)), axis=1)[:, :p] if c * f <= 1 << 22 else \
        rng.integers(0, f, size=(c, p))                          # distinct when small; rare repeats add up
    proto_ids = proto_ids.astype(np.int32)
    proto_values = rng.uniform(0.5, 1.5, size=(c, p)).astype(np.float32)

    count = rng.integers(1, m + 1, size=n)
    labels = rng.integers(0, c, size=(n, m))
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
