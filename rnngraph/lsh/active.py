"""Per-sample active sets of output neurons: the union of the sample's L buckets, de-duplicated,
plus its true labels (training; optionally the whole batch's), padded with random distinct
neurons up to a minimum.

As G-SLIDE's ``LSH::query_act_nodes`` (Pan et al., IEEE TPDS 2022): a neuron is active when
it is in at least ``threshold`` of the sample's buckets (G-SLIDE counts them in a per-sample hash
table; here a sort); the labels are always active; when fewer than ``min_active`` neurons are,
G-SLIDE walks a random permutation of all neurons (``d_rand_nodes``, redrawn with the bins) from
a random start, adding those not already active until there are ``min_active`` — a walk that
draws distinct neurons with no retry loop, and that this module makes the same way
(``pad_order`` and one start a sample from a seeded generator). Each list comes out sorted.
"""
from __future__ import annotations

import numpy as np

from .ragged import Ragged
from .tables import BucketTables


def draw_pad_order(classes: int, rng: np.random.Generator) -> np.ndarray:
    """(classes,) int32, a random permutation of the neurons to pad from (redraw it with the bins)."""
    return rng.permutation(classes).astype(np.int32)


def active_sets(tables: BucketTables, query_buckets, *, classes: int, min_active: int,
                pad_order: np.ndarray, rng: np.random.Generator, labels: Ragged | None = None,
                threshold: int = 1, batch_labels: bool = False) -> Ragged:
    """The active output neurons of N samples.

    Args:
        tables: the bucket tables of the layer's weight rows.
        query_buckets: (N, L) int bucket ids of the samples' input vectors (``DWTAHash.hash``).
        classes: V, the number of output neurons; ids are in [0, V).
        min_active: pad each set to at least ``min(min_active, V)`` neurons.
        pad_order: (V,) int32 permutation of range(V) (:func:`draw_pad_order`).
        rng: draws each sample's start in ``pad_order``.
        labels: N lists of true labels (training) or None (inference); always active.
        threshold: buckets of the sample a neuron must be in (1: the plain union).
        batch_labels: with ``labels``, every set holds the labels of all N samples, not only its
            own (in-batch negatives, :class:`rnngraph.lsh.LSHConfig`); they count toward the
            minimum.

    Returns:
        A :class:`Ragged`: ids (E,) int32 sorted within each sample, offsets (N+1,) int64.

    Raises:
        ValueError: naming the argument: ``labels`` not N lists or a label outside [0, V),
            ``pad_order`` not a (V,) permutation, ``threshold`` < 1 or ``min_active`` < 0.
    """
    gathered = tables.gather(query_buckets)
    n = len(gathered)
    if threshold < 1 or min_active < 0:
        raise ValueError(f"threshold must be >= 1 and min_active >= 0, got {threshold} and {min_active}")
    pad_order = np.asarray(pad_order)
    if pad_order.shape != (classes,) or not np.array_equal(np.sort(pad_order), np.arange(classes)):
        raise ValueError(f"pad_order must be a permutation of range({classes}), got shape {pad_order.shape}")
    if labels is not None:
        if len(labels) != n:
            raise ValueError(f"labels has {len(labels)} samples, query_buckets {n}")
        labels.check_range(classes, "labels")
    starts = rng.integers(0, classes, size=n)
    want = min(min_active, classes)
    shared = np.unique(labels.ids) if labels is not None and batch_labels else None
    sets = []
    for i in range(n):
        found, counts = np.unique(gathered[i], return_counts=True)
        chosen = found[counts >= threshold]
        if labels is not None:
            chosen = np.union1d(chosen, labels[i] if shared is None else shared)
        need = want - chosen.size
        if need > 0:   # the next `need` neurons of the walk that are not chosen yet
            walk = pad_order[(starts[i] + np.arange(min(need + chosen.size, classes))) % classes]
            chosen = np.union1d(chosen, walk[~np.isin(walk, chosen)][:need])
        sets.append(chosen)
    return Ragged.from_lists(sets, "active sets")
