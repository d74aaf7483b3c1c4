"""bench/lm_vs_torch.py on the CPU with tiny settings: the JSON it writes (curves, tokens/s, finite
bits/char), identical batches and starting weights for rnngraph and torch.nn.LSTM, the
evaluation layout against rnngraph.lm.Evaluator, epoch resets, merging, interruption and bad
input; at --level word, perplexity over the library's word vocabulary. The torch parts skip
without torch."""
import json
import math

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.data import CharVocab, batches
from rnngraph.lm import Evaluator, build_vocab
from script_modules import load_script


def _load():
    return load_script("bench/lm_vs_torch.py", "bench_lm_vs_torch")


lvt = _load()

TINY = ["--hidden", "16", "--embed", "8", "--window", "8", "--streams", "4", "--eval-streams", "4",
        "--device", "cpu", "--quiet"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = np.random.default_rng(3)
    words = "the of and to a in that it was her she not be as had with for you his he at by on all".split()
    lines = [" ".join(rng.choice(words, size=int(rng.integers(4, 11)))).capitalize() + "." for _ in range(300)]
    path = tmp_path_factory.mktemp("lm") / "tiny.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def run(tmp_path, text_file, *extra, name="out.json"):
    out = tmp_path / name
    rc = lvt.main(["--text", str(text_file), *TINY, "--out", str(out), *extra])
    return rc, json.loads(out.read_text())


def check_record(r, steps):
    assert r["status"] == "done" and r["stopped_by"] == "steps"
    assert r["steps"] == steps and r["tokens"] == steps * 8 * 4
    assert r["tokens_per_s"] > 0 and r["tokens_per_s_overall"] > 0 and r["train_s"] > 0
    curve = r["curve"]
    assert [p["step"] for p in curve] == list(range(0, steps + 1, 2))
    assert curve[0]["train_bpc"] is None and all(math.isfinite(p["train_bpc"]) for p in curve[1:])
    assert all(math.isfinite(p["valid_bpc"]) and p["valid_tokens"] > 0 for p in curve)
    assert [p["tokens"] for p in curve] == [p["step"] * 32 for p in curve]
    assert curve[-1]["valid_bpc"] < curve[0]["valid_bpc"]  # it learns something in a few steps
    for k in ("valid_bpc", "test_bpc"):
        assert math.isfinite(r["final"][k]) and 1.0 < r["final"][k] < 8.0
    assert len(r["first_losses"]) == min(steps, 10) and r["hashed_batches"] == steps
    assert len(r["first_batch_sha256"]) == 16 and len(r["data_sha256"]) == 16


def test_rnngraph_alone(tmp_path, text_file):
    rc, res = run(tmp_path, text_file, "--impl", "rnngraph", "--steps", "6", "--eval-every", "2")
    assert rc == 0 and res["status"] == "complete"
    r = res["impls"]["rnngraph"]
    check_record(r, 6)
    assert r["device"] == "cpu" and r["plan"] in ("wavefront", "scc-sequential")
    cfg = res["config"]
    assert cfg["layers"] == 2 and cfg["hidden"] == 16 and cfg["window"] == 8 and cfg["streams"] == 4
    assert cfg["vocab"] == len(CharVocab.build(lvt.load_corpus(lvt.build_parser().parse_args(
        ["--text", str(text_file)])).train))
    assert res["versions"]["rnngraph"] == rg.__version__ and res["date"]


def test_both_see_identical_batches_and_weights(tmp_path, text_file):
    pytest.importorskip("torch")
    rc, res = run(tmp_path, text_file, "--steps", "6", "--eval-every", "2")
    assert rc == 0 and res["status"] == "complete"
    a, b = res["impls"]["rnngraph"], res["impls"]["torch"]
    check_record(a, 6)
    check_record(b, 6)
    assert b["device"] == "cpu" and b["tf32"] is False and b["parameters"] == a["parameters"]
    assert a["first_batch_sha256"] == b["first_batch_sha256"] and a["data_sha256"] == b["data_sha256"]
    assert res["same_batches"] is True
    # same initial weights, same batches, same optimizer: the same numbers up to float32 rounding
    np.testing.assert_allclose(a["first_losses"], b["first_losses"], rtol=1e-4)
    for pa, pb in zip(a["curve"], b["curve"]):
        assert pa["valid_tokens"] == pb["valid_tokens"]  # the torch evaluation scores Evaluator's tokens
        assert pa["valid_bpc"] == pytest.approx(pb["valid_bpc"], abs=5e-3)
    for k in ("valid", "test"):
        assert a["final"][f"{k}_tokens"] == b["final"][f"{k}_tokens"]
        assert a["final"][f"{k}_bpc"] == pytest.approx(b["final"][f"{k}_bpc"], abs=5e-3)


def test_dropout_in_both_models(tmp_path, text_file):
    """--dropout P: the same placement in both (after the embedding, between the LSTM layers,
    before the head), on while training, off while evaluating."""
    pytest.importorskip("torch")
    rc, res = run(tmp_path, text_file, "--steps", "2", "--eval-every", "0", "--dropout", "0.4")
    _, plain = run(tmp_path, text_file, "--steps", "2", "--eval-every", "0", name="plain.json")
    assert rc == 0 and res["config"]["dropout"] == 0.4 and plain["config"]["dropout"] == 0.0
    a, b = res["impls"]["rnngraph"], res["impls"]["torch"]
    pa, pb = plain["impls"]["rnngraph"], plain["impls"]["torch"]
    assert a["dropout"] == b["dropout"] == 0.4 and a["status"] == b["status"] == "done"
    # step 0 is scored without dropout by both: the untrained weights give the dropout-free numbers
    assert a["curve"][0]["valid_bpc"] == pa["curve"][0]["valid_bpc"]
    assert b["curve"][0]["valid_bpc"] == pytest.approx(pa["curve"][0]["valid_bpc"], abs=1e-4)
    # training drops in both: the first losses leave the dropout-free ones (which agree)
    assert pa["first_losses"][0] == pytest.approx(pb["first_losses"][0], rel=1e-4)
    assert abs(a["first_losses"][0] - pa["first_losses"][0]) > 1e-3
    assert abs(b["first_losses"][0] - pb["first_losses"][0]) > 1e-3
    # the torch modules: nn.Dropout around nn.LSTM(dropout=P); none inside a 1-layer nn.LSTM
    args = lvt.build_parser().parse_args(["--dropout", "0.4", "--hidden", "8", "--embed", "4", "--device", "cpu"])
    m = lvt.TorchModel(args, 10)
    assert m.model.drop.p == 0.4 and m.model.lstm.dropout == 0.4 and m.model.lstm.num_layers == 2
    args.layers = 1
    assert lvt.TorchModel(args, 10).model.lstm.dropout == 0.0
    # rnngraph: the network rnngraph train --dropout builds
    from rnngraph.lm import LMConfig, build_network
    r = lvt.RnngraphModel(args, 10)
    assert str(r.net.graph) == str(build_network(LMConfig(layers=1, hidden=8, embed=4, dropout=0.4), 10).graph)
    assert lvt.main(["--text", str(text_file), "--dropout", "1", "--steps", "1"]) == 2


def _word_vocab_and_splits(text_file, max_words=None):
    """The library's word vocabulary of the tiny text (rnngraph.lm.build_vocab, as ``rnngraph train
    --level word`` builds it) and the validation split's ids under it."""
    corpus = lvt.load_corpus(lvt.build_parser().parse_args(["--text", str(text_file)]))
    vocab = build_vocab("word", corpus.train, max_words)
    return corpus, vocab, vocab.encode(corpus.valid)


def test_word_level_scores_perplexity(tmp_path, text_file):
    """--level word: the library's word vocabulary, perplexity = exp(nats per word) in *_ppl fields,
    the level and the vocabulary's size in the config, no bits/char anywhere."""
    rc, res = run(tmp_path, text_file, "--level", "word", "--impl", "rnngraph", "--steps", "6", "--eval-every", "2")
    assert rc == 0 and res["status"] == "complete"
    cfg, r = res["config"], res["impls"]["rnngraph"]
    corpus, vocab, valid_ids = _word_vocab_and_splits(text_file)
    assert cfg["level"] == "word" and cfg["max_words"] is None and cfg["target"] is None
    assert cfg["vocab"] == len(vocab) and len(vocab) != len(CharVocab.build(corpus.train))
    assert cfg["train_words"] == len(vocab.encode(corpus.train)) and cfg["valid_words"] == len(valid_ids)
    assert "train_chars" not in cfg and "bpc" not in json.dumps([cfg, r])
    assert r["status"] == "done" and r["steps"] == 6 and r["tokens"] == 6 * 8 * 4
    curve = r["curve"]
    assert [p["step"] for p in curve] == [0, 2, 4, 6] and curve[0]["train_ppl"] is None
    for v in [p["valid_ppl"] for p in curve] + [p["train_ppl"] for p in curve[1:]] + [
            r["final"]["valid_ppl"], r["final"]["test_ppl"], r["best"]["valid_ppl"], r["best_valid_ppl"]]:
        assert math.isfinite(v) and 1.0 < v < 2 * len(vocab)
    assert curve[-1]["valid_ppl"] < curve[0]["valid_ppl"]  # it learns
    assert r["final"]["valid_tokens"] > 0 and "time_to_target" not in r
    # step 0 scores the untrained weights: exp of rnngraph.lm.Evaluator's mean nats per word
    net = rg.stacked(rg.cells.lstm, 2, 16, vocab=len(vocab), embed=8)
    nats, count = Evaluator(net, 8, 4)(rg.init_params(net.graph, 0, "float32"), valid_ids)
    assert curve[0]["valid_ppl"] == pytest.approx(math.exp(nats), rel=1e-5) and curve[0]["valid_tokens"] == count
    # runs of the other level do not merge with it
    char = dict(res, config=dict(cfg, level="char"))
    (tmp_path / "char.json").write_text(json.dumps(char))
    assert lvt.main(["--merge", str(tmp_path / "out.json"), str(tmp_path / "char.json"),
                     "--out", str(tmp_path / "m.json")]) == 2


def test_word_level_header_counts_words(tmp_path, text_file, capsys):
    """The run's first line counts each split's words at word level (the corpus's repr counts its
    characters), and nothing of the kind at char level."""
    argv = ["--text", str(text_file), *[a for a in TINY if a != "--quiet"], "--impl", "rnngraph", "--steps", "1",
            "--eval-every", "0"]
    assert lvt.main([*argv, "--level", "word", "--out", str(tmp_path / "w.json")]) == 0
    cfg = json.loads((tmp_path / "w.json").read_text())["config"]
    first = capsys.readouterr().out.splitlines()[0]
    assert (f"({cfg['train_words']:,} / {cfg['valid_words']:,} / {cfg['test_words']:,} words in train / valid / "
            "test), word level") in first, first
    assert lvt.main([*argv, "--out", str(tmp_path / "c.json")]) == 0
    assert "words in train" not in capsys.readouterr().out.splitlines()[0]


def test_word_level_max_words_and_bad_flags(tmp_path, text_file, capsys):
    rc, res = run(tmp_path, text_file, "--level", "word", "--max-words", "5", "--impl", "rnngraph", "--steps", "1",
                  "--eval-every", "0", "--target", "1000")
    _, vocab, _ = _word_vocab_and_splits(text_file, 5)
    assert rc == 0 and res["config"]["vocab"] == len(vocab) == 6 and res["config"]["max_words"] == 5
    r = res["impls"]["rnngraph"]
    assert r["time_to_target"]["step"] == 0 and r["time_to_target"]["valid_ppl"] < 1000  # below at once
    capsys.readouterr()
    assert lvt.main(["--text", str(text_file), "--max-words", "5", "--steps", "1"]) == 2  # char level
    assert "needs --level word" in capsys.readouterr().err
    assert lvt.main(["--text", str(text_file), "--level", "word", "--max-words", "0", "--steps", "1"]) == 2
    assert lvt.main(["--text", str(text_file), "--level", "word", "--target", "-1", "--steps", "1"]) == 2
    assert lvt.main(["--text", str(text_file), "--level", "word", "--window", "700", "--steps", "1"]) == 2
    assert "words, fewer than one window" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        lvt.build_parser().parse_args(["--level", "sentence"])


def test_add_rare_words_replaces_a_seeded_fraction_by_new_ids():
    ids = np.arange(20_000, dtype=np.int32) % 50
    (a,), (b,) = (lvt.add_rare_words((ids,), 50, 1_000, 0.1, seed=4) for _ in range(2))
    np.testing.assert_array_equal(a, b)  # seeded
    rare = a >= 50
    assert a.dtype == np.int32 and a.max() < 1_000 and 0.09 < rare.mean() < 0.11
    np.testing.assert_array_equal(a[~rare], ids[~rare])  # the other tokens stay
    assert len(np.unique(a[rare])) > 800  # uniform over the 950 new words: about 840 distinct in 2,000 draws


def test_word_level_lsh_heads_over_a_padded_vocabulary(tmp_path, text_file, capsys):
    """--impl rnngraph-lsh,rnngraph-lsh-batch-labels --vocab-size: the rg.LSHSoftmax heads (the
    --lsh-* config, batch_labels in the second) train over the same windows as the dense head,
    score dense perplexity over all V = 300 words, and the config records both vocabularies."""
    lsh = ["--lsh-K", "2", "--lsh-L", "2", "--lsh-min-active", "10"]
    rc, res = run(tmp_path, text_file, "--level", "word", "--vocab-size", "300", "--impl",
                  "rnngraph,rnngraph-lsh,rnngraph-lsh-batch-labels", "--steps", "4", "--eval-every", "2", *lsh)
    assert rc == 0 and res["status"] == "complete"
    _, vocab, _ = _word_vocab_and_splits(text_file)
    cfg, impls = res["config"], res["impls"]
    assert cfg["vocab"] == 300 and cfg["text_vocab"] == len(vocab) and cfg["rare_fraction"] == 0.02
    assert impls["rnngraph"]["head"] == "SoftmaxCrossEntropy(300)"
    assert impls["rnngraph-lsh"]["head"] == "LSHSoftmax(300, K=2, L=2, min_active=10)"
    assert impls["rnngraph-lsh-batch-labels"]["head"] == "LSHSoftmax(300, K=2, L=2, min_active=10, batch_labels=True)"
    digests = {r["data_sha256"] for r in impls.values()}
    assert len(digests) == 1  # the same windows, rare words included
    for r in impls.values():
        assert r["status"] == "done" and r["parameters"] == impls["rnngraph"]["parameters"]
        assert all(math.isfinite(p["valid_ppl"]) for p in r["curve"]) and r["final"]["valid_ppl"] > 1
    capsys.readouterr()
    assert lvt.main(["--text", str(text_file), "--vocab-size", "300", "--steps", "1"]) == 2  # char level
    assert "--vocab-size needs --level word (it adds words), got --level char" in capsys.readouterr().err
    assert lvt.main(["--text", str(text_file), "--level", "word", "--vocab-size", "5", "--steps", "1"]) == 2
    assert "must exceed the text's vocabulary" in capsys.readouterr().err
    assert lvt.main(["--text", str(text_file), "--level", "word", "--impl", "rnngraph-lsh", "--lsh-K", "0",
                     "--steps", "1"]) == 2
    assert "--lsh-K 0 --lsh-L 50 --lsh-min-active 1500: LSHConfig.K must be a positive integer, got 0" in (
        capsys.readouterr().err)
    assert lvt.main(["--text", str(text_file), "--level", "word", "--vocab-size", "300", "--rare-fraction", "1",
                     "--steps", "1"]) == 2
    assert "--rare-fraction must be in (0, 1), got 1.0" in capsys.readouterr().err
    assert lvt.main(["--text", str(text_file), "--level", "word", "--rare-fraction", "0.1", "--steps", "1"]) == 2
    assert "--rare-fraction needs --vocab-size" in capsys.readouterr().err


def test_word_level_both_models_share_vocabulary_and_batches(tmp_path, text_file):
    pytest.importorskip("torch")
    rc, res = run(tmp_path, text_file, "--level", "word", "--steps", "4", "--eval-every", "2")
    assert rc == 0 and res["status"] == "complete" and res["same_batches"] is True
    a, b = res["impls"]["rnngraph"], res["impls"]["torch"]
    assert a["data_sha256"] == b["data_sha256"] and a["first_batch_sha256"] == b["first_batch_sha256"]
    assert a["parameters"] == b["parameters"]  # the embedding and the softmax span the same V words
    np.testing.assert_allclose(a["first_losses"], b["first_losses"], rtol=1e-4)
    for k in ("valid", "test"):
        assert a["final"][f"{k}_tokens"] == b["final"][f"{k}_tokens"]
        assert a["final"][f"{k}_ppl"] == pytest.approx(b["final"][f"{k}_ppl"], rel=1e-3)


def test_torch_native_init_differs(tmp_path, text_file):
    pytest.importorskip("torch")
    rc, res = run(tmp_path, text_file, "--steps", "2", "--eval-every", "0", "--init", "native")
    assert rc == 0
    a, b = res["impls"]["rnngraph"], res["impls"]["torch"]
    assert a["first_batch_sha256"] == b["first_batch_sha256"]
    assert a["first_losses"][0] != pytest.approx(b["first_losses"][0], rel=1e-4)
    assert [p["step"] for p in b["curve"]] == [0, 2]  # --eval-every 0: the start and the end only


def test_eval_blocks_match_evaluator():
    """The torch evaluation's windows are Evaluator's: same token count, same loss through rnngraph."""
    rng = np.random.default_rng(0)
    V = 7
    net = rg.Sequential(rg.Embedding(V, 3), rg.cells.lstm(hidden=5), rg.SoftmaxCrossEntropy(V))
    params = rg.init_params(net.graph, 1, "float32")
    for n in (2, 9, 50, 103):
        ids = rng.integers(0, V, size=n).astype(np.int32)
        want, count = Evaluator(net, 8, 4)(params, ids)
        blocks = list(lvt.eval_blocks(ids, 8, 4))
        assert sum(x.size for x, _ in blocks) == count
        total, state = 0.0, None
        for x, y in blocks:
            step = rg.compile(net, window=x.shape[0], streams=x.shape[1], device="cpu")
            step.set_parameters(params)
            if state is not None:
                step.state = state
            total += step.forward(x, y).loss * x.size
            state = step.state
        assert total / count == pytest.approx(want, rel=1e-6)


class FakeModel:
    """Records what train_model feeds it; loss falls with the steps."""
    name = "fake"

    def __init__(self, fail_at=None):
        self.batches, self.resets, self.lrs, self.fail_at = [], [], [], fail_at

    def train(self, x, y):
        if self.fail_at is not None and len(self.batches) == self.fail_at:
            raise lvt.Terminated("SIGTERM")
        self.batches.append((x.copy(), y.copy()))
        return 3.0 / (1 + len(self.batches))

    def reset(self):
        self.resets.append(len(self.batches))

    def set_lr(self, lr):
        self.lrs.append(lr)

    def snapshot(self):
        return {"n": len(self.batches)}

    def evaluate(self, ids, params=None):
        n = len(self.batches) if params is None else params["n"]
        return 2.0 / (1 + n), len(ids) - 1


def test_train_model_epochs_resets_and_schedule():
    ids = np.arange(1 + 4 * 8 * 3 + 5, dtype=np.int32) % 11  # 3 windows an epoch at T=8, S=4
    args = lvt.build_parser().parse_args(["--window", "8", "--streams", "4", "--steps", "7", "--eval-every", "3",
                                          "--target", "0.5"])
    data = {"train_ids": ids, "valid_ids": ids[:30], "test_ids": ids[:20], "valid_curve_ids": ids[:30]}
    model, rec = FakeModel(), {}
    lvt.train_model(model, args, data, rec, lambda: None, lambda s: None, 0.0)
    want = [b for b, _ in zip(batches(ids, 8, 4), range(7))]
    assert len(model.batches) == 7
    for (x, y), (wx, wy) in zip(model.batches, want):
        np.testing.assert_array_equal(x, wx)
        np.testing.assert_array_equal(y, wy)
    assert model.resets == [3, 6]  # states reset at each epoch start, not at the very first window
    assert rec["windows_per_epoch"] == 3 and rec["epochs"] == pytest.approx(7 / 3)
    assert [p["step"] for p in rec["curve"]] == [0, 3, 6, 7]
    # valid nats 2 / (1 + steps): 0.5 bits/char is first passed at the step-6 evaluation
    assert rec["time_to_target"]["step"] == 6 and rec["time_to_target"]["valid_bpc"] < 0.5
    assert rec["best"]["step"] == 7 and rec["status"] == "done"
    assert model.lrs == [] and {p["lr"] for p in rec["curve"]} == {2e-3}  # constant: never touched


def test_cosine_schedule_by_steps():
    ids = np.arange(1 + 4 * 8 * 3 + 5, dtype=np.int32) % 11
    args = lvt.build_parser().parse_args(["--window", "8", "--streams", "4", "--steps", "5", "--eval-every", "0",
                                          "--lr", "1e-2", "--lr-schedule", "cosine", "--lr-final", "0.1"])
    data = {"train_ids": ids, "valid_ids": ids[:30], "test_ids": ids[:20], "valid_curve_ids": ids[:30]}
    model, rec = FakeModel(), {}
    lvt.train_model(model, args, data, rec, lambda: None, lambda s: None, 0.0)
    low = 1e-3
    want = [low + (1e-2 - low) * 0.5 * (1 + math.cos(math.pi * k / 5)) for k in range(5)]
    np.testing.assert_allclose(model.lrs, want)
    assert model.lrs[0] == pytest.approx(1e-2) and rec["curve"][-1]["lr"] == model.lrs[-1]


def test_interrupted_run_keeps_its_curve(tmp_path, text_file, monkeypatch):
    made = []

    def fake_make(name, args, V):
        m = FakeModel(fail_at=5)
        m.name = name
        m.info = {"device": "cpu", "parameters": 1, "build_s": 0.0}
        made.append(m)
        return m

    monkeypatch.setattr(lvt, "make_model", fake_make)
    out = tmp_path / "cut.json"
    rc = lvt.main(["--text", str(text_file), *TINY, "--impl", "rnngraph", "--steps", "9", "--eval-every", "2",
                   "--out", str(out)])
    res = json.loads(out.read_text())
    assert rc == 124 and res["status"] == "interrupted"
    r = res["impls"]["rnngraph"]
    assert r["status"].startswith("interrupted") and [p["step"] for p in r["curve"]] == [0, 2, 4]


def test_merge(tmp_path, text_file):
    pytest.importorskip("torch")
    _, a = run(tmp_path, text_file, "--impl", "rnngraph", "--steps", "3", "--eval-every", "0", name="a.json")
    _, b = run(tmp_path, text_file, "--impl", "torch", "--steps", "3", "--eval-every", "0", name="b.json")
    out = tmp_path / "ab.json"
    assert lvt.main(["--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert list(res["impls"]) == ["rnngraph", "torch"] and res["status"] == "complete"
    assert res["same_batches"] is True and res["rnngraph_over_torch_tokens_per_s"] > 0
    assert lvt.main(["--merge", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--out", str(out)]) == 2


def test_bad_input(tmp_path, text_file, capsys):
    assert lvt.main(["--cache", str(tmp_path), "--device", "cpu", "--steps", "1"]) == 2  # no corpus: no apt-get
    assert "lacks" in capsys.readouterr().err
    assert lvt.main(["--text", str(tmp_path / "missing.txt"), "--steps", "1"]) == 2
    assert lvt.main(["--text", str(text_file), "--impl", "keras", "--steps", "1"]) == 2
    assert lvt.main(["--text", str(text_file), "--minutes", "0"]) == 2  # would never stop
    assert lvt.main(["--text", str(text_file), "--window", "4000", "--steps", "1"]) == 2  # too short
    with pytest.raises(SystemExit):
        lvt.build_parser().parse_args(["--eval-every", "soon"])
    assert lvt.parse_every("30s") == ("s", 30.0) and lvt.parse_every("200") == ("steps", 200.0)
    assert lvt.parse_every("0") == ("off", 0.0)


def test_one_model_failing_keeps_the_other(tmp_path, text_file, monkeypatch):
    def fake_make(name, args, V):
        if name == "rnngraph":
            raise RuntimeError("no kernel for you")
        m = FakeModel()
        m.name, m.info = name, {"device": "cpu", "parameters": 1, "build_s": 0.0}
        return m

    monkeypatch.setattr(lvt, "make_model", fake_make)
    monkeypatch.setitem(__import__("sys").modules, "torch", object())  # the fake needs no torch
    out = tmp_path / "err.json"
    rc = lvt.main(["--text", str(text_file), *TINY, "--steps", "4", "--eval-every", "2", "--out", str(out)])
    res = json.loads(out.read_text())
    assert rc == 1 and res["status"] == "partial"
    assert res["impls"]["rnngraph"]["status"] == "error" and "no kernel for you" in res["impls"]["rnngraph"]["error"]
    assert res["impls"]["torch"]["status"] == "done" and res["impls"]["torch"]["steps"] == 4
