"""Corpora for language-model training: Jane Austen's novels or any UTF-8 text file,
deterministic splits, character and word vocabularies, and truncated-BPTT batches; UEA/UCR
time series; extreme-classification sets (the XC Repository's format, and a synthetic one).

    corpus = Corpus.austen()              # or Corpus.from_file("book.txt")
    vocab = CharVocab.build(corpus.train)
    for inputs, targets in batches(vocab.encode(corpus.train), window=100, streams=32):
        ...                               # int32 arrays of shape (100, 32)

    train, test = japanese_vowels()       # UEA/UCR .ts files; read_ts reads any of them
    x, lengths = pad_series(train.series, time_major=True)   # (26, 270, 12), (270,) int64

    data = read_xc("amazon_train.txt")    # Extreme Classification Repository text format (CSR)
    synth = synthetic_xc(10_000, 5_000, 20_000, seed=0)      # the same shape, planted structure
"""

from .austen import NOVELS, TITLES, default_cache_dir, load_austen
from .batching import BatchIterator, batches
from .corpus import AUSTEN_HELD_OUT, AUSTEN_TRAIN, Corpus, load_text_file
from .errors import CorpusError, FetchError
from .rdata_db import LazyLoadDB
from .uea_aeon import aeon_ts_paths, japanese_vowels, load_aeon_dataset
from .uea_ts import TsDataset, pad_series, read_ts
from .vocab import UNK, CharVocab, WordVocab, tokenize_words, vocab_from_json
from .xc import XCDataset, read_xc, write_xc
from .xc_synthetic import SyntheticXC, synthetic_xc

__all__ = [
    "AUSTEN_HELD_OUT", "AUSTEN_TRAIN", "BatchIterator", "CharVocab", "Corpus", "CorpusError",
    "FetchError", "LazyLoadDB", "NOVELS", "TITLES", "TsDataset", "UNK", "WordVocab",
    "aeon_ts_paths", "batches", "default_cache_dir", "japanese_vowels", "load_aeon_dataset",
    "load_austen", "load_text_file", "pad_series", "read_ts", "tokenize_words",
    "vocab_from_json", "XCDataset", "read_xc", "write_xc", "SyntheticXC", "synthetic_xc",
]
