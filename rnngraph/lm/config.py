"""What defines a language model (:class:`LMConfig`, stored in a checkpoint's config.json), its
optimizer and learning-rate schedule, and :class:`CheckpointError`."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from ..precision import PRECISIONS, check_precision
from ..optim import SGD, Adam, AdamW, Optimizer, cosine_lr, from_config


LN2 = math.log(2.0)



class CheckpointError(ValueError):
    """A checkpoint directory is missing, unreadable, corrupt, or does not fit the request."""


@dataclass
class LMConfig:
    """What defines a language model and its training data layout (stored in config.json).

    cell: a standard cell name (``rg.cells.STANDARD``) or ``/abs/path/file.py:function``;
    cell_source: that file's text when the run started (None for a standard cell, and in
    checkpoints written before it was stored): :func:`build_network` runs it, not the file, so a
    checkpoint keeps working when the file moves or changes (see
    :func:`rnngraph.cellfile.checkpoint_cell`);
    corpus: ``"austen"`` or a text file's absolute path; level: ``"char"`` or ``"word"``;
    max_words: word level, the vocabulary's cap (None: every word type of the training split;
    checkpoints written before that default store 10,000);
    optimizer: :meth:`rnngraph.optim.Optimizer.config`; clip: global-norm clip or None;
    dropout: p of the Dropout layers of :func:`build_network` (0 = none; checkpoints written
    before it existed load as 0); lr_schedule: :func:`make_lr_schedule`, the lr of each step
    (:func:`scheduled_lr`; checkpoints written before it existed load as constant);
    chunk: classes per chunk of the output layer and loss (``rg.SoftmaxCrossEntropy(V,
    chunk=chunk)``, memory O(T*S*chunk) instead of O(T*S*V)) or None for the dense head
    (checkpoints written before it existed load as None); the parameters are the same either
    way, so it changes no shape (:func:`choose_chunk` picks it from the vocabulary size);
    tie_weights: the head's output weight is the embedding table (``rg.SoftmaxCrossEntropy(V,
    tie_weights=True)``; Press & Wolf 2017, PyTorch's word_language_model ``--tied``), so there is
    no ``head.W.weight`` and embed must equal hidden (checkpoints written before it existed load
    as False); precision: the once-per-window GEMMs' operand format, ``"fp32"``, ``"tf32"`` or
    ``"bf16"`` (rnngraph/precision.py; checkpoints written before it existed load as fp32; the
    parameters are float32 in every precision, so a resumed run may change it); corpus_sha256:
    :meth:`rnngraph.data.Corpus.fingerprint` of the text it last trained on (None in checkpoints
    written before it was kept), for a note when the corpus file has changed since; steps: the
    total steps the run was last started or resumed to train (``rnngraph train --steps``; None
    in checkpoints written before it was kept), where a resumed run without ``--steps`` goes on to;
    cell_args: the cell's keyword arguments besides ``hidden`` (``rnngraph train --cell-arg
    NAME=VALUE``; JSON values; checkpoints written before it existed load as none),
    :func:`rnngraph.cellfile.bind_cell_args`.
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
    max_words: int | None = None
    optimizer: dict = field(default_factory=lambda: {"name": "adam", "lr": 2e-3})
    clip: float | None = 1.0
    dropout: float = 0.0
    lr_schedule: dict = field(default_factory=lambda: {"name": "constant"})
    cell_source: str | None = None
    chunk: int | None = None
    tie_weights: bool = False
    precision: str = "fp32"
    corpus_sha256: str | None = None
    steps: int | None = None
    cell_args: dict = field(default_factory=dict)

    #: Fields that older checkpoints lack, with the value that reproduces what they trained.
    OPTIONAL = {"dropout": 0.0, "lr_schedule": {"name": "constant"}, "cell_source": None, "chunk": None,
                "tie_weights": False, "precision": "fp32", "corpus_sha256": None, "steps": None,
                "cell_args": {}}
    #: Fields that fix the parameters' shapes or the data layout: a resumed run must agree.
    FIXED = ("cell", "layers", "hidden", "embed", "window", "streams", "level", "corpus", "dtype",
             "max_words", "tie_weights")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> LMConfig:
        """The config of a checkpoint's config.json fields (:attr:`OPTIONAL` ones may be absent).
        CheckpointError for a missing field; ValueError naming the field and its value as JSON spells
        it (``true``, ``"byte"``) for one of the wrong type or out of range (a window of 0, a level
        of "byte", an optimizer that is not an object, ...)."""
        names = {f.name for f in dataclasses.fields(cls)}
        d = {**cls.OPTIONAL, **d}
        missing = sorted(names - set(d))
        if missing:
            raise CheckpointError(f"config lacks {missing}")
        for name, (ok, what) in _FIELDS.items():
            if not ok(d[name]):
                raise ValueError(f"{name} must be {what}, got {_json(d[name])}")
        _check_optimizer(d["optimizer"])
        d["cell_args"] = dict(d["cell_args"])  # not OPTIONAL's own dict
        try:
            d["lr_schedule"] = make_lr_schedule(**d["lr_schedule"])  # a copy
        except (TypeError, ValueError) as exc:
            raise ValueError(f"lr_schedule {_json(d['lr_schedule'])}: {exc}") from None
        if not isinstance(d["precision"], str) or d["precision"] not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(map(json.dumps, PRECISIONS))}, got "
                             f"{_json(d['precision'])}")
        check_precision(d["precision"], d["dtype"])
        if d["tie_weights"] and d["embed"] != d["hidden"]:
            raise ValueError(f"tie_weights needs embed equal to hidden, got embed {d['embed']} and hidden "
                             f"{d['hidden']}")
        return cls(**{k: d[k] for k in names})


def _json(value) -> str:
    """A config.json value as the file spells it (``true``, ``null``, ``"x"``), for errors; Python's
    repr for what JSON cannot hold."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(v) -> bool:
    return _integer(v) and v >= 1


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v) -> bool:
    return isinstance(v, str) and v != ""


#: What each field of a checkpoint's config.json must hold (a test and its words), so that a damaged
#: file is a one-line error naming the field rather than a crash or a silently wrong run; the
#: optimizer, the lr schedule and the precision are checked by their own functions.
_FIELDS = {
    "cell": (_text, "a cell name or /path/file.py:function"),
    "cell_source": (lambda v: v is None or isinstance(v, str), "null or the cell file's text"),
    "layers": (_count, "a positive integer"),
    "hidden": (_count, "a positive integer"),
    "embed": (_count, "a positive integer"),
    "window": (_count, "a positive integer"),
    "streams": (_count, "a positive integer"),
    "level": (lambda v: v in ("char", "word"), '"char" or "word"'),
    "corpus": (_text, '"austen" or a text file\'s path'),
    "seed": (lambda v: _integer(v) and v >= 0, "an integer >= 0"),
    "dtype": (lambda v: v in ("float32", "float64"), '"float32" or "float64"'),
    "max_words": (lambda v: v is None or _count(v), "null or a positive integer"),
    "clip": (lambda v: v is None or (_number(v) and v > 0), "null (no clipping) or a positive number"),
    "dropout": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "lr_schedule": (lambda v: isinstance(v, dict), 'an object such as {"name": "constant"}'),
    "chunk": (lambda v: v is None or _count(v), "null or a positive integer"),
    "tie_weights": (lambda v: isinstance(v, bool), "true or false"),
    "corpus_sha256": (lambda v: v is None or (isinstance(v, str) and len(v) == 64
                                              and all(c in "0123456789abcdef" for c in v)),
                      "null or a SHA-256 digest in hex"),
    "steps": (lambda v: v is None or (_integer(v) and v >= 0), "null or an integer >= 0"),
    "cell_args": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and k.isidentifier() for k in v),
                  "an object of keyword argument names"),
}


def _check_optimizer(value) -> None:
    """ValueError naming the field when a config's ``optimizer`` is not what
    :meth:`rnngraph.optim.Optimizer.config` writes (an object with a known name, a positive lr and
    valid hyper-parameters)."""
    if not (isinstance(value, dict) and isinstance(value.get("name"), str) and "lr" in value):
        raise ValueError(f'optimizer must be an object with a name and an lr, such as {{"name": "adam", '
                         f'"lr": 0.002}}, got {_json(value)}')
    try:
        from_config(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"optimizer {_json(value)}: {exc}") from None


#: ``--chunk auto`` (the default) chunks the head of a vocabulary of more than this many tokens
#: (at T*S = 35*64 the dense head's float32 logits and their gradient are then over 0.5 GiB) ...
AUTO_CHUNK_ABOVE = 32_768
#: ... in chunks of this many classes (70 MiB of float32 logits a chunk at T*S = 35*64).
AUTO_CHUNK = 8_192


def choose_chunk(choice, vocab_size: int) -> int | None:
    """The head's chunk (:attr:`LMConfig.chunk`) for a ``--chunk`` choice: ``"auto"``:
    AUTO_CHUNK when ``vocab_size`` > AUTO_CHUNK_ABOVE, else None (the dense head); ``"none"`` or
    None: None; a positive integer: itself (one larger than the vocabulary makes one chunk).
    ValueError for anything else."""
    if choice == "auto":
        return AUTO_CHUNK if vocab_size > AUTO_CHUNK_ABOVE else None
    if choice is None or choice == "none":
        return None
    if isinstance(choice, bool) or not isinstance(choice, int) or choice < 1:
        raise ValueError(f"--chunk must be a positive integer, auto or none, got {choice!r}")
    return choice


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
