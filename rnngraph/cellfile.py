"""Cells named on the command line: a standard cell's name, or ``file.py:function`` in a file of
the user's.

A checkpoint stores a file cell's path *and its source text* (``cell_source`` of
:class:`rnngraph.lm.LMConfig`), so sampling and evaluation do not depend on the file staying
where it was: :func:`checkpoint_cell` decides which source a loaded checkpoint runs. The source
is the file's alone: modules it imports from its folder (first on ``sys.path`` while it runs)
must stay importable. It also stores the cell's keyword arguments other than ``hidden``
(``train --cell-arg NAME=VALUE``, ``cell_args``), which :func:`bind_cell_args` checks against the
cell and gives it.
"""
from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import os
import sys
import types

from .cells import STANDARD
from .errors import GraphError
from .trace.cell_function import missing_keywords


class CellFileError(ValueError):
    """A ``file.py:function`` cell could not be loaded (missing file, import error, not a cell)."""


def split_cell(spec: str) -> tuple[str, str] | None:
    """``(path, function)`` of a ``file.py:function`` spec; None for anything else (a standard
    cell's name, or a bare ``file.py``)."""
    path, sep, fn = spec.rpartition(":")
    return (path, fn) if sep and path.endswith(".py") else None


def canonical_cell(spec: str) -> str:
    """A standard cell name as is; ``file.py:function`` with the file's absolute path."""
    parts = split_cell(spec)
    return f"{os.path.abspath(parts[0])}:{parts[1]}" if parts else spec


def read_cell_source(spec: str, flag: str = "--cell") -> str | None:
    """The text of the file of a ``file.py:function`` cell; None for a standard cell.

    Raises:
        CellFileError: the file is missing or not UTF-8 (naming the file and ``flag``).
    """
    parts = split_cell(spec)
    if parts is None:
        return None
    path = parts[0]
    if not os.path.isfile(path):
        raise CellFileError(f"{path}: no such file (from {flag} {spec})")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise CellFileError(f"{path}: not valid UTF-8 at byte {exc.start} (from {flag} {spec})") from None


def resolve_cell(spec: str, flag: str = "--cell", source: str | None = None):
    """The cell factory named by ``spec``: a key of ``rg.cells.STANDARD`` or
    ``file.py:function`` naming an ``@rg.cell`` function in a Python file.

    source: the file's text to run instead of reading the file (a checkpoint's stored copy);
    the file then need not exist, and errors still name its path and line. While the file runs,
    its folder is first on ``sys.path`` (as for a script), so it imports modules beside it.

    Raises:
        CellFileError: an unknown name, a missing file, an error while importing the file
            (one line: the file, line and exception; for a module missing where ``source`` runs
            for a file no longer there, that a checkpoint stores only the file's own source), a
            file named without its function or no such function (both listing the file's
            @rg.cell functions), or not an @rg.cell.
        GraphError: raised by the file while it is imported (e.g. ``rg.State(delay=0)``).
    """
    parts = split_cell(spec)
    if parts is None:
        if spec.endswith(".py"):
            if not os.path.isfile(spec):
                raise CellFileError(f"{spec}: no such file (from {flag} {spec})")
            raise CellFileError(f"{flag} {spec}: name the cell function too, as {spec}:FUNCTION"
                                f"{_cells_listed(spec)}")
        if spec not in STANDARD:
            close = [c for c in STANDARD if c == spec.lower()] or difflib.get_close_matches(spec, STANDARD, n=1)
            raise CellFileError(f"{flag} {spec}: unknown cell{f' (did you mean {close[0]}?)' if close else ''}; "
                                f"standard cells are {', '.join(sorted(STANDARD))}, or give file.py:function")
        return STANDARD[spec]
    path, fn = parts
    moved = source is not None and not os.path.isfile(path)
    if source is None:
        source = read_cell_source(spec, flag)
    module = _run_module(path, source, moved)
    factory = getattr(module, fn, None)
    if factory is None:
        raise CellFileError(f"{path}: no function {fn!r} ({_cell_names(module)})")
    if not getattr(factory, "is_cell", False):
        raise CellFileError(f"{path}: {fn!r} is not an @rg.cell function")
    return factory


def _cell_names(module: types.ModuleType) -> str:
    """``@rg.cell functions there: a, b`` (``none`` when there are none) of a cell file's module."""
    cells = sorted(k for k, v in vars(module).items() if getattr(v, "is_cell", False))
    return f"@rg.cell functions there: {', '.join(cells) or 'none'}"


def _cells_listed(path: str) -> str:
    """`` (@rg.cell functions there: ...)`` for a cell file named without its function, or ``""``
    where the file cannot be read or run (the error then comes once a function is named)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f" ({_cell_names(_run_module(path, f.read()))})"
    except (OSError, UnicodeDecodeError, CellFileError, GraphError):
        return ""


def _run_module(path: str, source: str, moved: bool = False) -> types.ModuleType:
    """Run ``source`` as the module of file ``path`` (registered in ``sys.modules`` as an import
    would: dataclasses, pickling and the like look there), with the file's folder first on
    ``sys.path`` meanwhile and the modules it imports from there forgotten afterwards
    (:func:`_forgetting_imports_from`); errors as :func:`_raise_import_error` (``moved``: ``source`` is a
    checkpoint's copy of a file no longer at ``path``)."""
    target = os.path.abspath(path)
    name = "_rnngraph_user_cells_" + "".join(c if c.isalnum() else "_" for c in target)
    module = types.ModuleType(name)
    module.__file__ = target
    sys.modules[name] = module
    try:
        with _folder_on_path(os.path.dirname(target)), _forgetting_imports_from(os.path.dirname(target)):
            exec(compile(source, target, "exec", dont_inherit=True), module.__dict__)  # not our __future__ flags
    except BaseException as exc:
        sys.modules.pop(name, None)
        _raise_import_error(exc, path, moved)
    return module


@contextlib.contextmanager
def _forgetting_imports_from(folder: str):
    """The modules the block imports from ``folder`` (the cell file's ``from helpers import gate``) are
    dropped from ``sys.modules`` afterwards (the cell's functions keep them through their globals), so
    the next cell file imports its own: another folder's ``helpers.py`` of the same name, or the edited
    one. Dropped: each module new in ``sys.modules`` whose top-level package is new too and whose file
    lies in ``folder`` (a package's submodules with it); a module imported before, or a new submodule of
    a package imported before (``rnngraph.torch``), stays."""
    before = set(sys.modules)
    try:
        yield
    finally:
        new = set(sys.modules) - before
        for name in [n for n in new if n.partition(".")[0] in new and _lies_in(sys.modules[n], folder)]:
            del sys.modules[name]


def _lies_in(module, folder: str) -> bool:
    """Whether ``module``'s file (a namespace package's first folder) is in ``folder`` or below it."""
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ()), None)
    if not isinstance(where, str):
        return False
    try:
        return os.path.commonpath([os.path.abspath(where), folder]) == folder
    except ValueError:  # on another drive
        return False


@contextlib.contextmanager
def _folder_on_path(folder: str):
    """``folder`` first on ``sys.path`` inside the block, as Python puts a script's folder, so a
    cell file imports the modules beside it; the entry is removed afterwards (by identity: the
    same folder already elsewhere on the path, and entries the file added, stay)."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        for i, p in enumerate(sys.path):
            if p is folder:
                del sys.path[i]
                break


def _raise_import_error(exc: BaseException, path: str, moved: bool = False):
    """Re-raise what importing a cell file raised as one line naming the file (and line); ``moved``
    (a checkpoint's copy of a file no longer there): a missing module's with :func:`_moved_note`."""
    if isinstance(exc, GraphError):
        raise type(exc)(f"{path}{_user_line(exc, path)}: {exc}") from None
    if isinstance(exc, SyntaxError):
        raise CellFileError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    if isinstance(exc, Exception):  # anything else the user's file raises while it is imported
        note = _moved_note(exc.name, path) if moved and isinstance(exc, ModuleNotFoundError) and exc.name else ""
        raise CellFileError(f"{path}{_user_line(exc, path)}: {type(exc).__name__} while importing: "
                            f"{exc}{note}") from None
    raise exc  # KeyboardInterrupt, SystemExit


def _moved_note(module: str, path: str) -> str:
    """Why a checkpoint's copy of a moved cell file misses ``module``, and what to do."""
    return (f" (the file is no longer there, and a checkpoint stores only the cell file's own source, not "
            f"the modules it imports: put {module!r} back beside {path} or on PYTHONPATH)")


def _user_line(exc: BaseException, path: str) -> str:
    """``:LINE`` of the innermost traceback frame in ``path``, or ``""``."""
    tb, line, target = exc.__traceback__, "", os.path.abspath(path)
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == target:
            line = f":{tb.tb_lineno}"
        tb = tb.tb_next
    return line


def bind_cell_args(factory, spec: str, cell_args: dict, stored_in: str | None = None):
    """``factory`` giving every cell it makes ``cell_args`` (``--cell-arg NAME=VALUE``, stored in a
    checkpoint) besides the ``hidden=`` that ``rg.stacked`` gives; ``factory`` itself when there are none.
    ``stored_in``: the checkpoint directory ``cell_args`` were read from, where a command runs another
    cell than the checkpoint's with them (the errors then say so, and how to replace them).

    Raises:
        CellFileError: a NAME the cell's function does not take (listing its keywords), ``hidden``
            (which is ``--hidden``), or a required keyword argument of the cell that neither
            ``--hidden`` nor ``--cell-arg`` gives (naming the keyword and the option); ``spec``
            names the cell.
    """
    try:
        params = list(inspect.signature(factory.__wrapped__, eval_str=True).parameters.values())
    except Exception:  # not an @rg.cell, or annotations that do not evaluate: rg.cell's Cell says why
        return functools.partial(factory, **cell_args) if cell_args else factory
    keywords = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.name != "hidden"]  # hidden: --hidden's
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    stored = f", stored in {stored_in}" if stored_in else ""
    for name, value in cell_args.items():
        if name == "hidden":
            raise CellFileError(f"--cell-arg hidden={value!r}{stored}: the cells' hidden size is --hidden H")
        if name not in keywords and not any_keyword:
            raise CellFileError(f"--cell-arg {name}={value!r}{stored}: cell {spec} takes no keyword argument "
                                f"{name!r} (its keyword arguments besides hidden: {', '.join(keywords) or 'none'})"
                                f"{_replace_stored(stored_in)}")
    missing = missing_keywords(params, {*cell_args, "hidden"})  # rg.stacked gives hidden
    if missing:
        raise CellFileError(f"cell {spec} needs the keyword argument{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)}: give it with "
                            + " ".join(f"--cell-arg {name}=VALUE" for name in missing)
                            + _replace_stored(stored_in))
    return functools.partial(factory, **cell_args) if cell_args else factory


def _replace_stored(stored_in: str | None) -> str:
    """How sample, eval and complete replace the ``--cell-arg`` values stored in checkpoint ``stored_in``
    (``""`` for None: the values were given on the command line)."""
    if not stored_in:
        return ""
    return (f"; the values are those {stored_in} was trained with: --cell-arg NAME=VALUE replaces them all, "
            f"--no-cell-args gives none")


def checkpoint_cell(cell: str, source: str | None, override: str | None, where: str,
                    resumed: bool = False) -> tuple[str, str | None, str]:
    """Which cell a loaded checkpoint runs: ``(cell, source, note)``.

    cell, source: the checkpoint's (``source`` None for a standard cell, and for a file cell
    of a checkpoint written before checkpoints stored the source); override: ``--cell``
    given to sample or eval, or None; where: the checkpoint directory, for messages; resumed: for
    ``train --resume`` (which takes no other cell: its note says how to train the edited file). In order:

    1. ``override``: a standard cell's name, ``file.py:function``, or ``file.py`` (the
       checkpoint's function name in another file); its file is read now.
    2. the stored source, whether the file is still there or not; ``note`` says so when the
       file at the stored path is there but differs from it.
    3. an old checkpoint: the file at the stored path.

    ``note`` is ``""`` or one line for the user. Raises CellFileError for an override whose
    file is missing or not UTF-8, and for an old checkpoint whose file is missing (naming
    ``--cell``).
    """
    if override is not None:
        stored = split_cell(cell)
        if override.endswith(".py") and stored is not None:
            override = f"{override}:{stored[1]}"
        return canonical_cell(override), read_cell_source(override), ""
    parts = split_cell(cell)
    if parts is None:
        return cell, source, ""
    path = parts[0]
    if source is None:
        if not os.path.isfile(path):
            raise CellFileError(f"{path}: no such file: {where} was written before checkpoints stored their "
                                f"cell's source, so it needs that file: put it back, or give sample and eval "
                                f"--cell FILE.py (a copy of it)")
        return cell, None, ""
    note = ""
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                changed = f.read() != source
        except (OSError, UnicodeDecodeError):
            changed = True
        if changed:
            how = ("a new --checkpoint directory trains the file" if resumed else f"--cell {path} runs the file")
            note = (f"{path} has changed since {where} was written; it runs the cell source stored in the "
                    f"checkpoint ({how})")
    return cell, source, note


__all__ = ["CellFileError", "canonical_cell", "read_cell_source", "resolve_cell", "bind_cell_args", "checkpoint_cell",
           "split_cell"]
