"""Corpora for language-model training: Jane Austen's novels or any UTF-8 text file,
deterministic splits, character and word vocabularies, and truncated-BPTT batches.

    corpus = Corpus.austen()              # or Corpus.from_file("book.txt")
    vocab = CharVocab.build(corpus.train)
    for inputs, targets in batches(vocab.encode(corpus.train), window=100, streams=32):
        ...                               # int32 arrays of shape (100, 32)
"""

from .austen import NOVELS, TITLES, default_cache_dir, load_austen
from .batching import BatchIterator, batches
from .corpus import AUSTEN_HELD_OUT, AUSTEN_TRAIN, Corpus, load_text_file
from .errors import CorpusError, FetchError
from .rdata_db import LazyLoadDB
from .vocab import UNK, CharVocab, WordVocab, tokenize_words, vocab_from_json

__all__ = [
    "AUSTEN_HELD_OUT", "AUSTEN_TRAIN", "BatchIterator", "CharVocab", "Corpus", "CorpusError",
    "FetchError", "LazyLoadDB", "NOVELS", "TITLES", "UNK", "WordVocab", "batches",
    "default_cache_dir", "load_austen", "load_text_file", "tokenize_words", "vocab_from_json",
]
