"""Word-level language models on the command line: the whole vocabulary by default, the chunked
head (``--chunk``) through train, eval, sample and complete, and checkpoints without its key."""
import json

import numpy as np
import pytest

from cli_helpers import TINY, assert_one_line_error, run, train
from rnngraph.data import Corpus, tokenize_words
from rnngraph.lm import load_checkpoint

#: Word-level flags of the tiny runs (4 timesteps x 2 streams).
WORD = ["--level", "word", "--window", 4, "--streams", 2]


def word_types(text_file) -> set:
    return set(tokenize_words(Corpus.from_file(text_file).train))


def test_word_level_keeps_every_word_type_by_default(capsys, tmp_path, text_file):
    code, out, err = train(capsys, text_file, tmp_path / "all", *WORD, steps=1)
    assert code == 0, err
    ck = load_checkpoint(tmp_path / "all")
    types = word_types(text_file)
    assert ck.config.max_words is None
    assert len(ck.vocab) == len(types) + 1  # every type, and <unk> (id 0) for words seen only later
    assert set(ck.vocab.tokens[1:]) == types and ck.vocab.tokens[0] == "<unk>"
    assert f"vocab {len(types) + 1:,}" in out


def test_max_words_still_caps_the_vocabulary(capsys, tmp_path, text_file):
    code, _, err = train(capsys, text_file, tmp_path / "cap", *WORD, "--max-words", 5, steps=1)
    assert code == 0, err
    assert len(load_checkpoint(tmp_path / "cap").vocab) == 6
    code, _, err = train(capsys, text_file, tmp_path / "cap", *WORD, "--max-words", 7, "--resume", steps=2)
    assert_one_line_error(code, err, "trained with --max-words 5, not 7")
