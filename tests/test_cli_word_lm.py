"""Word-level language models on the command line: the whole vocabulary by default, the chunked
head (``--chunk``) through train, eval, sample and complete, and checkpoints without its key."""
import json
import re
import shutil

import pytest

from cli_helpers import TINY, assert_one_line_error, run, train
from rnngraph import cli, lm
from rnngraph.data import Corpus, tokenize_words
from rnngraph.lm import AUTO_CHUNK, AUTO_CHUNK_ABOVE, choose_chunk, load_checkpoint

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


def test_max_words_at_char_level_is_refused_not_ignored(capsys, tmp_path, text_file):
    """It used to train a char model as if the flag were not there."""
    code, _, err = train(capsys, text_file, tmp_path / "chars", "--window", 4, "--streams", 2, "--max-words", 5,
                         steps=1)
    assert_one_line_error(code, err, "--max-words 5 keeps the most frequent word types: it needs --level word "
                                     "(the tokens are chars)")
    assert not (tmp_path / "chars").exists()


def test_a_text_without_words_names_the_file(capsys, tmp_path):
    """Regression: a word-level text of spaces and tabs only (no word, no newline) failed in the API:
    `rg.SoftmaxCrossEntropy(1): needs an integer number of classes >= 2`."""
    path = tmp_path / "spaces.txt"
    path.write_text(" \t " * 40, encoding="utf-8")
    code, _, err = train(capsys, path, tmp_path / "ck", *WORD, steps=1)
    assert_one_line_error(code, err, f"{path}: the training split has no words (a vocabulary of 1 token, <unk>; "
                                     f"need at least 2)")
    assert not (tmp_path / "ck").exists()


def test_eval_on_another_text_notes_unknown_words(capsys, tmp_path, text_file):
    """Regression: word-level eval on another corpus scored its words outside the vocabulary as
    <unk> without the note char-level eval gives. On the checkpoint's own corpus there is none
    (its test words outside the training split are <unk> by design)."""
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, *WORD, steps=1)[0] == 0
    other = tmp_path / "other.txt"
    other.write_text("she was zebra and quux of the gnu\n" * 200, encoding="utf-8")
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--corpus", other)
    assert code == 0 and "perplexity" in out, err
    share = float(re.fullmatch(r"rnngraph: note: ([\d.]+)% of the test split's words are not in the checkpoint's "
                               r"vocabulary: they are scored as <unk>\n", err).group(1))
    assert 30 < share < 40  # zebra, quux, gnu: 3 of the 9 tokens a line (the newline one)
    for corpus in ((), ("--corpus", text_file)):
        code, out, err = run(capsys, "eval", "--checkpoint", ckpt, *corpus)
        assert code == 0 and err == "", err


# ---- the chunked head -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def chunked(tmp_path_factory, text_file):
    """A word-level checkpoint of 2 steps trained with --chunk 4 (the banner printed with it)."""
    ckpt = tmp_path_factory.mktemp("chunked") / "ck"
    code = cli.main(["train", "--corpus", str(text_file), *TINY, *map(str, WORD), "--chunk", "4", "--steps", "2",
                     "--eval-every", "2", "--checkpoint", str(ckpt)])
    assert code == 0
    return ckpt


def nats(out: str) -> float:
    """The nats per word ``rnngraph eval`` prints."""
    return float(re.search(r"\(([0-9.]+) nats/word", out).group(1))


def test_choose_chunk_by_vocabulary_size():
    assert choose_chunk("auto", AUTO_CHUNK_ABOVE) is None and choose_chunk("auto", AUTO_CHUNK_ABOVE + 1) == AUTO_CHUNK
    assert choose_chunk("none", 10**6) is None and choose_chunk(None, 10**6) is None
    assert choose_chunk(4, 19) == 4
    with pytest.raises(ValueError, match="--chunk"):
        choose_chunk(0, 19)


def test_chunk_is_stored_and_a_resumed_run_keeps_or_changes_it(capsys, tmp_path, text_file):
    ck = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ck, *WORD, "--chunk", 4, steps=1)
    assert code == 0, err
    assert "softmax in chunks of 4" in out and load_checkpoint(ck).config.chunk == 4
    assert train(capsys, text_file, ck, *WORD, "--resume", steps=2)[0] == 0
    assert load_checkpoint(ck).config.chunk == 4
    assert train(capsys, text_file, ck, *WORD, "--resume", "--chunk", "none", steps=3)[0] == 0
    assert load_checkpoint(ck).config.chunk is None


def test_a_chunk_above_the_vocabulary_is_lowered_to_it_with_a_note(capsys, tmp_path, text_file):
    ck = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ck, *WORD, "--chunk", 100000, steps=1)
    assert code == 0, err
    V = len(load_checkpoint(ck).vocab)
    assert V < 100000 and load_checkpoint(ck).config.chunk == V  # one chunk of every class, stored as such
    assert f"rnngraph: note: --chunk 100,000 is more than the vocabulary's {V} words: the softmax runs in one chunk of {V}" \
        in out and f"softmax in chunks of {V})" in out
    code, out, err = run(capsys, "eval", "--checkpoint", ck, "--device", "cpu", "--streams", 2, "--chunk", V + 1)
    assert code == 0 and f"rnngraph: note: --chunk {V + 1} is more than the vocabulary's {V} words" in err, err
    assert f"softmax head in chunks of {V} of the {V} classes" in out


def test_eval_of_a_chunked_checkpoint_reports_the_dense_heads_perplexity(capsys, chunked):
    code, out, err = run(capsys, "eval", "--checkpoint", chunked, "--device", "cpu", "--streams", 2)
    assert code == 0, err
    assert "perplexity" in out
    V = len(load_checkpoint(chunked).vocab)
    assert f", softmax head in chunks of 4 of the {V} classes, checkpoint step 2)" in out  # the head it evaluated with
    dense = run(capsys, "eval", "--checkpoint", chunked, "--device", "cpu", "--streams", 2, "--chunk", "none")[1]
    assert ", dense softmax head, checkpoint step 2)" in dense and "chunks" not in dense
    assert nats(out) == pytest.approx(nats(dense), abs=2e-4)  # float32, the same parameters
    assert nats(out) > 1.0  # 2 steps: far from fitting 20 words


def test_sample_of_a_chunked_checkpoint_draws_from_the_dense_heads_logits(capsys, chunked):
    code, out, err = run(capsys, "sample", "--checkpoint", chunked, "--length", 8, "--seed", 1)
    assert code == 0, err
    ck = load_checkpoint(chunked)
    dense = lm.build_network(ck.config, len(ck.vocab), dropout=0.0, dense=True)
    assert out == lm.sample(dense, ck.params, ck.vocab, "", 8, seed=1) + "\n"
    with pytest.raises(ValueError, match="dense head"):  # the chunked network outputs the hidden state
        lm.sample(lm.build_network(ck.config, len(ck.vocab)), ck.params, ck.vocab, "", 8)


def test_sample_names_the_prime_words_outside_the_vocabulary(capsys, chunked):
    ck = load_checkpoint(chunked)
    code, out, err = run(capsys, "sample", "--checkpoint", chunked, "--prime", "She zebra was Quux zebra", "--length", 4)
    assert code == 0, err
    assert err.strip() == ("rnngraph: note: --prime: 3 of its 5 words are not in the checkpoint's vocabulary "
                           f"({len(ck.vocab)} words) and are fed to the network as <unk>: 'zebra', 'quux'")
    dense = lm.build_network(ck.config, len(ck.vocab), dropout=0.0, dense=True)
    assert out == "She zebra was Quux zebra " + lm.sample(dense, ck.params, ck.vocab, "she <unk> was <unk> <unk>", 4) + "\n"
    code, _, err = run(capsys, "sample", "--checkpoint", chunked, "--prime", "She was", "--length", 4)
    assert code == 0 and err == ""  # every word known: no note


def test_sample_takes_chunk_and_says_it_changes_nothing(capsys, chunked):
    plain = run(capsys, "sample", "--checkpoint", chunked, "--length", 6, "--seed", 2)[1]
    code, out, err = run(capsys, "sample", "--checkpoint", chunked, "--length", 6, "--seed", 2, "--chunk", 4)
    assert code == 0 and out == plain
    assert err.strip() == "rnngraph: note: --chunk changes nothing in sample: it draws from the dense head's logits (the same parameters)"
    assert cli.main(["sample", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--chunk N|auto|none changes nothing here" in text and "`rnngraph train --help`" in text


def test_complete_with_a_chunked_checkpoint_scores_as_the_dense_head(capsys, tmp_path, chunked):
    questions = tmp_path / "q.txt"
    words = ["at", "the", "and", "his", "you"]  # "at" is not in the training text
    questions.write_text("".join(f"1{letter}) she was not [{word}] to her\n" for letter, word in zip("abcde", words)),
                         encoding="utf-8")
    code, out, err = run(capsys, "complete", "--checkpoint", chunked, "--questions", questions)
    assert code == 0, err
    dense = run(capsys, "complete", "--checkpoint", chunked, "--questions", questions, "--chunk", "none")[1]
    score = r"\((-[0-9.]+) nats"
    assert out.split()[:2] == dense.split()[:2]  # the same choice
    assert float(re.search(score, out).group(1)) == pytest.approx(float(re.search(score, dense).group(1)), abs=2e-3)
    assert "outside the vocabulary: 1 of the 30 words scored" in out


def test_a_checkpoint_without_the_chunk_key_loads_as_dense(capsys, tmp_path, chunked):
    old = tmp_path / "old"
    shutil.copytree(chunked, old)
    config = json.loads((old / "config.json").read_text(encoding="utf-8"))
    del config["chunk"]
    (old / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert load_checkpoint(old).config.chunk is None
    code, out, err = run(capsys, "eval", "--checkpoint", old, "--device", "cpu", "--streams", 2)
    assert code == 0, err
    chunked_out = run(capsys, "eval", "--checkpoint", chunked, "--device", "cpu", "--streams", 2)[1]
    assert nats(out) == pytest.approx(nats(chunked_out), abs=2e-4)
    config["chunk"] = 0  # neither null nor a positive integer
    (old / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code, _, err = run(capsys, "eval", "--checkpoint", old)
    assert_one_line_error(code, err, "config.json: unreadable or corrupt config", "chunk", exit_code=1)


@pytest.mark.parametrize("command, value", [("train", "0"), ("eval", "-3"), ("complete", "many")])
def test_a_bad_chunk_is_a_usage_error_naming_the_flag(capsys, text_file, chunked, command, value):
    where = ["--corpus", text_file, "--level", "word"] if command == "train" else ["--checkpoint", chunked]
    extra = ["--questions", text_file] if command == "complete" else []
    code, _, err = run(capsys, command, *where, *extra, "--chunk", value)
    assert_one_line_error(code, err, "argument --chunk: must be a positive integer", repr(value), exit_code=2)
