"""Scoring sentences by their log-probability under a language model, and choosing among candidates.

A sentence is tokenised as the checkpoint's vocabulary tokenises (``vocab.encode``: at word
level :func:`rnngraph.data.tokenize_words`, lowercased; tokens outside the vocabulary become
``<unk>``, id 0, which is scored like any other token and counted). The network reads a newline
first (the token that starts a line of the training text; ``<unk>`` where the vocabulary has
none), from zero states, then the sentence's tokens; the sentence's score is the sum of
``log p(token | the tokens before)`` over its tokens, in nats. No end-of-sentence token is
scored.

Sentences run side by side, one per stream of a step compiled for (window, streams): each group
of ``streams`` sentences is padded at the end (the padding's predictions are dropped; a
recurrent network's earlier outputs do not depend on later inputs) to whole windows, with the
states carried from window to window and zeroed between groups.

Sentences with the same tokens (e.g. candidates that differ only in words outside the
vocabulary, all ``<unk>``) are scored once and share that score. In float32 a sentence's score
moves in its last digits with the stream and group it runs in (the products' rounding depends on
where a row sits): scored apart, five candidates of the same tokens gave five different sums
(-46.7314708 to -46.7314727 nats), so a tie went unseen and the pick depended on ``--streams``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime import TrainingStep


@dataclass(frozen=True)
class SentenceScores:
    """Scores of n sentences: ``log_prob`` float64 (n,) (nats, summed over each sentence's tokens),
    ``tokens`` int64 (n,) (tokens scored) and ``unknown`` int64 (n,) (of those, ``<unk>``)."""

    log_prob: np.ndarray
    tokens: np.ndarray
    unknown: np.ndarray


def encode_sentences(vocab, sentences: list[str]) -> list[np.ndarray]:
    """Each sentence's token ids (int64 (n_i,)), as ``vocab.encode`` gives them.

    Raises:
        ValueError: a sentence with no token (empty or only spaces), naming its index.
    """
    ids = [np.asarray(vocab.encode(s), dtype=np.int64) for s in sentences]
    for k, x in enumerate(ids):
        if x.size == 0:
            raise ValueError(f"sentence {k} has no tokens: {sentences[k]!r}")
    return ids


def score_sentences(step: TrainingStep, vocab, sentences: list[str]) -> SentenceScores:
    """Total log-probability of each sentence (see the module docstring) under ``step``, a
    compiled step of a language model with its parameters set (its window and streams are the
    group shape; its states are overwritten). Sentences of the same tokens get the same score,
    bit for bit.

    Raises:
        ValueError: a sentence with no token.
    """
    ids = encode_sentences(vocab, sentences)
    start = vocab.index.get("\n", 0)
    T, S = step.window, step.streams
    first_of = {}  # a token sequence -> its place among the distinct ones (scored once)
    place = np.array([first_of.setdefault(x.tobytes(), len(first_of)) for x in ids], dtype=np.int64)
    distinct = [ids[k] for k in np.unique(place, return_index=True)[1]]
    scored = np.zeros(len(distinct), dtype=np.float64)
    for first in range(0, len(distinct), S):
        group = distinct[first:first + S]
        scored[first:first + len(group)] = _group_log_prob(step, group, start, T, S)
    log_prob = scored[place]
    tokens = np.array([x.size for x in ids], dtype=np.int64)
    unknown = np.array([int(np.count_nonzero(x == 0)) for x in ids], dtype=np.int64)
    return SentenceScores(log_prob, tokens, unknown)


def _group_log_prob(step: TrainingStep, group: list[np.ndarray], start: int, T: int, S: int) -> np.ndarray:
    """Log-probabilities (float64 (len(group),)) of up to S sentences run side by side."""
    longest = max(x.size for x in group)
    windows = -(-longest // T)
    inputs = np.full((windows * T, S), start, dtype=np.int64)
    targets = np.zeros((windows * T, S), dtype=np.int64)
    scored = np.zeros((windows * T, S), dtype=bool)
    for s, x in enumerate(group):
        inputs[1:x.size, s] = x[:-1]
        targets[:x.size, s] = x
        scored[:x.size, s] = True
    step.reset_state()
    loss_name = step.graph.loss
    nll = np.zeros((windows * T, S), dtype=np.float64)
    for w in range(windows):
        rows = slice(w * T, (w + 1) * T)
        values = step.forward(inputs[rows], targets[rows]).values
        nll[rows] = np.asarray(values[loss_name], dtype=np.float64).reshape(T, S)
    return -np.where(scored, nll, 0.0).sum(axis=0)[:len(group)]


@dataclass(frozen=True)
class Completion:
    """The choice for one question: ``choice`` (0-4), and the five candidate sentences'
    ``log_prob`` (float64 (5,)), ``tokens`` and ``unknown`` (``<unk>`` tokens; int64 (5,)).
    ``tied``: how many candidates share the highest log-probability (1: a clear choice; more:
    ``choice`` is the first of them, e.g. candidates that differ only in words outside the
    vocabulary)."""

    choice: int
    log_prob: np.ndarray
    tokens: np.ndarray
    unknown: np.ndarray
    tied: int = 1


def complete(step: TrainingStep, vocab, questions) -> list[Completion]:
    """For each question (an :class:`rnngraph.completion.Question`), the candidate whose sentence has
    the highest log-probability (the first of equals; ``tied`` counts them).

    Raises:
        ValueError: a candidate sentence with no token.
    """
    sentences = [s for q in questions for s in q.sentences]
    scores = score_sentences(step, vocab, sentences)
    out = []
    for k in range(len(questions)):
        five = slice(5 * k, 5 * k + 5)
        lp = scores.log_prob[five]
        out.append(Completion(int(np.argmax(lp)), lp, scores.tokens[five], scores.unknown[five],
                              int(np.count_nonzero(lp == lp.max()))))
    return out
