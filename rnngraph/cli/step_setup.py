"""What ``train``, ``eval`` and ``sample`` share: the device a run takes, the memory check before
anything is allocated, the compiled step, and a checkpoint's config and parameters."""
from __future__ import annotations

import dataclasses
import os
import re

from ..cellfile import bind_cell_args, checkpoint_cell, resolve_cell
from ..data import CorpusError
from ..lm import LMConfig, build_vocab, choose_chunk, load_corpus, unit
from ..memory import available_device_bytes, available_host_bytes, check_fits, estimate
from ..passes import schedule as build_schedule
from ..runtime import compile as rg_compile
from ..devices import resolve_device
from .arguments import CLIError, note as cli_note


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
    return rg_compile(net, window=cfg.window, streams=cfg.streams, device=device, dtype=cfg.dtype,
                      precision=cfg.precision, **kw)


def _footprint(net, window: int, streams: int, dtype: str, device: str, training: bool, slots: int = 2):
    """What a step of ``net`` compiled for (window, streams) will need (rnngraph.memory)."""
    return estimate(build_schedule(net.graph, window, streams, dtype, None), device, training, slots)


def _available(need) -> tuple:
    """(host bytes available, GPU bytes free) against which ``need`` (a Footprint) is checked;
    either None where unknown (the GPU's also where ``need`` takes none of it)."""
    return available_host_bytes(), available_device_bytes() if need.gpu.total else None


def _fits(need) -> bool:
    """Whether ``need`` (a Footprint) fits the memory :func:`_available` finds (unknown: it does)."""
    host, gpu = _available(need)
    return (host is None or need.host.total <= host) and (gpu is None or need.gpu.total <= gpu)


def _check_memory(need, what: str, advice: str) -> None:
    """NotEnoughMemory (one line naming ``what`` and ``advice``) when ``need`` (a Footprint) is
    more than this machine's available memory or the GPU's free memory."""
    check_fits(need, what, advice, *_available(need))


def _apply(ck, step, override: str | None) -> None:
    """The checkpoint's parameters into ``step``; with a ``--cell`` ``override`` a misfit names it."""
    ck.apply(step, optimizer=False, state=False, fit=None if override is None else f"the cell of --cell {override}")


def _model(cfg: LMConfig) -> str:
    """The checkpoint's sizes in words, for messages."""
    return f"{cell_words(cfg)} x{cfg.layers}, hidden {cfg.hidden}, embed {cfg.embed}"


def cell_words(cfg: LMConfig) -> str:
    """The cell's name (a file cell's without its folder) and its ``--cell-arg`` values: ``mgu.py:mgu(alpha=0.5)``."""
    args = ", ".join(f"{k}={v!r}" for k, v in cfg.cell_args.items())
    return os.path.basename(cfg.cell) + (f"({args})" if args else "")


def _chunked(cfg: LMConfig, choice, vocab_size: int, note=None) -> LMConfig:
    """``cfg`` with the head's chunk for a ``--chunk`` choice (``"auto"``, ``"none"`` or a
    positive integer: rnngraph.lm.choose_chunk); ``choice`` None (the flag not given): ``cfg``.
    A chunk larger than the vocabulary is lowered to its size (one chunk of every class), with a
    note on ``note`` (default stderr) naming the flag, the value and the vocabulary's size."""
    if choice is None:
        return cfg
    chunk = choose_chunk(choice, vocab_size)
    if chunk is not None and chunk > vocab_size:
        cli_note(f"--chunk {chunk:,} is more than the vocabulary's {vocab_size:,} {unit(cfg.level)}s: the "
                 f"softmax runs in one chunk of {vocab_size:,}", file=note)
        chunk = vocab_size
    return dataclasses.replace(cfg, chunk=chunk)


def _head_words(cfg: LMConfig, vocab_size: int) -> str:
    """The loss head a network of ``cfg`` is built with, for reports: ``dense softmax head`` or
    ``softmax head in chunks of c of the V classes`` (rnngraph.lm.build_network builds no other)."""
    if cfg.chunk is None:
        return "dense softmax head"
    return f"softmax head in chunks of {cfg.chunk:,} of the {vocab_size:,} classes"


def _checkpoint_config(ck, override: str | None, resumed: bool = False, cell_args: dict | None = None) -> LMConfig:
    """The loaded checkpoint's config with the cell it runs (``--cell`` ``override``, else the stored
    source, else the file; rnngraph.cellfile.checkpoint_cell, ``resumed`` for train --resume), printing
    its note, if any, on stderr. ``cell_args``: the cell's keyword arguments instead of the stored ones
    (sample's, eval's and complete's ``--cell-arg``, rnngraph.cli.arguments.checkpoint_cell_args), or None.

    Raises CellFileError where an ``override`` cell does not take the stored keyword arguments (the
    message says that they are the checkpoint's and how to replace them)."""
    cell, source, note = checkpoint_cell(ck.config.cell, ck.config.cell_source, override, ck.directory, resumed)
    if note:
        cli_note(note)
    stored = cell_args is None
    cfg = dataclasses.replace(ck.config, cell=cell, cell_source=source,
                              cell_args=dict(ck.config.cell_args) if stored else cell_args)
    if override is not None and stored and cfg.cell_args:  # another cell given the stored values: checked here
        bind_cell_args(resolve_cell(cell, source=source), cell, cfg.cell_args, stored_in=ck.directory)
    return cfg


def _checkpoint_corpus(spec: str, hint: str):
    """The corpus a checkpoint records (rnngraph.lm.load_corpus); when its file is gone, a
    CorpusError saying that it is the checkpoint's, with ``hint`` (the flag that names another)."""
    if spec != "austen" and not os.path.exists(spec):
        raise CorpusError(f"{spec}: no such file (the checkpoint's corpus; {hint})")
    return load_corpus(spec)


def vocabulary_differs(ck, corpus) -> bool:
    """Whether checkpoint ``ck``'s vocabulary is not the one its config builds from ``corpus``'s
    training split: another text, or one edited since (``train --resume`` goes on with the
    checkpoint's, rnngraph/cli/train.py)."""
    return build_vocab(ck.config.level, corpus.train, ck.config.max_words) != ck.vocab


def _corpus_note(ck, corpus, digest: str | None = None) -> None:
    """A note on stderr when ``corpus`` is not the text checkpoint ``ck`` trained on (its config's
    ``corpus_sha256``, kept since 2026-12-06): an edited file moves the splits without another sign.
    ``digest``: ``corpus.fingerprint()`` where the caller has it already."""
    kept = ck.config.corpus_sha256
    if kept is not None and kept != (digest or corpus.fingerprint()):
        cli_note(f"{corpus.name} has changed since {ck.directory} was written (its text's SHA-256 differs): "
                 f"the train / valid / test splits and the vocabulary's coverage may have moved")
