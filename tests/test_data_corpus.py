"""Splits, text files, vocabularies and truncated-BPTT batches."""

import json
import subprocess
import string

import numpy as np
import pytest

from rnngraph.data import (AUSTEN_HELD_OUT, AUSTEN_TRAIN, NOVELS, CharVocab, Corpus,
                           CorpusError, WordVocab, batches, load_text_file, tokenize_words,
                           vocab_from_json)

RNG_SEED = 1234


def random_text(n, seed=RNG_SEED):
    rng = np.random.default_rng(seed)
    alphabet = np.array(list(string.ascii_letters + " .,;'\n"))
    return "".join(rng.choice(alphabet, size=n))


# ---- text files ------------------------------------------------------------------------
def test_missing_file_is_named(tmp_path):
    path = tmp_path / "nope.txt"
    with pytest.raises(CorpusError, match=r"nope\.txt: no such file"):
        load_text_file(path)


def test_empty_file_is_named(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(CorpusError, match=r"empty\.txt: file is empty"):
        load_text_file(path)
    path.write_bytes(b"\xef\xbb\xbf")  # a BOM alone is empty too
    with pytest.raises(CorpusError, match=r"empty\.txt: file is empty"):
        load_text_file(path)


def test_non_utf8_names_file_and_byte_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("naïve".encode("utf-8") + b" caf\xe9 au lait")
    with pytest.raises(CorpusError, match=r"latin1\.txt: not valid UTF-8: byte 0xe9 at byte "
                                          r"offset 10") as err:
        load_text_file(path)
    assert isinstance(err.value, ValueError)


def test_directory_is_rejected(tmp_path):
    with pytest.raises(CorpusError, match="not a regular file"):
        load_text_file(tmp_path)


def test_bom_and_line_endings_are_normalised(tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\rthree\n")
    assert load_text_file(path) == "one\ntwo\nthree\n"


# ---- splits ----------------------------------------------------------------------------
def test_from_text_splits_90_5_5_disjoint_and_deterministic():
    text = random_text(10_001)
    c = Corpus.from_text(text)
    # 9000 and 9500, each moved to the next whitespace when it cuts a word (random letters: long words)
    assert 9000 <= len(c.train) < 9100 and 9500 <= len(c.train) + len(c.valid) < 9600
    assert c.train + c.valid + c.test == text
    assert c.valid[0].isspace() and c.test[0].isspace()
    assert Corpus.from_text(text) == c
    no_spaces = "x" * 10_001
    assert len(Corpus.from_text(no_spaces).train) == 9000  # nowhere to move: by characters


def test_from_text_cuts_no_word():
    """A word across the 90 % boundary ("raining" cut as "rain" | "ing") stays whole in train."""
    text = "a " * 44 + "raining" + " b" * 5  # 105 characters: the 90 % boundary, 94, inside the word
    c = Corpus.from_text(text)
    assert c.train.endswith("raining") and c.valid.startswith(" b")


def test_from_text_too_short():
    with pytest.raises(CorpusError, match="too short"):
        Corpus.from_text("x" * 19)
    assert len(Corpus.from_text("x" * 20).valid) == 1


def test_from_file_errors_name_the_file(tmp_path):
    with pytest.raises(CorpusError, match=r"missing\.txt"):
        Corpus.from_file(tmp_path / "missing.txt")
    path = tmp_path / "book.txt"
    path.write_text(random_text(1000), encoding="utf-8")
    assert Corpus.from_file(path).name == str(path)


@pytest.fixture
def austen_cache(tmp_path):
    """A cache directory holding six small stand-in novels (no download)."""
    for i, name in enumerate(NOVELS):
        text = f"{name.upper()}\n\n" + random_text(3000 + 100 * i, seed=i)
        (tmp_path / f"{name}.txt").write_text(text, encoding="utf-8", newline="")
    return tmp_path


def test_austen_splits(austen_cache):
    novels = {n: (austen_cache / f"{n}.txt").read_text(encoding="utf-8") for n in NOVELS}
    c = Corpus.austen(austen_cache)
    assert AUSTEN_TRAIN == ("sensesensibility", "prideprejudice", "mansfieldpark", "emma",
                            "northangerabbey") and AUSTEN_HELD_OUT == "persuasion"
    assert c.train == "\n\n".join(novels[n] for n in AUSTEN_TRAIN)
    held = novels["persuasion"]
    assert c.valid + c.test == held and len(c.valid) == len(held) // 2
    assert "PERSUASION" not in c.train and "PERSUASION" in c.valid
    assert Corpus.austen(austen_cache) == c


# ---- vocabularies ----------------------------------------------------------------------
def test_char_vocab_roundtrip_and_unk():
    v = CharVocab.build("hello world\n")
    assert v.tokens == ["<unk>", "\n", " ", "d", "e", "h", "l", "o", "r", "w"]
    ids = v.encode("hello world\n")
    assert ids.dtype == np.int32 and ids.shape == (12,)
    assert v.decode(ids) == "hello world\n"
    unseen = v.encode("hex€")
    assert list(unseen) == [v.index["h"], v.index["e"], 0, 0]
    assert v.decode(unseen) == "he\ufffd\ufffd"
    assert v.encode("").shape == (0,) and v.decode([]) == ""


def test_char_vocab_json_and_errors():
    v = CharVocab.build("abc£\n")
    again = CharVocab.from_json(v.to_json())
    assert again == v and len(again) == 6
    assert vocab_from_json(v.to_json()) == v
    with pytest.raises(ValueError, match="out of range"):
        v.decode([6])
    with pytest.raises(ValueError, match="not a 'word' vocabulary"):
        WordVocab.from_json(v.to_json())
    with pytest.raises(ValueError, match="unknown vocabulary kind"):
        vocab_from_json(json.dumps({"kind": "bpe", "tokens": []}))


def test_tokenizer():
    assert tokenize_words("Don't stop, Mr. Darcy!\n'Tis 1811--") == [
        "don't", "stop", ",", "mr", ".", "darcy", "!", "\n", "'", "tis", "1", "8", "1", "1",
        "-", "-"]


def test_word_vocab_cap_order_and_unk():
    text = "b b b a a c c d e\n"
    v = WordVocab.build(text, max_words=3)
    assert v.tokens == ["<unk>", "b", "a", "c"]  # a and c tie at 2: alphabetical
    assert list(v.encode("A d b")) == [2, 0, 1]
    assert v.decode(v.encode("A d b")) == "a <unk> b"
    assert len(WordVocab.build(text)) == 7  # 6 distinct tokens (newline too) + <unk>


def test_word_vocab_default_cap_is_10000():
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}"
             for i in range(12_000)]
    v = WordVocab.build(" ".join(words))
    assert len(v) == 10_001 and v.tokens[0] == "<unk>"
    assert v.tokens[1:] == sorted(set(words))[:10_000]  # all counts 1: alphabetical


def test_word_vocab_roundtrip():
    text = "It is a truth universally acknowledged,\nthat a single man -- don't ask."
    v = WordVocab.build(text)
    ids = v.encode(text)
    assert ids.dtype == np.int32 and (ids != 0).all()
    assert v.decode(ids) == ("it is a truth universally acknowledged ,\nthat a single man - - "
                             "don't ask .")
    assert np.array_equal(v.encode(v.decode(ids)), ids)
    assert WordVocab.from_json(v.to_json()) == v and vocab_from_json(v.to_json()) == v


# ---- batches ---------------------------------------------------------------------------
def test_batch_shapes_offsets_and_shift():
    n, T, S = 1001, 7, 4
    ids = np.arange(n) * 3  # token value = 3 * position
    it = batches(ids, T, S)
    assert list(it.offsets) == [s * (n - 1) // S for s in range(S)] == [0, 250, 500, 750]
    assert it.windows_per_epoch == 250 // 7
    for j in range(3):
        x, y = next(it)
        assert x.shape == y.shape == (T, S) and x.dtype == y.dtype == np.int32
        assert np.array_equal(x, ids[it.offsets[None, :] + j * T + np.arange(T)[:, None]])
        assert np.array_equal(y, x + 3)  # targets are the next tokens


def test_windows_continue_each_stream_and_cycle():
    ids = np.arange(101, dtype=np.int64)
    it = batches(ids, window=5, streams=2)  # streams of 50 tokens: 10 windows an epoch
    windows = [next(it) for _ in range(21)]
    for (x0, y0), (x1, _) in zip(windows[:9], windows[1:10]):
        assert np.array_equal(x1[0], y0[-1])  # the next window starts where this one ended
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(windows[:11], windows[10:]))
    assert it.index == 21 and it.epoch == 2


def test_resume_equals_skipping():
    ids = np.random.default_rng(RNG_SEED).integers(0, 50, size=2000)
    skipped = batches(ids, 8, 3)
    for _ in range(37):
        next(skipped)
    resumed = batches(ids, 8, 3, start=37)
    for _ in range(200):  # crosses epoch boundaries (83 windows an epoch)
        a, b = next(skipped), next(resumed)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_epochs_limit():
    ids = np.arange(41)
    assert len(list(batches(ids, 4, 2, epochs=1))) == 5
    assert len(list(batches(ids, 4, 2, epochs=2, start=3))) == 7


def test_batch_errors():
    with pytest.raises(CorpusError, match=r"shorter than one window per stream.*at least 41"):
        batches(np.arange(40), 10, 4)
    assert batches(np.arange(41), 10, 4).windows_per_epoch == 1
    with pytest.raises(CorpusError, match="window and streams must be >= 1"):
        batches(np.arange(100), 0, 2)
    with pytest.raises(CorpusError, match="window and streams must be >= 1"):
        batches(np.arange(100), 2, 0)
    with pytest.raises(CorpusError, match="1-D integer"):
        batches(np.zeros(100), 2, 2)
    with pytest.raises(CorpusError, match="start must be"):
        batches(np.arange(100), 2, 2, start=-1)


def test_austen_fetch_from_a_relative_cache_dir_passes_paths_valid_in_the_cache(tmp_path, monkeypatch):
    """Regression: ``load_austen(".cache/rg")`` ran ``dpkg-deb -x .cache/rg/<pkg>.deb .cache/rg/deb``
    inside .cache/rg, where those relative paths name nothing ("failed to read archive"). Every
    path the commands get must exist from the directory they run in."""
    from rnngraph.data import austen
    from rnngraph.data.errors import FetchError
    (tmp_path / "rel").mkdir()
    (tmp_path / "rel" / f"{austen.PACKAGE}_1.0.0-1_all.deb").write_bytes(b"not a deb")
    monkeypatch.chdir(tmp_path)
    seen = []

    def run(cmd, cwd):
        seen.append(cmd)
        assert (cwd / cmd[2]).exists(), (cmd, cwd)  # the archive, as the command in cwd sees it
        return subprocess.CompletedProcess(cmd, 2, "", "stopped by the test")
    monkeypatch.setattr(austen, "_run", run)
    with pytest.raises(FetchError, match="dpkg-deb -x .*failed"):
        austen.load_austen("rel")
    assert seen and seen[0][0] == "dpkg-deb"


def test_austen_fetch_says_so_and_without_apt_get_names_the_files_and_corpus(tmp_path, monkeypatch, capsys):
    """The one-time download is announced on stderr; a machine without apt-get is told the six
    file names to supply and that --corpus trains on a file of one's own."""
    from rnngraph.data import austen
    from rnngraph.data.errors import FetchError
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no apt-get, no dpkg-deb
    with pytest.raises(FetchError, match="apt-get not found") as info:
        austen.load_austen(tmp_path / "c")
    assert all(f"{n}.txt" in str(info.value) for n in austen.NOVELS) and "--corpus FILE" in str(info.value)
    assert "fetching the Austen corpus: apt-get download r-cran-janeaustenr" in capsys.readouterr().err
