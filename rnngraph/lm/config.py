"""What defines a language model (:class:`LMConfig`, stored in a checkpoint's config.json), its
optimizer and learning-rate schedule, and :class:`CheckpointError`."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..precision import check_precision
from ..optim import SGD, Adam, AdamW, Optimizer, cosine_lr


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
    parameters are float32 in every precision, so a resumed run may change it).
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

    #: Fields that older checkpoints lack, with the value that reproduces what they trained.
    OPTIONAL = {"dropout": 0.0, "lr_schedule": {"name": "constant"}, "cell_source": None, "chunk": None,
                "tie_weights": False, "precision": "fp32"}
    #: Fields that fix the parameters' shapes or the data layout: a resumed run must agree.
    FIXED = ("cell", "layers", "hidden", "embed", "window", "streams", "level", "corpus", "dtype",
             "max_words", "tie_weights")

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
        if d["chunk"] is not None and (isinstance(d["chunk"], bool) or not isinstance(d["chunk"], int)
                                       or d["chunk"] < 1):
            raise ValueError(f"chunk must be null or a positive integer, got {d['chunk']!r}")
        if not isinstance(d["tie_weights"], bool):
            raise ValueError(f"tie_weights must be true or false, got {d['tie_weights']!r}")
        check_precision(d["precision"], d["dtype"])
        return cls(**{k: d[k] for k in names})


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
