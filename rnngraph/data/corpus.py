"""Train / validation / test splits of a text corpus, and reading a text file."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from .austen import load_austen
from .errors import CorpusError

#: The five training novels in publication order; ``persuasion`` is held out.
AUSTEN_TRAIN = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey")
AUSTEN_HELD_OUT = "persuasion"
#: What joins consecutive training novels.
NOVEL_SEPARATOR = "\n\n"


def load_text_file(path: str | os.PathLike) -> str:
    """Read a UTF-8 text file (a leading BOM is dropped; CRLF and CR become ``"\\n"``).

    Raises:
        CorpusError: the file is missing, is not a regular file, is empty, or is not valid
            UTF-8 (the message names the file and the byte offset of the first bad byte).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CorpusError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise CorpusError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise CorpusError(f"{path}: file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not valid UTF-8: byte 0x{data[exc.start]:02x} at byte "
                          f"offset {exc.start} ({exc.reason})") from exc
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        raise CorpusError(f"{path}: file is empty")
    return text


@dataclass(frozen=True)
class Corpus:
    """Three disjoint, deterministic splits of a text (Python ``str``, not yet tokenized).

    Build one with :meth:`austen`, :meth:`from_text` or :meth:`from_file`.

    Attributes:
        train, valid, test: the split texts.
        name: where the text came from (``"austen"`` or a file name).
    """

    train: str
    valid: str
    test: str
    name: str = "text"

    @classmethod
    def austen(cls, cache_dir: str | os.PathLike | None = None) -> Corpus:
        """Jane Austen's novels: train = the five novels of :data:`AUSTEN_TRAIN` in that
        order (publication order: Sense and Sensibility, Pride and Prejudice, Mansfield Park,
        Emma, Northanger Abbey) joined with ``"\\n\\n"``; the sixth, ``persuasion``, is held
        out: valid = its first ``len // 2`` characters, test = the rest.

        Raises:
            FetchError, CorpusError: as :func:`~rnngraph.data.austen.load_austen`.
        """
        novels = load_austen(cache_dir)
        held = novels[AUSTEN_HELD_OUT]
        half = len(held) // 2
        train = NOVEL_SEPARATOR.join(novels[n] for n in AUSTEN_TRAIN)
        return cls(train=train, valid=held[:half], test=held[half:], name="austen")

    @classmethod
    def from_text(cls, text: str, name: str = "text") -> Corpus:
        """Split any text by characters: the first 90% is train, the next 5% valid, the
        rest test (boundaries ``len * 90 // 100`` and ``len * 95 // 100``), each boundary that
        falls inside a word moved forward to the next whitespace (within 1,000 characters), so
        that no word is cut in two (a cut word would add its halves to a word vocabulary).

        Raises:
            CorpusError: fewer than 20 characters, so that a split would be empty.
        """
        n = len(text)
        if n < 20:
            raise CorpusError(f"{name}: {n} characters is too short to split 90/5/5 "
                              "(need at least 20)")
        a = _between_words(text, n * 90 // 100, n - 2)
        b = _between_words(text, max(n * 95 // 100, a + 1), n - 1)
        return cls(train=text[:a], valid=text[a:b], test=text[b:], name=name)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Corpus:
        """:meth:`from_text` of :func:`load_text_file` ``(path)``.

        Raises:
            CorpusError: as :func:`load_text_file`, or a text too short to split.
        """
        return cls.from_text(load_text_file(path), name=os.fspath(path))

    def splits(self) -> dict[str, str]:
        """``{"train": ..., "valid": ..., "test": ...}``."""
        return {"train": self.train, "valid": self.valid, "test": self.test}

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the three splits, each followed by a NUL: equal for the same text cut
        in the same places; a checkpoint keeps it to notice a corpus file edited since."""
        h = hashlib.sha256()
        for text in (self.train, self.valid, self.test):
            h.update(text.encode("utf-8") + b"\0")
        return h.hexdigest()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v):,} chars" for k, v in self.splits().items())
        return f"Corpus({self.name!r}: {sizes})"


def _between_words(text: str, at: int, limit: int) -> int:
    """``at``, or where a word cut at ``at`` ends (the next whitespace, looked for within 1,000
    characters and before ``limit``): a split boundary that cuts no word."""
    if at <= 0 or text[at - 1].isspace() or text[at].isspace():
        return at
    for i in range(at + 1, min(at + 1000, limit + 1)):
        if text[i].isspace():
            return i
    return at
