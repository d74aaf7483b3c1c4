"""The ``rnngraph`` command line: ``train``, ``sample``, ``eval``, ``schedule`` (``python -m rnngraph`` too).

Each subcommand is a :class:`Command` in :data:`COMMANDS`: a name, a help line, a function
adding its arguments to an argparse parser, and a function running it (returning the exit
code). To add one, append a Command (``schedule`` below is a small example).

Errors a user can cause (a missing, empty or non-UTF-8 file, a corpus too short for one
window, a bad checkpoint, a broken cell, a model too large for the machine's memory, a
training loss that is not finite) print one line, ``rnngraph: error: ...``, on stderr, in the
command line's words (its flags, not the Python API's arguments), and exit 1; bad flags exit 2;
Ctrl-C exits 130. NumPy's floating-point warnings are off (a non-finite loss is such an error).
``RNNGRAPH_DEBUG=1`` re-raises instead, for a traceback.

Before ``train``, ``eval`` and ``sample`` compile anything, they estimate the memory their steps
need (:mod:`rnngraph.memory`) and stop with that one line when it is more than the host has
available (or the GPU has free).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import __version__
from .cellfile import CellFileError, canonical_cell, checkpoint_cell, read_cell_source, resolve_cell
from .data import CorpusError, batches
from .errors import GraphError
from .lm import (DEFAULT_LR_FINAL, LN2, LR_SCHEDULES, CheckpointError, Evaluator, LMConfig, build_network,
                 build_vocab, canonical_corpus, describe_loss, generate, has_checkpoint, load_checkpoint,
                 load_corpus, make_lr_schedule, make_optimizer, save_checkpoint, scheduled_lr, unit)
from .memory import (NotEnoughMemory, available_device_bytes, available_host_bytes, check_fits, estimate,
                     optimizer_slots)
from .optim import from_config
from .passes import schedule as build_schedule
from .runtime import compile as rg_compile
from .runtime import resolve_device

PROG = "rnngraph"


class CLIError(Exception):
    """A user error found by the CLI itself; its message is printed as one line."""


# ---------------------------------------------------------------------------------- argparse
class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: ``rnngraph: error: ...``."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message} (see `{self.prog} --help`)\n")


def _number(convert, ok, what: str):
    """An argparse type: ``convert(text)`` that must satisfy ``ok``, else '<what>, got ...'."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value
    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0 and math.isfinite(v), "a positive number")
nonnegative_float = _number(float, lambda v: v >= 0 and math.isfinite(v), "a number >= 0")
probability = _number(float, lambda v: 0 <= v < 1, "a number in [0, 1)")
fraction = _number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")


@dataclass(frozen=True)
class Command:
    """A subcommand: ``add_arguments(parser)`` declares its flags, ``run(args) -> exit code``;
    ``shrink``: what to do when an allocation fails (the flags that make it smaller)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    shrink: str = "free some memory"


# ---------------------------------------------------------------------------------- train
#: --steps when not given (a resumed cosine run: the step its schedule ends at).
DEFAULT_STEPS = 1000
#: Defaults of the flags that a resumed run takes from its checkpoint when they are not given.
TRAIN_DEFAULTS = dict(cell="lstm", layers=1, hidden=128, embed=32, window=64, streams=32, level="char",
                      corpus="austen", seed=0, dtype="float32", max_words=10_000, optimizer="adam",
                      lr=2e-3, lr_schedule="constant", clip=1.0, dropout=0.0)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    d = TRAIN_DEFAULTS
    g = p.add_argument_group("model (a resumed run takes these from the checkpoint)")
    g.add_argument("--cell", metavar="NAME|FILE.py:FUNCTION",
                   help=f"a standard cell (lstm, gru, peephole_lstm, ...) or file.py:function naming an "
                        f"@rg.cell function (default {d['cell']})")
    g.add_argument("--layers", metavar="L", type=positive_int, help=f"stacked cells (default {d['layers']})")
    g.add_argument("--hidden", metavar="H", type=positive_int,
                   help=f"hidden size of each cell (default {d['hidden']})")
    g.add_argument("--embed", metavar="E", type=positive_int, help=f"embedding size (default {d['embed']})")
    g.add_argument("--dtype", choices=("float32", "float64"), help=f"(default {d['dtype']})")
    g.add_argument("--seed", metavar="SEED", type=int,
                   help=f"parameter initialisation seed (default {d['seed']})")
    g = p.add_argument_group("data (a resumed run takes these from the checkpoint too)")
    g.add_argument("--corpus", "--text", dest="corpus", metavar="austen|FILE",
                   help="'austen' (Jane Austen's novels; train on five, validate and test on halves of "
                        f"Persuasion) or a UTF-8 text file (split 90/5/5); --text FILE is the same "
                        f"(default {d['corpus']})")
    g.add_argument("--level", choices=("char", "word"), help=f"tokens (default {d['level']})")
    g.add_argument("--max-words", metavar="N", type=positive_int,
                   help=f"word level: keep the N most frequent words plus <unk> (default {d['max_words']})")
    g.add_argument("--window", metavar="T", type=positive_int,
                   help=f"timesteps per training step: truncated BPTT (default {d['window']})")
    g.add_argument("--streams", metavar="S", type=positive_int,
                   help=f"parallel streams, starting at evenly spaced offsets (default {d['streams']})")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", metavar="N", type=nonnegative_int,
                   help="train until this many steps in total (a resumed run counts its old steps) "
                        f"(default {DEFAULT_STEPS}; a resumed cosine run: the step its schedule ends at)")
    g.add_argument("--optimizer", choices=("adam", "adamw", "sgd"),
                   help=f"adamw: Adam with decoupled weight decay, as torch.optim.AdamW (default {d['optimizer']})")
    g.add_argument("--lr", metavar="LR", type=positive_float, help=f"learning rate (default {d['lr']})")
    g.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                   help="cosine: from --lr down to --lr * --lr-final at step --steps (PyTorch's CosineAnnealingLR "
                        "over the total step count, so a resumed run given the same --steps continues the same "
                        f"curve); a resumed run may change it (default {d['lr_schedule']})")
    g.add_argument("--lr-final", metavar="F", type=fraction,
                   help="--lr-schedule cosine only: the last lr as a fraction of --lr, in [0, 1] "
                        f"(default {DEFAULT_LR_FINAL})")
    g.add_argument("--weight-decay", metavar="WD", type=nonnegative_float,
                   help="--optimizer adamw only: each step multiplies the parameters by 1 - lr*WD before the "
                        "Adam update (torch.optim.AdamW; Loshchilov & Hutter 2019); a resumed run may change "
                        "it (adamw's default 0.01; an error with adam or sgd)")
    g.add_argument("--clip", metavar="C", type=nonnegative_float,
                   help=f"global gradient-norm clip, 0 = off (default {d['clip']})")
    g.add_argument("--dropout", metavar="P", type=probability,
                   help="dropout probability on the non-recurrent connections (after the embedding, "
                        "between cells, before the softmax; Zaremba et al. 2014), training only; a resumed "
                        f"run may change it (default {d['dropout']:g}: none)")
    g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="(default auto)")
    g.add_argument("--time-limit", metavar="SECONDS", type=nonnegative_float, default=0,
                   help="stop early (validating and checkpointing as at the end) once training has run "
                        "this long; 0 = no limit (default 0)")
    g = p.add_argument_group("validation and checkpoints")
    g.add_argument("--eval-every", metavar="K", type=nonnegative_int, default=100,
                   help="validate every K steps and at the end; 0 = only at the end (default 100)")
    g.add_argument("--eval-streams", metavar="S", type=positive_int, default=32,
                   help="streams of the validation pass (default 32)")
    g.add_argument("--eval-tokens", metavar="N", type=nonnegative_int, default=0,
                   help="validate on the first N tokens of the validation split only; 0 = all of it "
                        "(default 0)")
    g.add_argument("--checkpoint", metavar="DIR",
                   help="write config.json and params.npz here at each validation and at the end")
    g.add_argument("--checkpoint-every", metavar="K", type=nonnegative_int, default=None,
                   help="checkpoint every K steps (default: with each validation; 0: only at the end)")
    g.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint DIR")
    g = p.add_argument_group("output")
    g.add_argument("--show-schedule", action="store_true",
                   help="print the compiled schedule (the network graph where there is none) first")
    g.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none either when stderr is not a terminal)")


def _check_weight_decay(args, optimizer: str) -> None:
    if args.weight_decay is not None and optimizer != "adamw":
        raise CLIError(f"--weight-decay applies to --optimizer adamw only (decoupled weight decay, "
                       f"torch.optim.AdamW), not {optimizer}")


def _check_lr_final(args, schedule: str) -> None:
    if args.lr_final is not None and schedule != "cosine":
        raise CLIError(f"--lr-final applies to --lr-schedule cosine only (the lr it ends at), not {schedule}")


def _config_from_args(args) -> LMConfig:
    d = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in TRAIN_DEFAULTS.items()}
    _check_weight_decay(args, d["optimizer"])
    _check_lr_final(args, d["lr_schedule"])
    optimizer = make_optimizer(d["optimizer"], d["lr"], args.weight_decay).config()
    source = read_cell_source(d["cell"])  # stored with the checkpoints (see rnngraph.cellfile)
    return LMConfig(cell=canonical_cell(d["cell"]), cell_source=source, layers=d["layers"], hidden=d["hidden"],
                    embed=d["embed"],
                    window=d["window"], streams=d["streams"], level=d["level"],
                    corpus=canonical_corpus(d["corpus"]), seed=d["seed"], dtype=d["dtype"],
                    max_words=d["max_words"], optimizer=optimizer,
                    clip=d["clip"] or None, dropout=d["dropout"],
                    lr_schedule=make_lr_schedule(d["lr_schedule"], args.lr_final))


def _resumed_config(args, saved: LMConfig, directory: str) -> LMConfig:
    """The checkpoint's config, with lr/weight decay/lr schedule/clip/dropout overridden where given;
    CheckpointError when a flag that fixes shapes or the data layout disagrees with it."""
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
    _check_weight_decay(args, saved.optimizer["name"])
    if args.lr is not None:
        cfg.optimizer = {**cfg.optimizer, "lr": args.lr}
    if args.weight_decay is not None:
        cfg.optimizer = {**cfg.optimizer, "weight_decay": args.weight_decay}
    schedule = args.lr_schedule or saved.lr_schedule["name"]
    _check_lr_final(args, schedule)
    if args.lr_schedule is not None or args.lr_final is not None:  # an lr_final not given stays the saved one
        lr_final = args.lr_final if args.lr_final is not None else saved.lr_schedule.get("lr_final")
        cosine = schedule == "cosine"
        cfg.lr_schedule = make_lr_schedule(schedule, lr_final if cosine else None,
                                           saved.lr_schedule.get("steps") if cosine else None)
    if args.clip is not None:
        cfg.clip = args.clip or None
    if args.dropout is not None:
        cfg.dropout = args.dropout
    return cfg


def _flag_words(message: str) -> str:
    """An API message in the command line's words (``device='cpu'`` -> ``--device cpu``)."""
    return re.sub(r"device='(\w+)'", r"--device \1", message)


def _device(choice: str, dtype: str, float64: str) -> str:
    """``"cpu"`` or ``"cuda"`` for ``--device choice`` and a model of ``dtype``: auto takes the
    GPU where numba finds one, unless the dtype is float64 (the GPU backend runs float32).
    CLIError for --device cuda without a GPU, or with float64 (``float64``: the rest of that
    message, e.g. ``not --dtype float64: use --device cpu or --dtype float32``)."""
    if dtype != "float32":
        if choice == "cuda":
            raise CLIError(f"--device cuda runs float32 only, {float64}")
        return "cpu"
    try:
        return resolve_device(choice)
    except RuntimeError as exc:  # --device cuda where numba finds no GPU
        raise CLIError(_flag_words(str(exc))) from None


def _compile(net, cfg: LMConfig, device: str, **kw):
    return rg_compile(net, window=cfg.window, streams=cfg.streams, device=device, dtype=cfg.dtype, **kw)


def _footprint(net, window: int, streams: int, dtype: str, device: str, training: bool, slots: int = 2):
    """What a step of ``net`` compiled for (window, streams) will need (rnngraph.memory)."""
    return estimate(build_schedule(net.graph, window, streams, dtype, None), device, training, slots)


def _check_memory(need, what: str, advice: str) -> None:
    """NotEnoughMemory (one line naming ``what`` and ``advice``) when ``need`` (a Footprint) is
    more than this machine's available memory or the GPU's free memory."""
    check_fits(need, what, advice, available_host_bytes(), available_device_bytes() if need.gpu.total else None)


def _apply(ck, step, override: str | None) -> None:
    """The checkpoint's parameters into ``step``; with a ``--cell`` ``override`` a misfit names it."""
    try:
        ck.apply(step, optimizer=False, state=False)
    except CheckpointError as exc:
        if override is None:
            raise
        raise CheckpointError(f"--cell {override}: this cell's parameters are not the checkpoint's ({exc})") from None


def _model(cfg: LMConfig) -> str:
    """The checkpoint's sizes in words, for messages."""
    return f"{os.path.basename(cfg.cell)} x{cfg.layers}, hidden {cfg.hidden}, embed {cfg.embed}"


def _checkpoint_config(ck, override: str | None) -> LMConfig:
    """The loaded checkpoint's config with the cell it runs (``--cell`` ``override``, else the stored
    source, else the file; rnngraph.cellfile.checkpoint_cell), printing its note, if any, on stderr."""
    cell, source, note = checkpoint_cell(ck.config.cell, ck.config.cell_source, override, ck.directory)
    if note:
        print(note, file=sys.stderr, flush=True)
    return dataclasses.replace(ck.config, cell=cell, cell_source=source)


def run_train(args) -> int:
    return _Trainer(args).run()


class _Trainer:
    """One ``rnngraph train`` run: config, data, compiled step, and the loop's bookkeeping.

    The data position is the index of the next training window (:mod:`rnngraph.data.batching`);
    with the parameters, optimizer slots and states it is all a checkpoint needs to continue
    exactly. At each epoch start every stream jumps back to its offset, so states are reset.
    """

    def __init__(self, args):
        self.args, self.ckdir, ck = args, args.checkpoint, None
        if args.checkpoint_every is not None and not self.ckdir:
            raise CLIError("--checkpoint-every needs --checkpoint DIR (where to write the checkpoints)")
        if args.resume:
            if not self.ckdir:
                raise CLIError("--resume needs --checkpoint DIR")
            ck = load_checkpoint(self.ckdir)
            _checkpoint_config(ck, None)  # the note when its cell file has changed; the error when it is gone
            cfg = _resumed_config(args, ck.config, self.ckdir)
            if cfg.cell_source is None:  # an older checkpoint: its next ones store the file's text
                cfg.cell_source = read_cell_source(cfg.cell)
        else:
            if self.ckdir and has_checkpoint(self.ckdir):
                raise CLIError(f"{self.ckdir} already holds a checkpoint: add --resume to continue it, or "
                               f"choose another --checkpoint directory")
            cfg = _config_from_args(args)
        self._resolve_steps(cfg, ck)
        self.cfg = cfg
        self.corpus = corpus = load_corpus(cfg.corpus)
        self.vocab = build_vocab(cfg.level, corpus.train, cfg.max_words)
        if ck is not None and self.vocab != ck.vocab:
            raise CheckpointError(f"{self.ckdir}: the corpus {cfg.corpus} has changed since the checkpoint "
                                  f"(its vocabulary differs)")
        self.net = build_network(cfg, len(self.vocab))
        self.train_ids = self.vocab.encode(corpus.train)
        need, what = cfg.window * cfg.streams + 1, unit(cfg.level)
        if len(self.train_ids) < need:
            raise CorpusError(f"{corpus.name}: the training split has {len(self.train_ids):,} {what}s, "
                              f"shorter than one window per stream (--window {cfg.window} x --streams "
                              f"{cfg.streams} needs {need:,})")
        self.valid_ids = self.vocab.encode(corpus.valid)
        if args.eval_tokens:
            self.valid_ids = self.valid_ids[: args.eval_tokens + 1]
        if len(self.valid_ids) < 2:
            raise CorpusError(f"{corpus.name}: the validation split has {len(self.valid_ids)} {what}(s); "
                              f"need at least 2")
        device = _device(args.device, cfg.dtype, f"and {self.ckdir} is a {cfg.dtype} checkpoint: use --device cpu"
                         if ck is not None else f"not --dtype {cfg.dtype}: use --device cpu or --dtype float32")
        eval_net = build_network(cfg, len(self.vocab), dropout=0.0) if cfg.dropout else self.net  # no dropout
        self.evaluator = Evaluator(eval_net, cfg.window, args.eval_streams, cfg.dtype, device=device)
        self._check_fits(ck, device, eval_net)
        self.step = _compile(self.net, cfg, device, optimizer=from_config(cfg.optimizer),
                             clip_norm=cfg.clip, seed=cfg.seed)
        self.done = self.index = 0
        if ck is not None:
            ck.apply(self.step)
            self.done, self.index = ck.step, ck.data_index
            ck = dataclasses.replace(ck, params={}, optim={}, state={})  # its arrays are in the step now
        self.saved_step = ck.step if ck is not None else None
        self.data = batches(self.train_ids, cfg.window, cfg.streams, start=self.index)
        if self.ckdir:  # fail now, not at the first checkpoint
            if os.path.exists(self.ckdir) and not os.path.isdir(self.ckdir):
                raise CLIError(f"--checkpoint {self.ckdir}: exists and is not a directory")
            os.makedirs(self.ckdir, exist_ok=True)
        self.resumed = ck
        self.recent: list[float] = []  # the last losses, for the progress bar
        self.train_time = 0.0
        self.lr = cfg.optimizer["lr"]  # the lr of the last step (train_one sets it: --lr-schedule)

    def _check_fits(self, ck, device: str, eval_net) -> None:
        """NotEnoughMemory, before anything is allocated, when the training step and the validation
        step will not fit (rnngraph.memory's estimate)."""
        cfg = self.cfg
        need = (_footprint(self.net, cfg.window, cfg.streams, cfg.dtype, device, True, optimizer_slots(cfg.optimizer))
                + _footprint(eval_net, *self.evaluator.shape(len(self.valid_ids)), cfg.dtype, device, False))
        sizes = f"--hidden {cfg.hidden} --layers {cfg.layers} --window {cfg.window} --streams {cfg.streams}"
        if ck is not None:
            _check_memory(need, f"{self.ckdir} ({sizes})", "resume it on a machine with more memory (a resumed "
                                                            "run keeps the checkpoint's sizes)")
            return
        words = ", --max-words" if cfg.level == "word" else ""
        _check_memory(need, sizes, f"lower --hidden, --layers{words}, --window or --streams")

    def _resolve_steps(self, cfg: LMConfig, ck) -> None:
        """``args.steps`` when not given (a resumed cosine run: where its curve ends), and the
        cosine schedule's end step in ``cfg`` (saved with the checkpoints)."""
        args, ends = self.args, cfg.lr_schedule.get("steps")
        if args.steps is None:
            args.steps = ends if ck is not None and ends is not None else DEFAULT_STEPS
        if cfg.lr_schedule["name"] == "cosine":
            if ck is not None and ends is not None and ends != args.steps:
                print(f"note: the cosine lr schedule now ends at step {args.steps:,} (the checkpoint's ended at "
                      f"{ends:,}): the lr jumps to where the new curve is at step {ck.step:,}", flush=True)
            cfg.lr_schedule = {**cfg.lr_schedule, "steps": args.steps}

    # ------------------------------------------------------------------ pieces
    def banner(self) -> None:
        cfg, args = self.cfg, self.args
        print(f"train {os.path.basename(cfg.cell)} x{cfg.layers}, hidden {cfg.hidden}, embed {cfg.embed} on "
              f"{self.corpus.name} ({cfg.level} level, vocab {len(self.vocab):,}, {len(self.train_ids):,} "
              f"training {unit(cfg.level)}s, {self.data.windows_per_epoch:,} windows an epoch)\n"
              f"window {cfg.window} x {cfg.streams} streams, {cfg.optimizer['name']} lr "
              f"{cfg.optimizer['lr']:g}"
              + (f" (cosine to {cfg.optimizer['lr'] * cfg.lr_schedule['lr_final']:g} at step {args.steps:,})"
                 if cfg.lr_schedule["name"] == "cosine" else "")
              + (f", weight decay {cfg.optimizer['weight_decay']:g}" if "weight_decay" in cfg.optimizer else "")
              + f", clip {cfg.clip}"
              + (f", dropout {cfg.dropout:g}" if cfg.dropout else "") + f", {self.step.device} {cfg.dtype}",
              flush=True)
        if args.show_schedule:
            schedule = getattr(self.step, "schedule", None)
            print(schedule if schedule is not None else
                  f"(no schedule in this build; the network graph:)\n{self.net.graph}", flush=True)
        if self.resumed is not None:
            print(f"resumed {self.ckdir} at step {self.done:,}", flush=True)

    def metric(self, nats: float) -> str:
        return f"{nats / LN2:.3f}" if self.cfg.level == "char" else f"{math.exp(min(nats, 700.0)):.1f}"

    def rate(self) -> float:
        """Training tokens per second of compute time in this run."""
        steps_here = self.done - (self.resumed.step if self.resumed is not None else 0)
        return self.cfg.window * self.cfg.streams * steps_here / max(self.train_time, 1e-9)

    def train_one(self) -> float:
        """One window: reset states at an epoch start, set the step's lr, train, advance the position."""
        if self.data.index % self.data.windows_per_epoch == 0 and self.data.index > 0:
            self.step.reset_state()  # a new epoch: every stream jumps back to its start
        x, y = next(self.data)
        self.lr = scheduled_lr(self.cfg, self.done)
        self.step.optimizer.lr = self.lr  # both backends read it at every update
        t0 = time.perf_counter()
        try:
            loss = self.step.train(x, y)
        except FloatingPointError:  # nothing changed; said in flags (the API's message names rg.compile options)
            raise CLIError(self._not_finite("its loss or gradients", self.step.last_grad_norm)) from None
        self.train_time += time.perf_counter() - t0
        self.done, self.index = self.done + 1, self.data.index
        return loss

    def _not_finite(self, what: str, norm: float | None) -> str:
        """The message for a training window whose loss or gradients are not finite."""
        return (f"training step {self.done + 1:,}: {what} are not finite (gradient norm {norm}): lower --lr or set "
                f"--clip (a NaN or inf in the text or the cell can do it too); the parameters are those of step "
                f"{self.done:,}")

    def validate(self, started: float) -> str:
        nats, count = self.evaluator(self.step.parameters, self.valid_ids)
        key = "bits/char" if self.cfg.level == "char" else "perplexity"
        avg = sum(self.recent) / len(self.recent)
        lr = f"  lr {self.lr:.3g}" if self.cfg.lr_schedule["name"] != "constant" else ""
        return (f"step {self.done:>6,}  train {key} {self.metric(avg)}  valid {key} {self.metric(nats)}  "
                f"({count:,} {unit(self.cfg.level)}s)  {self.rate():,.0f} tok/s  "
                f"{time.perf_counter() - started:.0f} s{lr}")

    def checkpoint(self) -> None:
        if self.ckdir:
            save_checkpoint(self.ckdir, self.cfg, self.vocab, self.step, self.done, self.index)
            self.saved_step = self.done

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        from tqdm import tqdm

        args = self.args
        self.banner()
        if self.done >= args.steps:
            where = f"the checkpoint is at step {self.done:,}" if self.resumed is not None else "nothing trained yet"
            print(f"nothing to do: {where} and --steps is {args.steps:,}")
            return 0
        ckpt_every = args.eval_every if args.checkpoint_every is None else args.checkpoint_every
        bar = tqdm(total=args.steps, initial=self.done, unit="step", dynamic_ncols=True,
                   disable=True if args.no_progress else None, leave=False, mininterval=0.5)  # None: off when not a TTY
        started = t_shown = time.perf_counter()
        updating = False
        with _SigintGuard() as guard:
            try:
                while self.done < args.steps:
                    updating = guard.critical = True  # until train() returns, params may be half-updated
                    loss = self.train_one()
                    updating = guard.critical = False
                    guard.check()  # a Ctrl-C during the step lands here, between steps
                    if not math.isfinite(loss):  # train() raises first; this holds should it not
                        raise CLIError(self._not_finite(f"the loss {loss}", None))
                    self.recent = (self.recent + [loss])[-50:]
                    out_of_time = bool(args.time_limit) and time.perf_counter() - started > args.time_limit
                    last = self.done == args.steps or out_of_time
                    if time.perf_counter() - t_shown > 0.5 or last:
                        avg = sum(self.recent) / len(self.recent)
                        key = "bpc" if self.cfg.level == "char" else "ppl"
                        lr = f"  lr {self.lr:.2e}" if self.cfg.lr_schedule["name"] != "constant" else ""
                        bar.set_postfix_str(f"loss {avg:.3f}  {key} {self.metric(avg)}  {self.rate():,.0f} tok/s"
                                            f"{lr}", refresh=False)
                        t_shown = time.perf_counter()
                    bar.update(1)
                    if (args.eval_every and self.done % args.eval_every == 0) or last:
                        bar.write(self.validate(started), file=sys.stdout)
                        sys.stdout.flush()
                    if (ckpt_every and self.done % ckpt_every == 0) or last:
                        self.checkpoint()
                    if out_of_time:
                        bar.write(f"stopped at step {self.done:,}: --time-limit {args.time_limit:g} s reached",
                                  file=sys.stdout)
                        break
            except KeyboardInterrupt:
                bar.close()
                if self.ckdir and not updating and self.saved_step != self.done:
                    try:
                        self.checkpoint()
                    except KeyboardInterrupt:  # a second Ctrl-C: the previous checkpoint stays
                        pass
                where = (f"; {self.ckdir} holds step {self.saved_step:,}" if self.saved_step is not None else
                         "; no checkpoint was written" if self.ckdir else "")
                print(f"{PROG}: interrupted at step {self.done:,}{where}", file=sys.stderr)
                return 130
        bar.close()
        if self.ckdir:
            print(f"checkpoint: {self.ckdir} (step {self.done:,})")
        return 0


class _SigintGuard:
    """Defers Ctrl-C out of a training step: while ``critical`` is set, a first SIGINT only sets
    ``pending`` and :meth:`check` raises KeyboardInterrupt once the step is over (so the
    parameters are whole and can be saved); a second SIGINT, or one outside a step, raises at
    once. Installed only in the main thread and where SIGINT has Python's default handler."""

    def __init__(self):
        self.critical = self.pending = False
        self._previous = None

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum, frame):
        if self.critical and not self.pending:
            self.pending = True
            return
        raise KeyboardInterrupt

    def check(self):
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


# ---------------------------------------------------------------------------------- sample
CELL_OVERRIDE = ("run this cell instead of the one stored in the checkpoint: file.py (the checkpoint's function "
                 "name), file.py:function or a standard cell's name; its parameters must fit the checkpoint's "
                 "(default: the cell source the checkpoint stores, or for an older checkpoint the file it names)")


def _sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", required=True)
    p.add_argument("--cell", metavar="FILE.py[:FUNCTION]", help=CELL_OVERRIDE)
    p.add_argument("--prime", metavar="TEXT", default="",
                   help="text fed to the network before sampling (default: none)")
    p.add_argument("--length", metavar="N", type=nonnegative_int, default=200, help="tokens to draw (default 200)")
    p.add_argument("--temperature", metavar="TAU", type=positive_float, default=1.0,
                   help="divide the logits by this before the softmax (default 1.0)")
    p.add_argument("--seed", metavar="SEED", type=int, default=0, help="sampling seed (default 0)")


def run_sample(args) -> int:
    """Print --prime, then each token as it is drawn (flushed: the text appears as it comes)."""
    ck = load_checkpoint(args.checkpoint)
    cfg = _checkpoint_config(ck, args.cell)
    net = build_network(cfg, len(ck.vocab), dropout=0.0)  # sampling never drops
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


# ---------------------------------------------------------------------------------- eval
def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", required=True)
    p.add_argument("--cell", metavar="FILE.py[:FUNCTION]", help=CELL_OVERRIDE)
    p.add_argument("--split", choices=("valid", "test", "train"), default="test", help="(default test)")
    p.add_argument("--corpus", "--text", dest="corpus", metavar="austen|FILE",
                   help="evaluate on this corpus's split instead of the checkpoint's corpus (--text: the same)")
    p.add_argument("--streams", metavar="S", type=positive_int, default=16,
                   help="parallel streams over the split, states carried through each (default 16)")
    p.add_argument("--window", metavar="T", type=positive_int,
                   help="timesteps per forward call (default: the checkpoint's)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="(default auto)")


def run_eval(args) -> int:
    ck = load_checkpoint(args.checkpoint)
    cfg = _checkpoint_config(ck, args.cell)
    net = build_network(cfg, len(ck.vocab), dropout=0.0)  # evaluation never drops
    corpus = load_corpus(canonical_corpus(args.corpus) if args.corpus else cfg.corpus)
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
    if cfg.level == "char" and unknown > 0.01:  # another text than the checkpoint's
        print(f"note: {unknown:.1%} of the {args.split} split's characters are not in the checkpoint's "
              f"vocabulary: they are scored as <unk>", file=sys.stderr)
    nats, count = evaluator(step.parameters, ids)
    print(f"{args.split} {describe_loss(nats, cfg.level)}  ({nats:.4f} nats/{unit(cfg.level)}, "
          f"{count:,} {unit(cfg.level)}s of {corpus.name}, checkpoint step {ck.step:,})")
    return 0


# ---------------------------------------------------------------------------------- schedule
FORMATS = ("text", "json", "dot", "gantt")


def _schedule_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", metavar="CELL", help="a standard cell name or file.py:function")
    p.add_argument("--layers", type=positive_int, default=1, help="stacked cells (default 1)")
    p.add_argument("--hidden", type=positive_int, default=512, help="hidden size H (default 512)")
    p.add_argument("--window", type=positive_int, default=100, help="timesteps T per window (default 100)")
    p.add_argument("--streams", type=positive_int, default=1, help="parallel streams S (default 1)")
    p.add_argument("--input-size", type=positive_int, default=None, help="float inputs of this size (default: hidden)")
    p.add_argument("--vocab", type=positive_int, default=None,
                   help="a language model: Embedding(vocab) first and a softmax head last")
    p.add_argument("--dropout", metavar="P", type=probability, default=0.0,
                   help="rg.stacked(..., dropout=P): Dropout layers between cells (and, with --vocab, after "
                        "the embedding and before the head) (default 0: none)")
    p.add_argument("--plan", choices=("wavefront", "scc-sequential", "naive"), default=None,
                   help="force a plan (default: the cost model chooses; naive: one kernel per op per timestep)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="(default float32)")
    p.add_argument("--format", choices=FORMATS, default="text", help="(default text)")
    p.add_argument("--out", default=None, help="write here instead of stdout (required for gantt: a PNG)")


def run_schedule(args) -> int:
    """Print (or write) the schedule of a stacked network of CELL."""
    import json

    from .loop_env import from_environment, resolve
    from .network import stacked
    from .passes import schedule
    from .schedule_export import gantt, to_dot, to_json

    factory = resolve_cell(args.cell, flag="CELL")
    net = stacked(factory, args.layers, args.hidden, input_size=args.input_size, vocab=args.vocab,
                  dropout=args.dropout)
    options, _ = resolve(args.streams, overrides=from_environment())  # RNNGRAPH_LOOP's schedule keys
    s = schedule(net.graph, args.window, args.streams, args.dtype, args.plan, options)
    if args.format == "gantt":
        if not args.out:
            raise CLIError("--format gantt writes a PNG: give --out FILE.png")
        gantt(s, args.out)
        print(f"wrote {args.out}")
        return 0
    text = {"text": lambda: str(s), "json": lambda: json.dumps(to_json(s), indent=1) + "\n",
            "dot": lambda: to_dot(s)}[args.format]()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------------------------- bench
def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iters", metavar="N", type=positive_int, default=100, help="timed calls (default 100)")
    p.add_argument("--warmup", metavar="N", type=nonnegative_int, default=10, help="warm-up calls (default 10)")
    p.add_argument("--out", metavar="FILE.json", default=None, help="also write the results JSON here")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: the GPU comparison where numba finds a GPU, else the CPU backend (default auto)")


def run_bench(args) -> int:
    """LSTM H=512 T=100 S in {1, 64}: rnngraph against cuDNN fp32 (the full grid: bench/run_all.py)."""
    from .bench import cli_bench

    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise CLIError(f"--out {args.out}: no such directory {os.path.dirname(os.path.abspath(args.out))!r}")
    return cli_bench(iters=args.iters, warmup=args.warmup, out=args.out, device=args.device)


# ---------------------------------------------------------------------------------- main
COMMANDS: list[Command] = [
    Command("train", "train a language model (truncated BPTT over parallel streams)", _train_arguments,
            run_train, "lower --hidden, --layers, --window or --streams"),
    Command("sample", "generate text from a checkpoint", _sample_arguments, run_sample,
            "sample on a machine with more memory"),
    Command("eval", "bits/char (or word perplexity) of a checkpoint on a split", _eval_arguments, run_eval,
            "lower --window or --streams"),
    Command("schedule", "print the parallel schedule the compiler chooses for a cell stack", _schedule_arguments,
            run_schedule),
    Command("bench", "time rnngraph against cuDNN (LSTM H=512 T=100 S=1, 64; without a GPU: the CPU backend)",
            _bench_arguments, run_bench),
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


def _command(name: str) -> Command:
    return next(c for c in COMMANDS if c.name == name)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def _silence_stdout() -> None:
    """Point stdout at the null device, so that flushing it at exit cannot fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a file (tests), or already closed
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 error, 2 bad flags, 130 Ctrl-C,
    141 when the reader of its output went away)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        with np.errstate(all="ignore"):  # a non-finite loss is reported in flags below, not as NumPy warnings
            return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (``rnngraph train | head``): stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a command its pipe ended
    except MemoryError as exc:  # NotEnoughMemory: the estimate before allocating; else an allocation failed
        if os.environ.get("RNNGRAPH_DEBUG", "0") not in ("", "0"):
            raise
        text = _one_line(exc) if isinstance(exc, NotEnoughMemory) else \
            f"out of memory ({_one_line(exc)}): {_command(args.command).shrink}"
        print(f"{PROG}: error: {text}", file=sys.stderr)
        return 1
    except (CLIError, GraphError, CorpusError, CheckpointError, CellFileError, ValueError, OSError,
            ImportError, FloatingPointError) as exc:  # ImportError: an optional dependency (rdata for the
        # Austen corpus); FloatingPointError: a window whose loss or gradients were not finite
        if os.environ.get("RNNGRAPH_DEBUG", "0") not in ("", "0"):
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
