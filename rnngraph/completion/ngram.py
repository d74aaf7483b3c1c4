"""An interpolated Kneser-Ney n-gram language model (order 2 or 3), the sentence-completion baseline.

The standard formulation of Chen and Goodman (1998, "An empirical study of smoothing techniques
for language modeling", section 3, interpolated Kneser-Ney) with one **fixed discount D = 0.75**
at every order (the default; ``discount`` sets another value in (0, 1)). The count-based
estimate D = n1 / (n1 + 2 n2) is not used. For a trigram model, with c the counts of the
training n-grams and N1+ the number of distinct words filling the ``.`` place::

    P3(w | u v) = max(c(u v w) - D, 0) / c(u v .) + D N1+(u v .) / c(u v .) * P2(w | v)
    P2(w | v)   = max(N1+(. v w) - D, 0) / N1+(. v .) + D N1+(v .) / N1+(. v .) * P1(w)
    P1(w)       = max(N1+(. w) - D, 0) / N1+(. .) + D N1+(types) / N1+(. .) * 1 / |V|

that is, the highest order uses counts and the lower orders use continuation counts (the number
of distinct words seen before), and the unigram is interpolated with the uniform distribution
over the predicted vocabulary V, so every word of V (``<unk>`` included) has probability > 0. A
context never seen (c(u v .) = 0, or N1+(. v .) = 0) gives its whole weight to the order below.
A bigram model (``order=2``) uses the last two lines with P2 from counts c(v w) in place of
continuation counts.

Sentences are lists of tokens (no tokenisation here); each is padded with ``order - 1`` start
tokens ``<s>`` and one end token ``</s>``. The predicted vocabulary V is the training words seen
at least ``min_count`` times, ``<unk>`` and ``</s>`` (never ``<s>``); every other word, in
training and when scoring, is mapped to ``<unk>``. Probabilities are float64; log-probabilities
are natural logarithms (nats).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

UNK, BOS, EOS = "<unk>", "<s>", "</s>"


class KneserNey:
    """An interpolated Kneser-Ney model trained on ``sentences`` (a list of token lists).

    Raises:
        ValueError: ``order`` not 2 or 3; ``discount`` outside (0, 1); ``min_count`` < 1; no
            sentence with a token (an empty corpus).
    """

    def __init__(self, sentences, order: int = 3, discount: float = 0.75, min_count: int = 1):
        if order not in (2, 3):
            raise ValueError(f"order must be 2 or 3, got {order}")
        if not 0.0 < discount < 1.0:
            raise ValueError(f"discount must be in (0, 1), got {discount}")
        if min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {min_count}")
        sentences = [list(s) for s in sentences if len(s)]
        if not sentences:
            raise ValueError("empty corpus: no sentence with a token to train on")
        self.order, self.discount = order, float(discount)
        words = Counter(w for s in sentences for w in s)
        kept = sorted(w for w, c in words.items() if c >= min_count and w not in (UNK, BOS, EOS))
        #: The predicted vocabulary, sorted words then ``<unk>`` and ``</s>``.
        self.vocab = tuple(kept) + (UNK, EOS)
        self._known = frozenset(kept)
        self.word_counts = Counter({w: c for w, c in words.items() if w in self._known})
        grams = Counter()
        for s in sentences:
            padded = self._pad(s)
            for i in range(order - 1, len(padded)):
                grams[tuple(padded[i - order + 1:i + 1])] += 1
        self._build(grams)

    def _pad(self, tokens) -> list[str]:
        return [BOS] * (self.order - 1) + [w if w in self._known else UNK for w in tokens] + [EOS]

    def _build(self, grams: Counter) -> None:
        """Tables for each order from the highest-order counts ``grams`` (tuple -> count)."""
        # Highest order: counts.  Context -> (total count, distinct followers).
        self._top, self._top_ctx = dict(grams), _contexts(grams)
        if self.order == 3:
            # Bigram level: continuation counts N1+(. v w).
            cont2 = Counter(g[1:] for g in grams)
            self._mid, self._mid_ctx = dict(cont2), _contexts(cont2)
            bigrams = cont2
        else:
            bigrams = grams
        # Unigram level: continuation counts N1+(. w) over the distinct bigrams.
        self._uni = Counter(g[1] for g in bigrams)
        self._uni_total = sum(self._uni.values())

    def _p1(self, w: str) -> float:
        D, n = self.discount, self._uni_total
        return max(self._uni.get(w, 0) - D, 0.0) / n + D * len(self._uni) / n / len(self.vocab)

    def _level(self, table, ctx_table, ctx: tuple, w: str, lower: float) -> float:
        total, types = ctx_table.get(ctx, (0, 0))
        if total == 0:
            return lower
        D = self.discount
        return max(table.get(ctx + (w,), 0) - D, 0.0) / total + D * types / total * lower

    def prob(self, word: str, context=()) -> float:
        """P(word | the last ``order - 1`` tokens of ``context``), a float in (0, 1]. ``context``
        is a token sequence (start tokens ``<s>`` are added in front when it is shorter);
        ``word`` and the context's words outside the vocabulary count as ``<unk>``; ``word`` may
        be ``</s>``.

        Raises:
            ValueError: ``word`` is ``<s>``, which is never predicted.
        """
        if word == BOS:
            raise ValueError("'<s>' is never predicted")
        w = word if word in self._known or word == EOS else UNK
        ctx = [BOS] * (self.order - 1) + [t if t in self._known or t == BOS else UNK for t in context]
        ctx = tuple(ctx[len(ctx) - (self.order - 1):])
        p = self._p1(w)
        if self.order == 3:
            p = self._level(self._mid, self._mid_ctx, ctx[1:], w, p)
        return self._level(self._top, self._top_ctx, ctx, w, p)

    def logprob(self, tokens, end: bool = True) -> float:
        """Natural log-probability of a sentence (a token list): the sum of ``log P(w | the
        order - 1 tokens before)`` over its tokens, from ``<s>`` start tokens, plus ``log
        P(</s> | ...)`` when ``end``. Words outside the vocabulary are scored as ``<unk>``."""
        tokens = list(tokens)
        targets = tokens + [EOS] if end else tokens
        return sum(math.log(self.prob(w, tokens[:i])) for i, w in enumerate(targets))

    def unknown(self, tokens) -> int:
        """How many of ``tokens`` are outside the vocabulary (scored as ``<unk>``)."""
        return sum(1 for t in tokens if t not in self._known)


def _contexts(grams) -> dict[tuple, tuple[int, int]]:
    """Context (an n-gram less its last word) -> (sum of the counts of the n-grams that extend
    it, how many distinct words extend it), from ``grams`` (tuple -> count)."""
    out = defaultdict(lambda: [0, 0])
    for g, c in grams.items():
        out[g[:-1]][0] += c
        out[g[:-1]][1] += 1
    return {k: tuple(v) for k, v in out.items()}
