"""Checkpoints: :func:`save_checkpoint` writes a directory's two files atomically,
:func:`load_checkpoint` reads them into a :class:`Checkpoint`, which loads into a step."""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data import vocab_from_json
from ..runtime import TrainingStep
from .config import CheckpointError, LMConfig


FORMAT = 1
CONFIG_FILE = "config.json"
PARAMS_FILE = "params.npz"



def _atomic_write(path: Path, write) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, fsync it, then rename it over
    ``path``; on any exception (KeyboardInterrupt too) remove the temporary file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a normal file's mode
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _temp_name(name: str) -> re.Pattern:
    """The names :func:`_atomic_write` gives its temporary files for ``name``: mkstemp's
    ``.{name}.`` + 8 random characters + ``.tmp``."""
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp")


def _remove_stale_temps(directory: Path, before: float) -> None:
    """Remove the temporary files of :func:`_atomic_write` for the checkpoint's two files that a
    killed writer (SIGKILL, a power loss) left in ``directory``: plain files of exactly those names
    last modified before ``before`` (a ``time.time()``: a writer still at work is newer). Files of
    other names are never touched; one that cannot be removed stays."""
    patterns = [_temp_name(CONFIG_FILE), _temp_name(PARAMS_FILE)]
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if not any(p.fullmatch(entry.name) for p in patterns):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < before:
                os.unlink(entry.path)
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def has_checkpoint(directory) -> bool:
    d = Path(directory)
    return (d / CONFIG_FILE).exists() or (d / PARAMS_FILE).exists()


def save_checkpoint(directory, cfg: LMConfig, vocab, step: TrainingStep, steps_done: int,
                    data_index: int, state: dict | None = None) -> None:
    """Write config.json (when its content changed) and params.npz, each atomically. ``state``:
    the recurrent states to save, name -> (depth, S, n) (None: ``step.state``; data-parallel
    training passes the global states, joined from every process's). Once both are written,
    the temporary files a writer killed mid-save left there are removed (older than this save's
    start, of the writer's own temporary names only)."""
    begun = time.time()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    config = {"format": FORMAT, **cfg.to_json(), "vocab": json.loads(vocab.to_json())}
    text = (json.dumps(config, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    cpath = d / CONFIG_FILE
    if not cpath.exists() or cpath.read_bytes() != text:
        _atomic_write(cpath, lambda f: f.write(text))
    arrays = {f"param/{k}": v for k, v in step.parameters.items()}
    arrays.update({f"optim/{k}": np.asarray(v) for k, v in step.optimizer.state_dict().items()})
    arrays.update({f"state/{k}": v for k, v in (step.state if state is None else state).items()})
    arrays["step"] = np.array(steps_done, np.int64)
    arrays["data_index"] = np.array(data_index, np.int64)
    _atomic_write(d / PARAMS_FILE, lambda f: np.savez(f, **arrays))
    _remove_stale_temps(d, begun)


@dataclass
class Checkpoint:
    """A loaded checkpoint: config, vocabulary and arrays split by kind."""

    directory: str
    config: LMConfig
    vocab: object
    params: dict
    optim: dict
    state: dict
    step: int
    data_index: int

    def apply(self, step: TrainingStep, *, optimizer: bool = True, state: bool = True, fit: str | None = None) -> None:
        """Load parameters (and optimizer slots, training states) into ``step``.

        ``fit``: what ``step`` was built from, for the error (default: the checkpoint's own
        config.json; the CLI's ``--cell`` names another cell).

        Raises:
            CheckpointError: a parameter or state of another name or shape (a checkpoint of
                another cell or shape than its config.json says, or than ``fit``); with
                ``optimizer`` or ``state``, an optimizer slot or recurrent state that is not finite.
        """
        c = self.config
        what = (f"{self.directory}: {PARAMS_FILE} does not fit {fit or 'its ' + CONFIG_FILE} "
                f"({os.path.basename(c.cell)} x{c.layers}, hidden {c.hidden}, embed {c.embed}, vocab {len(self.vocab)})")
        have, want = set(self.params), set(step.parameters)
        if have != want:
            extra, lacking = sorted(have - want), sorted(want - have)
            raise CheckpointError(f"{what}: unexpected parameters {_few(extra)}, missing {_few(lacking)}")
        try:
            step.set_parameters(self.params)
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{what}: {exc.args[0] if exc.args else exc}") from None
        if optimizer or state:  # a resumed run (--distributed: its states are sharded after this)
            ppath = Path(self.directory) / PARAMS_FILE
            _check_finite(ppath, self.optim, "optimizer slot")
            _check_finite(ppath, self.state, "recurrent state")
        if optimizer:
            step.optimizer.load_state_dict(self.optim)
        if state:
            if set(self.state) != set(step.state) or any(
                    self.state[k].shape != step.state[k].shape for k in step.state):
                raise CheckpointError(f"{what}: its recurrent states do not fit {step.streams} streams")
            step.state = {k: np.array(v, dtype=step.state[k].dtype) for k, v in self.state.items()}


def load_checkpoint(directory) -> Checkpoint:
    """Read a checkpoint directory.

    Raises:
        CheckpointError: the directory or a file is missing (or a file is a directory),
            config.json is not valid JSON, lacks fields or holds one of the wrong type or out of
            range (named in the message: :meth:`LMConfig.from_json`), params.npz is not an .npz
            archive, is truncated or corrupt, lacks entries, or holds a parameter that is not
            finite (named in the message).
    """
    d = Path(directory)
    if d.is_file():
        raise CheckpointError(f"{d} is a file: a checkpoint is the directory `rnngraph train --checkpoint DIR` "
                              f"wrote ({CONFIG_FILE}, {PARAMS_FILE}, ...)")
    if not d.is_dir():
        raise CheckpointError(f"{d}: no such checkpoint directory")
    cpath, ppath = d / CONFIG_FILE, d / PARAMS_FILE
    for p in (cpath, ppath):
        if p.is_dir():
            raise CheckpointError(f"{p}: is a directory, not a file: {d} is not a complete checkpoint")
        if not p.is_file():
            raise CheckpointError(f"{p}: missing: {d} is not a complete checkpoint")
    try:
        raw = json.loads(cpath.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        fmt = raw.get("format")
        if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT:
            raise CheckpointError(f"{cpath}: checkpoint format {fmt}, written by a newer rnngraph (this one reads "
                                  f"format {FORMAT}): upgrade rnngraph to load it")
        if fmt != FORMAT:
            raise ValueError(f"format {fmt!r}, expected {FORMAT}")
        cfg = LMConfig.from_json(raw)
        vocab = vocab_from_json(json.dumps(raw["vocab"]))
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{cpath}: unreadable or corrupt config ({exc})") from None
    _check_npz_header(ppath)
    try:
        with np.load(ppath, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise CheckpointError(f"{ppath}: truncated or corrupt ({exc})") from None
    except Exception as exc:  # zlib.error and friends from a damaged archive
        raise CheckpointError(f"{ppath}: truncated or corrupt ({type(exc).__name__}: {exc})") from None
    for key in ("step", "data_index", "optim/steps"):
        if key not in arrays:
            raise CheckpointError(f"{ppath}: corrupt: no {key!r} entry")

    def part(prefix):
        return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}

    params = part("param/")
    _check_finite(ppath, params, "parameter")
    return Checkpoint(str(d), cfg, vocab, params, part("optim/"), part("state/"),
                      int(arrays["step"]), int(arrays["data_index"]))



#: How an .npz archive (a zip file) begins: a local file header, or the end record of an empty one.
_ZIP_STARTS = (b"PK\x03\x04", b"PK\x05\x06")


def _check_npz_header(ppath: Path) -> None:
    """CheckpointError for a params.npz that is empty or not a zip archive at all (a text file,
    a single .npy array), said before NumPy's np.load, which would speak of pickled data and
    ``allow_pickle``; a damaged zip archive is left to np.load (truncated or corrupt)."""
    try:
        with open(ppath, "rb") as f:
            head = f.read(6)
    except OSError as exc:
        raise CheckpointError(f"{ppath}: unreadable ({exc.strerror or exc})") from None
    if not head:
        raise CheckpointError(f"{ppath}: empty (0 bytes), not an .npz archive")
    if head.startswith(_ZIP_STARTS):
        return
    what = "a single .npy array" if head == b"\x93NUMPY" else "not a zip file"
    raise CheckpointError(f"{ppath}: not an .npz archive ({what})")


def _check_finite(ppath, arrays: dict, what: str) -> None:
    """CheckpointError naming the first of ``arrays`` (name -> array; ``what``: "parameter",
    "optimizer slot", "recurrent state") that holds NaN or inf: a network run with such a
    parameter outputs NaN (training saves finite steps only: the file was damaged or written
    otherwise)."""
    for name, value in arrays.items():
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            bad = int(value.size - np.count_nonzero(np.isfinite(value)))
            raise CheckpointError(f"{ppath}: {what} {name!r} holds {bad:,} of its {value.size:,} values that are "
                                  f"not finite (NaN or inf): the checkpoint is unusable")


def _few(names: list, shown: int = 4) -> str:
    """The first ``shown`` names, and how many more there are."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{names[:shown]}{more}"
