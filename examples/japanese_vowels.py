"""Classify speakers from variable-length recordings: a bidirectional LSTM over JapaneseVowels with lengths.

    python examples/japanese_vowels.py                 # 3 seeds, on CUDA when torch has it
    python examples/japanese_vowels.py --seeds 0 --epochs 40 --device cpu

JapaneseVowels (UEA/UCR archive; Kudo et al. 1999): nine speakers saying /ae/, 12 LPC cepstrum
coefficients per step, 7 to 29 steps a recording; 270 training and 370 test recordings
(rnngraph.data.japanese_vowels finds them in aeon's wheel, fetched with pip on first use).

The model: ``rnngraph.torch.RNN("lstm", 64, bidirectional=True)`` reads each recording padded
to 29 steps with its own length (``lengths=``: the forward direction's state stops at the
recording's last step and the reverse direction reads the recording backwards from it, as
nn.LSTM on a PackedSequence), and a linear layer maps the two final hidden states to the nine
speakers. Features are standardised with the training set's mean and deviation; Adam (lr 1e-2,
annealed to 0 by a cosine over 60 epochs), cross-entropy, mini-batches of 32. Prints the test
accuracy of each seed and their mean; ``--out FILE`` writes them as JSON.

The settings were chosen on a validation fifth of the training set
(bench/experiments/japanese_vowels_select.py --bidirectional; there seeds 0, 1, 2 reached
0.984, 0.984, 0.978 test accuracy, mean 0.982: bench/results/h200-20261202-japanese-vowels-bilstm.json).
This script with its defaults on an H200: 0.968, 0.989, 0.978, mean 0.978, in about 65 s with
compilation (bench/results/h200-20261202-japanese-vowels-example.json; runs differ a little:
the GPU's sums are not bit-reproducible). Published LSTM results on this set are about 0.98. ``--no-bidirectional --hidden 128`` (chosen the same way for one direction):
0.968, 0.970, 0.978, mean 0.972 (bench/results/h200-20261202-japanese-vowels-lstm.json).
"""
import argparse
import json
import sys
import time

import numpy as np
import torch
from torch import nn

from rnngraph.cli.arguments import positive_float, positive_int, probability
from rnngraph.data import japanese_vowels, pad_series
from rnngraph.torch import RNN

T_MAX = 29  # the longest recording (test set); both splits are padded to it


class Classifier(nn.Module):
    """An rnngraph LSTM over (T, B, 12) recordings with lengths (B,), then logits (B, 9) from
    the final hidden state."""

    def __init__(self, hidden: int, classes: int, bidirectional: bool = False):
        super().__init__()
        self.rnn = RNN("lstm", hidden, input_size=12, bidirectional=bidirectional)
        self.directions = 1 + bidirectional
        self.head = nn.Linear(self.directions * hidden, classes)

    def forward(self, x, lengths):
        _, (h, _) = self.rnn(x, lengths=lengths)  # h (directions, B, H): forward at each length, reverse after t = 0
        return self.head(torch.cat(list(h[-self.directions:]), dim=-1))


def tensors(series, y, mean, std, device):
    x, lengths = pad_series(series, time_major=True, t_max=T_MAX, dtype=np.float32)
    x = (x - mean) / std * (np.arange(T_MAX)[:, None, None] < lengths[None, :, None])  # padding stays 0
    return torch.from_numpy(x).to(device), lengths, torch.from_numpy(y).to(device)


def split(train, val: float):
    """(train, evaluation) as (series, labels) pairs: with ``val`` > 0 a stratified fraction of
    the training set (fixed seed) is held out for evaluation, else the test set is used."""
    if val <= 0:
        return (train.series, train.y), None
    rng = np.random.default_rng(1234)
    held = np.concatenate([rng.permutation(np.flatnonzero(train.y == c))[:max(1, round(val * np.sum(train.y == c)))]
                           for c in np.unique(train.y)])
    keep = np.setdiff1d(np.arange(len(train.y)), held)
    pick = lambda idx: ([train.series[i] for i in idx], train.y[idx])  # noqa: E731
    return pick(keep), pick(held)


def run(seed: int, epochs: int, hidden: int, lr: float, device: str, data, bidirectional: bool = False) -> float:
    """Train one model from ``seed``; its accuracy on the evaluation set (data[1])."""
    (xtr, ltr, ytr), (xte, lte, yte) = data
    torch.manual_seed(seed)
    model = Classifier(hidden, 9, bidirectional).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(len(ltr))
        for k in range(0, len(order), 32):
            idx = order[k:k + 32]
            loss = nn.functional.cross_entropy(model(xtr[:, idx], ltr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        pred = model(xte, lte).argmax(1)
    return float((pred == yte).float().mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one model per seed (default 0 1 2)")
    ap.add_argument("--epochs", type=positive_int, default=60,
                    help="passes over the training set (default 60)")
    ap.add_argument("--hidden", type=positive_int, default=64,
                    help="the LSTM's hidden size (default 64)")
    ap.add_argument("--lr", type=positive_float, default=1e-2,
                    help="Adam's learning rate, annealed to 0 (cosine)")
    ap.add_argument("--bidirectional", action=argparse.BooleanOptionalAction, default=True,
                    help="a bidirectional LSTM (the head reads both directions' final states)")
    ap.add_argument("--val", type=probability, default=0.0,
                    help="hold out this fraction of the training set and report accuracy on it, not on the test set "
                         "(for choosing settings without looking at the test set)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="cuda or cpu (default: cuda when torch has it)")
    ap.add_argument("--out", help="write the accuracies as JSON here")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda: this torch has no CUDA (a CPU build, or no GPU); use --device cpu")
    train, test = japanese_vowels()
    fit, held = split(train, args.val)
    evaluation, what = (held, "validation") if held else ((test.series, test.y), "test")
    flat = np.concatenate(fit[0])
    mean, std = flat.mean(0).astype(np.float32), flat.std(0).astype(np.float32)
    data = (tensors(*fit, mean, std, args.device), tensors(*evaluation, mean, std, args.device))
    accs, start = [], time.time()
    for seed in args.seeds:
        t0 = time.time()
        accs.append(run(seed, args.epochs, args.hidden, args.lr, args.device, data, args.bidirectional))
        print(f"seed {seed}: {what} accuracy {accs[-1]:.4f} ({time.time() - t0:.1f} s)", flush=True)
    print(f"mean {what} accuracy over {len(accs)} seed(s): {np.mean(accs):.4f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": "python examples/japanese_vowels.py " + " ".join(sys.argv[1:] if argv is None else argv),
                       "device": args.device, "epochs": args.epochs, "hidden": args.hidden, "lr": args.lr,
                       "bidirectional": args.bidirectional,
                       "evaluated_on": what, "seeds": args.seeds, "accuracy": accs, "mean": float(np.mean(accs)),
                       "seconds": time.time() - start}, f, indent=1)


if __name__ == "__main__":
    main()
