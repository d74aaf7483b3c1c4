"""Character and word vocabularies: text <-> int32 token ids, JSON for checkpoints.

Both vocabularies give id 0 to ``<unk>``, which stands for anything not seen in the text
they were built from (the training split).
"""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np

UNK = "<unk>"
#: A word token: letters with apostrophes only inside (``don't``), or a newline, or any
#: other single non-space character (punctuation, digits, symbols). Spaces are dropped.
_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*|\n|[^\s]")


def tokenize_words(text: str) -> list[str]:
    """Lowercase ``text`` and split it into word tokens: runs of letters (with apostrophes
    inside a word, as in ``don't``; an apostrophe elsewhere is a token of its own), each
    other non-space character (punctuation, digit, ``_``) alone, and each newline.
    Spaces and tabs separate tokens and are dropped."""
    return _TOKEN.findall(text.lower())


class _Vocab:
    kind = ""

    def __init__(self, tokens: list[str]):
        if not tokens or tokens[0] != UNK or len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique and start with '<unk>'")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.tokens == other.tokens

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} tokens)"

    def _check_ids(self, ids) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
            raise ValueError(f"ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= len(self):
            bad = ids[(ids < 0) | (ids >= len(self))][0]
            raise ValueError(f"id {bad} is out of range for a vocabulary of {len(self)} tokens")
        return ids.astype(np.int64)

    def to_json(self) -> str:
        """The vocabulary as a JSON string ``{"kind": ..., "tokens": [...]}``."""
        return json.dumps({"kind": self.kind, "tokens": self.tokens}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str):
        """Rebuild a vocabulary from :meth:`to_json` output.

        Raises:
            ValueError: malformed JSON, or JSON of another kind of vocabulary.
        """
        obj = json.loads(text)
        if not isinstance(obj, dict) or obj.get("kind") != cls.kind:
            raise ValueError(f"not a {cls.kind!r} vocabulary: kind={obj.get('kind')!r}"
                             if isinstance(obj, dict) else "vocabulary JSON must be an object")
        return cls(obj["tokens"])


class CharVocab(_Vocab):
    """Characters: id 0 is ``<unk>``, ids 1.. are the distinct characters of the text it
    was built from, sorted by code point. Unseen characters encode to 0; 0 decodes to
    U+FFFD so that ``decode`` keeps one character per id."""

    kind = "char"
    UNK_TEXT = "\ufffd"

    def __init__(self, tokens: list[str]):
        super().__init__(tokens)
        if any(len(t) != 1 for t in self.tokens[1:]):
            raise ValueError("CharVocab tokens after '<unk>' must be single characters")
        codes = np.array([ord(t) for t in self.tokens[1:]], dtype=np.int64)
        self._table = np.zeros(int(codes.max(initial=0)) + 1, dtype=np.int32)
        self._table[codes] = np.arange(1, len(self.tokens), dtype=np.int32)
        self._chars = np.array([self.UNK_TEXT] + self.tokens[1:], dtype=object)

    @classmethod
    def build(cls, text: str) -> CharVocab:
        """The vocabulary of ``text``'s characters (plus ``<unk>``)."""
        return cls([UNK] + sorted(set(text)))

    def encode(self, text: str) -> np.ndarray:
        """``text`` -> ids, int32 array of shape ``(len(text),)``; unseen characters -> 0."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        inside = codes < len(self._table)
        return np.where(inside, self._table[np.where(inside, codes, 0)], 0).astype(np.int32)

    def decode(self, ids) -> str:
        """ids (1-D integer array-like) -> text of ``len(ids)`` characters.

        Raises:
            ValueError: an id outside ``[0, len(self))`` or a non-1-D / non-integer input.
        """
        return "".join(self._chars[self._check_ids(ids)])

    def piece(self, previous: int | None, token: int) -> str:
        """The text id ``token`` adds to a decoded text (one character); ``previous`` (the id
        before it, None at the start) does not matter at character level. Both are ids in
        ``[0, len(self))``."""
        return self._chars[token]


class WordVocab(_Vocab):
    """Words of :func:`tokenize_words`: id 0 is ``<unk>``, then the tokens of the text it was
    built from (all of them, or the ``max_words`` most frequent), by descending count, ties
    broken alphabetically (so ``len(vocab) <= max_words + 1``). Newline and punctuation tokens
    count as words. Unseen tokens encode to 0, which decodes to ``"<unk>"``."""

    kind = "word"

    @classmethod
    def build(cls, text: str, max_words: int | None = 10_000) -> WordVocab:
        """The vocabulary of ``text``'s ``max_words`` most frequent tokens (plus ``<unk>``);
        ``max_words=None``: every distinct token of ``text`` (plus ``<unk>``).

        Raises:
            ValueError: ``max_words < 1``.
        """
        if max_words is not None and max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        counts = Counter(tokenize_words(text))
        counts.pop(UNK, None)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_words]
        return cls([UNK] + [w for w, _ in top])

    def encode(self, text: str) -> np.ndarray:
        """``text`` -> ids of its tokens, int32 array of shape ``(n_tokens,)``."""
        get = self.index.get
        toks = tokenize_words(text)
        return np.fromiter((get(t, 0) for t in toks), dtype=np.int32, count=len(toks))

    def decode(self, ids) -> str:
        """ids -> text: tokens joined by single spaces, with no space next to a newline.
        Lossy (case and original spacing are gone), but ``encode(decode(ids)) == ids``
        when ``ids`` holds no ``<unk>``.

        Raises:
            ValueError: an id outside ``[0, len(self))`` or a non-1-D / non-integer input.
        """
        text = " ".join(self.tokens[i] for i in self._check_ids(ids))
        return text.replace(" \n", "\n").replace("\n ", "\n")

    def piece(self, previous: int | None, token: int) -> str:
        """The text id ``token`` adds after id ``previous`` (None at the start): the word, with a
        space before it unless it starts the text or it or the previous token is a newline; so
        the pieces of ids, joined, are ``decode(ids)`` (sampling prints them one at a time).
        Both are ids in ``[0, len(self))``."""
        word = self.tokens[token]
        if previous is None or word == "\n" or self.tokens[previous] == "\n":
            return word
        return " " + word


def vocab_from_json(text: str) -> CharVocab | WordVocab:
    """Rebuild whichever vocabulary :meth:`to_json` wrote.

    Raises:
        ValueError: malformed JSON or an unknown kind.
    """
    obj = json.loads(text)
    kinds = {c.kind: c for c in (CharVocab, WordVocab)}
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind not in kinds:
        raise ValueError(f"unknown vocabulary kind {kind!r}; expected one of {sorted(kinds)}")
    return kinds[kind](obj["tokens"])
