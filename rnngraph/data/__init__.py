"""Corpora for language-model training: Jane Austen's novels or any UTF-8 text file,
deterministic splits, character and word vocabularies, and truncated-BPTT batches.

    corpus = Corpus.austen()              # or Corpus.from_file("book.txt")
    vocab = CharVocab.build(corpus.train)
    for inputs, targets in batches(vocab.encode(corpus.train), window=100, streams=32):
        ...                               # int32 arrays of shape (100, 32)

    train, test = japanese_vowels()       # UEA/UCR .ts files; read_ts reads any of them
    x, lengths = pad_series(train.series, time_major=True)   # (26, 270, 12), (270,) int64
"""

from .austen import NOVELS, TITLES, default_cache_dir, load_austen
from .batching import BatchIterator, batches
from .corpus import AUSTEN_HELD_OUT, AUSTEN_TRAIN, Corpus, load_text_file
from .errors import CorpusError, FetchError
from .rdata_db import LazyLoadDB
from .uea_aeon import aeon_ts_paths, japanese_vowels, load_aeon_dataset
from .uea_ts import TsDataset, pad_series, read_ts
from .vocab import UNK, CharVocab, WordVocab, tokenize_words, vocab_from_json

__all__ = [
    "AUSTEN_HELD_OUT", "AUSTEN_TRAIN", "BatchIterator", "CharVocab", "Corpus", "CorpusError",
    "FetchError", "LazyLoadDB", "NOVELS", "TITLES", "TsDataset", "UNK", "WordVocab",
    "aeon_ts_paths", "batches", "default_cache_dir", "japanese_vowels", "load_aeon_dataset",
    "load_austen", "load_text_file", "pad_series", "read_ts", "tokenize_words",
    "vocab_from_json",
]
