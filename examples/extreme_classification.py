"""Extreme classification with an LSH output layer: features -> ReLU layer -> ``rg.LSHSoftmax``.

    python examples/extreme_classification.py                    # a synthetic long-tailed set, GPU if there is one
    python examples/extreme_classification.py --device cpu --epochs 2
    python examples/extreme_classification.py --data train.txt --test test.txt   # the XC Repository's format

A layer without recurrent states is a cell whose state dict is empty, so ``rg.Sequential(layer,
rg.LSHSoftmax(C, config))`` compiled with ``window=1`` and ``streams=batch`` is a standalone
classifier, one sample a column: ``step.train(x, y)`` with x (1, batch, features) and y (1,
batch) class ids. The head trains over each sample's LSH active set (G-SLIDE's hashing; with
``batch_labels=True``, this example's default, every set also holds the batch's labels, which on
long-tailed labels lifts P@1 a lot: README, Limitations) and evaluates densely. The same network
with ``rg.SoftmaxCrossEntropy(C)`` is trained on the same batches for comparison. Prints the
schedule of the LSH step, each epoch's seconds and last loss, and P@1 on the held-out samples
for both heads (a hit when the arg-max class is one of the sample's labels; the floor is the P@1
of always answering the training set's most frequent label).

Data: ``--data FILE`` (and ``--test FILE``, else the last tenth of FILE) in the Extreme
Classification Repository's text format (rnngraph.data.read_xc: Amazon-670K's format), or by
default rnngraph.data.synthetic_xc's planted structure with Zipf-law label frequencies
(``--label-skew``). A sample with several labels trains on its first (a column has one class
id); one without labels is ignored (``ignore_index``). Features are fed dense, a batch at a
time: for millions of features and labels use the GPU layer of bench/lsh_gpu.py
(rnngraph/codegen/lsh_layer.py, sparse features) instead.

Where LSH pays, as measured on an H100 (bench/results/h100-20261205-lsh-crossover.json): from
about 17,000-110,000 classes at 128 hidden units and 180,000-340,000 at 512-1,024; below that
the dense head is faster. The small default here shows the API and the accuracy, not speed: on
2 CPU cores it takes about 30 s, P@1 0.572 with LSH against 0.507 dense (the most frequent
label alone: 0.290), the NumPy backend's LSH epochs 7.5 s against the dense head's 1.4 s (its
gathers and scatters of the active rows are NumPy's; on a GPU they are kernels).
"""
import argparse
import time

import numpy as np

import rnngraph as rg
from rnngraph.data import read_xc, synthetic_xc

IGNORE = -100


@rg.cell
def relu_layer(x, *, hidden: int):
    """One feed-forward layer, ReLU(x W^T + b): a cell without states."""
    h = rg.relu(rg.linear(x, hidden, name="W"))
    return h, {}


def first_labels(data, rows: range) -> np.ndarray:
    """Each sample's first label (int64), IGNORE where it has none."""
    lo, hi = data.label_offsets[rows.start:rows.stop], data.label_offsets[rows.start + 1:rows.stop + 1]
    return np.where(hi > lo, data.label_ids[np.minimum(lo, len(data.label_ids) - 1)], IGNORE).astype(np.int64)


def batches(rows: range, size: int):
    """(start, stop) pairs of consecutive batches of ``rows`` (the last may be smaller)."""
    return [(s, min(s + size, rows.stop)) for s in range(rows.start, rows.stop, size)]


def p_at_1(step, data, rows: range, batch: int, lsh: bool) -> float:
    """The fraction of ``rows`` whose arg-max class (dense logits) is one of their labels."""
    hits = 0
    for s, e in batches(rows, batch):
        out = step.forward(data.dense_features(slice(s, e))[None], carry=False).outputs
        logits = rg.LSHSoftmax.dense_logits(out["layer0.h"], step.parameters) if lsh else out["head.logits"]
        top = logits[0].argmax(axis=1)
        hits += sum(int(top[i - s] in data.label_ids[data.label_offsets[i]:data.label_offsets[i + 1]])
                    for i in range(s, e))
    return hits / len(rows)


def train(head, data, train_rows: range, test_rows: range, args) -> dict:
    """Trains relu_layer -> ``head`` for args.epochs over ``train_rows``; its P@1 on ``test_rows``."""
    net = rg.Sequential(relu_layer(hidden=args.hidden), head, input_size=data.num_features)
    step = rg.compile(net, window=1, streams=args.batch, device=args.device, optimizer=rg.Adam(lr=args.lr),
                      seed=args.seed)
    lsh = isinstance(head, rg.LSHSoftmax)
    if lsh:
        print(step.schedule)
    y = first_labels(data, range(0, data.label_offsets.size - 1))
    order = np.random.default_rng(args.seed)
    for epoch in range(args.epochs):
        t = time.perf_counter()
        for s, e in sorted(batches(train_rows, args.batch), key=lambda _: order.random()):
            loss = step.train(data.dense_features(slice(s, e))[None], y[None, s:e])
        print(f"  {'LSH' if lsh else 'dense'} epoch {epoch + 1}: {time.perf_counter() - t:.1f} s, "
              f"last loss {float(loss):.3f}" + (" (over the active sets)" if lsh else ""), flush=True)
    return {"p_at_1": p_at_1(step, data, test_rows, args.batch, lsh), "device": step.device}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="training file in the XC Repository's format (default: a synthetic set)")
    ap.add_argument("--test", help="held-out file of that format (default: the last tenth of the samples)")
    ap.add_argument("--samples", type=int, default=6_000, help="synthetic samples (default 6,000)")
    ap.add_argument("--features", type=int, default=2_000, help="synthetic features (default 2,000)")
    ap.add_argument("--labels", type=int, default=10_000, help="synthetic labels (default 10,000)")
    ap.add_argument("--label-skew", type=float, default=1.1, help="Zipf exponent of the synthetic labels (1.1)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--K", type=int, default=4, help="hashes a table (G-SLIDE's Amazon-670K: 6)")
    ap.add_argument("--L", type=int, default=16, help="tables (G-SLIDE's Amazon-670K: 50)")
    ap.add_argument("--min-active", type=int, default=300, help="active classes a sample at least")
    ap.add_argument("--no-batch-labels", action="store_true", help="G-SLIDE's sets, without the batch's labels")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    if args.data:
        data = read_xc(args.data)
        if args.test:
            test = read_xc(args.test)
            data, n_train = _joined(data, test), data.label_offsets.size - 1
        else:
            n_train = (data.label_offsets.size - 1) * 9 // 10
    else:
        data = synthetic_xc(args.samples, args.features, args.labels, seed=args.seed, label_skew=args.label_skew).data
        n_train = args.samples * 9 // 10
    n = data.label_offsets.size - 1
    train_rows, test_rows = range(0, n_train), range(n_train, n)
    counts = np.bincount(data.label_ids[:data.label_offsets[n_train]], minlength=data.num_labels)
    floor = np.mean([counts.argmax() in data.label_ids[data.label_offsets[i]:data.label_offsets[i + 1]]
                     for i in test_rows])
    print(f"{n_train:,} training and {len(test_rows):,} held-out samples, {data.num_features:,} features, "
          f"{data.num_labels:,} labels; always the most frequent label: P@1 {floor:.3f}")
    config = rg.LSHConfig(K=args.K, L=args.L, min_active=args.min_active, batch_labels=not args.no_batch_labels)
    result = {"floor": float(floor)}
    result["lsh"] = train(rg.LSHSoftmax(data.num_labels, config, seed=args.seed, ignore_index=IGNORE), data,
                          train_rows, test_rows, args)
    result["dense"] = train(rg.SoftmaxCrossEntropy(data.num_labels, ignore_index=IGNORE), data, train_rows,
                            test_rows, args)
    print(f"P@1 on the held-out samples: LSH {result['lsh']['p_at_1']:.3f}, dense {result['dense']['p_at_1']:.3f} "
          f"({result['lsh']['device']})")
    return result


def _joined(a, b):
    """One XCDataset of ``a``'s samples then ``b``'s (the same features and labels)."""
    from rnngraph.data import XCDataset
    if (a.num_features, a.num_labels) != (b.num_features, b.num_labels):
        raise SystemExit(f"--test: {b.num_features:,} features and {b.num_labels:,} labels, but --data has "
                         f"{a.num_features:,} and {a.num_labels:,}")
    cat = lambda x, y, off: np.concatenate([x, y[1:] + off])  # noqa: E731
    return XCDataset(f"{a.source} + {b.source}", a.num_features, a.num_labels,
                     cat(a.feature_offsets, b.feature_offsets, a.feature_offsets[-1]),
                     np.concatenate([a.feature_ids, b.feature_ids]),
                     np.concatenate([a.feature_values, b.feature_values]),
                     cat(a.label_offsets, b.label_offsets, a.label_offsets[-1]),
                     np.concatenate([a.label_ids, b.label_ids]))


if __name__ == "__main__":
    main()
