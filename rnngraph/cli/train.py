"""``rnngraph train``: one run (:class:`_Trainer`): config, data, compiled step, the training loop,
validation, checkpoints, and Ctrl-C and SIGTERM deferred to the end of a step (rnngraph/cli/sigint.py); with
``--distributed`` one of torchrun's processes (rnngraph/cli/distributed_setup.py)."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time

import numpy as np

from ..cellfile import read_cell_source
from ..data import CorpusError, batches
from ..lm import (LN2, Evaluator, LMConfig, build_network, build_vocab, has_checkpoint,
                  load_checkpoint, load_corpus, save_checkpoint, scheduled_lr, unit)
from ..optim import from_config
from ..errors import counted
from ..distributed import PeerFailure, global_state
from .arguments import PROG, CLIError, Reported, note as cli_note, quiet_notes
from .distributed_setup import (Processes, agree, any_process, first_process, in_process, join, leave, note_failure,
                                peer_noted, sharded, wait_for_reporter)
from .sigint import SigintGuard, exit_status, sigterm_raises, stopped_word
from .step_setup import (_check_memory, _checkpoint_config, _checkpoint_corpus, _chunked, _compile, _corpus_note,
                         _device, _fits, cell_words, vocabulary_differs)
from .train_memory import lowering_advice, sizes_words, training_need
from .train_config import DEFAULT_STEPS, _config_from_args, _resumed_config

#: tokens of validation from which ``train`` says it is validating before it starts (on 2 CPU
#: cores a 2 x 512 model took 85 s over Austen's 233,408 validation characters)
LONG_VALIDATION = 100_000


def run_train(args) -> int:
    """Train (rnngraph/cli/train_config.py: the flags); SIGTERM raises sigint.Terminated throughout, as
    Ctrl-C raises KeyboardInterrupt (deferred to the end of a step during the steps)."""
    with sigterm_raises():
        return _run_train(args)


def _run_train(args) -> int:
    if not args.distributed:
        if args.distributed_timeout is not None:
            raise CLIError("--distributed-timeout applies to --distributed runs only")
        return _Trainer(args).run()
    try:
        procs = join(args, _streams(args))  # torchrun's environment, read here only
    except Exception:
        if not first_process():  # every process meets it alike: process 0 says it
            raise Reported from None
        raise
    try:
        with contextlib.ExitStack() as stack:
            if procs.rank != 0:  # only rank 0 prints (errors: see rnngraph/cli/distributed_setup.py)
                args.no_progress = True
                stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
                stack.enter_context(quiet_notes())  # and its notes: process 0 says each
            code = _one_of_many(args, procs)
    except Reported:
        wait_for_reporter()
        leave()
        raise
    # a process that says an error keeps the group until it exits, after its line: leaving first would
    # end the others' wait_for_reporter, and torchrun could stop it before the line is out
    leave()
    return code


class NotFinite(CLIError):
    """A training window whose loss or gradients are not finite (with --distributed, on every process alike);
    ``what``: which of them; ``message``: the one the user sees (:meth:`_Trainer.not_finite` makes it)."""

    def __init__(self, what: str, message: str | None = None):
        super().__init__(message or f"{what} are not finite")
        self.what = what


def _one_of_many(args, procs: Processes) -> int:
    """One process of a --distributed run: set up, agree with the others that all are, train.
    A failure is one line from one process (rnngraph/cli/distributed_setup.py); the others raise
    Reported."""
    trainer = error = None
    try:
        trainer = _Trainer(args, procs)
    except Exception as e:  # said after every process has told the others (agree)
        error = e
    try:
        agree(procs, error)
        trainer.shard()
        return trainer.run()
    except NotFinite:  # the all-reduced gradients are the same everywhere: every process stops here
        if procs.rank != 0:
            raise Reported from None
        raise
    except PeerFailure as e:  # the checkpoint on disk stays whole (written atomically)
        if peer_noted():  # the process that failed has said why
            raise Reported from None
        held = trainer is not None and trainer.saved_step is not None
        raise CLIError(f"process {e.rank} of {e.world}: {e.what} failed: another process has died or did not "
                       f"answer within --distributed-timeout ({procs.timeout_s:g} s): {e.cause}"
                       + (f"; {args.checkpoint} holds step {trainer.saved_step:,}" if held else "")) from None
    except Reported:
        raise
    except Exception as e:
        if e is not error:  # this process's own failure after the set-up (agree said the set-up's)
            note_failure(procs)
            in_process(e, procs)
        raise


def _streams(args) -> int:
    """The global streams of the run: the checkpoint's when resuming, else --streams (or its default)."""
    if args.resume and args.checkpoint and has_checkpoint(args.checkpoint):
        return load_checkpoint(args.checkpoint).config.streams
    return args.streams if args.streams is not None else LMConfig().streams


class _Trainer:
    """One ``rnngraph train`` run: config, data, compiled step, and the loop's bookkeeping.

    The data position is the index of the next training window (:mod:`rnngraph.data.batching`);
    with the parameters, optimizer slots and states it is all a checkpoint needs to continue
    exactly. At each epoch start every stream jumps back to its offset, so states are reset.
    """

    def __init__(self, args, procs: Processes | None = None):
        self.args, self.ckdir, ck, self.procs = args, args.checkpoint, None, procs
        self.made_dir = False  # whether this run made the --checkpoint directory
        if args.checkpoint_every is not None and not self.ckdir:
            raise CLIError("--checkpoint-every needs --checkpoint DIR (where to write the checkpoints)")
        if args.resume:
            if not self.ckdir:
                raise CLIError("--resume needs --checkpoint DIR")
            ck = load_checkpoint(self.ckdir)
            cfg = _resumed_config(args, ck.config, self.ckdir)  # (a --cell FILE edited since: an error)
            _checkpoint_config(ck, None, resumed=True)  # a changed cell file: a note; an old one gone: the error
            if cfg.cell_source is None:  # an older checkpoint: its next ones store the file's text
                cfg.cell_source = read_cell_source(cfg.cell)
        else:
            if self.ckdir and has_checkpoint(self.ckdir):
                raise CLIError(f"{self.ckdir} already holds a checkpoint: add --resume to continue it, or "
                               f"choose another --checkpoint directory")
            cfg = _config_from_args(args)
        self._resolve_steps(cfg, ck)
        self.corpus = corpus = (load_corpus(cfg.corpus) if ck is None else
                                _checkpoint_corpus(cfg.corpus, "give --corpus FILE where it is now"))
        # a resumed run keeps the checkpoint's vocabulary (its embedding and head are shaped by it): the
        # tokens of an edited or other text outside it are fed as <unk>, as eval does
        self.vocab = build_vocab(cfg.level, corpus.train, cfg.max_words) if ck is None else ck.vocab
        if len(self.vocab) < 2:  # <unk> alone (a word-level text of spaces): the softmax needs 2 classes
            raise CorpusError(f"{corpus.name}: the training split has no {unit(cfg.level)}s (a vocabulary of "
                              f"{len(self.vocab)} token, <unk>; need at least 2)")
        cfg.corpus_sha256 = corpus.fingerprint()  # the text this run trains on, kept in its checkpoints
        if ck is not None:
            _corpus_note(ck, corpus, cfg.corpus_sha256)
        # the head's chunk: a new run's from --chunk (auto by default), a resumed run's stays unless given
        self.cfg = cfg = _chunked(cfg, "auto" if args.chunk is None and ck is None else args.chunk, len(self.vocab),
                                 sys.stdout)  # with the banner (quiet on the other processes of --distributed)
        self.net = build_network(cfg, len(self.vocab))
        self.train_ids = self.vocab.encode(corpus.train)
        if ck is not None and vocabulary_differs(ck, corpus):
            outside = float(np.mean(self.train_ids == 0)) if len(self.train_ids) else 0.0  # id 0 is <unk>
            cli_note(f"the vocabulary of {corpus.name} differs from the checkpoint's: training goes on with the "
                     f"checkpoint's {len(ck.vocab):,} {unit(cfg.level)}s, and {outside:.1%} of the training split's "
                     f"{unit(cfg.level)}s are fed as <unk>")
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
        # several processes train on the CPU unless --device cuda (one GPU each: distributed_setup.join)
        choice = args.device if procs is None or args.device == "cuda" else "cpu"
        device = _device(choice, cfg.dtype, f"and {self.ckdir} is a {cfg.dtype} checkpoint: use --device cpu"
                         if ck is not None else f"not --dtype {cfg.dtype}: use --device cpu or --dtype float32")
        eval_net = build_network(cfg, len(self.vocab), dropout=0.0) if cfg.dropout else self.net  # no dropout
        self.evaluator = Evaluator(eval_net, cfg.window, args.eval_streams, cfg.dtype, device=device,
                                   precision=cfg.precision)
        self._check_fits(ck, device, eval_net)
        local = cfg if procs is None else dataclasses.replace(cfg, streams=procs.hi - procs.lo)  # its streams
        self.step = _compile(self.net, local, device, optimizer=from_config(cfg.optimizer),
                             clip_norm=cfg.clip, seed=cfg.seed)
        self.done = self.index = 0
        if ck is not None:
            ck.apply(self.step, state=procs is None)
            self.done, self.index = ck.step, ck.data_index
        self.data = batches(self.train_ids, cfg.window, cfg.streams, start=self.index)
        self._unsharded = ck if procs is not None else None  # shard() gives each process its part of its states
        if ck is not None:
            ck = dataclasses.replace(ck, params={}, optim={}, state={})  # its arrays are in the step now
        self.saved_step = ck.step if ck is not None else None
        if self.ckdir:  # fail now, not at the first checkpoint
            if os.path.exists(self.ckdir) and not os.path.isdir(self.ckdir):
                raise CLIError(f"--checkpoint {self.ckdir}: exists and is not a directory")
            if args.steps > self.done:  # nothing to train: no empty directory left behind
                self.made_dir = not os.path.exists(self.ckdir)  # removed again should nothing be written
                os.makedirs(self.ckdir, exist_ok=True)
        self.resumed = ck
        self.recent: list[float] = []  # the last losses, for the progress bar
        self.train_time = 0.0
        self.lr = cfg.optimizer["lr"]  # the lr of the last step (train_one sets it: --lr-schedule)

    def shard(self) -> None:
        """--distributed, once every process is set up: the step made one of the processes (rank
        0's parameters, the gradients all-reduced), its states its part of the checkpoint's, the
        data its streams (the first words between the processes)."""
        self.step, self.data = sharded(self.step, self.data, self._unsharded, self.procs)
        self._unsharded = None

    def _check_fits(self, ck, device: str, eval_net) -> None:
        """NotEnoughMemory, before anything is allocated, when the training step and the validation
        step will not fit (rnngraph.memory's estimate)."""
        cfg, V, eval_streams = self.cfg, len(self.vocab), self.args.eval_streams
        need = training_need(cfg, V, device, len(self.valid_ids), eval_streams, (self.net, eval_net))
        if _fits(need):
            return
        sizes = sizes_words(cfg, V)
        if ck is not None:
            _check_memory(need, f"{self.ckdir} ({sizes})", "resume it on a machine with more memory (a resumed "
                                                            "run keeps the checkpoint's sizes)")
            return
        advice = lowering_advice(cfg, V, device, len(self.valid_ids), eval_streams, need)
        if "--eval-streams" in advice:  # the validation step's streams: said with the sizes
            sizes = sizes_words(cfg, V, eval_streams)
        _check_memory(need, sizes, advice)

    def _resolve_steps(self, cfg: LMConfig, ck) -> None:
        """``args.steps`` when not given (a resumed run: the total it was last asked to train,
        ``cfg.steps``; a resumed cosine run: where its curve ends; checkpoints without either:
        DEFAULT_STEPS), kept in ``cfg.steps``, and the cosine schedule's end step in ``cfg`` (both
        saved with the checkpoints)."""
        args, ends = self.args, cfg.lr_schedule.get("steps")
        kept = ends if ends is not None else cfg.steps
        self.steps_from = "given" if args.steps is not None else "kept" if ck is not None and kept is not None \
            else "default"  # for the "nothing to do" line
        #: the total a plain --resume of the directory's checkpoint trains to (None: no checkpoint
        #: yet), for the Ctrl-C hint: a run given another --steps has it on disk only once it saves
        self.saved_total = None if ck is None else kept if kept is not None else DEFAULT_STEPS
        if args.steps is None:
            args.steps = kept if ck is not None and kept is not None else DEFAULT_STEPS
        cfg.steps = args.steps
        if cfg.lr_schedule["name"] == "cosine":
            if ck is not None and ends is not None and ends != args.steps:
                cli_note(f"the cosine lr schedule now ends at step {args.steps:,} (the checkpoint's ended at "
                         f"{ends:,}): the lr jumps to where the new curve is at step {ck.step:,}")
            cfg.lr_schedule = {**cfg.lr_schedule, "steps": args.steps}

    # ------------------------------------------------------------------ pieces
    def banner(self) -> None:
        cfg, args = self.cfg, self.args
        print(f"train {cell_words(cfg)} x{cfg.layers}, hidden {cfg.hidden}, embed {cfg.embed}"
              f"{' (tied to the output layer)' if cfg.tie_weights else ''} on "
              f"{self.corpus.name} ({cfg.level} level, vocab {len(self.vocab):,}, {len(self.train_ids):,} "
              f"training {unit(cfg.level)}s, {counted(self.data.windows_per_epoch, 'window')} an epoch"
              + (f", softmax in chunks of {cfg.chunk:,}" if cfg.chunk is not None else "") + ")\n"
              f"window {cfg.window} x {cfg.streams} streams, {cfg.optimizer['name']} lr "
              f"{cfg.optimizer['lr']:g}"
              + (f" (cosine to {cfg.optimizer['lr'] * cfg.lr_schedule['lr_final']:g} at step {args.steps:,})"
                 if cfg.lr_schedule["name"] == "cosine" else "")
              + (f", weight decay {cfg.optimizer['weight_decay']:g}" if "weight_decay" in cfg.optimizer else "")
              + (f", clip {cfg.clip}" if cfg.clip else ", clip off")
              + (f", dropout {cfg.dropout:g}" if cfg.dropout else "") + f", {self.step.device} {cfg.dtype}"
              + (f" ({cfg.precision} GEMMs)" if cfg.precision != "fp32" else "")
              + (f", {self.procs.world} processes" if self.procs is not None else ""),
              flush=True)
        if args.show_schedule:
            schedule = getattr(self.step, "schedule", None)
            print(schedule if schedule is not None else
                  f"(no schedule in this build; the network graph:)\n{self.net.graph}", flush=True)
        if self.resumed is not None:
            total = f" of {args.steps:,}" if self.done < args.steps else ""
            print(f"resumed {self.ckdir} at step {self.done:,}{total}", flush=True)

    def metric(self, nats: float) -> str:
        return f"{nats / LN2:.3f}" if self.cfg.level == "char" else f"{math.exp(min(nats, 700.0)):.1f}"

    def rate(self) -> float:
        """Training tokens per second of compute time in this run."""
        steps_here = self.done - (self.resumed.step if self.resumed is not None else 0)
        return self.cfg.window * self.cfg.streams * steps_here / max(self.train_time, 1e-9)

    def train_one(self) -> float:
        """One window: reset states at an epoch start, set the step's lr, train, advance the position.
        Returns the loss unread (on the GPU a LazyLoss: the step runs while the next window is
        prepared; :meth:`settled` reads the losses when they are shown)."""
        t0 = time.perf_counter()
        try:
            if self.data.index % self.data.windows_per_epoch == 0 and self.data.index > 0:
                self.step.reset_state()  # a new epoch: every stream jumps back to its start (settles first)
            x, y = next(self.data)
            self.lr = scheduled_lr(self.cfg, self.done)
            self.step.optimizer.lr = self.lr  # both backends read it at every update
            loss = self.step.train(x, y)  # settles an earlier window: its error may surface here
        except FloatingPointError:  # nothing changed; said in flags (the API's message names rg.compile options)
            raise NotFinite("its loss or gradients") from None
        self.train_time += time.perf_counter() - t0
        self.done, self.index = self.done + 1, self.data.index
        return loss

    def settled(self) -> list[float]:
        """The recent windows' losses read (waiting for the GPU; counted as training time).
        CLIError for a window whose loss or gradients were not finite."""
        t0 = time.perf_counter()
        try:
            out = [float(loss) for loss in self.recent]
        except FloatingPointError:
            raise NotFinite("its loss or gradients") from None
        self.train_time += time.perf_counter() - t0
        bad = [v for v in out if not math.isfinite(v)]
        if bad:  # train() raises first; this holds should it not
            raise NotFinite(f"the loss {bad[0]}")
        return out

    def not_finite(self, what: str) -> NotFinite:
        """The error the user sees for a training window whose loss or gradients are not finite:
        the first window after the last update. The step's update count is exact once the error
        has surfaced, and its parameters, optimizer slots and states are those of that update
        (on the GPU the loop's own count may be ahead: a window enqueued behind the bad one);
        with --checkpoint they are saved first (with --distributed by process 0, with every
        process's states: every process meets the same window, whose loss and gradients are
        all-reduced), and the message says which step the directory holds. It suggests --clip
        only when clipping is off."""
        good = self.step.optimizer.steps
        if self.ckdir and good != self.saved_step and good > 0:
            index = self.index - (self.done - good)  # the data position after that update
            if self.procs is None:
                save_checkpoint(self.ckdir, self.cfg, self.vocab, self.step, good, index)
            else:
                state = global_state(self.step)
                if self.procs.rank == 0:
                    save_checkpoint(self.ckdir, self.cfg, self.vocab, self.step, good, index, state)
            self.saved_step, self.saved_total = good, self.args.steps
        advice = "lower --lr" if self.cfg.clip else "lower --lr or set --clip"
        return NotFinite(what, f"training step {good + 1:,}: {what} are not finite (gradient norm "
                         f"{self.step.last_grad_norm}): {advice} (a NaN or inf in the text or the cell can do it "
                         f"too); the parameters are those of step {good:,}{self.held()}")

    def stopped(self, stop: KeyboardInterrupt, updating: bool) -> int:
        """After Ctrl-C or SIGTERM (``stop``): a checkpoint of the last whole step where none holds it
        yet, one line saying where the run stopped and how to go on; returns 130 (Ctrl-C) or 143 (SIGTERM)."""
        if self.ckdir and not updating and self.saved_step != self.done and self.procs is None:
            try:
                self.checkpoint()
            except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: the previous checkpoint stays
                pass
        held = self.held()
        if self.saved_step is not None:  # how to go on: a resumed run trains to the total its checkpoint keeps
            steps = f" --steps {self.args.steps}" if self.saved_total != self.args.steps else ""
            held += f" (to go on: {PROG} train --checkpoint {self.ckdir} --resume{steps})"
        print(f"{PROG}: {stopped_word(stop)} at step {self.done:,}{held}", file=sys.stderr)
        return exit_status(stop)

    def held(self) -> str:
        """What --checkpoint holds as the run stops early, for its last line: ``; DIR holds step N``,
        ``; no checkpoint was written`` (a directory this run made and left empty is removed), or
        nothing without --checkpoint."""
        if not self.ckdir:
            return ""
        if self.saved_step is not None:
            return f"; {self.ckdir} holds step {self.saved_step:,}"
        if self.made_dir and self.procs is None:
            with contextlib.suppress(OSError):  # not empty after all: leave it
                os.rmdir(self.ckdir)
        return "; no checkpoint was written"

    def validate(self, started: float) -> str:
        recent = self.settled()
        if self.procs is not None and self.procs.rank != 0:
            return ""  # rank 0 validates; the others go on to their next all-reduce
        nats, count = self.evaluator(self.step.parameters, self.valid_ids)
        key = "bits/char" if self.cfg.level == "char" else "perplexity"
        avg = sum(recent) / len(recent)
        lr = f"  lr {self.lr:.3g}" if self.cfg.lr_schedule["name"] != "constant" else ""
        return (f"step {self.done:>6,}  train {key} {self.metric(avg)}  valid {key} {self.metric(nats)}  "
                f"({count:,} {unit(self.cfg.level)}s)  {self.rate():,.0f} tok/s  "
                f"{time.perf_counter() - started:.0f} s{lr}")

    def checkpoint(self) -> None:
        if not self.ckdir:
            return
        if self.procs is not None:  # every process sends its states; rank 0 writes
            state = global_state(self.step)
            if self.procs.rank == 0:
                save_checkpoint(self.ckdir, self.cfg, self.vocab, self.step, self.done, self.index, state)
        else:
            save_checkpoint(self.ckdir, self.cfg, self.vocab, self.step, self.done, self.index)
        self.saved_step, self.saved_total = self.done, self.args.steps

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        from tqdm import tqdm

        args = self.args
        self.banner()
        if self.done >= args.steps:
            where = f"the checkpoint is at step {self.done:,}" if self.resumed is not None else "nothing trained yet"
            total = {"given": f"--steps is {args.steps:,}",
                     "kept": f"the run's total, kept in the checkpoint, is {args.steps:,} (a larger --steps goes on)",
                     "default": f"--steps defaults to {args.steps:,} (a larger --steps goes on)"}[self.steps_from]
            print(f"nothing to do: {where} and {total}")
            return 0
        ckpt_every = args.eval_every if args.checkpoint_every is None else args.checkpoint_every
        bar = tqdm(total=args.steps, initial=self.done, unit="step", dynamic_ncols=True,
                   disable=True if args.no_progress else None, leave=False, mininterval=0.5)  # None: off when not a TTY
        started = t_shown = time.perf_counter()
        updating = False
        with SigintGuard() as guard:
            try:
                while self.done < args.steps:
                    updating = guard.critical = True  # until train() returns, params may be half-updated
                    loss = self.train_one()
                    updating = guard.critical = False
                    guard.check()  # a Ctrl-C during the step lands here, between steps
                    self.recent = (self.recent + [loss])[-50:]  # read when shown (settled())
                    out_of_time = bool(args.time_limit) and time.perf_counter() - started > args.time_limit
                    if args.time_limit and self.procs is not None:
                        out_of_time = any_process(out_of_time)  # every process stops at the same step
                    last = self.done == args.steps or out_of_time
                    if time.perf_counter() - t_shown > 0.5 or last:
                        recent = self.settled()
                        avg = sum(recent) / len(recent)
                        key = "bpc" if self.cfg.level == "char" else "ppl"
                        lr = f"  lr {self.lr:.2e}" if self.cfg.lr_schedule["name"] != "constant" else ""
                        bar.set_postfix_str(f"loss {avg:.3f}  {key} {self.metric(avg)}  {self.rate():,.0f} tok/s"
                                            f"{lr}", refresh=False)
                        t_shown = time.perf_counter()
                    bar.update(1)
                    if (args.eval_every and self.done % args.eval_every == 0) or last:
                        if len(self.valid_ids) >= LONG_VALIDATION and (self.procs is None or self.procs.rank == 0):
                            bar.write(f"validating on {len(self.valid_ids):,} {unit(self.cfg.level)}s "
                                      f"(--eval-tokens N validates on fewer) ...", file=sys.stdout)
                            sys.stdout.flush()
                        bar.write(self.validate(started), file=sys.stdout)
                        sys.stdout.flush()
                    if (ckpt_every and self.done % ckpt_every == 0) or last:
                        self.checkpoint()
                    if out_of_time:
                        bar.write(f"stopped at step {self.done:,}: --time-limit {args.time_limit:g} s reached",
                                  file=sys.stdout)
                        break
            except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (sigint.Terminated)
                bar.close()
                return self.stopped(stop, updating)
            except (NotFinite, FloatingPointError) as exc:  # FloatingPointError: the GPU's error, surfacing
                bar.close()  # where the step is read (a checkpoint's parameters)
                raise self.not_finite(getattr(exc, "what", "its loss or gradients")) from None
        bar.close()
        if self.ckdir:
            print(f"checkpoint: {self.ckdir} (step {self.done:,})")
        return 0
