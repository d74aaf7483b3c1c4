#!/usr/bin/env python3
"""Do rnngraph's dropout masks train like PyTorch's? A short side-by-side of bench/lm_vs_torch.py's
models on the same batches, without the lr schedule and the time budget.

Trains bench/lm_vs_torch.py's language model (2x LSTM 512, embedding 128, char-level Austen, T=100, S=64,
Adam 2e-3, clip 1, ``--dropout``, default 0.5) for ``--steps`` windows (default 1000) three times
from the same initial weights and batches: torch.nn.LSTM (cuDNN, its own masks), rnngraph with the
masks drawn on the host (``RNNGRAPH_MASKS=host``: NumPy, the CPU backend's) and rnngraph with
cuRAND's on the device (the default). Prints, per variant, the mean training bits/char of each
block of 200 windows and the validation bits/char on the first ``--valid-chars`` characters
(8 streams). Needs torch; ``--device cpu`` runs all three on the CPU (the two rnngraph
variants then draw the same NumPy masks).

Usage (GPU):  python bench/lm_dropout_check.py --cache .cache/rg [--steps 1000] [--dropout 0.5]
The model and data options of bench/lm_vs_torch.py (``--hidden``, ``--window``, ``--streams``,
``--lr``, ``--clip``, ``--seed``, ``--text``, ``--device``, ...) pass through; its ``--level`` and
``--max-words`` are refused (this check is char level only).
Measured on the H200, 2026-11-30 (bench/results/h200-20261130-lm-dropout-check.log, run as this script's draft with the
same variants, batches and output): after 1000 windows the per-block training curves lie within
0.011 bits/char of each other (torch and host masks within 0.006); validation 2.049 (torch),
2.055 (host masks), 2.060 (cuRAND).
"""
from __future__ import annotations

import argparse
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


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                 epilog="Model and data options of bench/lm_vs_torch.py pass through "
                                        "(see python bench/lm_vs_torch.py --help).")
    ap.add_argument("--steps", type=positive_int, default=1000, help="training windows per variant (default 1000)")
    ap.add_argument("--valid-chars", type=positive_int, default=50_000,
                    help="validation characters scored at the end (default 50000)")
    ap.add_argument("--dropout", type=float, default=0.5, help="dropout probability (default 0.5)")
    ours, rest = ap.parse_known_args(argv)
    ignored = {"--impl", "--minutes", "--lr-schedule", "--lr-final", "--out", "--merge", "--eval-every",
               "--eval-tokens", "--eval-streams", "--wall-limit", "--target", "--keep-best", "--no-keep-best",
               "--hash-batches", "--quiet"}
    bad = sorted({a.split("=")[0] for a in rest if a.split("=")[0] in ignored})
    if bad:
        ap.error(f"{', '.join(bad)}: lm_vs_torch.py's run options have no meaning here")
    if {a.split("=")[0] for a in rest} & {"--level", "--max-words"}:
        ap.error("--level, --max-words: this check trains and scores the char-level model only")
    args = lvt.build_parser().parse_args(["--eval-streams", "8", "--dropout", str(ours.dropout)] + rest)
    steps, valid_chars = ours.steps, ours.valid_chars
    try:
        import torch  # noqa: F401
    except ImportError:
        print("lm_dropout_check.py: error: needs torch (pip install torch)", file=sys.stderr)
        return 1
    from rnngraph.data import CharVocab, CorpusError, batches

    try:
        lvt.check_args(args)
        corpus = lvt.load_corpus(args)
    except (lvt.RunError, CorpusError) as exc:
        print(f"lm_dropout_check.py: error: {exc}", file=sys.stderr)
        return 1
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
