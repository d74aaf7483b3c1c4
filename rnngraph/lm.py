"""Language models on text: build the network, checkpoints, evaluation and sampling.

The plumbing behind ``rnngraph train | eval | sample`` (see :mod:`rnngraph.cli`), usable from
Python too::

    cfg = LMConfig(cell="lstm", layers=1, hidden=128, embed=32, window=64, streams=32)
    corpus = load_corpus("austen")
    vocab = build_vocab(cfg.level, corpus.train)
    net = build_network(cfg, len(vocab))

A **checkpoint** is a directory with two files, each written atomically (a temporary file in
the same directory, then ``os.replace``), so an interrupted write leaves the previous one:

- ``config.json``: the :class:`LMConfig` fields (a file cell's source text among them), the
  vocabulary and a format version;
- ``params.npz``: ``param/NAME`` (parameters), ``optim/KEY`` (optimizer slots and step
  count), ``state/NAME`` (the training streams' recurrent states), ``step`` (training steps
  done) and ``data_index`` (the index of the next training window, see
  :mod:`rnngraph.data.batching`). Together they make resuming exact.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cellfile import CellFileError, resolve_cell
from .data import CharVocab, Corpus, WordVocab, batches, vocab_from_json
from .errors import GraphError
from .network import Sequential, stacked
from .optim import SGD, Adam, AdamW, Optimizer, cosine_lr
from .runtime import TrainingStep, compile

FORMAT = 1
CONFIG_FILE = "config.json"
PARAMS_FILE = "params.npz"
LN2 = math.log(2.0)


class CheckpointError(ValueError):
    """A checkpoint directory is missing, unreadable, corrupt, or does not fit the request."""


# ---------------------------------------------------------------------------------- config
@dataclass
class LMConfig:
    """What defines a language model and its training data layout (stored in config.json).

    cell: a standard cell name (``rg.cells.STANDARD``) or ``/abs/path/file.py:function``;
    cell_source: that file's text when the run started (None for a standard cell, and in
    checkpoints written before it was stored): :func:`build_network` runs it, not the file, so a
    checkpoint keeps working when the file moves or changes (see
    :func:`rnngraph.cellfile.checkpoint_cell`);
    corpus: ``"austen"`` or a text file's absolute path; level: ``"char"`` or ``"word"``;
    optimizer: :meth:`rnngraph.optim.Optimizer.config`; clip: global-norm clip or None;
    dropout: p of the Dropout layers of :func:`build_network` (0 = none; checkpoints written
    before it existed load as 0); lr_schedule: :func:`make_lr_schedule`, the lr of each step
    (:func:`scheduled_lr`; checkpoints written before it existed load as constant).
    """

    cell: str = "lstm"
    layers: int = 1
    hidden: int = 128
    embed: int = 32
    window: int = 64
    streams: int = 32
    level: str = "char"
    corpus: str = "austen"
    seed: int = 0
    dtype: str = "float32"
    max_words: int = 10_000
    optimizer: dict = field(default_factory=lambda: {"name": "adam", "lr": 2e-3})
    clip: float | None = 1.0
    dropout: float = 0.0
    lr_schedule: dict = field(default_factory=lambda: {"name": "constant"})
    cell_source: str | None = None

    #: Fields that older checkpoints lack, with the value that reproduces what they trained.
    OPTIONAL = {"dropout": 0.0, "lr_schedule": {"name": "constant"}, "cell_source": None}
    #: Fields that fix the parameters' shapes or the data layout: a resumed run must agree.
    FIXED = ("cell", "layers", "hidden", "embed", "window", "streams", "level", "corpus", "dtype",
             "max_words")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> LMConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        d = {**cls.OPTIONAL, **d}
        missing = sorted(names - set(d))
        if missing:
            raise CheckpointError(f"config lacks {missing}")
        d["lr_schedule"] = make_lr_schedule(**d["lr_schedule"])  # a copy; ValueError for a bad one
        return cls(**{k: d[k] for k in names})


def make_optimizer(name: str, lr: float, weight_decay: float | None = None) -> Optimizer:
    """``"adam"`` -> Adam(lr), ``"adamw"`` -> AdamW(lr, weight_decay) (torch.optim.AdamW's
    decoupled weight decay; None: its default 0.01), ``"sgd"`` -> SGD(lr). ValueError for another
    name, for a weight_decay given with adam or sgd, or a negative one."""
    if name == "adamw":
        return AdamW(lr=lr) if weight_decay is None else AdamW(lr=lr, weight_decay=weight_decay)
    if name in ("adam", "sgd") and weight_decay is not None:
        raise ValueError(f"weight decay applies to adamw only, not {name} (got weight_decay {weight_decay!r})")
    if name == "adam":
        return Adam(lr=lr)
    if name == "sgd":
        return SGD(lr=lr)
    raise ValueError(f"unknown optimizer {name!r} (adam, adamw, sgd)")


LR_SCHEDULES = ("constant", "cosine")
#: A cosine schedule's last lr as a fraction of the optimizer's, when not given.
DEFAULT_LR_FINAL = 0.1


def make_lr_schedule(name: str = "constant", lr_final: float | None = None, steps: int | None = None) -> dict:
    """The ``lr_schedule`` of an :class:`LMConfig`: ``{"name": "constant"}``, or ``{"name": "cosine",
    "lr_final": F, "steps": N}`` (the lr at step N, where the curve ends, is F times the optimizer's
    lr; F None: DEFAULT_LR_FINAL; N None: not known yet, set by ``rnngraph train`` from --steps and used as a
    resumed run's default --steps). ValueError for another name, for lr_final or steps with
    constant, for an lr_final outside [0, 1] or steps not an integer >= 0."""
    if name == "constant":
        if lr_final is not None or steps is not None:
            raise ValueError(f"a final lr and an end step apply to the cosine schedule only, not {name}")
        return {"name": name}
    if name != "cosine":
        raise ValueError(f"unknown lr schedule {name!r} ({', '.join(LR_SCHEDULES)})")
    lr_final = DEFAULT_LR_FINAL if lr_final is None else lr_final
    if not (isinstance(lr_final, (int, float)) and 0 <= lr_final <= 1):
        raise ValueError(f"the final lr fraction must be a number in [0, 1], got {lr_final!r}")
    if steps is not None and not (isinstance(steps, int) and steps >= 0):
        raise ValueError(f"the cosine schedule's end step must be an integer >= 0, got {steps!r}")
    return {"name": name, "lr_final": float(lr_final)} | ({"steps": steps} if steps is not None else {})


def scheduled_lr(cfg: LMConfig, done: int) -> float:
    """The lr of training step ``done`` (0-based: the step about to run; steps of earlier, resumed
    runs count): the optimizer's lr when the schedule is constant, else
    :func:`rnngraph.optim.cosine_lr` from it to ``lr * lr_final`` at the schedule's end step N.
    ValueError for a cosine schedule without an end step."""
    lr, schedule = cfg.optimizer["lr"], cfg.lr_schedule
    if schedule["name"] == "constant":
        return lr
    if schedule.get("steps") is None:
        raise ValueError("the cosine lr schedule has no end step (rnngraph train sets it from --steps)")
    total = schedule["steps"]
    return cosine_lr(lr, schedule["lr_final"], done / total if total > 0 else 1.0)


# ---------------------------------------------------------------------------------- the network
def build_network(cfg: LMConfig, vocab_size: int, dropout: float | None = None) -> Sequential:
    """Embedding(V, embed) -> ``layers`` x cell(hidden=hidden) -> SoftmaxCrossEntropy(V), with
    ``rg.Dropout(p)`` after the embedding, between the cells and before the head when p > 0
    (``rg.stacked(..., vocab=V, dropout=p)``: Zaremba et al. 2014's placement), traced and
    validated (GraphError from the cell is raised here, prefixed with its name). A file cell
    runs ``cfg.cell_source`` where it is set, else the file at its path.

    dropout: p, default ``cfg.dropout``. Evaluation and sampling pass 0: the same parameters
    (Dropout has none) in a graph without masks, which computes what ``forward`` computes with
    masks of ones."""
    factory = resolve_cell(cfg.cell, source=cfg.cell_source)
    p = cfg.dropout if dropout is None else dropout
    net = stacked(factory, cfg.layers, cfg.hidden, vocab=vocab_size, embed=cfg.embed, dropout=p)
    try:
        net.graph  # trace and validate now, so errors surface before any data work
    except GraphError as exc:
        raise type(exc)(f"cell {cfg.cell}: {exc}") from None
    return net


# ---------------------------------------------------------------------------------- data
def load_corpus(spec: str) -> Corpus:
    """``"austen"`` -> :meth:`Corpus.austen`; anything else is a UTF-8 text file (90/5/5 split)."""
    return Corpus.austen() if spec == "austen" else Corpus.from_file(spec)


def canonical_corpus(spec: str) -> str:
    return spec if spec == "austen" else os.path.abspath(spec)


def build_vocab(level: str, train_text: str, max_words: int = 10_000):
    """CharVocab or WordVocab (top ``max_words``) of the training text."""
    if level == "char":
        return CharVocab.build(train_text)
    if level == "word":
        return WordVocab.build(train_text, max_words)
    raise ValueError(f"--level must be char or word, got {level!r}")


def unit(level: str) -> str:
    return "char" if level == "char" else "word"


def describe_loss(nats: float, level: str) -> str:
    """``2.345 bits/char`` at char level, ``123.4 perplexity`` at word level."""
    if level == "char":
        return f"{nats / LN2:.3f} bits/char"
    return f"{math.exp(min(nats, 700.0)):.1f} perplexity"


# ---------------------------------------------------------------------------------- checkpoints
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def has_checkpoint(directory) -> bool:
    d = Path(directory)
    return (d / CONFIG_FILE).exists() or (d / PARAMS_FILE).exists()


def save_checkpoint(directory, cfg: LMConfig, vocab, step: TrainingStep, steps_done: int,
                    data_index: int) -> None:
    """Write config.json (when its content changed) and params.npz, each atomically."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    config = {"format": FORMAT, **cfg.to_json(), "vocab": json.loads(vocab.to_json())}
    text = (json.dumps(config, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    cpath = d / CONFIG_FILE
    if not cpath.exists() or cpath.read_bytes() != text:
        _atomic_write(cpath, lambda f: f.write(text))
    arrays = {f"param/{k}": v for k, v in step.parameters.items()}
    arrays.update({f"optim/{k}": np.asarray(v) for k, v in step.optimizer.state_dict().items()})
    arrays.update({f"state/{k}": v for k, v in step.state.items()})
    arrays["step"] = np.array(steps_done, np.int64)
    arrays["data_index"] = np.array(data_index, np.int64)
    _atomic_write(d / PARAMS_FILE, lambda f: np.savez(f, **arrays))


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

    def apply(self, step: TrainingStep, *, optimizer: bool = True, state: bool = True) -> None:
        """Load parameters (and optimizer slots, training states) into ``step``.

        Raises:
            CheckpointError: a parameter or state of another name or shape (a checkpoint of
                another cell or shape than its config.json says).
        """
        c = self.config
        what = (f"{self.directory}: {PARAMS_FILE} does not fit its {CONFIG_FILE} ({os.path.basename(c.cell)} "
                f"x{c.layers}, hidden {c.hidden}, embed {c.embed}, vocab {len(self.vocab)})")
        have, want = set(self.params), set(step.parameters)
        if have != want:
            extra, lacking = sorted(have - want), sorted(want - have)
            raise CheckpointError(f"{what}: unexpected parameters {_few(extra)}, missing {_few(lacking)}")
        try:
            step.set_parameters(self.params)
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{what}: {exc.args[0] if exc.args else exc}") from None
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
        CheckpointError: the directory or a file is missing, config.json is not valid JSON or
            lacks fields, params.npz is truncated or corrupt or lacks entries.
    """
    d = Path(directory)
    if d.is_file():
        raise CheckpointError(f"{d} is a file: a checkpoint is the directory `rnngraph train --checkpoint DIR` "
                              f"wrote ({CONFIG_FILE}, {PARAMS_FILE}, ...)")
    if not d.is_dir():
        raise CheckpointError(f"{d}: no such checkpoint directory")
    cpath, ppath = d / CONFIG_FILE, d / PARAMS_FILE
    for p in (cpath, ppath):
        if not p.is_file():
            raise CheckpointError(f"{p}: missing: {d} is not a complete checkpoint")
    try:
        raw = json.loads(cpath.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT}")
        cfg = LMConfig.from_json(raw)
        vocab = vocab_from_json(json.dumps(raw["vocab"]))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{cpath}: unreadable or corrupt config ({exc})") from None
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

    return Checkpoint(str(d), cfg, vocab, part("param/"), part("optim/"), part("state/"),
                      int(arrays["step"]), int(arrays["data_index"]))


# ---------------------------------------------------------------------------------- evaluation
class Evaluator:
    """Mean loss of a network over a whole token array, forward only, with its own streams and
    states: S streams over contiguous chunks, states carried through each chunk from zero.
    Compiled steps are cached per (window, streams); parameters are copied in at each call."""

    def __init__(self, net: Sequential, window: int, streams: int, dtype: str = "float32",
                 device: str = "cpu"):
        self.net, self.window, self.streams, self.dtype, self.device = net, window, streams, dtype, device
        self._steps: dict[tuple[int, int], TrainingStep] = {}

    def _step(self, window: int, streams: int, params: dict) -> TrainingStep:
        key = (window, streams)
        if key not in self._steps:
            self._steps[key] = compile(self.net, window=window, streams=streams, device=self.device,
                                       dtype=self.dtype)
        step = self._steps[key]
        step.set_parameters(params)
        step.reset_state()
        return step

    def shape(self, tokens: int) -> tuple[int, int]:
        """(window, streams) of the main step over ``tokens`` tokens: the window, shortened to
        the predictions there are, and as many of the streams as get a whole window each (at
        least 1). ValueError for fewer than 2 tokens."""
        n = tokens - 1
        if n < 1:
            raise ValueError(f"cannot evaluate on {tokens} token(s): need at least 2")
        T = min(self.window, n)
        return T, max(1, min(self.streams, n // T))

    def __call__(self, params: dict, ids) -> tuple[float, int]:
        """(mean loss in nats per token, tokens scored) over ``ids``: every next-token
        prediction except fewer than ``streams`` at the end. ValueError for < 2 tokens."""
        ids = np.asarray(ids)
        n = len(ids) - 1
        T, S = self.shape(len(ids))
        L = n // S
        full, rest = divmod(L, T)
        total, count = 0.0, 0
        step = self._step(T, S, params)
        for x, y in batches(ids, T, S, epochs=1):
            total += step.forward(x, y).loss * x.size
            count += x.size
        if rest:
            offsets = np.arange(S, dtype=np.int64) * n // S
            idx = offsets[None, :] + full * T + np.arange(rest + 1)[:, None]
            block = ids[idx]
            tail = self._step(rest, S, params)
            tail.state = step.state
            total += tail.forward(block[:-1], block[1:]).loss * block[:-1].size
            count += block[:-1].size
        return total / count, count


# ---------------------------------------------------------------------------------- sampling
def generate(step: TrainingStep, vocab, prime: str, length: int, temperature: float = 1.0, seed: int = 0):
    """Feed ``prime`` token by token to ``step`` (compiled for window 1, streams 1, its
    parameters set), then draw ``length`` tokens from softmax(logits / temperature), yielding
    each one's text as soon as it is drawn (``vocab.piece``: a character, or a word with the
    space before it); the pieces joined are ``vocab.decode`` of the drawn ids. An empty prime
    starts from a newline. Char level never draws ``<unk>``. The step's states carry on.

    Raises ValueError (naming --temperature / --length) here, before the first token, for a
    temperature that is not a positive finite number or a negative length.
    """
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"--temperature must be a positive number, got {temperature}")
    if length < 0:
        raise ValueError(f"--length must be >= 0, got {length}")
    return _draw(step, vocab, prime, length, temperature, seed)


def _draw(step: TrainingStep, vocab, prime: str, length: int, temperature: float, seed: int):
    out_name = step.graph.outputs[0]
    ids = list(vocab.encode(prime)) or list(vocab.encode("\n")) or [0]
    rng = np.random.default_rng(seed)
    logits = None
    for tok in ids:
        logits = step.forward(np.array([[tok]])).values[out_name][0, 0]
    previous = None
    for k in range(length):
        z = logits.astype(np.float64) / temperature
        if isinstance(vocab, CharVocab):
            z[0] = -np.inf
        p = np.exp(z - z.max())
        p /= p.sum()
        token = int(rng.choice(len(p), p=p))
        yield vocab.piece(previous, token)
        previous = token
        if k + 1 < length:
            logits = step.forward(np.array([[token]])).values[out_name][0, 0]


def sample(net: Sequential, params: dict, vocab, prime: str, length: int, temperature: float = 1.0,
           seed: int = 0, dtype: str = "float32") -> str:
    """:func:`generate` on a step of ``net`` (window 1, streams 1, on the CPU) with ``params``;
    returns the generated text only (without the prime), all at once."""
    step = compile(net, window=1, streams=1, device="cpu", dtype=dtype)
    step.set_parameters(params)
    return "".join(generate(step, vocab, prime, length, temperature, seed))


def _few(names: list, shown: int = 4) -> str:
    """The first ``shown`` names, and how many more there are."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{names[:shown]}{more}"


__all__ = ["CheckpointError", "CellFileError", "LMConfig", "Checkpoint", "Evaluator", "build_network",
           "build_vocab", "load_corpus", "load_checkpoint", "save_checkpoint", "has_checkpoint",
           "resolve_cell", "sample", "generate", "describe_loss", "make_optimizer", "make_lr_schedule", "scheduled_lr"]
