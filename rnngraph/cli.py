"""The ``rnngraph`` command line: ``train``, ``sample``, ``eval`` (``python -m rnngraph`` too).

Each subcommand is a :class:`Command` in :data:`COMMANDS`: a name, a help line, a function
adding its arguments to an argparse parser, and a function running it (returning the exit
code). To add one, append a Command (see ``schedule`` in DESIGN.md).

Errors a user can cause (a missing, empty or non-UTF-8 file, a corpus too short for one
window, a bad checkpoint, a broken cell) print one line, ``rnngraph: error: ...``, on stderr
and exit 1; bad flags exit 2; Ctrl-C exits 130. ``RNNGRAPH_DEBUG=1`` re-raises instead, for a
traceback.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from . import __version__
from .data import CorpusError
from .errors import GraphError
from .lm import (LN2, CellFileError, CheckpointError, Evaluator, LMConfig, build_network, build_vocab,
                 canonical_cell, canonical_corpus, describe_loss, has_checkpoint, load_checkpoint,
                 load_corpus, make_optimizer, sample, save_checkpoint, unit)
from .optim import from_config
from .runtime import compile as rg_compile

PROG = "rnngraph"


class CLIError(Exception):
    """A user error found by the CLI itself; its message is printed as one line."""


# ---------------------------------------------------------------------------------- argparse
class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: ``rnngraph: error: ...``."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message} (see `{self.prog} --help`)\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


@dataclass(frozen=True)
class Command:
    """A subcommand: ``add_arguments(parser)`` declares its flags, ``run(args) -> exit code``."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ---------------------------------------------------------------------------------- train
#: Defaults of the flags that a resumed run takes from its checkpoint when they are not given.
TRAIN_DEFAULTS = dict(cell="lstm", layers=1, hidden=128, embed=32, window=64, streams=32, level="char",
                      corpus="austen", seed=0, dtype="float32", max_words=10_000, optimizer="adam",
                      lr=2e-3, clip=1.0)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    d = TRAIN_DEFAULTS
    g = p.add_argument_group("model (a resumed run takes these from the checkpoint)")
    g.add_argument("--cell", help=f"a standard cell (lstm, gru, peephole_lstm, ...) or file.py:function "
                                  f"naming an @rg.cell function (default {d['cell']})")
    g.add_argument("--layers", type=positive_int, help=f"stacked cells (default {d['layers']})")
    g.add_argument("--hidden", type=positive_int, help=f"hidden size of each cell (default {d['hidden']})")
    g.add_argument("--embed", type=positive_int, help=f"embedding size (default {d['embed']})")
    g.add_argument("--dtype", choices=("float32", "float64"), help=f"(default {d['dtype']})")
    g.add_argument("--seed", type=int, help=f"parameter initialisation seed (default {d['seed']})")
    g = p.add_argument_group("data")
    g.add_argument("--corpus", help="'austen' (Jane Austen's novels; train on five, validate and test on "
                                    "halves of Persuasion) or a UTF-8 text file (split 90/5/5) "
                                    f"(default {d['corpus']})")
    g.add_argument("--level", choices=("char", "word"), help=f"tokens (default {d['level']})")
    g.add_argument("--max-words", type=positive_int, help="word level: vocabulary of the most frequent "
                                                          f"words plus <unk> (default {d['max_words']})")
    g.add_argument("--window", type=positive_int, help=f"T, timesteps per training step (truncated BPTT) "
                                                       f"(default {d['window']})")
    g.add_argument("--streams", type=positive_int, help=f"S, parallel streams at evenly spaced offsets "
                                                        f"(default {d['streams']})")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=nonnegative_int, default=1000,
                   help="train until this many steps in total (a resumed run counts its old steps) "
                        "(default 1000)")
    g.add_argument("--optimizer", choices=("adam", "sgd"), help=f"(default {d['optimizer']})")
    g.add_argument("--lr", type=positive_float, help=f"learning rate (default {d['lr']})")
    g.add_argument("--clip", type=nonnegative_float, help=f"global gradient-norm clip, 0 = off "
                                                          f"(default {d['clip']})")
    g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="(default auto)")
    g = p.add_argument_group("validation and checkpoints")
    g.add_argument("--eval-every", type=nonnegative_int, default=100,
                   help="validate every K steps and at the end; 0 = only at the end (default 100)")
    g.add_argument("--eval-streams", type=positive_int, default=32,
                   help="streams of the validation pass (default 32)")
    g.add_argument("--eval-tokens", type=nonnegative_int, default=0,
                   help="validate on the first N tokens of the validation split only; 0 = all of it "
                        "(default 0)")
    g.add_argument("--checkpoint", metavar="DIR", help="write config.json and params.npz here at each "
                                                        "validation and at the end")
    g.add_argument("--checkpoint-every", type=nonnegative_int, default=None,
                   help="checkpoint every K steps (default: with each validation)")
    g.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint DIR")
    g = p.add_argument_group("output")
    g.add_argument("--show-schedule", action="store_true",
                   help="print the compiled schedule (the network graph where there is none) first")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


def _config_from_args(args) -> LMConfig:
    d = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in TRAIN_DEFAULTS.items()}
    return LMConfig(cell=canonical_cell(d["cell"]), layers=d["layers"], hidden=d["hidden"], embed=d["embed"],
                    window=d["window"], streams=d["streams"], level=d["level"],
                    corpus=canonical_corpus(d["corpus"]), seed=d["seed"], dtype=d["dtype"],
                    max_words=d["max_words"], optimizer=make_optimizer(d["optimizer"], d["lr"]).config(),
                    clip=d["clip"] or None)


def _resumed_config(args, saved: LMConfig, directory: str) -> LMConfig:
    """The checkpoint's config, with lr/clip overridden where given; CheckpointError when a
    flag that fixes shapes or the data layout disagrees with it."""
    canon = {"cell": canonical_cell, "corpus": canonical_corpus}
    for name in LMConfig.FIXED:
        given = getattr(args, name)
        if given is None:
            continue
        given = canon.get(name, lambda v: v)(given)
        if given != getattr(saved, name):
            flag = "--" + name.replace("_", "-")
            raise CheckpointError(
                f"{directory}: the checkpoint was trained with {flag} {getattr(saved, name)}, not {given}: "
                f"drop {flag} to resume it, or train into a new --checkpoint directory")
    cfg = LMConfig(**{**saved.to_json()})
    if args.optimizer is not None and args.optimizer != saved.optimizer["name"]:
        raise CheckpointError(f"{directory}: the checkpoint was trained with --optimizer "
                              f"{saved.optimizer['name']}, not {args.optimizer}")
    if args.lr is not None:
        cfg.optimizer = {**cfg.optimizer, "lr": args.lr}
    if args.clip is not None:
        cfg.clip = args.clip or None
    return cfg


def _compile(net, cfg: LMConfig, device: str, **kw):
    try:
        return rg_compile(net, window=cfg.window, streams=cfg.streams, device=device, dtype=cfg.dtype, **kw)
    except RuntimeError as exc:  # device="cuda" where it is not available
        raise CLIError(str(exc)) from None


def run_train(args) -> int:
    from tqdm import tqdm

    ckdir = args.checkpoint
    ck = None
    if args.resume:
        if not ckdir:
            raise CLIError("--resume needs --checkpoint DIR")
        ck = load_checkpoint(ckdir)
        cfg = _resumed_config(args, ck.config, ckdir)
    else:
        if ckdir and has_checkpoint(ckdir):
            raise CLIError(f"{ckdir} already holds a checkpoint: add --resume to continue it, or choose "
                           f"another --checkpoint directory")
        cfg = _config_from_args(args)

    corpus = load_corpus(cfg.corpus)
    vocab = build_vocab(cfg.level, corpus.train, cfg.max_words)
    if ck is not None and vocab != ck.vocab:
        raise CheckpointError(f"{ckdir}: the corpus {cfg.corpus} has changed since the checkpoint "
                              f"(its vocabulary differs)")
    net = build_network(cfg, len(vocab))
    step = _compile(net, cfg, args.device, optimizer=from_config(cfg.optimizer), clip_norm=cfg.clip,
                    seed=cfg.seed)
    train_ids = vocab.encode(corpus.train)
    need = cfg.window * cfg.streams + 1
    if len(train_ids) < need:
        raise CorpusError(f"{corpus.name}: the training split has {len(train_ids):,} {unit(cfg.level)}s, "
                          f"shorter than one window per stream (--window {cfg.window} x --streams "
                          f"{cfg.streams} needs {need:,})")
    from .data import batches
    done, index = 0, 0
    if ck is not None:
        ck.apply(step)
        done, index = ck.step, ck.data_index
    data = batches(train_ids, cfg.window, cfg.streams, start=index)
    per_epoch = data.windows_per_epoch
    valid_ids = vocab.encode(corpus.valid)
    if args.eval_tokens:
        valid_ids = valid_ids[: args.eval_tokens + 1]
    evaluator = Evaluator(net, cfg.window, args.eval_streams, cfg.dtype)

    cell_name = os.path.basename(cfg.cell)
    print(f"train {cell_name} x{cfg.layers} hidden {cfg.hidden} embed {cfg.embed} | {corpus.name} "
          f"{cfg.level} level, vocab {len(vocab):,}, {len(train_ids):,} training {unit(cfg.level)}s "
          f"({per_epoch:,} windows an epoch) | window {cfg.window} x {cfg.streams} streams | "
          f"{cfg.optimizer['name']} lr {cfg.optimizer['lr']:g} clip {cfg.clip} | {step.device} {cfg.dtype}",
          flush=True)
    if args.show_schedule:
        schedule = getattr(step, "schedule", None)
        print(schedule if schedule is not None else f"(no schedule in this build; the network graph:)\n"
                                                    f"{net.graph}", flush=True)
    if ck is not None:
        print(f"resumed {ckdir} at step {done:,}", flush=True)
    if done >= args.steps:
        print(f"nothing to do: the checkpoint is at step {done:,} and --steps is {args.steps:,}")
        return 0

    ckpt_every = args.eval_every if args.checkpoint_every is None else args.checkpoint_every
    saved_step = ck.step if ck is not None else None
    tokens = cfg.window * cfg.streams
    bar = tqdm(total=args.steps, initial=done, unit="step", dynamic_ncols=True, disable=args.no_progress,
               leave=False, mininterval=0.5)
    recent: list[float] = []
    train_time, t_last = 0.0, time.perf_counter()
    started = time.perf_counter()
    updating = False

    def metric(nats):
        return f"{nats / LN2:.3f}" if cfg.level == "char" else f"{math.exp(min(nats, 700.0)):.1f}"

    def checkpoint():
        nonlocal saved_step
        if ckdir:
            save_checkpoint(ckdir, cfg, vocab, step, done, index)
            saved_step = done

    try:
        while done < args.steps:
            updating = True  # from here until train() returns, params may be half-updated
            if data.index % per_epoch == 0 and data.index > 0:
                step.reset_state()  # a new epoch: every stream jumps back to its start
            x, y = next(data)
            t0 = time.perf_counter()
            loss = step.train(x, y)
            train_time += time.perf_counter() - t0
            done, index = done + 1, data.index
            updating = False
            if not math.isfinite(loss):
                raise CLIError(f"the training loss became {loss} at step {done}: lower --lr or set --clip")
            recent = (recent + [loss])[-50:]
            now = time.perf_counter()
            if now - t_last > 0.5 or done == args.steps:
                avg = sum(recent) / len(recent)
                key = "bpc" if cfg.level == "char" else "ppl"
                bar.set_postfix_str(f"loss {avg:.3f}  {key} {metric(avg)}  "
                                    f"{_rate(tokens, train_time, done, ck):,.0f} tok/s", refresh=False)
                t_last = now
            bar.update(1)
            last = done == args.steps
            if (args.eval_every and done % args.eval_every == 0) or last:
                nats, count = evaluator(step.parameters, valid_ids)
                avg = sum(recent) / len(recent)
                key = "bits/char" if cfg.level == "char" else "perplexity"
                bar.write(f"step {done:>6,}  train {key} {metric(avg)}  valid {key} {metric(nats)}  "
                          f"({count:,} {unit(cfg.level)}s)  {_rate(tokens, train_time, done, ck):,.0f} tok/s  "
                          f"{time.perf_counter() - started:.0f} s", file=sys.stdout)
                sys.stdout.flush()
            if (ckpt_every and done % ckpt_every == 0) or last:
                checkpoint()
    except KeyboardInterrupt:
        bar.close()
        if ckdir and not updating and saved_step != done:
            try:
                checkpoint()
            except KeyboardInterrupt:
                pass
        where = (f"; {ckdir} holds step {saved_step:,}" if saved_step is not None else
                 "; no checkpoint was written" if ckdir else "")
        print(f"{PROG}: interrupted at step {done:,}{where}", file=sys.stderr)
        return 130
    bar.close()
    if ckdir:
        print(f"checkpoint: {ckdir} (step {done:,})")
    return 0


def _rate(tokens_per_step: int, train_time: float, done: int, ck) -> float:
    """Training tokens per second of compute time in this run."""
    steps_here = done - (ck.step if ck is not None else 0)
    return tokens_per_step * steps_here / max(train_time, 1e-9)


# ---------------------------------------------------------------------------------- sample
def _sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", required=True)
    p.add_argument("--prime", default="", help="text fed to the network before sampling (default: none)")
    p.add_argument("--length", type=nonnegative_int, default=200, help="tokens to draw (default 200)")
    p.add_argument("--temperature", type=positive_float, default=1.0,
                   help="divide the logits by this before the softmax (default 1.0)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")


def run_sample(args) -> int:
    ck = load_checkpoint(args.checkpoint)
    net = build_network(ck.config, len(ck.vocab))
    step = _compile(net, LMConfig(**{**ck.config.to_json(), "window": 1, "streams": 1}), "cpu")
    ck.apply(step, optimizer=False, state=False)
    text = sample(net, step.parameters, ck.vocab, args.prime, args.length, args.temperature, args.seed,
                  ck.config.dtype)
    joiner = " " if ck.config.level == "word" and args.prime and text else ""
    print(args.prime + joiner + text)
    return 0


# ---------------------------------------------------------------------------------- eval
def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", required=True)
    p.add_argument("--split", choices=("valid", "test", "train"), default="test", help="(default test)")
    p.add_argument("--corpus", help="evaluate on this text file's split instead of the checkpoint's corpus")
    p.add_argument("--streams", type=positive_int, default=16,
                   help="parallel streams over the split, states carried through each (default 16)")
    p.add_argument("--window", type=positive_int, help="timesteps per forward call (default: the checkpoint's)")


def run_eval(args) -> int:
    ck = load_checkpoint(args.checkpoint)
    cfg = ck.config
    net = build_network(cfg, len(ck.vocab))
    step = _compile(net, LMConfig(**{**cfg.to_json(), "window": 1, "streams": 1}), "cpu")
    ck.apply(step, optimizer=False, state=False)
    corpus = load_corpus(canonical_corpus(args.corpus) if args.corpus else cfg.corpus)
    ids = ck.vocab.encode(getattr(corpus, args.split))
    if len(ids) < 2:
        raise CorpusError(f"{corpus.name}: the {args.split} split has {len(ids)} {unit(cfg.level)}(s); "
                          f"need at least 2")
    nats, count = Evaluator(net, args.window or cfg.window, args.streams, cfg.dtype)(step.parameters, ids)
    print(f"{args.split} {describe_loss(nats, cfg.level)}  ({nats:.4f} nats/{unit(cfg.level)}, "
          f"{count:,} {unit(cfg.level)}s of {corpus.name}, checkpoint step {ck.step:,})")
    return 0


# ---------------------------------------------------------------------------------- main
COMMANDS: list[Command] = [
    Command("train", "train a language model (truncated BPTT over parallel streams)", _train_arguments,
            run_train),
    Command("sample", "generate text from a checkpoint", _sample_arguments, run_sample),
    Command("eval", "bits/char (or word perplexity) of a checkpoint on a split", _eval_arguments, run_eval),
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="rnngraph: a graph compiler for LSTM-like recurrent networks.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(run=cmd.run)
    return parser


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 error, 2 bad flags, 130 Ctrl-C)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (CLIError, GraphError, CorpusError, CheckpointError, CellFileError, ValueError, OSError) as exc:
        if os.environ.get("RNNGRAPH_DEBUG", "0") not in ("", "0"):
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
