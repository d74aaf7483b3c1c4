"""``rnngraph sample`` and ``rnngraph eval``: the commands that run a checkpoint."""
from __future__ import annotations

import argparse
import sys

from ..data import CorpusError, tokenize_words
from ..lm import (Evaluator, LMConfig, build_network, canonical_corpus, describe_loss, generate, load_checkpoint,
                  load_corpus, unit)
from .arguments import (CHUNK_HELP, checkpoint_cell_arg_options, checkpoint_cell_args, chunk_choice, directory,
                        nonnegative_int, note as cli_note, positive_float, positive_int)
from .step_setup import (_apply, _check_memory, _checkpoint_config, _checkpoint_corpus, _chunked, _compile,
                         _corpus_note, _device, _footprint, _head_words, _model, vocabulary_differs)


CELL_OVERRIDE = ("run this cell instead of the one stored in the checkpoint: file.py (the checkpoint's function "
                 "name), file.py:function or a standard cell's name; its parameters must fit the checkpoint's "
                 "(default: the cell source the checkpoint stores, or for an older checkpoint the file it names)")

#: ``--chunk``'s help where a checkpoint's network is rebuilt to score text (eval, complete).
CHUNK_OVERRIDE = CHUNK_HELP + " (default: the checkpoint's, the dense head for one written without it)"


def _sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", type=directory, required=True)
    p.add_argument("--cell", metavar="FILE.py[:FUNCTION]", help=CELL_OVERRIDE)
    checkpoint_cell_arg_options(p)
    p.add_argument("--prime", metavar="TEXT", default="",
                   help="text fed to the network before sampling (default: none)")
    p.add_argument("--length", metavar="N", type=nonnegative_int, default=200, help="tokens to draw (default 200)")
    p.add_argument("--temperature", metavar="TAU", type=positive_float, default=1.0,
                   help="divide the logits by this before the softmax (default 1.0)")
    p.add_argument("--seed", metavar="SEED", type=nonnegative_int, default=0, help="sampling seed (default 0)")
    p.add_argument("--chunk", metavar="N|auto|none", type=chunk_choice,
                   help="changes nothing here (taken so that train's, eval's and complete's flags can be given): "
                        "sample always draws from the dense head's logits over the whole vocabulary, rebuilt from "
                        "the same parameters whatever head the checkpoint was trained with; what --chunk does: "
                        "`rnngraph train --help` and README.md, 'The command line'")


def _prime_note(vocab, prime: str, level: str) -> str | None:
    """The note for a --prime with tokens outside the checkpoint's vocabulary, which the network is
    fed as <unk> (tokens as the vocabulary encodes them: lowercased words at word level,
    characters else), naming them; None when every token is known."""
    tokens = tokenize_words(prime) if vocab.kind == "word" else list(prime)
    outside = [t for t in tokens if t not in vocab.index]
    if not outside:
        return None
    distinct = list(dict.fromkeys(outside))
    shown = ", ".join(repr(t) for t in distinct[:8]) + (f" and {len(distinct) - 8} more" if len(distinct) > 8 else "")
    are = "is" if len(outside) == 1 else "are"
    return (f"--prime: {len(outside)} of its {len(tokens)} {unit(level)}s {are} not in the checkpoint's "
            f"vocabulary ({len(vocab):,} {unit(level)}s) and {are} fed to the "
            f"network as <unk>: {shown}")


def run_sample(args) -> int:
    """Print --prime, then each token as it is drawn (flushed: the text appears as it comes).
    Notes on stderr: a --prime with tokens outside the vocabulary; --chunk (the dense head samples)."""
    ck = load_checkpoint(args.checkpoint)
    cfg = _checkpoint_config(ck, args.cell, cell_args=checkpoint_cell_args(args))
    if args.chunk is not None:
        cli_note("--chunk changes nothing in sample: it draws from the dense head's logits (the same parameters)")
    note = _prime_note(ck.vocab, args.prime, cfg.level)
    if note:
        cli_note(note)
    net = build_network(cfg, len(ck.vocab), dropout=0.0, dense=True)  # never drops; the logits, chunked or not
    _check_memory(_footprint(net, 1, 1, cfg.dtype, "cpu", False), f"sampling from {args.checkpoint} ({_model(cfg)})",
                  "sample on a machine with more memory")
    step = _compile(net, LMConfig(**{**cfg.to_json(), "window": 1, "streams": 1}), "cpu")
    _apply(ck, step, args.cell)
    pieces = generate(step, ck.vocab, args.prime, args.length, args.temperature, args.seed)
    joiner = " " if cfg.level == "word" and args.prime else ""  # between the prime and the first word
    out = sys.stdout
    out.write(args.prime)
    for k, piece in enumerate(pieces):
        out.write((joiner if k == 0 else "") + piece)
        out.flush()
    out.write("\n")
    out.flush()
    return 0


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", type=directory, required=True)
    p.add_argument("--cell", metavar="FILE.py[:FUNCTION]", help=CELL_OVERRIDE)
    checkpoint_cell_arg_options(p)
    p.add_argument("--split", choices=("valid", "test", "train"), default="test", help="(default test)")
    p.add_argument("--corpus", "--text", dest="corpus", metavar="austen|FILE",
                   help="evaluate on this corpus's split instead of the checkpoint's corpus (--text: the same)")
    p.add_argument("--streams", metavar="S", type=positive_int, default=16,
                   help="parallel streams over the split, states carried through each (default 16)")
    p.add_argument("--window", metavar="T", type=positive_int,
                   help="timesteps per forward call (default: the checkpoint's)")
    p.add_argument("--chunk", metavar="N|auto|none", type=chunk_choice, help=CHUNK_OVERRIDE)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="(default auto)")


def run_eval(args) -> int:
    ck = load_checkpoint(args.checkpoint)
    cfg = _chunked(_checkpoint_config(ck, args.cell, cell_args=checkpoint_cell_args(args)), args.chunk,
                   len(ck.vocab))
    net = build_network(cfg, len(ck.vocab), dropout=0.0)  # evaluation never drops
    corpus = (load_corpus(canonical_corpus(args.corpus)) if args.corpus else
              _checkpoint_corpus(cfg.corpus, "give --corpus FILE"))
    if not args.corpus:
        _corpus_note(ck, corpus)
    ids = ck.vocab.encode(getattr(corpus, args.split))
    if len(ids) < 2:
        raise CorpusError(f"{corpus.name}: the {args.split} split has {len(ids)} {unit(cfg.level)}(s); "
                          f"need at least 2")
    device = _device(args.device, cfg.dtype, f"and {args.checkpoint} is a {cfg.dtype} checkpoint: use --device cpu")
    evaluator = Evaluator(net, args.window or cfg.window, args.streams, cfg.dtype, device=device)
    T, S = evaluator.shape(len(ids))
    _check_memory(_footprint(net, 1, 1, cfg.dtype, "cpu", False) + _footprint(net, T, S, cfg.dtype, device, False),
                  f"evaluating {args.checkpoint} ({_model(cfg)}) with --window {T} --streams {S}",
                  "lower --window or --streams")
    step = _compile(net, LMConfig(**{**cfg.to_json(), "window": 1, "streams": 1}), "cpu")
    _apply(ck, step, args.cell)
    unknown = float((ids == 0).mean())  # id 0 is <unk>
    # another text than the checkpoint's: any at char level; at word level a --corpus of another file
    # or a text whose vocabulary is not the checkpoint's (one edited before a resumed run), as the
    # checkpoint's own test and validation words outside its training split are <unk> too
    other = cfg.level == "char" or (args.corpus is not None and canonical_corpus(args.corpus) != cfg.corpus) \
        or vocabulary_differs(ck, corpus)
    if other and unknown > 0.01:
        tokens = "characters" if cfg.level == "char" else "words"
        cli_note(f"{unknown:.1%} of the {args.split} split's {tokens} are not in the checkpoint's "
                 f"vocabulary: they are scored as <unk>")
    nats, count = evaluator(step.parameters, ids)
    print(f"{args.split} {describe_loss(nats, cfg.level)}  ({nats:.4f} nats/{unit(cfg.level)}, "
          f"{count:,} {unit(cfg.level)}s of {corpus.name}, {_head_words(cfg, len(ck.vocab))}, checkpoint step "
          f"{ck.step:,})")
    return 0
