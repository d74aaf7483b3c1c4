#!/usr/bin/env python3
"""Do rnngraph's dropout masks train like PyTorch's? A short side-by-side of bench/lm_vs_torch.py's
models on the same batches, without the lr schedule and the time budget.

Trains the issue-5 language model (2x LSTM 512, embedding 128, char-level Austen, T=100, S=64,
Adam 2e-3, clip 1, ``--dropout``, default 0.5) for N windows three times from the same initial
weights and batches: torch.nn.LSTM (cuDNN, its own masks), rnngraph with the masks drawn on the
host (``RNNGRAPH_MASKS=host``: NumPy, the CPU backend's) and rnngraph with cuRAND's on the
device (the default). Prints, per variant, the mean training bits/char of each block of 200
windows and the validation bits/char on the first ``--valid-chars`` characters (8 streams).

Usage (GPU):  python bench/lm_dropout_check.py --cache .cache/rg [--steps 1000] [--dropout 0.5]
Other lm_vs_torch.py model options (``--hidden``, ``--window``, ``--streams``, ...) pass through.
Result of session 3 (bench/results/h200-20261130-lm-dropout-check.log): after 1000 windows the
three curves agree within 0.006 bits/char; validation 2.049 (torch), 2.055 (host), 2.060 (cuRAND).
"""
from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # rnngraph from this checkout
sys.path.insert(0, str(HERE))

import lm_vs_torch as lvt  # noqa: E402

VARIANTS = ("torch", "rnngraph-host", "rnngraph-curand")
BLOCK = 200


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    steps, valid_chars = 1000, 50_000
    for flag in ("--steps", "--valid-chars"):  # ours; the rest goes to lm_vs_torch's parser
        if flag in argv:
            k = argv.index(flag)
            value = int(argv[k + 1])
            del argv[k:k + 2]
            steps, valid_chars = (value, valid_chars) if flag == "--steps" else (steps, value)
    if "--dropout" not in argv:
        argv += ["--dropout", "0.5"]
    args = lvt.build_parser().parse_args(["--eval-streams", "8"] + argv)
    from rnngraph.data import CharVocab, batches

    corpus = lvt.load_corpus(args)
    vocab = CharVocab.build(corpus.train)
    train_ids, valid_ids = vocab.encode(corpus.train), vocab.encode(corpus.valid)[:valid_chars + 1]
    print(f"{steps} windows of {args.window} x {args.streams}, dropout {args.dropout:g}, Adam lr {args.lr:g}, "
          f"clip {args.clip:g}; validation on {len(valid_ids) - 1:,} characters", flush=True)
    for variant in VARIANTS:
        t0 = time.time()
        impl, _, masks = variant.partition("-")
        if masks == "host":
            os.environ["RNNGRAPH_MASKS"] = "host"
        else:
            os.environ.pop("RNNGRAPH_MASKS", None)
        model = lvt.make_model(impl, args, len(vocab))
        it = batches(train_ids, args.window, args.streams)
        losses = [model.train(*next(it)) for _ in range(steps)]
        blocks = [float(np.mean(losses[i:i + BLOCK])) / math.log(2) for i in range(0, steps, BLOCK)]
        nats, _ = model.evaluate(valid_ids)
        print(f"{variant:16} train bits/char per {BLOCK} windows {' '.join(f'{b:.3f}' for b in blocks)}  "
              f"valid {nats / math.log(2):.4f}  ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
