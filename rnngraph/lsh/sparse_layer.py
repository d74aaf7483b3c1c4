"""Softmax cross-entropy over each sample's active output neurons only: forward, loss, backward.

For sample i with input x_i (d,), active set A_i and true labels Y_i (all in A_i):

    z_a = W[a] . x_i + b[a]                     for a in A_i
    p_a = exp(z_a) / sum_{c in A_i} exp(z_c)    (softmax over the active set)
    t_a = 1 / |Y_i| if a in Y_i else 0          (the target spread evenly over the labels)
    loss = (1/N) sum_i  -sum_{a in A_i} t_a log p_a
    dz_a = (p_a * sum(t) - t_a) / N

G-SLIDE's ``softmax_fwd_bp_rowmajor_*_knl`` (Pan et al., IEEE TPDS 2022) computes this delta,
``(1/|Y| [a in Y] - p_a) / batch`` (the negated gradient); so does SLIDE (Chen et al., MLSys 2020)
with its multi-label targets. A sample with no labels has t = 0: it adds nothing to the loss or
the gradients (G-SLIDE's kernel would push all its probabilities down) but counts in N. Repeated
labels count once. With A_i = all V neurons this is the dense softmax cross-entropy layer.

Gradients: dx_i = sum_a dz_a W[a]; the weight and bias rows touched (the union of the active
sets) receive dW[a] += dz_a x_i, db[a] += dz_a, accumulated over the samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ragged import Ragged


@dataclass(frozen=True, eq=False)
class SparseXent:
    """The result of :func:`sparse_softmax_xent`.

    Attributes:
        loss: the mean over the N samples of -sum_a t_a log p_a (float).
        probs: (E,) the softmax over each sample's active set, aligned with ``active.ids``.
        dx: (N, d) gradient w.r.t. the input, or None without ``backward``.
        rows: (R,) int32 sorted ids of the rows touched (the union of the active sets).
        dweight: (R, d) the gradient of those weight rows; dbias: (R,) of those biases.
    """

    loss: float
    probs: np.ndarray
    dx: np.ndarray | None
    rows: np.ndarray | None
    dweight: np.ndarray | None
    dbias: np.ndarray | None

    def dense_grads(self, classes: int) -> tuple[np.ndarray, np.ndarray]:
        """(dW (classes, d), db (classes,)): the row gradients scattered into zeros."""
        dw = np.zeros((classes, self.dweight.shape[1]), dtype=self.dweight.dtype)
        db = np.zeros(classes, dtype=self.dbias.dtype)
        dw[self.rows], db[self.rows] = self.dweight, self.dbias
        return dw, db


def check_inputs(x, weight, bias, active: Ragged):
    """``x`` (N, d), ``weight`` (V, d), ``bias`` (V,) as arrays of one float dtype; ValueError
    naming the argument on a shape, dtype or active-set mismatch."""
    x, weight, bias = np.asarray(x), np.asarray(weight), np.asarray(bias)
    for name, a, nd in (("x", x, 2), ("weight", weight, 2), ("bias", bias, 1)):
        if a.ndim != nd or not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"{name} must be a {nd}-D float array, got shape {a.shape} dtype {a.dtype}")
    if weight.shape[1] != x.shape[1] or bias.shape != (weight.shape[0],):
        raise ValueError(f"x {x.shape}, weight {weight.shape} and bias {bias.shape} do not fit: "
                         f"need (N, d), (V, d), (V,)")
    if len(active) != len(x):
        raise ValueError(f"active has {len(active)} samples, x {len(x)}")
    active.check_range(len(weight), "active")
    dtype = np.result_type(x, weight, bias)
    return x.astype(dtype, copy=False), weight.astype(dtype, copy=False), bias.astype(dtype, copy=False)


def active_logits(x, weight, bias, active: Ragged) -> np.ndarray:
    """(E,) z = W[a] . x_i + b[a] for each active neuron a of each sample i, aligned with
    ``active.ids``. Raises ValueError as :func:`check_inputs`."""
    x, weight, bias = check_inputs(x, weight, bias, active)
    rows = active.rows
    return np.einsum("ed,ed->e", weight[active.ids], x[rows]) + bias[active.ids]


def segment_log_softmax(z: np.ndarray, active: Ragged) -> np.ndarray:
    """(E,) log-softmax of ``z`` within each sample's segment (max-shifted: no overflow, and
    no log of an underflowed probability)."""
    rows = active.rows
    top = np.full(len(active), -np.inf, dtype=z.dtype)
    np.maximum.at(top, rows, z)
    shifted = z - top[rows]
    total = np.bincount(rows, weights=np.exp(shifted), minlength=len(active))
    return shifted - np.log(total, where=total > 0, out=np.zeros_like(total))[rows]


def label_targets(active: Ragged, labels: Ragged) -> np.ndarray:
    """(E,) t: 1/|Y_i| at the active entries that are labels of their sample, else 0.

    Raises:
        ValueError: naming the sample and label when a label is not in its active set.
    """
    if len(labels) != len(active):
        raise ValueError(f"labels has {len(labels)} samples, active {len(active)}")
    t = np.zeros(active.ids.size)
    for i in range(len(active)):
        y = np.unique(labels[i])
        if not y.size:
            continue
        segment = active[i]
        hit = np.isin(segment, y)
        if hit.sum() < y.size:   # an active set may repeat an id; each label must be there
            missing = np.setdiff1d(y, segment)
            raise ValueError(f"labels: label {int(missing[0])} of sample {i} is not in its active set")
        t[active.offsets[i]:active.offsets[i + 1]][hit] = 1.0 / hit.sum()
    return t


def sparse_softmax_xent(x, weight, bias, active: Ragged, labels: Ragged, backward: bool = True) -> SparseXent:
    """Softmax cross-entropy over the active sets (module docstring for the equations).

    Args:
        x: (N, d) float, the layer's inputs (the LSH queries).
        weight: (V, d) float, one row per output neuron; bias: (V,) float.
        active: N lists of active neuron ids in [0, V) (:func:`rnngraph.lsh.active_sets`).
        labels: N lists of true labels, each inside its active set.
        backward: also compute dx and the touched rows' dweight and dbias.

    Returns:
        :class:`SparseXent`, in the result dtype of x, weight and bias.

    Raises:
        ValueError: naming the argument on bad shapes or ids, or a label outside its active set.
    """
    x, weight, bias = check_inputs(x, weight, bias, active)
    t = label_targets(active, labels)
    z = active_logits(x, weight, bias, active)
    log_p = segment_log_softmax(z, active)
    p = np.exp(log_p)
    rows = active.rows
    n = len(active)
    loss = float(-(t * log_p).sum() / max(n, 1))
    if not backward:
        return SparseXent(loss, p, None, None, None, None)
    t_sum = np.bincount(rows, weights=t, minlength=n)
    dz = (p * t_sum[rows] - t) / max(n, 1)
    dx = add_rows_at(np.zeros_like(x), rows, dz[:, None] * weight[active.ids])
    touched, where = np.unique(active.ids, return_inverse=True)
    dweight = add_rows_at(np.zeros((touched.size, x.shape[1]), dtype=x.dtype), where, dz[:, None] * x[rows])
    dbias = np.bincount(where, weights=dz, minlength=touched.size).astype(x.dtype)
    return SparseXent(loss, p, dx, touched.astype(np.int32), dweight, dbias)


def add_rows_at(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``out[index[e]] += values[e]`` for every e, as ``np.add.at(out, index, values)`` (equal to
    rounding: reduceat may sum a row's terms in another order), through one stable sort and
    ``np.add.reduceat``: ``np.add.at``'s per-element loop took 7.9 of a 10 s training epoch of
    examples/extreme_classification.py on the CPU.

    out: (R, d); index: (E,) ints in [0, R); values: (E, d). Returns ``out`` (changed in place)."""
    if index.size == 0:
        return out
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
    out[sorted_index[starts]] += np.add.reduceat(values[order], starts, axis=0)
    return out
