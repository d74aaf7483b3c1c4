"""Why the LSH output layer's P@1 trails the dense softmax on the long-tailed synthetic XC set, and
what the batch's labels in every active set (``LSHConfig(batch_labels=True)``) change: the same
model trained with NumPy on the CPU at 1/20 of Amazon-670K's shape (not part of the package; the
GPU benchmark is bench/lsh_gpu.py).

Model (bench/lsh_gpu.py's, but for its initialisation): sparse features (F) -> H ReLU -> C-way
softmax, Adam (lr 1e-3), batches of 256, the multi-label target spread over a sample's labels;
P@1 on held-out samples with the dense logits after each epoch. The first layer's weights are
uniform within 1/sqrt(40) (about 37 features a sample), the output rows' within 1/sqrt(H), the
biases zero (lsh_gpu.py draws every parameter within 1/sqrt(fan-in)). Output layers (``--variant``):

  dense             the softmax over all C classes
  lsh               rnngraph.lsh.LSHIndex's active sets (DWTA buckets, the labels, padding with
                    random classes to --min-active), the softmax over them (G-SLIDE's algorithm)
  lsh-batch-labels  the same with LSHConfig(batch_labels=True): the batch's labels in every set,
                    counting toward the minimum
  random            the labels padded with --min-active uniformly random classes, no hashing

The default shape is Amazon-670K's divided by 20 (6,795 features, 33,504 labels), 50,000 training
and 5,000 test samples, label skew 1.1; --min-active 75 is G-SLIDE's 1,500 scaled the same way
(0.22 % of the classes); K = 5 keeps the NumPy tables to 0.85 GB (50 tables of 32,768 buckets of
128 ids, whatever --labels). One line of JSON per run on stdout: the per-epoch loss, P@1, seconds
and mean active classes a sample (progress on stderr).

    python bench/experiments/lsh_batch_labels_cpu.py --variant lsh-batch-labels --min-active 75

Result: bench/results/cpu-20261204-lsh-batch-labels-p-at-1.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

VARIANTS = ("dense", "lsh", "lsh-batch-labels", "random")


def scatter_rows(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """(n, d): values (E, d) summed into their rows (E,) (a sort and np.add.reduceat)."""
    out = np.zeros((n, values.shape[1]), dtype=values.dtype)
    if rows.size:
        order = np.argsort(rows, kind="stable")
        ids, starts = np.unique(rows[order], return_index=True)
        out[ids] = np.add.reduceat(values[order], starts, axis=0)
    return out


class Model:
    """Sparse input -> ReLU hidden -> output rows W2 (C, H), b2; Adam over every parameter."""

    def __init__(self, features: int, hidden: int, classes: int, lr: float, seed: int):
        rng = np.random.default_rng(seed)
        bound = 1 / np.sqrt(40)  # about 37 features a sample
        self.params = [rng.uniform(-bound, bound, (features, hidden)).astype(np.float32), np.zeros(hidden, np.float32),
                       rng.uniform(-1 / np.sqrt(hidden), 1 / np.sqrt(hidden), (classes, hidden)).astype(np.float32),
                       np.zeros(classes, np.float32)]
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.lr, self.steps = lr, 0

    def hidden(self, ids, values, offsets):
        """(n, H) ReLU activations of the samples' sparse features (CSR arrays)."""
        w1, b1 = self.params[:2]
        rows = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        return np.maximum(scatter_rows(rows, values[:, None] * w1[ids], offsets.size - 1) + b1, 0), rows

    def adam(self, grads):
        self.steps += 1
        c1, c2 = 1 - 0.9 ** self.steps, 1 - 0.999 ** self.steps
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            p -= self.lr * (m / c1) / (np.sqrt(v / c2) + 1e-8)


def targets(sets, labels):
    """(n, m) padded ids, validity and targets 1/|Y| at each sample's labels."""
    width = max(len(s) for s in sets)
    ids, valid, t = (np.zeros((len(sets), width), np.int64), np.zeros((len(sets), width), bool),
                     np.zeros((len(sets), width), np.float32))
    for i, (s, y) in enumerate(zip(sets, labels)):
        ids[i, :len(s)], valid[i, :len(s)] = s, True
        hit = np.isin(s, y)
        if hit.any():
            t[i, :len(s)][hit] = 1.0 / hit.sum()
    return ids, valid, t


def main(argv=None) -> int:
    from rnngraph.data.xc_synthetic import synthetic_xc
    from rnngraph.lsh import LSHConfig, LSHIndex, Ragged

    def count(least):
        def parse(text):
            value = int(text)
            if value < least:
                raise argparse.ArgumentTypeError(f"must be an integer >= {least}, got {text}")
            return value
        return parse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--variant", choices=VARIANTS, default="lsh", help="the output layer (module docstring)")
    ap.add_argument("--train", type=count(1), default=50_000, help="training samples")
    ap.add_argument("--test", type=count(1), default=5_000, help="held-out samples (P@1)")
    ap.add_argument("--features", type=count(1), default=6_795, help="sparse input features")
    ap.add_argument("--labels", type=count(2), default=33_504, help="classes C")
    ap.add_argument("--hidden", type=count(1), default=128, help="H, the ReLU layer's width")
    ap.add_argument("--batch", type=count(1), default=256, help="samples a batch")
    ap.add_argument("--epochs", type=count(1), default=3)
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    ap.add_argument("--label-skew", type=float, default=1.1, help="Zipf exponent of the label frequencies")
    ap.add_argument("--min-active", type=count(0), default=75, help="active classes a sample at least (lsh, random)")
    ap.add_argument("--K", type=count(1), default=5, help="hashes a table")
    ap.add_argument("--L", type=count(1), default=50, help="tables")
    a = ap.parse_args(argv)

    d = synthetic_xc(a.train + a.test, a.features, a.labels, seed=0, label_skew=a.label_skew).data
    labels = [d.labels(i) for i in range(len(d))]
    model = Model(a.features, a.hidden, a.labels, a.lr, seed=1)
    rng = np.random.default_rng(2)
    index = None
    if a.variant.startswith("lsh"):
        config = LSHConfig(K=a.K, L=a.L, min_active=a.min_active, batch_labels=a.variant == "lsh-batch-labels")
        index = LSHIndex(config, a.hidden, a.labels, seed=2)
        index.rebuild(model.params[2])

    def batch(idx):
        lo, hi = d.feature_offsets[idx], d.feature_offsets[idx + 1]
        pick = np.concatenate([np.arange(x, y) for x, y in zip(lo, hi)])
        return d.feature_ids[pick], d.feature_values[pick], np.r_[0, np.cumsum(hi - lo)]

    history = []
    for epoch in range(a.epochs):
        t0, total, batches, active = time.perf_counter(), 0.0, 0, 0
        order = np.random.default_rng(100 + epoch).permutation(a.train)
        for start in range(0, a.train, a.batch):
            idx = order[start:start + a.batch]
            ids, values, offsets = batch(idx)
            h, rows = model.hidden(ids, values, offsets)
            ys = [labels[i] for i in idx]
            n = len(idx)
            w2, b2 = model.params[2:]
            if a.variant == "dense":
                z = h @ w2.T + b2
                t = np.zeros_like(z)
                for i, y in enumerate(ys):
                    t[i, y] = 1.0 / max(len(y), 1)
                z -= z.max(1, keepdims=True)
                p = np.exp(z)
                p /= p.sum(1, keepdims=True)
                loss = -(t * np.log(np.maximum(p, 1e-30))).sum() / n
                dz = (p * t.sum(1, keepdims=True) - t) / n
                dw2, db2, dh = dz.T @ h, dz.sum(0), dz @ w2
                active += a.labels * n
            else:
                if index is not None:
                    found = index.query(h, Ragged.from_lists(ys, "labels"))
                    sets = [found[i] for i in range(n)]
                else:
                    sets = [np.union1d(y, rng.integers(0, a.labels, a.min_active)) for y in ys]
                act, valid, t = targets(sets, ys)
                active += valid.sum()
                z = np.where(valid, np.einsum("nmd,nd->nm", w2[act], h) + b2[act], -np.inf)
                z -= z.max(1, keepdims=True)
                p = np.exp(z)
                p /= p.sum(1, keepdims=True)
                loss = -(t * np.log(np.maximum(p, 1e-30))).sum() / n
                dz = np.where(valid, (p * t.sum(1, keepdims=True) - t) / n, 0).astype(np.float32)
                dw2 = scatter_rows(act.ravel(), (dz[:, :, None] * h[:, None, :]).reshape(-1, a.hidden), a.labels)
                db2 = np.bincount(act.ravel(), weights=dz.ravel(), minlength=a.labels).astype(np.float32)
                dh = np.einsum("nm,nmd->nd", dz, w2[act])
            da = (dh * (h > 0)).astype(np.float32)
            dw1 = scatter_rows(ids, values[:, None] * da[rows], a.features)
            model.adam([dw1, da.sum(0), dw2.astype(np.float32), db2.astype(np.float32)])
            if index is not None:
                index.after_batch(n, model.params[2])
            total, batches = total + float(loss), batches + 1
        hits = 0
        for start in range(a.train, a.train + a.test, 1000):
            idx = np.arange(start, min(start + 1000, a.train + a.test))
            h, _ = model.hidden(*batch(idx))
            top = np.argmax(h @ model.params[2].T + model.params[3], 1)
            hits += sum(int(top[i] in labels[j]) for i, j in enumerate(idx))
        history.append(dict(epoch=epoch + 1, loss=round(total / batches, 4), p_at_1=round(hits / a.test, 4),
                            s=round(time.perf_counter() - t0, 1), active_per_sample=round(float(active) / a.train, 1)))
        print(a.variant, history[-1], file=sys.stderr, flush=True)
    print(json.dumps(dict(variant=a.variant, min_active=a.min_active, args=vars(a), history=history)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
