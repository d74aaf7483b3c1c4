#!/usr/bin/env python3
r"""Language model on Jane Austen, char or word level: rnngraph against torch.nn.LSTM, same data, same budget.

The target: a 2-layer LSTM, hidden 512, char level, reaches < 1.6 bits/char on
the held-out text within 10 minutes of training; in the same run a torch.nn.LSTM model of the
same shape trains on the same data (window, streams, optimizer), and both tokens/s and both
final bits/char are reported. ``--level word`` (issue 27) asks the same of a word model: the
perplexity each library reaches after an equal training budget.

Both models
    rnngraph  rg.stacked(rg.cells.lstm, L, H, vocab=V, embed=E, dropout=P) (= rg.Sequential(rg.Embedding(V, E),
              rg.cells.lstm(hidden=H) x L, rg.SoftmaxCrossEntropy(V)) with an rg.Dropout(P) after the
              embedding, between the cells and before the head when P > 0; what ``rnngraph train
              --dropout P`` builds), rg.compile(net, window=T, streams=S, device=..., optimizer=rg.Adam(lr=LR)
              (rg.AdamW(lr=LR, weight_decay=WD) with --weight-decay WD > 0), clip_norm=CLIP, seed=SEED);
              ``step.train(x, y)`` per window
    torch     nn.Embedding(V, E) -> nn.Dropout(P) -> nn.LSTM(E, H, L, dropout=P) -> nn.Dropout(P) ->
              nn.Linear(H, V), F.cross_entropy (mean), torch.optim.Adam(lr=LR) (torch.optim.AdamW(lr=LR,
              weight_decay=WD) with --weight-decay WD > 0), clip_grad_norm_(CLIP);
              the hidden state is carried and detached between windows (truncated BPTT); model.train()
              while training, model.eval() while evaluating. TF32 off unless --tf32.
    ``--dropout P`` (default 0: none) is Zaremba et al. 2014's placement (the non-recurrent
    connections: the input of every LSTM layer and of the softmax), inverted dropout in both; the
    masks come from each library's own generator, so with P > 0 the first losses differ.
Both see the same windows: ``rnngraph.data.batches(train_ids, T, S)`` over the token ids of the
training split (int32; CharVocab, or WordVocab at word level: below), states carried from window
to window and reset at each epoch start (as ``rnngraph train`` does). By default torch starts
from rnngraph's initial weights (``--init rnngraph``: same seed, PyTorch's layout and gate
order), so the two runs differ only in the implementation's arithmetic; the first training
losses of both are recorded to show it.
``data_sha256`` (the first ``--hash-batches`` windows) is recorded per model: equal values mean
identical batches.

Each model trains for ``--minutes`` of training time (evaluation excluded; the first step, which
compiles kernels, included) or ``--steps`` windows, whichever comes first, one model after the
other in one process (``--impl``). Every ``--eval-every`` (``30s``: seconds of training time;
``200``: steps) it measures bits/char on the validation split (the first ``--eval-tokens``
characters; 0 = all of it) forward only with carried states, as :class:`rnngraph.lm.Evaluator`
does (rnngraph uses it; torch runs the identical window layout), and adds a point to the curve
(step, tokens, epoch, training seconds, wall seconds, train and valid bits/char). At the end:
bits/char on the whole validation and test splits, with the final weights and with the weights
of the best validation point (``--keep-best``), tokens/s (steady state: training tokens after the
first step / training time after it), and the training time and tokens to reach ``--target``
(1.6) bits/char. The JSON (``--out``) is rewritten after every evaluation, so a run cut short
(``timeout``: SIGTERM is caught) keeps its curves; a table is printed at the end.

Word level (``--level word``): the tokens and the vocabulary are ``rnngraph train --level word``'s
(rnngraph.lm.build_vocab: lowercased words, punctuation marks, digits and newlines, rnngraph/data/vocab.py;
every word type of the training split, or its ``--max-words N`` most frequent; ``<unk>`` is id 0
and stands for the held-out splits' unseen words, scored like any other word, as ``rnngraph eval``
does). Both models' softmax is over that vocabulary (V = 13,353 on the Austen corpus: 834,758
training words, 372 windows an epoch at T=35, S=64), rnngraph's head dense (rg.stacked; ``rnngraph
train`` chunks it only above 32,768 words). The scores are perplexities, exp(mean nats per word),
in fields named ``*_ppl`` where char level has ``*_bpc``: ``train_ppl`` and ``valid_ppl`` on the
curve, ``valid_ppl``/``test_ppl`` in ``final`` and ``best``, ``best_valid_ppl``; ``--target``
is a perplexity there and has no default (no ``time_to_target``). The config records ``level``,
``max_words``, ``vocab`` (the vocabulary's size, ``<unk>`` included) and the splits' lengths as
``train_words``, ``valid_words``, ... (``train_chars``, ... at char level). The other defaults
are char level's: give the word model's shape on the command line (below). Expected for the
2 x 1024 model on one H200 (estimates from the step times of
bench/results/h200-20261202-word-lm-2x1024.json, not readings): ~143k words/s for rnngraph fp32,
~151k for cuDNN with TF32 off -> ~35M words, ~40 epochs, in 4 minutes; without dropout a model of
44M parameters overfits 835k words long before that, hence ``--dropout 0.5`` (Zaremba et al.'s
medium model) in the usage line below; ``best`` scores the best validation point either way.

Defaults (the GPU run): L=2, H=512, E=128 (V is 82 characters: a 128-wide embedding is no
bottleneck, and it is the input width of the LM step measured in bench/results/h200-20261129.json),
T=100, S=64 (the shape of that measurement: 13.0 ms per rnngraph LM step with one layer),
Adam lr 2e-3 constant, clip 1.0. Expected on one H200 (estimates, not readings): rnngraph's 2-layer
step ~26 ms (2 x 12.1 ms per LSTM layer forward+backward at S=64 from the 4-layer record, plus
embedding, softmax head, clip and Adam) -> ~250k tokens/s -> ~60M tokens (~17 epochs of the
3.56M-character training split, 555 windows an epoch) in 4 minutes, ~150M (~40 epochs) in 10;
cuDNN ~11 ms + ~2 ms head/optimizer -> ~500k tokens/s. What the held-out text allows was read on
a CPU with these defaults (torch, which with ``--init rnngraph`` computes what rnngraph computes):
after 4.2 epochs (15M tokens) train 1.53, valid 1.78 (its first 60k characters: 1.83), test 1.75
bits/char, the validation curve still falling by ~0.015 bits per epoch while the gap to the
training loss grows (Persuasion is another novel: its names and places are unseen; that run had
no dropout). So < 1.6 needs the later epochs and may not come at all with a constant lr: read the
best point (``best``) and ``time_to_target``; the final numbers drift up as the model overfits.
``--dropout P`` (Zaremba et al. used 0.5 for their 2x650 word model) and ``--lr-schedule cosine``
(both models alike) are the knobs against it; e.g. ``LM_ARGS="--dropout 0.2"`` for
bench/lm_gpu.sh (not yet measured here).

LSH heads (issue 28): ``--impl rnngraph-lsh`` and ``rnngraph-lsh-batch-labels`` are the rnngraph
model with an ``rg.LSHSoftmax(V, rg.LSHConfig(K=--lsh-K, L=--lsh-L, min_active=--lsh-min-active))``
head instead of the dense softmax, the first with ``batch_labels=False`` (G-SLIDE's sets), the second
with ``batch_labels=True`` (every column's active set also holds the window's
next words); the same windows, optimizer and dense evaluation, so their
valid/test perplexities compare with the dense head's, while their ``train_ppl`` is over each
column's active set (lower than the full softmax's). ``--vocab-size N`` (word level) makes the
vocabulary N types: a seeded ``--rare-fraction`` (0.02) of every split's tokens is replaced by
synthetic rare words drawn uniformly from the N - V new ids (Austen's V = 13,353 words to N =
100,000: about 17k rare tokens over 86,647 new words in training, most unseen), the same for every
impl; the config records ``vocab`` (N) and ``text_vocab`` (V). The word LM of the issue, LSH against
the full softmax after equal time::

    timeout -k 5 590 python3 bench/lm_vs_torch.py --level word --vocab-size 100000 --layers 2 --hidden 1024 \
        --embed 1024 --window 35 --streams 64 --dropout 0.5 --cache .cache/rg --minutes 2 --eval-every 60s \
        --impl rnngraph,rnngraph-lsh,rnngraph-lsh-batch-labels --out bench/results/h200-YYYYMMDD-lm-word-lsh.json

The GPU machine has no network: carry the corpus in a cache directory. Prepare it here once
(``.cache/`` is git-ignored; only the six NAME.txt files are needed, ~4 MB)::

    RNNGRAPH_CACHE=$PWD/.cache/rg python3 -c "from rnngraph.data import load_austen; load_austen()"
    # or copy an existing cache: mkdir -p .cache/rg/austen && cp ~/.cache/rnngraph/austen/*.txt .cache/rg/austen/
    pip download numpy==2.4.6 --no-deps -d .whl   # numba-cuda 0.30.4 cannot compile kernels with numpy 2.5

then, on the GPU machine with ``.whl/`` and ``.cache/rg/`` copied along, ``bash bench/lm_gpu.sh`` runs
(see that file: both models, ``LM_MINUTES`` each, in one command under the 10-minute limit; on a
machine with 2 GPUs the two run side by side, one per GPU). ``--cache DIR`` reads
``DIR/austen/NAME.txt`` and refuses to start (instead of trying ``apt-get``) when they are missing.

Usage::

    python3 bench/lm_vs_torch.py --cache .cache/rg --minutes 4 --out bench/results/h200-lm-YYYYMMDD.json
    # the 2 x 1024 word model of bench/word_lm.py (E = 1024, T = 35, S = 64), 4 minutes each on one GPU
    # (2 x 4 min of training + compiling and evaluations within 10 minutes; should those take more than
    # ~90 s, --wall-limit ends torch's training early and its stopped_by says "wall-limit"):
    timeout -k 5 590 python3 bench/lm_vs_torch.py --level word --layers 2 --hidden 1024 --embed 1024 \
        --window 35 --streams 64 --dropout 0.5 --cache .cache/rg --minutes 4 --eval-every 60s \
        --wall-limit 570 --out bench/results/h200-YYYYMMDD-lm-word-2x1024.json
    # two GPUs: the two models side by side, one per GPU (bench/lm_gpu.sh; LM_ARGS pass through)
    LM_MINUTES=4 LM_ARGS="--level word --hidden 1024 --embed 1024 --window 35 --dropout 0.5 --eval-every 60s" \
        bash bench/lm_gpu.sh
    python3 bench/lm_vs_torch.py --text book.txt --hidden 64 --steps 50 --eval-every 10 --out /tmp/x.json
    python3 bench/lm_vs_torch.py --merge a.json b.json --out both.json   # runs of one model each
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

LN2 = math.log(2.0)
IMPLS = ("rnngraph", "torch", "rnngraph-lsh", "rnngraph-lsh-batch-labels")
#: the rnngraph models with an rg.LSHSoftmax head, and whether its config has batch_labels
LSH_IMPLS = {"rnngraph-lsh": False, "rnngraph-lsh-batch-labels": True}
FORMAT = "lm_vs_torch/1"
#: per --level: (suffix of the score fields: train_bpc, valid_ppl, ...; the score's name; its format in the
#: progress lines and the table; what the split lengths count in prose)
METRICS = {"char": ("bpc", "bits/char", "{:.3f}", "characters"),
           "word": ("ppl", "perplexity", "{:.2f}", "words")}
#: --target's default per level: 1.6 bits/char; word level has none (time_to_target is left out)
DEFAULT_TARGET = {"char": 1.6, "word": None}


class Terminated(BaseException):
    """SIGTERM (``timeout``) or SIGINT: stop, write what was measured, exit non-zero."""


class RunError(Exception):
    """A bad argument or missing input: one line, exit code 2."""


# ---------------------------------------------------------------------------------- arguments
def parse_every(text: str) -> tuple[str, float]:
    """``"30s"`` -> ("s", 30.0); ``"200"`` -> ("steps", 200); ``"0"`` -> ("off", 0)."""
    t = str(text).strip().lower()
    try:
        if t.endswith("s") and not t.endswith("steps"):
            v = float(t[:-1])
            kind = "s"
        else:
            v = float(int(t.removesuffix("steps")))
            kind = "steps"
    except ValueError:
        raise argparse.ArgumentTypeError(f"--eval-every takes SECONDS + s (30s) or STEPS (200), got {text!r}") from None
    if v < 0 or not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"--eval-every must be >= 0, got {text!r}")
    return ("off", 0.0) if v == 0 else (kind, v)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lm_vs_torch.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    d = p.add_argument_group("data")
    d.add_argument("--text", metavar="FILE", help="any UTF-8 text (90/5/5 split) instead of the Austen corpus")
    d.add_argument("--cache", metavar="DIR", help="corpus cache root (RNNGRAPH_CACHE): reads DIR/austen/NAME.txt, "
                   "never fetches")
    d.add_argument("--level", choices=tuple(METRICS), default="char",
                   help="tokens: characters (scored in bits/char; default) or words (scored in perplexity), the "
                        "vocabulary of rnngraph.lm.build_vocab, as `rnngraph train --level` builds it")
    d.add_argument("--max-words", type=int, default=None, metavar="N",
                   help="word level: keep only the N most frequent word types of the training split, the rest "
                        "becoming <unk> (default: every word type)")
    d.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help="word level: pad the vocabulary to N types with synthetic rare words: a seeded "
                        "--rare-fraction of every split's tokens becomes one of the N - V new words, drawn "
                        "uniformly (a large-vocabulary model on Austen; default: no padding)")
    d.add_argument("--rare-fraction", type=float, default=None, metavar="F",
                   help="with --vocab-size: the fraction of tokens replaced by rare words (default 0.02)")
    m = p.add_argument_group("model and training (the same for both)")
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--hidden", type=int, default=512)
    m.add_argument("--embed", type=int, default=128)
    m.add_argument("--window", type=int, default=100, help="T, timesteps per window (default 100)")
    m.add_argument("--streams", type=int, default=64, help="S, parallel streams (default 64)")
    m.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (default 2e-3)")
    m.add_argument("--weight-decay", type=float, default=0.0, metavar="WD",
                   help="> 0: AdamW for both (torch.optim.AdamW's decoupled weight decay: parameters *= 1 - lr*WD "
                        "each step before the Adam update; Loshchilov & Hutter 2019); 0 = plain Adam (default 0)")
    m.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clip; 0 = off (default 1.0)")
    m.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                   help="constant (default), or cosine from --lr down to --lr * --lr-final over the budget "
                        "(each model's own fraction of --minutes / --steps, whichever ends it first)")
    m.add_argument("--lr-final", type=float, default=0.1, help="cosine: the last lr as a fraction of --lr (0.1)")
    m.add_argument("--dropout", type=float, default=0.0,
                   help="dropout probability after the embedding, between the LSTM layers and before the head "
                        "(Zaremba et al. 2014), training only (default 0: none)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--init", choices=("rnngraph", "native"), default="rnngraph",
                   help="torch's initial weights: rnngraph's (same seed; default) or torch's own")
    h = p.add_argument_group("LSH head (--impl rnngraph-lsh, rnngraph-lsh-batch-labels: rg.LSHSoftmax)")
    h.add_argument("--lsh-K", type=int, default=6, help="hashes a table (default 6, G-SLIDE's; with --lsh-L 50 the "
                   "tables take 6.8 GB whatever the vocabulary: rg.LSHConfig().table_bytes(); K 2, L 2 for tiny runs)")
    h.add_argument("--lsh-L", type=int, default=50, help="tables (default 50)")
    h.add_argument("--lsh-min-active", type=int, default=1500, help="active classes a column at least (default 1500)")
    b = p.add_argument_group("budget and evaluation")
    b.add_argument("--impl", default="rnngraph,torch",
                   help=f"models to train, in order, of {', '.join(IMPLS)} (default rnngraph,torch)")
    b.add_argument("--minutes", type=float, default=10.0, help="training time per model (default 10); 0 = no limit")
    b.add_argument("--steps", type=int, default=None, help="at most this many windows per model")
    b.add_argument("--eval-every", type=parse_every, default=("s", 30.0),
                   help="SECONDS + s of training time (30s, default) or a number of STEPS; 0 = only at the end")
    b.add_argument("--eval-tokens", type=int, default=0,
                   help="evaluate the curve on this validation prefix (0 = the whole split, default)")
    b.add_argument("--eval-streams", type=int, default=64, help="streams of the evaluation (default 64)")
    b.add_argument("--wall-limit", type=float, default=None, metavar="SECONDS",
                   help="safety net under a hard timeout: no model trains on once the process has run this long "
                        "(its final evaluation still runs); the budgets stay --minutes each")
    b.add_argument("--target", type=float, default=None,
                   help="validation score to reach: bits/char at char level (default 1.6), perplexity at word level "
                        "(default: none)")
    b.add_argument("--keep-best", action=argparse.BooleanOptionalAction, default=True,
                   help="also score the weights of the best validation point at the end (default on)")
    b.add_argument("--hash-batches", type=int, default=50, help="windows hashed into data_sha256 (default 50)")
    r = p.add_argument_group("devices and output")
    r.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: CUDA where available (each model decides), else the CPU")
    r.add_argument("--tf32", action="store_true", help="allow TF32 in torch (off by default)")
    r.add_argument("--out", metavar="JSON", help="results file, rewritten after every evaluation")
    r.add_argument("--merge", nargs="+", metavar="JSON", help="combine result files of single models into --out")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def check_args(args) -> list[str]:
    for name in ("layers", "hidden", "embed", "window", "streams", "eval_streams"):
        if getattr(args, name) < 1:
            raise RunError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        raise RunError(f"--lr must be a positive number, got {args.lr}")
    if not 0 <= args.lr_final <= 1:
        raise RunError(f"--lr-final must be in [0, 1], got {args.lr_final}")
    if args.clip < 0:
        raise RunError(f"--clip must be >= 0, got {args.clip}")
    if not (args.weight_decay >= 0 and math.isfinite(args.weight_decay)):
        raise RunError(f"--weight-decay must be a number >= 0, got {args.weight_decay}")
    if not 0 <= args.dropout < 1:
        raise RunError(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.minutes < 0 or (args.steps is not None and args.steps < 1):
        raise RunError("--minutes must be >= 0 and --steps >= 1")
    if args.minutes == 0 and args.steps is None:
        raise RunError("--minutes 0 needs --steps N (else training never stops)")
    if args.wall_limit is not None and not args.wall_limit > 0:
        raise RunError(f"--wall-limit must be > 0 seconds, got {args.wall_limit}")
    if args.eval_tokens < 0 or args.hash_batches < 0:
        raise RunError("--eval-tokens and --hash-batches must be >= 0")
    if args.max_words is not None and (args.level != "word" or args.max_words < 1):
        raise RunError(f"--max-words takes a number >= 1 and needs --level word, got --max-words {args.max_words} "
                       f"at --level {args.level}")
    if args.vocab_size is not None and args.level != "word":
        raise RunError(f"--vocab-size needs --level word (it adds words), got --level {args.level}")
    if args.vocab_size is not None and args.vocab_size < 2:
        raise RunError(f"--vocab-size must be a number >= 2, got {args.vocab_size}")
    if args.rare_fraction is not None and args.vocab_size is None:
        raise RunError("--rare-fraction needs --vocab-size (it says how many tokens become the added rare words)")
    if args.vocab_size is not None and args.rare_fraction is None:
        args.rare_fraction = 0.02
    if args.rare_fraction is not None and not 0 < args.rare_fraction < 1:
        raise RunError(f"--rare-fraction must be in (0, 1), got {args.rare_fraction}")
    if args.target is not None and not (args.target > 0 and math.isfinite(args.target)):
        raise RunError(f"--target must be a positive number, got {args.target}")
    impls = [s.strip() for s in args.impl.split(",") if s.strip()]
    bad = [s for s in impls if s not in IMPLS]
    if bad or not impls or len(set(impls)) != len(impls):
        raise RunError(f"--impl takes a comma-separated list of {', '.join(IMPLS)}, got {args.impl!r}")
    if any(i in LSH_IMPLS for i in impls):
        lsh_config(args, False)  # a bad --lsh-* value fails here, before any model trains
    return impls


def lsh_config(args, batch_labels: bool):
    """The rg.LSHConfig of the --lsh-* flags; RunError naming the field when one is bad."""
    import rnngraph as rg
    try:
        return rg.LSHConfig(K=args.lsh_K, L=args.lsh_L, min_active=args.lsh_min_active, batch_labels=batch_labels)
    except ValueError as exc:
        raise RunError(f"--lsh-K {args.lsh_K} --lsh-L {args.lsh_L} --lsh-min-active {args.lsh_min_active}: "
                       f"{exc}") from None


# ---------------------------------------------------------------------------------- data
def load_corpus(args):
    from rnngraph.data import Corpus
    from rnngraph.data.austen import NOVELS

    if args.text:
        return Corpus.from_file(args.text)
    if args.cache:
        os.environ["RNNGRAPH_CACHE"] = os.path.abspath(args.cache)
        folder = Path(args.cache) / "austen"
        missing = [n for n in NOVELS if not (folder / f"{n}.txt").is_file()]
        if missing:
            raise RunError(f"--cache {args.cache}: {folder} lacks {', '.join(f'{n}.txt' for n in missing)}; prepare it "
                           f"where there is a network: RNNGRAPH_CACHE={os.path.abspath(args.cache)} python3 -c "
                           f"\"from rnngraph.data import load_austen; load_austen()\"")
        return Corpus.austen(folder)
    return Corpus.austen()


def eval_blocks(ids: np.ndarray, window: int, streams: int):
    """The windows :class:`rnngraph.lm.Evaluator` scores ``ids`` with, in its order: S streams
    over contiguous chunks (``batches(ids, T, S, epochs=1)``), then a shorter tail window
    continuing every stream; states carry through all of them from zero."""
    from rnngraph.data import batches

    ids = np.asarray(ids)
    n = len(ids) - 1
    if n < 1:
        raise ValueError(f"cannot evaluate on {len(ids)} token(s): need at least 2")
    T = min(window, n)
    S = max(1, min(streams, n // T))
    L = n // S
    full, rest = divmod(L, T)
    yield from batches(ids, T, S, epochs=1)
    if rest:
        offsets = np.arange(S, dtype=np.int64) * n // S
        idx = offsets[None, :] + full * T + np.arange(rest + 1)[:, None]
        block = ids[idx].astype(np.int32)
        yield block[:-1], block[1:]


def batch_digest(x: np.ndarray, y: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in (x, y):
        a = np.ascontiguousarray(a, dtype=np.int32)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------- the two models
class RnngraphModel:
    name = "rnngraph"

    def __init__(self, args, vocab_size: int, name: str = "rnngraph"):
        import rnngraph as rg
        from rnngraph.lm import Evaluator

        t0 = time.perf_counter()
        self.name = name
        head = (rg.LSHSoftmax(vocab_size, lsh_config(args, LSH_IMPLS[name]), seed=args.seed) if name in LSH_IMPLS
                else None)

        def net(p):
            stack = rg.stacked(rg.cells.lstm, args.layers, args.hidden, vocab=vocab_size, embed=args.embed, dropout=p)
            return stack if head is None else rg.Sequential(*stack.layers[:-1], head)
        self.net = net(args.dropout)
        self.step = rg.compile(self.net, window=args.window, streams=args.streams, device=args.device,
                               optimizer=rg.AdamW(lr=args.lr, weight_decay=args.weight_decay) if args.weight_decay
                               else rg.Adam(lr=args.lr), clip_norm=args.clip or None, seed=args.seed)
        self.device = self.step.device
        # evaluation never drops: the same parameters in the graph without Dropout layers
        self.evaluator = Evaluator(net(0.0), args.window, args.eval_streams, "float32", device=self.device)
        self.info = {"device": self.device, "plan": self.step.schedule.plan, "dropout": args.dropout,
                     "head": repr(self.net.layers[-1]),
                     "build_s": time.perf_counter() - t0,
                     "parameters": int(sum(v.size for v in self.step.parameters.values()))}
        if self.device == "cuda":
            self.info["gpu"] = _numba_gpu_name()

    def train(self, x, y) -> float:
        return float(self.step.train(x, y))  # read at once, as the torch model's loss.item()

    def set_lr(self, lr: float) -> None:
        self.step.optimizer.lr = float(lr)  # both backends read it at every update

    def reset(self) -> None:
        self.step.reset_state()

    def snapshot(self) -> dict:
        return {k: np.array(v, copy=True) for k, v in self.step.parameters.items()}

    def evaluate(self, ids, params=None) -> tuple[float, int]:
        """(nats per token, tokens) by rnngraph.lm.Evaluator (its own steps and states)."""
        return self.evaluator(self.step.parameters if params is None else params, ids)


class TorchModel:
    name = "torch"

    def __init__(self, args, vocab_size: int):
        import torch
        import torch.nn as nn

        t0 = time.perf_counter()
        self.torch = torch
        want = args.device
        if want == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch finds no CUDA device")
        self.device = "cuda" if (want in ("auto", "cuda") and torch.cuda.is_available()) else "cpu"
        torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
        torch.backends.cudnn.allow_tf32 = bool(args.tf32)  # PyTorch's default is True: set it either way
        torch.manual_seed(args.seed)

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                p = args.dropout
                self.embed = nn.Embedding(vocab_size, args.embed)
                self.drop = nn.Dropout(p)  # no parameters: the state dict is unchanged
                # nn.LSTM drops between its layers only (and warns about dropout with one layer)
                self.lstm = nn.LSTM(args.embed, args.hidden, args.layers, dropout=p if args.layers > 1 else 0.0)
                self.head = nn.Linear(args.hidden, vocab_size)

            def forward(self, x, state=None):
                h, state = self.lstm(self.drop(self.embed(x)), state)
                return self.head(self.drop(h)), state

        self.model = LM()
        if args.init == "rnngraph":
            self._load_rnngraph_init(args, vocab_size)
        self.model.to(self.device)
        if args.weight_decay:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        else:
            self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.clip, self.V = args.clip, vocab_size
        self.state = None
        self.info = {"device": self.device, "init": args.init, "tf32": bool(args.tf32), "dropout": args.dropout,
                     "cudnn": torch.backends.cudnn.version() if self.device == "cuda" else None,
                     "build_s": time.perf_counter() - t0,
                     "parameters": int(sum(p.numel() for p in self.model.parameters()))}
        if self.device == "cuda":
            self.info["gpu"] = torch.cuda.get_device_name()

    def _load_rnngraph_init(self, args, vocab_size: int) -> None:
        """rnngraph's seed-``args.seed`` initialisation, mapped onto the torch modules (rnngraph
        keeps PyTorch's layout: W = weight_ih, U = weight_hh, gate order i, f, g, o)."""
        import rnngraph as rg

        cells = [rg.cells.lstm(hidden=args.hidden) for _ in range(args.layers)]
        net = rg.Sequential(rg.Embedding(vocab_size, args.embed), *cells, rg.SoftmaxCrossEntropy(vocab_size))
        p = rg.init_params(net.graph, args.seed, "float32")
        mapping = {"embed.weight": "embed.weight", "head.weight": "head.W.weight", "head.bias": "head.W.bias"}
        for k in range(args.layers):
            mapping.update({f"lstm.weight_ih_l{k}": f"layer{k}.W.weight", f"lstm.bias_ih_l{k}": f"layer{k}.W.bias",
                            f"lstm.weight_hh_l{k}": f"layer{k}.U.weight", f"lstm.bias_hh_l{k}": f"layer{k}.U.bias"})
        sd = self.model.state_dict()
        if set(sd) != set(mapping) or set(mapping.values()) != set(p):
            raise RuntimeError(f"cannot map rnngraph's parameters {sorted(p)} onto torch's {sorted(sd)}")
        for tk, rk in mapping.items():
            if tuple(sd[tk].shape) != p[rk].shape:
                raise RuntimeError(f"{rk} {p[rk].shape} does not fit torch's {tk} {tuple(sd[tk].shape)}")
        as_tensor = self.torch.from_numpy
        self.model.load_state_dict({tk: as_tensor(np.ascontiguousarray(p[rk])) for tk, rk in mapping.items()})

    def _ids(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)

    def train(self, x, y) -> float:
        torch, F = self.torch, self.torch.nn.functional
        xt, yt = self._ids(x), self._ids(y)
        self.model.train()  # dropout on (evaluate() switches it off and back)
        logits, state = self.model(xt, self.state)
        loss = F.cross_entropy(logits.reshape(-1, self.V), yt.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        self.state = tuple(s.detach() for s in state)
        return loss.item()  # synchronises, as rnngraph's step.train does (it returns the loss as a float)

    def reset(self) -> None:
        self.state = None

    def set_lr(self, lr: float) -> None:
        for group in self.opt.param_groups:
            group["lr"] = float(lr)

    def snapshot(self) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def evaluate(self, ids, params=None) -> tuple[float, int]:
        """(nats per token, tokens) over the windows of :func:`eval_blocks` (Evaluator's layout)."""
        torch, F = self.torch, self.torch.nn.functional
        model = self.model
        if params is not None:
            import copy
            model = copy.deepcopy(self.model)
            model.load_state_dict(params)
        was_training = model.training
        model.eval()
        total, count, state = 0.0, 0, None
        try:
            with torch.no_grad():
                for x, y in eval_blocks(ids, self.window_for_eval, self.streams_for_eval):
                    logits, state = model(self._ids(x), state)
                    total += F.cross_entropy(logits.reshape(-1, self.V), self._ids(y).reshape(-1),
                                             reduction="sum").item()
                    count += x.size
        finally:
            model.train(was_training)
        return total / count, count


def make_model(name: str, args, vocab_size: int):
    if name.startswith("rnngraph"):
        return RnngraphModel(args, vocab_size, name)
    m = TorchModel(args, vocab_size)
    m.window_for_eval, m.streams_for_eval = args.window, args.eval_streams
    return m


# ---------------------------------------------------------------------------------- environment
def _numba_gpu_name() -> str | None:
    try:
        from numba import cuda
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name, module in (("numpy", "numpy"), ("numba", "numba"), ("numba-cuda", "numba_cuda"), ("torch", "torch"),
                         ("rnngraph", "rnngraph")):
        try:
            out[name] = __import__(module).__version__
        except Exception:
            out[name] = None
    return out


def environment() -> dict:
    env = {"host": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(), "gpus": []}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        env["gpus"] = [line.strip() for line in q.stdout.splitlines() if line.strip()]
    except Exception:
        pass
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        env["git"] = rev.stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        env["git_dirty"] = bool(dirty.stdout.strip()) if rev.returncode == 0 else None
    except Exception:
        env["git"] = None
    return env


def write_json(path: str | None, result: dict) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1, default=lambda v: v.item() if isinstance(v, np.generic) else str(v))
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------- training one model
def score(nats: float | None, level: str) -> float | None:
    """Mean nats per token (float; None passes through) -> the level's score (METRICS): bits/char
    (nats / ln 2) at char level, perplexity (rnngraph.lm.perplexity) at word level."""
    from rnngraph.lm import perplexity
    if nats is None:
        return None
    return nats / LN2 if level == "char" else perplexity(nats)


def target_of(args) -> float | None:
    """--target, else the level's default (DEFAULT_TARGET: 1.6 bits/char; none at word level)."""
    return DEFAULT_TARGET[args.level] if args.target is None else args.target


def train_model(model, args, data: dict, rec: dict, save, log, t_process: float) -> None:
    """Train ``model`` within the budget, filling ``rec`` (curve, speed, final scores); ``save()``
    after every evaluation."""
    from rnngraph.data import batches
    from rnngraph.optim import cosine_lr

    T, S = args.window, args.streams
    it = batches(data["train_ids"], T, S)
    W = it.windows_per_epoch
    valid_curve = data["valid_curve_ids"]
    budget = args.minutes * 60.0 if args.minutes else math.inf
    every_kind, every = args.eval_every
    key, _, spec, _ = METRICS[args.level]
    target = target_of(args)
    rec.update({"curve": [], "first_losses": [], "steps": 0, "tokens": 0, "train_s": 0.0, "eval_s": 0.0,
                "windows_per_epoch": W, "status": "training"})
    digest = hashlib.sha256()
    best = {"score": math.inf, "params": None, "step": None}
    recent: list[float] = []
    step_times: list[float] = []
    started = time.perf_counter()
    lr_now = args.lr

    def lr_at() -> float:
        done = max(rec["train_s"] / budget if math.isfinite(budget) else 0.0,
                   rec["steps"] / args.steps if args.steps else 0.0)
        return cosine_lr(args.lr, args.lr_final, done)

    def evaluate_point() -> None:
        t0 = time.perf_counter()
        nats, count = model.evaluate(valid_curve)
        dt = time.perf_counter() - t0
        rec["eval_s"] += dt
        v = score(nats, args.level)
        point = {"step": rec["steps"], "tokens": rec["tokens"], "epoch": round(rec["steps"] / W, 4),
                 "train_s": round(rec["train_s"], 3), "wall_s": round(time.perf_counter() - started, 3),
                 f"train_{key}": score(sum(recent) / len(recent), args.level) if recent else None, f"valid_{key}": v,
                 "valid_tokens": count, "eval_s": round(dt, 3), "lr": lr_now}
        recent.clear()
        rec["curve"].append(point)
        if math.isfinite(v) and v < best["score"]:
            best.update(score=v, step=rec["steps"], train_s=rec["train_s"])
            if args.keep_best and rec["steps"] > 0:
                best["params"] = model.snapshot()
        if rec.get("time_to_target") is None and target is not None and v < target:
            rec["time_to_target"] = {k: point[k] for k in ("step", "tokens", "epoch", "train_s", "wall_s",
                                                           f"valid_{key}")}
        rec[f"best_valid_{key}"], rec["best_step"] = best["score"], best["step"]
        if rec["steps"] > 1 and rec["train_s"] > rec["first_step_s"]:
            rec["tokens_per_s"] = (rec["tokens"] - T * S) / (rec["train_s"] - rec["first_step_s"])
        log(f"[{model.name:8}] step {rec['steps']:>6,}  epoch {point['epoch']:6.2f}  "
            f"{rec['tokens'] / 1e6:7.2f}M tokens  "
            f"train {rec['train_s']:6.1f} s  train {key}{' (active sets)' if model.name in LSH_IMPLS else ''} "
            f"{_fmt(point[f'train_{key}'], spec)}  "
            f"valid {key} {_fmt(v, spec)}  "
            f"{_fmt(rec.get('tokens_per_s'), '{:,.0f}')} tok/s  (eval {dt:.1f} s)")
        save()

    evaluate_point()  # step 0: the untrained model (and the evaluator's compile, before the clock starts)
    next_eval = every if every_kind != "off" else math.inf
    stopped_by = None
    while stopped_by is None:
        if args.steps is not None and rec["steps"] >= args.steps:
            stopped_by = "steps"
        elif rec["train_s"] >= budget:
            stopped_by = "minutes"
        elif args.wall_limit is not None and time.perf_counter() - t_process >= args.wall_limit:
            stopped_by = "wall-limit"
        if stopped_by is not None:
            break
        t0 = time.perf_counter()
        if it.index % W == 0 and it.index > 0:
            model.reset()  # a new epoch: every stream jumps back to its start
        x, y = next(it)
        if args.lr_schedule != "constant":
            lr_now = lr_at()
            model.set_lr(lr_now)
        t1 = time.perf_counter()
        loss = model.train(x, y)
        t2 = time.perf_counter()
        rec["train_s"] += t2 - t0
        step_times.append(t2 - t1)
        rec["steps"] += 1
        rec["tokens"] += x.size
        if rec["steps"] == 1:
            rec["first_step_s"] = t2 - t0
            rec["first_batch_sha256"] = batch_digest(x, y)
        if rec["steps"] <= args.hash_batches:
            digest.update(batch_digest(x, y).encode())
            rec["data_sha256"] = digest.hexdigest()[:16]
            rec["hashed_batches"] = rec["steps"]
        if len(rec["first_losses"]) < 10:
            rec["first_losses"].append(loss)
        if not math.isfinite(loss):
            stopped_by = f"diverged: loss {loss} at step {rec['steps']}"
            break
        recent.append(loss)
        progress = rec["train_s"] if every_kind == "s" else rec["steps"]
        if progress >= next_eval:
            evaluate_point()
            while next_eval <= progress:
                next_eval += every
    rec["stopped_by"] = stopped_by
    rec["status"] = "final evaluation"
    if recent or not rec["curve"] or rec["curve"][-1]["step"] != rec["steps"]:
        evaluate_point()
    times = np.array(step_times[1:] if len(step_times) > 1 else step_times)
    if times.size:
        rec["step_ms"] = {"median": float(np.median(times) * 1e3), "p10": float(np.percentile(times, 10) * 1e3),
                          "p90": float(np.percentile(times, 90) * 1e3), "mean": float(times.mean() * 1e3)}
    rec["tokens_per_s_overall"] = rec["tokens"] / rec["train_s"] if rec["train_s"] > 0 else None
    rec["epochs"] = rec["steps"] / W
    save()

    # final scores on the whole splits
    t0 = time.perf_counter()
    final = {}
    for split in ("valid", "test"):
        nats, count = model.evaluate(data[f"{split}_ids"])
        final[f"{split}_{key}"], final[f"{split}_tokens"] = score(nats, args.level), count
        rec["final"] = final
        save()
    if args.keep_best and best["params"] is not None and best["step"] != rec["steps"]:
        b = {"step": best["step"], "train_s": round(best["train_s"], 3)}
        for split in ("valid", "test"):
            nats, count = model.evaluate(data[f"{split}_ids"], best["params"])
            b[f"{split}_{key}"] = score(nats, args.level)
        rec["best"] = b
    elif best["step"] == rec["steps"]:
        rec["best"] = {"step": rec["steps"], "train_s": round(rec["train_s"], 3), **{
            k: final[k] for k in (f"valid_{key}", f"test_{key}")}}
    rec["final_eval_s"] = time.perf_counter() - t0
    rec["status"] = "diverged" if stopped_by.startswith("diverged") else "done"
    save()
    log(f"[{model.name:8}] final valid {_fmt(final[f'valid_{key}'], spec)}  test {_fmt(final[f'test_{key}'], spec)} "
        f"{METRICS[args.level][1]}"
        + (f"; best (step {rec['best']['step']:,}) valid {_fmt(rec['best'][f'valid_{key}'], spec)} test "
           f"{_fmt(rec['best'][f'test_{key}'], spec)}" if rec.get("best") else ""))


def _fmt(v, spec: str = "{:.3f}") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else spec.format(v)


# ---------------------------------------------------------------------------------- report
def table(result: dict) -> str:
    """The results as a text table, scores in the level's unit (files written before --level: char)."""
    level, target = result["config"].get("level", "char"), result["config"]["target"]
    key, score_name, spec, _ = METRICS[level]
    rows = [("impl", "device", "steps", "epochs", "tokens", "train s", "tok/s", "step ms", "valid", "test",
             "best valid", "best test", f"t(<{target:g}) s" if target is not None else "t(target) s")]
    for name, r in result["impls"].items():
        if "error" in r and "curve" not in r:
            rows.append((name, r.get("device", "-"), "error: " + r["error"].splitlines()[-1][:90]))
            continue
        f, b, tt = r.get("final", {}), r.get("best", {}), r.get("time_to_target")
        rows.append((name, r.get("device", "-"), f"{r.get('steps', 0):,}", _fmt(r.get("epochs"), "{:.1f}"),
                     f"{r.get('tokens', 0) / 1e6:.1f}M", _fmt(r.get("train_s"), "{:.0f}"),
                     _fmt(r.get("tokens_per_s"), "{:,.0f}"), _fmt(r.get("step_ms", {}).get("median"), "{:.2f}"),
                     _fmt(f.get(f"valid_{key}"), spec), _fmt(f.get(f"test_{key}"), spec),
                     _fmt(b.get(f"valid_{key}"), spec), _fmt(b.get(f"test_{key}"), spec),
                     _fmt(tt["train_s"], "{:.0f}") if tt else "not reached" if target is not None else "no target"))
    width = [max(len(r[i]) for r in rows if i < len(r) and len(r) > 3) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        if len(r) <= 3:
            lines.append("  ".join(r))
        else:
            lines.append("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, width))))
    return "\n".join(lines) + f"\n({score_name}; valid/test: final weights on the whole splits; best: weights of the " \
                              "best validation point; t: training seconds to the first validation below target)"


def merge(paths: list[str], out: str | None) -> dict:
    results = [json.loads(Path(p).read_text()) for p in paths]
    base = dict(results[0])
    base["impls"] = {}
    keys = ("layers", "hidden", "embed", "window", "streams", "lr", "clip", "seed", "init", "corpus", "dropout",
            "weight_decay", "level", "max_words", "vocab", "vocab_size", "rare_fraction")
    for p, r in zip(paths, results):
        # files written before these options ran without them
        old = {"dropout": 0.0, "weight_decay": 0.0, "level": "char", "max_words": None, "vocab_size": None,
               "rare_fraction": None}
        diff = [k for k in keys if r["config"].get(k, old.get(k)) != base["config"].get(k, old.get(k))]
        if diff:
            raise RunError(f"{p}: its config differs from {paths[0]}'s in {diff}")
        for name, rec in r["impls"].items():
            if name in base["impls"]:
                raise RunError(f"{p}: a second result for {name}")
            base["impls"][name] = rec
    base["merged_from"] = [{"file": os.path.basename(p), "date": r.get("date"), "environment": r.get("environment")}
                           for p, r in zip(paths, results)]
    base["status"] = "complete" if all(r.get("status") == "complete" for r in results) else "partial"
    summarize(base)
    write_json(out, base)
    return base


def summarize(result: dict) -> None:
    """Cross-model checks: identical batches, first losses, speed ratio."""
    imp = result["impls"]
    if all(n in imp and "data_sha256" in imp[n] for n in ("rnngraph", "torch")):
        a, b = imp["rnngraph"], imp["torch"]
        n = min(a.get("hashed_batches", 0), b.get("hashed_batches", 0))
        same_count = a["hashed_batches"] == b["hashed_batches"]
        result["same_batches"] = (a["first_batch_sha256"] == b["first_batch_sha256"]
                                  and (a["data_sha256"] == b["data_sha256"] if same_count else None))
        result["hashed_batches_compared"] = n
        if a.get("first_losses") and b.get("first_losses"):
            result["first_loss_diff"] = abs(a["first_losses"][0] - b["first_losses"][0])
        if a.get("tokens_per_s") and b.get("tokens_per_s"):
            result["rnngraph_over_torch_tokens_per_s"] = a["tokens_per_s"] / b["tokens_per_s"]


# ---------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    previous = {}

    def on_signal(signum, frame):
        raise Terminated(signal.Signals(signum).name)

    try:
        if args.merge:
            result = merge(args.merge, args.out)
            print(table(result))
            return 0
        impls = check_args(args)
        import threading
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        return _run(args, impls, log)
    except RunError as exc:
        print(f"lm_vs_torch: {exc}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def encode_corpus(args, corpus):
    """The vocabulary of ``args.level`` built from the training split as ``rnngraph train --level
    LEVEL --max-words N`` builds it (rnngraph.lm.build_vocab: CharVocab, or WordVocab of the
    lowercased word, punctuation and newline tokens, ``<unk>`` = id 0), and the three splits'
    token ids under it (int32 arrays of shape (tokens,); unseen words of the held-out splits are
    ``<unk>``). RunError when a split is too short for a window per stream or for a prediction."""
    from rnngraph.lm import build_vocab

    noun = METRICS[args.level][3]
    vocab = build_vocab(args.level, corpus.train, args.max_words)
    if args.vocab_size is not None and args.vocab_size <= len(vocab):
        raise RunError(f"--vocab-size {args.vocab_size:,} must exceed the text's vocabulary, {len(vocab):,}")
    train_ids = vocab.encode(corpus.train)
    valid_ids, test_ids = vocab.encode(corpus.valid), vocab.encode(corpus.test)
    if len(train_ids) < args.window * args.streams + 1:
        raise RunError(f"the training split has {len(train_ids):,} {noun}, fewer than one window per stream "
                       f"(--window {args.window} x --streams {args.streams} needs {args.window * args.streams + 1:,})")
    if len(valid_ids) < 2 or len(test_ids) < 2:
        raise RunError(f"the validation and test splits need at least 2 {noun} each")
    if args.vocab_size is not None:
        train_ids, valid_ids, test_ids = add_rare_words((train_ids, valid_ids, test_ids), len(vocab), args.vocab_size,
                                                        args.rare_fraction, args.seed)
    return vocab, train_ids, valid_ids, test_ids


def add_rare_words(splits, words: int, size: int, fraction: float, seed: int):
    """``splits`` (int32 token-id arrays over a vocabulary of ``words`` ids) with a ``fraction`` of
    each split's positions (drawn with ``seed``) replaced by ids in [words, size), drawn uniformly:
    synthetic rare words that make the vocabulary ``size`` types (unseen ones included)."""
    rng = np.random.default_rng([seed, 28])
    out = []
    for ids in splits:
        ids = np.array(ids, dtype=np.int32)
        where = np.flatnonzero(rng.random(ids.size) < fraction)
        ids[where] = rng.integers(words, size, size=where.size, dtype=np.int32)
        out.append(ids)
    return tuple(out)


def _run(args, impls: list[str], log) -> int:
    from rnngraph.data import CorpusError
    from rnngraph.lm import unit

    t_start = time.perf_counter()
    try:
        corpus = load_corpus(args)
    except CorpusError as exc:
        raise RunError(str(exc)) from None
    vocab, train_ids, valid_ids, test_ids = encode_corpus(args, corpus)
    V = args.vocab_size or len(vocab)
    valid_curve = valid_ids[: args.eval_tokens + 1] if args.eval_tokens else valid_ids
    data = {"train_ids": train_ids, "valid_ids": valid_ids, "test_ids": test_ids, "valid_curve_ids": valid_curve}
    W = ((len(train_ids) - 1) // args.streams) // args.window
    config = {k: v for k, v in vars(args).items() if k not in ("merge", "quiet", "out")}
    config.update(eval_every=f"{args.eval_every[1]:g}{'s' if args.eval_every[0] == 's' else ''}"
                  if args.eval_every[0] != "off" else "0", impl=impls, corpus=corpus.name if not args.text else
                  os.path.basename(args.text), cell="lstm", optimizer="adamw" if args.weight_decay else "adam",
                  vocab=V, text_vocab=len(vocab), dtype="float32", target=target_of(args),
                  **{f"{split}_{unit(args.level)}s": len(ids) for split, ids in (
                      ("train", train_ids), ("valid", valid_ids), ("test", test_ids), ("valid_curve", valid_curve))},
                  windows_per_epoch=W, tokens_per_window=args.window * args.streams,
                  budget="per model: --minutes of training time (evaluation excluded) or --steps, first reached")
    result = {"format": FORMAT, "bench": "bench/lm_vs_torch.py",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "versions": versions(), "environment": environment(), "config": config, "impls": {},
              "status": "running"}
    save = lambda: write_json(args.out, result)  # noqa: E731
    save()
    sizes = "" if args.level == "char" else (  # the corpus's repr counts characters
        f" ({len(train_ids):,} / {len(valid_ids):,} / {len(test_ids):,} words in train / valid / test)")
    log(f"{corpus!r}{sizes}, {args.level} level, vocab {V:,}"
        + (f" ({len(vocab):,} in the text, {args.rare_fraction:g} of the tokens rare words)" if V != len(vocab) else "")
        + f"; {args.layers}x LSTM {args.hidden}, "
        f"embed {args.embed}; window {args.window} x {args.streams} streams ({args.window * args.streams:,} tokens, "
        f"{W:,} windows an epoch); "
        + (f"AdamW lr {args.lr:g}, weight decay {args.weight_decay:g}, " if args.weight_decay else
           f"Adam lr {args.lr:g}, ")
        + f"clip {args.clip:g}" + (f", dropout {args.dropout:g}" if args.dropout else "")
        + f"; budget {args.minutes:g} min" + (f" / {args.steps:,} steps" if args.steps else "")
        + f" per model; {', '.join(impls)}")
    interrupted = None
    for name in impls:
        rec = result["impls"].setdefault(name, {})
        try:
            if name == "torch":
                try:
                    importlib.import_module("torch")
                except ImportError as exc:
                    rec.update(error=f"torch is not installed ({exc})", status="skipped")
                    log("[torch   ] skipped: torch is not installed")
                    save()
                    continue
            model = make_model(name, args, V)
            rec.update(model.info)
            log(f"[{name:8}] {model.info['device']}, {model.info['parameters']:,} parameters"
                + (f", plan {model.info['plan']}" if "plan" in model.info else "")
                + f" (built in {model.info['build_s']:.1f} s)")
            train_model(model, args, data, rec, save, log, t_start)
        except Terminated as exc:
            rec["status"] = f"interrupted ({exc})"
            interrupted = exc
            break
        except Exception as exc:  # one model's failure must not lose the other's run
            rec["error"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
            rec["status"] = "error"
            log(f"[{name:8}] failed: {type(exc).__name__}: {exc}")
        finally:
            save()
            model = None
    summarize(result)
    result["wall_s"] = time.perf_counter() - t_start
    failed = [n for n, r in result["impls"].items() if r.get("status") not in ("done", "skipped")]
    result["status"] = "interrupted" if interrupted else ("complete" if not failed else "partial")
    save()
    print(table(result), flush=True)
    if "same_batches" in result:
        print(f"same batches: {result['same_batches']} (first window and the first "
              f"{result['hashed_batches_compared']} hashed); first-loss difference "
              f"{_fmt(result.get('first_loss_diff'), '{:.2e}')}; rnngraph/torch tokens/s "
              f"{_fmt(result.get('rnngraph_over_torch_tokens_per_s'), '{:.2f}')}", flush=True)
    if args.out:
        print(f"results: {args.out}", flush=True)
    if interrupted:
        return 124
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
