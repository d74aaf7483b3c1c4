"""The command line's argparse pieces: the parser whose usage errors are one line, the types of
numeric and directory flags, :class:`Command` (a subcommand) and :class:`CLIError` (a user error
it finds)."""
from __future__ import annotations

import argparse
import ast
import contextlib
import keyword
import math
import sys
from dataclasses import dataclass
from typing import Callable

from ..lm import AUTO_CHUNK, AUTO_CHUNK_ABOVE


PROG = "rnngraph"


#: Whether :func:`note` says nothing: set by :func:`quiet_notes` on the processes of a
#: ``--distributed`` run but the first, whose notes would repeat process 0's.
_quiet = False


def note(text: str, file=None) -> None:
    """Print ``rnngraph: note: TEXT`` on ``file`` (default stderr), flushed: every command's notes
    (a flag that changes nothing, a corpus or cell file edited since its checkpoint, tokens fed as
    <unk>) read alike, apart from the command's output on stdout. Nothing inside
    :func:`quiet_notes`."""
    if not _quiet:
        print(f"{PROG}: note: {text}", file=file or sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_notes():
    """:func:`note` says nothing inside (a ``--distributed`` run's other processes: process 0 says each)."""
    global _quiet
    before, _quiet = _quiet, True
    try:
        yield
    finally:
        _quiet = before


class CLIError(Exception):
    """A user error found by the CLI itself; its message is printed as one line."""


class Reported(Exception):
    """This process failed and another process of the same ``--distributed`` run prints the one
    line for it: exit 1 without a message."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: ``rnngraph: error: ...``, and which takes
    flags whole only (argparse's default took ``--step 5`` for ``--steps 5``: a misspelling that
    happens to be a prefix would silently mean another flag)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

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
#: A directory flag's type (``--checkpoint DIR``): an empty path is refused (train wrote nothing
#: with one, eval and sample read the current directory).
directory = _number(str, bool, "a directory path")


def chunk_choice(text: str):
    """``--chunk``'s type: ``"auto"``, ``"none"`` or a positive integer (classes per chunk of the
    output layer, rnngraph.lm.choose_chunk); ArgumentTypeError naming the three otherwise."""
    if text in ("auto", "none"):
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (classes per chunk), auto or none, got {text!r}")
    return value


def cell_arg(text: str) -> tuple[str, object]:
    """``--cell-arg``'s type: ``NAME=VALUE`` -> ``(NAME, VALUE)``, VALUE a Python literal (``0.5``, ``3``,
    ``True``, ``None``, ``'x'``, ``[1, 2]``; a tuple becomes a list, as the checkpoint's JSON gives it back),
    or a plain word as text (``act=tanh``: ``"tanh"``). ArgumentTypeError (naming the text) for a NAME
    that is not a Python identifier and for the values of :func:`_cell_arg_value`."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier() or keyword.iskeyword(name):
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, NAME a keyword argument of the cell, got {text!r}")
    return name, _cell_arg_value(value.strip(), text)


#: How a ``--cell-arg`` VALUE meant as a literal starts: one ``ast.literal_eval`` cannot read is an
#: error (a typo such as ``[1,2``), never text.
_LITERAL_START = tuple("[{('\"0123456789-+.")
#: JSON's words, which Python spells otherwise.
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}
#: What ``--cell-arg``'s VALUE may be, for its errors.
_LITERALS = "a number, True, False, None, a quoted string, or a list or dict of those"


def _cell_arg_value(value: str, text: str):
    """``--cell-arg``'s VALUE (``text`` being the whole option's): a Python literal JSON holds (tuples as
    lists), or a plain word as text. ArgumentTypeError for an empty value, JSON's true, false and
    null (write True, False, None), a number that is not finite (nan, inf, 1e999), a value starting
    as a literal does (``[{('"``, a digit, ``-``, ``+``, ``.``) that is not one, and a literal JSON
    cannot hold (a set, bytes, a dict key that is not a string)."""
    def refuse(why: str):
        return argparse.ArgumentTypeError(f"{text!r}: {why}")

    if not value:
        raise refuse(f"the value is empty: give {_LITERALS} (NAME='' for the empty string)")
    if value.lower() in _JSON_WORDS and value not in ("True", "False"):
        raise refuse(f"write {_JSON_WORDS[value.lower()]}, not {value} (VALUE is a Python literal, not JSON)")
    if value.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise refuse(f"{value} is not a finite number (the checkpoint keeps --cell-arg values as JSON)")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if value.startswith(_LITERAL_START):
            raise refuse(f"{value} is not a Python literal ({_LITERALS}); quote text: NAME='...'") from None
        return value  # a plain word: the text
    problem = _json_problem(parsed)
    if problem:
        raise refuse(f"{problem} (the checkpoint keeps --cell-arg values as JSON: {_LITERALS})")
    return _lists(parsed)


def _json_problem(value) -> str | None:
    """Why JSON does not hold ``value`` (tuples as lists) the way the checkpoint keeps ``--cell-arg``
    values, or None where it does."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (list, tuple)):
        return next(filter(None, map(_json_problem, value)), None)
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            return f"dict keys must be strings (quoted: {str(bad[0])!r}), not {bad[0]!r}"
        return next(filter(None, map(_json_problem, value.values())), None)
    return f"a {type(value).__name__} is not a value JSON holds"


def cell_args_given(pairs: list | None) -> dict:
    """The ``(NAME, VALUE)`` pairs of the ``--cell-arg`` options as a dict ({} for none); CLIError
    for a NAME given twice."""
    out: dict = {}
    for name, value in pairs or ():
        if name in out:
            raise CLIError(f"--cell-arg {name} given twice ({out[name]!r} and {value!r})")
        out[name] = value
    return out


#: ``--cell-arg``'s help (train and schedule).
CELL_ARG_HELP = ("a keyword argument of the cell function besides hidden (def cell(x, h, *, hidden, alpha): "
                 "--cell-arg alpha=0.5), repeated for each; VALUE a Python literal (0.5, 3, True, None, 'x', [1, 2], "
                 "{'k': 1}) or a plain word, taken as text (act=tanh)")


#: ``--cell-arg``'s help where a checkpoint runs (sample, eval, complete).
CELL_ARG_OVERRIDE_HELP = (CELL_ARG_HELP + "; given at all, these replace the checkpoint's stored --cell-arg values "
                          "wholesale, none of which is kept (for a --cell that takes other keyword arguments; "
                          "default: the stored values)")


def checkpoint_cell_arg_options(p: argparse.ArgumentParser) -> None:
    """sample's, eval's and complete's ``--cell-arg`` (replacing the checkpoint's stored values) and
    ``--no-cell-args`` (none of them), one or the other."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cell-arg", dest="cell_args", metavar="NAME=VALUE", type=cell_arg, action="append",
                   help=CELL_ARG_OVERRIDE_HELP)
    g.add_argument("--no-cell-args", action="store_true",
                   help="give the cell none of the checkpoint's stored --cell-arg values (for a --cell that "
                        "takes no keyword argument besides hidden)")


def checkpoint_cell_args(args: argparse.Namespace) -> dict | None:
    """The cell's keyword arguments a checkpoint command gives instead of the checkpoint's: those of
    its ``--cell-arg`` options ({} for ``--no-cell-args``), or None (neither given: the stored ones)."""
    if args.no_cell_args:
        return {}
    return None if args.cell_args is None else cell_args_given(args.cell_args)


def _lists(value):
    """``value`` with its tuples made lists (what JSON reads back), so a resumed run's cell gets the same."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return {k: _lists(v) for k, v in value.items()} if isinstance(value, dict) else value


#: ``--chunk``'s help, less its default.
CHUNK_HELP = (f"compute the output layer and softmax N classes of the vocabulary at a time (memory O(T*S*N), not "
              f"O(T*S*V); the same parameters and loss as the dense head); none: the dense head; auto: chunks of "
              f"{AUTO_CHUNK:,} when the vocabulary has more than {AUTO_CHUNK_ABOVE:,} tokens, else none; an N above "
              f"the vocabulary's size is lowered to it (one chunk), with a note")


@dataclass(frozen=True)
class Command:
    """A subcommand: ``add_arguments(parser)`` declares its flags, ``run(args) -> exit code``;
    ``shrink``: what to do when an allocation fails (the flags that make it smaller)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    shrink: str = "free some memory"


def precision_flag(precision: str, dtype: str) -> str:
    """``--precision``'s value; CLIError naming both flags when it needs float32 and ``dtype`` is not."""
    if precision != "fp32" and dtype != "float32":
        raise CLIError(f"--precision {precision} needs --dtype float32 (tensor cores take at most fp32 operands), "
                       f"not {dtype}")
    return precision
