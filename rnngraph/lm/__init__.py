"""Language models on text: build the network, checkpoints, evaluation and sampling.

The plumbing behind ``rnngraph train | eval | sample`` (see :mod:`rnngraph.cli`), usable from
Python too::

    cfg = LMConfig(cell="lstm", layers=1, hidden=128, embed=32, window=64, streams=32)
    corpus = load_corpus("austen")
    vocab = build_vocab(cfg.level, corpus.train)
    net = build_network(cfg, len(vocab))

A **checkpoint** is a directory with two files, each written atomically (a temporary file in
the same directory, then ``os.replace``), so an interrupted write leaves the previous one (a
writer killed outright leaves its temporary file too, which the next save there removes):

- ``config.json``: the :class:`LMConfig` fields (a file cell's source text among them), the
  vocabulary and a format version;
- ``params.npz``: ``param/NAME`` (parameters), ``optim/KEY`` (optimizer slots and step
  count), ``state/NAME`` (the training streams' recurrent states), ``step`` (training steps
  done) and ``data_index`` (the index of the next training window, see
  :mod:`rnngraph.data.batching`). Together they make resuming exact.

The package's modules: ``config.py`` (:class:`LMConfig`, the optimizer and lr schedule),
``checkpoint.py`` (saving and loading checkpoints); this one builds the network and the
vocabulary, evaluates and samples, and exports the names of both.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..cellfile import CellFileError, bind_cell_args, resolve_cell
from ..data import CharVocab, Corpus, WordVocab, batches
from ..errors import GraphError
from ..heads import SoftmaxCrossEntropy
from ..network import Sequential, stacked
from ..runtime import TrainingStep, compile
from .checkpoint import CONFIG_FILE, FORMAT, PARAMS_FILE, Checkpoint, has_checkpoint, load_checkpoint, save_checkpoint
from .config import (AUTO_CHUNK, AUTO_CHUNK_ABOVE, DEFAULT_LR_FINAL, LN2, LR_SCHEDULES, CheckpointError, LMConfig,
                     choose_chunk, make_lr_schedule, make_optimizer, scheduled_lr)


def build_network(cfg: LMConfig, vocab_size: int, dropout: float | None = None, dense: bool = False) -> Sequential:
    """Embedding(V, embed) -> ``layers`` x cell(hidden=hidden) -> SoftmaxCrossEntropy(V,
    chunk=cfg.chunk, tie_weights=cfg.tie_weights), with ``rg.Dropout(p)`` after the embedding,
    between the cells and before the head when p > 0 (``rg.stacked(..., vocab=V, dropout=p)``: Zaremba et al. 2014's
    placement), traced and validated (GraphError from the cell is raised here, prefixed with its
    name). A file cell runs ``cfg.cell_source`` where it is set, else the file at its path; the
    cells get ``cfg.cell_args`` too (CellFileError for one the cell does not take or a required
    one missing: :func:`rnngraph.cellfile.bind_cell_args`).

    dropout: p, default ``cfg.dropout``. Evaluation and sampling pass 0: the same parameters
    (Dropout has none) in a graph without masks, which computes what ``forward`` computes with
    masks of ones.
    dense: True builds the dense head whatever ``cfg.chunk`` says (same parameters), so the
    network's output is the logits (T, S, V), as sampling needs; with a chunked head it is the
    hidden state the head follows."""
    factory = bind_cell_args(resolve_cell(cfg.cell, source=cfg.cell_source), cfg.cell, cfg.cell_args)
    p = cfg.dropout if dropout is None else dropout
    net = stacked(factory, cfg.layers, cfg.hidden, vocab=vocab_size, embed=cfg.embed, dropout=p,
                  tie_weights=cfg.tie_weights)
    chunk = None if dense else cfg.chunk
    if chunk is not None:  # the same layers, the head computed chunk classes at a time
        head = SoftmaxCrossEntropy(vocab_size, chunk=chunk, tie_weights=cfg.tie_weights)
        net = Sequential(*net.layers[:-1], head, name=net.name)
    try:
        net.graph  # trace and validate now, so errors surface before any data work
    except GraphError as exc:
        raise type(exc)(f"cell {cfg.cell}: {exc}") from None
    return net


def load_corpus(spec: str) -> Corpus:
    """``"austen"`` -> :meth:`Corpus.austen`; anything else is a UTF-8 text file (90/5/5 split, no word cut)."""
    return Corpus.austen() if spec == "austen" else Corpus.from_file(spec)


def canonical_corpus(spec: str) -> str:
    return spec if spec == "austen" else os.path.abspath(spec)


def build_vocab(level: str, train_text: str, max_words: int | None = None):
    """CharVocab, or WordVocab of every word type of the training text (``max_words`` None, the
    default) or of its ``max_words`` most frequent ones; both with ``<unk>`` as id 0 (see
    :mod:`rnngraph.data.vocab`). ValueError for another level or max_words < 1."""
    if level == "char":
        return CharVocab.build(train_text)
    if level == "word":
        return WordVocab.build(train_text, max_words)
    raise ValueError(f"--level must be char or word, got {level!r}")


def unit(level: str) -> str:
    return "char" if level == "char" else "word"


def perplexity(nats: float) -> float:
    """exp(mean nats per token), the exponent capped at 700 so that it stays a finite float64."""
    return math.exp(min(nats, 700.0))


def describe_loss(nats: float, level: str) -> str:
    """``2.345 bits/char`` at char level, ``123.4 perplexity`` at word level."""
    if level == "char":
        return f"{nats / LN2:.3f} bits/char"
    return f"{perplexity(nats):.1f} perplexity"


class Evaluator:
    """Mean loss of a network over a whole token array, forward only, with its own streams and
    states: S streams over contiguous chunks, states carried through each chunk from zero.
    Compiled steps are cached per (window, streams); parameters are copied in at each call.
    precision: as for :func:`rnngraph.compile` (the model's, so that it is measured as it trains)."""

    def __init__(self, net: Sequential, window: int, streams: int, dtype: str = "float32",
                 device: str = "cpu", precision: str = "fp32"):
        self.net, self.window, self.streams, self.dtype, self.device = net, window, streams, dtype, device
        self.precision = precision
        self._steps: dict[tuple[int, int], TrainingStep] = {}

    def _step(self, window: int, streams: int, params: dict) -> TrainingStep:
        key = (window, streams)
        if key not in self._steps:
            self._steps[key] = compile(self.net, window=window, streams=streams, device=self.device,
                                       dtype=self.dtype, backward=False,  # forward only: no backward kernels
                                       precision=self.precision)
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


def generate(step: TrainingStep, vocab, prime: str, length: int, temperature: float = 1.0, seed: int = 0):
    """Feed ``prime`` token by token to ``step`` (compiled for window 1, streams 1, its
    parameters set), then draw ``length`` tokens from softmax(logits / temperature), yielding
    each one's text as soon as it is drawn (``vocab.piece``: a character, or a word with the
    space before it); the pieces joined are ``vocab.decode`` of the drawn ids. A temperature
    so small that the scaled logits overflow (1e-320) draws the argmax. An empty prime
    starts from a newline. Char level never draws ``<unk>``. The step's states carry on.

    Raises ValueError (naming --temperature / --length) here, before the first token, for a
    temperature that is not a positive finite number or a negative length, and for a step whose
    output is not the vocabulary's logits (a chunked head: sample with
    ``build_network(..., dense=True)``, same parameters).
    """
    width = step.graph.node(step.graph.outputs[0]).size
    if width != len(vocab):
        raise ValueError(f"the network's output has {width} values a token, not the {len(vocab)} logits of the "
                         f"vocabulary (a chunked head outputs the hidden state): sample from the dense head, "
                         f"build_network(cfg, V, dense=True), which has the same parameters")
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
        z = logits.astype(np.float64)
        if isinstance(vocab, CharVocab):
            z[0] = -np.inf
        token = _pick(z, temperature, rng)
        yield vocab.piece(previous, token)
        previous = token
        if k + 1 < length:
            logits = step.forward(np.array([[token]])).values[out_name][0, 0]


def _pick(z: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A token drawn from softmax(z / temperature), z float64 logits (-inf: never drawn). The max
    is subtracted before dividing, so a tiny temperature (1e-320) cannot make inf - inf; where
    the probabilities are still not finite or sum to 0 (logits that overflow), the argmax."""
    with np.errstate(all="ignore"):
        p = np.exp((z - z.max()) / temperature)
        total = p.sum()
    if not (np.isfinite(total) and total > 0):
        return int(np.argmax(np.where(np.isnan(z), -np.inf, z)))
    return int(rng.choice(len(p), p=p / total))


def sample(net: Sequential, params: dict, vocab, prime: str, length: int, temperature: float = 1.0,
           seed: int = 0, dtype: str = "float32") -> str:
    """:func:`generate` on a step of ``net`` (window 1, streams 1, on the CPU) with ``params``;
    returns the generated text only (without the prime), all at once."""
    step = compile(net, window=1, streams=1, device="cpu", dtype=dtype)
    step.set_parameters(params)
    return "".join(generate(step, vocab, prime, length, temperature, seed))


__all__ = ["CheckpointError", "CellFileError", "LMConfig", "Checkpoint", "Evaluator", "build_network",
           "build_vocab", "load_corpus", "load_checkpoint", "save_checkpoint", "has_checkpoint",
           "resolve_cell", "sample", "generate", "describe_loss", "perplexity", "choose_chunk", "make_optimizer", "make_lr_schedule", "scheduled_lr",
           # and the constants, and the helpers of the command line
           "AUTO_CHUNK", "AUTO_CHUNK_ABOVE", "CONFIG_FILE", "DEFAULT_LR_FINAL", "FORMAT", "LN2", "LR_SCHEDULES", "PARAMS_FILE", "canonical_corpus", "unit"]
