"""The ``rnngraph`` command line: ``train``, ``sample``, ``eval``, ``complete``, ``schedule``, ``bench``
(``python -m rnngraph`` too).

Each subcommand is a :class:`Command` in :data:`COMMANDS`: a name, a help line, a function
adding its arguments to an argparse parser, and a function running it (returning the exit
code). To add one, append a Command (``schedule``, in schedule_command.py, is a small example).

Errors a user can cause (a missing, empty or non-UTF-8 file, a corpus too short for one
window, a bad checkpoint, a broken cell, a model too large for the machine's memory, a
training loss that is not finite) print one line, ``rnngraph: error: ...``, on stderr, in the
command line's words (its flags, not the Python API's arguments), and exit 1; bad flags exit 2;
Ctrl-C exits 130, and SIGTERM during ``train`` 143 (during its steps ``train`` finishes the step under
way and checkpoints first: rnngraph/cli/sigint.py). NumPy's floating-point warnings are off (a
non-finite loss is such an error); rnngraph's own warnings (a cell's state or input never read)
are ``rnngraph: note: ...`` lines, each text once.
``RNNGRAPH_DEBUG=1`` re-raises instead, for a traceback, and prints each GPU kernel's compile
(or cache load) time on stderr (the ``rnngraph.compile`` logger, rnngraph/codegen/kernel_cache.py).

Before ``train``, ``eval``, ``sample`` and ``complete`` compile anything, they estimate the
memory their steps need (:mod:`rnngraph.memory`) and stop with that one line when it is more
than the host has available (or the GPU has free).

The package's modules: ``arguments.py`` (argparse pieces, :class:`Command`, :class:`CLIError`),
``step_setup.py`` (what train, eval and sample share), ``train_config.py``, ``train_memory.py``
and ``train.py`` (``train``), ``checkpoint_commands.py`` (``sample``, ``eval``), ``complete_command.py``
(``complete``), ``schedule_command.py`` and ``bench_command.py``; this one lists the commands
and runs them (:func:`main`).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

from .. import __version__
from ..cellfile import CellFileError
from ..data import CorpusError
from ..debug import debug_level
from ..errors import GraphError, UnusedWarning
from ..lm import CheckpointError
from ..memory import NotEnoughMemory
from .arguments import PROG, CLIError, Command, Reported, _Parser, note
from .bench_command import _bench_arguments, bench_help, run_bench
from .checkpoint_commands import _eval_arguments, _sample_arguments, run_eval, run_sample
from .complete_command import _complete_arguments, run_complete
from .schedule_command import _schedule_arguments, run_schedule
from .sigint import exit_status, stopped_word
from .train import run_train
from .train_config import _train_arguments


COMMANDS: list[Command] = [
    Command("train", "train a language model (truncated BPTT over parallel streams)", _train_arguments,
            run_train, "lower --hidden, --layers, --window or --streams"),
    Command("sample", "generate text from a checkpoint (on the CPU, a token at a time)", _sample_arguments,
            run_sample, "sample on a machine with more memory"),
    Command("eval", "bits/char (or word perplexity) of a checkpoint on a split", _eval_arguments, run_eval,
            "lower --window or --streams"),
    Command("complete", "choose sentence-completion candidates by their log-probability under a checkpoint",
            _complete_arguments, run_complete, "lower --window or --streams"),
    Command("schedule", "print the parallel schedule the compiler chooses for a cell stack", _schedule_arguments,
            run_schedule),
    Command("bench", bench_help(), _bench_arguments, run_bench),
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="rnngraph: a graph compiler for LSTM-like recurrent networks.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.commands = {}  # name -> its parser: an unknown flag points to the command's --help
    for cmd in COMMANDS:
        p = parser.commands[cmd.name] = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(run=cmd.run)
    return parser


def _command(name: str) -> Command:
    return next(c for c in COMMANDS if c.name == name)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename is not None:  # as the corpus and cell files say it
        text = f"{exc.filename}: no such file"
    elif isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def _where(exc: BaseException) -> str:
    """``process R of N: `` for an error of one process of a --distributed run, else nothing."""
    process = getattr(exc, "process", None)
    return f"{process}: " if process else ""


def _silence_stdout() -> None:
    """Point stdout at the null device, so that flushing it at exit cannot fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a file (tests), or already closed
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class _FirstOfEachKernel:
    """A logging filter: a kernel's compile or cache-load line the first time only (a kernel is
    loaded again for each compiled shape); the repeats are counted for :meth:`summary`."""

    def __init__(self):
        self.seen, self.repeats, self.seconds = set(), 0, 0.0

    def filter(self, record) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg != "rnngraph: %s %s in %.2f s" or len(args) != 3:
            return True
        if args[:2] not in self.seen:
            self.seen.add(args[:2])
            return True
        self.repeats, self.seconds = self.repeats + 1, self.seconds + float(args[2])
        return False

    def summary(self) -> str | None:
        return (f"{PROG}: and {self.repeats:,} more compiles or loads of the kernels above ({self.seconds:.2f} s)"
                if self.repeats else None)


def _log_compiles() -> _FirstOfEachKernel:
    """Each kernel's compile or cache-load time on stderr (``rnngraph.compile`` logger), a kernel's
    first only; returns the filter that counts the rest."""
    import logging
    log = logging.getLogger("rnngraph.compile")
    first = _FirstOfEachKernel()
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    for handler in log.handlers:
        handler.filters = [f for f in handler.filters if not isinstance(f, _FirstOfEachKernel)] + [first]
    log.setLevel(logging.INFO)
    return first


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 error, 2 bad flags, 130 Ctrl-C, 143
    SIGTERM during train, 141 when the reader of its output went away)."""
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            parser.commands.get(getattr(args, "command", None), parser).error(
                f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        debug = debug_level()
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    kernels = _log_compiles() if debug else None
    try:
        return _run(args, debug)
    finally:
        said = kernels.summary() if kernels is not None else None
        if said:
            print(said, file=sys.stderr)


def _notes():
    """A warnings.showwarning for a command: rnngraph's own warnings (a cell's unused state or
    input) as one ``rnngraph: note:`` line each, once per text (each traced graph, one a plan,
    warns again), not Python's two lines naming rnngraph's source; others as Python shows them."""
    said = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if not issubclass(category, UnusedWarning):
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
        elif str(message) not in said:
            said.add(str(message))
            note(str(message), file=file)
    return show


def _run(args, debug: int) -> int:
    """``args.run(args)``, its errors made exit codes and one-line messages (see :func:`main`)."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():  # a non-finite loss is reported in flags below
            warnings.showwarning = _notes()  # (not as NumPy warnings)
            warnings.simplefilter("always", UnusedWarning)  # (the notes say each text once)
            return int(args.run(args) or 0)
    except Reported:  # another process of a --distributed run prints the line
        return 1
    except KeyboardInterrupt as stop:  # Ctrl-C (130), or SIGTERM during train (143: rnngraph/cli/sigint.py)
        print(f"{PROG}: {stopped_word(stop)}", file=sys.stderr)
        return exit_status(stop)
    except BrokenPipeError:  # the reader of stdout went away (``rnngraph train | head``): stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a command its pipe ended
    except MemoryError as exc:  # NotEnoughMemory: the estimate before allocating; else an allocation failed
        if debug:
            raise
        text = _one_line(exc) if isinstance(exc, NotEnoughMemory) else \
            f"out of memory ({_one_line(exc)}): {_command(args.command).shrink}"
        print(f"{PROG}: error: {_where(exc)}{text}", file=sys.stderr)
        return 1
    except (CLIError, GraphError, CorpusError, CheckpointError, CellFileError, ValueError, OSError,
            ImportError, FloatingPointError) as exc:  # ImportError: an optional dependency (rdata for the
        # Austen corpus); FloatingPointError: a window whose loss or gradients were not finite
        if debug:
            raise
        print(f"{PROG}: error: {_where(exc)}{_one_line(exc)}", file=sys.stderr)
        return 1
