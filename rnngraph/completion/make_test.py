"""Building a sentence-completion test of the MSR challenge's shape from held-out text.

The MSR Sentence Completion Challenge's data is not available here, so a test of the same shape
is made from text a model was not trained on (for Austen: the held-out novel), as follows; every
random choice comes from one ``random.Random(seed)``, so a seed gives the same test.

1. **Sentences**: :func:`split_sentences` cuts the held-out text into token lists
   (:func:`rnngraph.data.tokenize_words`, newlines dropped, a sentence ends after each ``.``,
   ``!`` or ``?`` token). Those of ``lengths`` tokens (default 10-40, ends included) and without a
   ``[`` or ``]`` token (the file form puts the candidate in brackets) are visited in a seeded
   random order until ``n`` questions are made.
2. **The blank**: one position, drawn at random among the sentence's words in the **frequency
   band**: all-letter words (an inner apostrophe allowed, as in ``don't``) whose count in the
   training text is within ``band`` (default 5 to 50 occurrences, both included; with Austen's
   ~600,000 training tokens that is a relative frequency of about 1e-5 to 1e-4, the "infrequent
   words" MSR blanked). A sentence with no such word is skipped.
3. **Four impostors**, drawn in a seeded random order from the band's other words whose training
   count is within a factor ``ratio`` (default 2) of the answer's and that do not occur in the
   sentence, keeping the first four that fit **no worse than the answer under a bigram model**:
   an interpolated Kneser-Ney bigram (:class:`rnngraph.completion.ngram.KneserNey`, order 2,
   D = 0.75) trained on the training sentences, judged by ``log P(word | previous token) +
   log P(next token | word)`` (``<s>`` before the first token, ``</s>`` after the last), which
   orders the candidates exactly as the whole sentence's bigram log-probability does. A sentence
   with fewer than four such words is skipped. So a bigram model never prefers the answer; the
   test needs a longer context.
4. **The answer's letter** is drawn uniformly from a-e; the impostors fill the other letters in
   the order drawn.

:func:`write_test` writes the machine form that :func:`rnngraph.completion.read_questions` and
:func:`rnngraph.completion.read_answers` read (``1a) tokens ... [word] ...``, tokens joined by
single spaces, which :func:`rnngraph.data.tokenize_words` splits back into the same tokens).
"""
from __future__ import annotations

import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..data import tokenize_words
from .msr import LETTERS
from .ngram import BOS, EOS, KneserNey

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*$")
_ENDS = frozenset(".!?")


@dataclass(frozen=True)
class MadeQuestion:
    """One made question: its ``number`` (from 1), the sentence's ``tokens`` (with the answer in
    place), the blank's ``position`` (index into tokens), the five ``candidates`` (a-e) and
    ``answer`` (0-4, the index of the original word among them)."""

    number: int
    tokens: tuple[str, ...]
    position: int
    candidates: tuple[str, ...]
    answer: int

    def sentence(self, k: int) -> str:
        """The sentence with candidate ``k`` (0-4) in brackets at the blank, tokens space-joined."""
        return " ".join(f"[{self.candidates[k]}]" if i == self.position else t
                        for i, t in enumerate(self.tokens))


def split_sentences(text: str) -> list[list[str]]:
    """Token lists of ``text``'s sentences (step 1 of the module docstring); empty ones dropped."""
    out, current = [], []
    for t in tokenize_words(text):
        if t == "\n":
            continue
        current.append(t)
        if t in _ENDS:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def make_questions(train, held_out, n: int, seed: int = 0, band: tuple[int, int] = (5, 50),
                   ratio: float = 2.0, lengths: tuple[int, int] = (10, 40)) -> list[MadeQuestion]:
    """Up to ``n`` questions (fewer when the held-out sentences run out; see the module
    docstring) from ``held_out`` sentences, with frequencies and the bigram model from ``train``
    sentences (both lists of token lists).

    Raises:
        ValueError: ``n`` < 1; ``band`` not 1 <= low <= high; ``ratio`` < 1; an empty training
            corpus (from the bigram model).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 1 <= band[0] <= band[1]:
        raise ValueError(f"band must be (low, high) with 1 <= low <= high, got {band}")
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    bigram = KneserNey(train, order=2)
    counts = Counter(w for s in train for w in s)
    pool = sorted(w for w, c in counts.items() if band[0] <= c <= band[1] and _WORD.match(w))
    in_band = frozenset(pool)
    rng = random.Random(seed)
    order = list(range(len(held_out)))
    rng.shuffle(order)
    questions = []
    for index in order:
        tokens = list(held_out[index])
        if not lengths[0] <= len(tokens) <= lengths[1] or "[" in tokens or "]" in tokens:
            continue
        places = [i for i, t in enumerate(tokens) if t in in_band]
        if not places:
            continue
        position = rng.choice(places)
        answer = tokens[position]
        c = counts[answer]
        similar = [w for w in pool if w != answer and c / ratio <= counts[w] <= c * ratio and w not in tokens]
        rng.shuffle(similar)
        before = tokens[position - 1] if position else BOS
        after = tokens[position + 1] if position + 1 < len(tokens) else EOS
        fit = lambda w: math.log(bigram.prob(w, [before])) + math.log(bigram.prob(after, [w]))  # noqa: E731
        bar = fit(answer)
        impostors = [w for w in similar if fit(w) >= bar][:4]
        if len(impostors) < 4:
            continue
        letter = rng.randrange(len(LETTERS))
        candidates = impostors[:letter] + [answer] + impostors[letter:]
        questions.append(MadeQuestion(len(questions) + 1, tuple(tokens), position, tuple(candidates), letter))
        if len(questions) == n:
            break
    return questions


def write_test(questions, questions_path, answers_path) -> None:
    """Write ``questions`` (:class:`MadeQuestion`) in the machine form: five lines a question to
    ``questions_path``, the right line of each to ``answers_path`` (UTF-8, newline-ended).

    Raises:
        OSError: a file cannot be written.
    """
    lines, answers = [], []
    for q in questions:
        rows = [f"{q.number}{LETTERS[k]}) {q.sentence(k)}" for k in range(len(LETTERS))]
        lines += rows
        answers.append(rows[q.answer])
    Path(questions_path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(answers_path).write_text("\n".join(answers) + "\n", encoding="utf-8")
