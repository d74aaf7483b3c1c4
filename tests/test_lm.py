"""rnngraph.lm: whole-split evaluation, sampling, checkpoints saved and loaded back (tied embeddings too)
and atomic writes."""
import dataclasses
import json
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph import lm
from rnngraph.lm import checkpoint
from rnngraph.data import CharVocab

TEXT = "it is a truth universally acknowledged, that a single man in possession of a good fortune\n" * 3


def tiny_net(vocab):
    return rg.Sequential(rg.Embedding(len(vocab), 4), rg.cells.lstm(hidden=6), rg.SoftmaxCrossEntropy(len(vocab)))


@pytest.mark.parametrize("window, streams", [(8, 1), (7, 3), (100, 4), (300, 2)])
def test_evaluator_scores_every_prediction_like_one_long_window(window, streams):
    vocab = CharVocab.build(TEXT)
    net = tiny_net(vocab)
    ids = vocab.encode(TEXT)
    params = rg.init_params(net.graph, seed=3, dtype="float64")
    nats, count = lm.Evaluator(net, window, streams, dtype="float64")(params, ids)
    n = len(ids) - 1
    S = max(1, min(streams, n // min(window, n)))
    assert count == (n // S) * S  # all predictions but the < S left over
    # the same streams, each run as one window from zero states
    ref = rg.Reference(net.graph, "float64")
    L = n // S
    offsets = np.arange(S) * n // S
    idx = offsets[None, :] + np.arange(L + 1)[:, None]
    fwd = ref.forward(params, {"x": ids[idx[:-1]], "y": ids[idx[1:]]})
    assert nats == pytest.approx(fwd.loss, rel=1e-12)


def test_sample_is_seeded_and_has_the_requested_length():
    vocab = CharVocab.build(TEXT)
    net = tiny_net(vocab)
    params = rg.init_params(net.graph, seed=0, dtype="float32")
    a = lm.sample(net, params, vocab, "a truth", 25, temperature=0.5, seed=7)
    assert len(a) == 25 and "\ufffd" not in a  # never <unk> at char level
    assert lm.sample(net, params, vocab, "a truth", 25, temperature=0.5, seed=7) == a
    assert lm.sample(net, params, vocab, "", 3, seed=1) != ""
    with pytest.raises(ValueError, match="temperature"):
        lm.sample(net, params, vocab, "a", 5, temperature=0.0)


def trained(cfg: lm.LMConfig, steps: int):
    """(vocab, step): a CPU step of ``cfg``'s network (window 8, 2 streams) after ``steps`` Adam
    steps on TEXT."""
    vocab = CharVocab.build(TEXT)
    net = lm.build_network(cfg, len(vocab))
    step = rg.compile(net, window=8, streams=2, device="cpu", optimizer=rg.Adam(lr=0.01), seed=1)
    x = vocab.encode(TEXT)[:17]
    for _ in range(steps):
        step.train(np.stack([x[:8], x[8:16]], 1), np.stack([x[1:9], x[9:17]], 1))
    return vocab, step


def test_checkpoint_round_trip_is_exact(tmp_path):
    cfg = lm.LMConfig(hidden=6, embed=4, window=8, streams=2, corpus="text.txt")
    vocab, step = trained(cfg, 3)
    net = lm.build_network(cfg, len(vocab))
    lm.save_checkpoint(tmp_path, cfg, vocab, step, steps_done=3, data_index=5)
    ck = lm.load_checkpoint(tmp_path)
    assert (ck.step, ck.data_index, ck.config, ck.vocab) == (3, 5, cfg, vocab)
    other = rg.compile(net, window=8, streams=2, device="cpu", optimizer=rg.Adam(lr=0.01), seed=2)
    ck.apply(other)
    for k, v in step.parameters.items():
        np.testing.assert_array_equal(other.parameters[k], v)
    for k, v in step.state.items():
        np.testing.assert_array_equal(other.state[k], v)
    assert other.optimizer.steps == 3
    for k, v in step.optimizer.state_dict().items():
        np.testing.assert_array_equal(other.optimizer.state_dict()[k], v)
    assert sorted(os.listdir(tmp_path)) == ["config.json", "params.npz"]


def test_checkpoint_round_trip_keeps_tied_embeddings(tmp_path):
    """A tied model (LMConfig.tie_weights) saves the table once and loads back tied, into the
    dense and the chunked head; an untied network misses head.W.weight."""
    cfg = lm.LMConfig(hidden=6, embed=6, window=8, streams=2, corpus="text.txt", tie_weights=True)
    vocab, step = trained(cfg, 2)
    lm.save_checkpoint(tmp_path, cfg, vocab, step, steps_done=2, data_index=0)
    assert json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))["tie_weights"] is True
    ck = lm.load_checkpoint(tmp_path)
    assert ck.config == cfg and set(ck.params) == set(step.parameters) and "head.W.weight" not in ck.params
    for chunk in (None, 4):
        net = lm.build_network(dataclasses.replace(ck.config, chunk=chunk), len(vocab))
        assert net.graph.node("head.logits" if chunk is None else "head.loss").params[0] == "embed.weight"
        other = rg.compile(net, window=8, streams=2, device="cpu", optimizer=rg.Adam(lr=0.01), seed=2)
        ck.apply(other)
        for k, v in step.parameters.items():
            np.testing.assert_array_equal(other.parameters[k], v)
    free = rg.compile(lm.build_network(dataclasses.replace(cfg, tie_weights=False), len(vocab)), window=8,
                      streams=2, device="cpu")
    with pytest.raises(lm.CheckpointError, match=r"missing \['head\.W\.weight'\]"):
        ck.apply(free)


def test_config_without_tie_weights_loads_untied():
    d = lm.LMConfig().to_json()
    del d["tie_weights"]
    assert lm.LMConfig.from_json(d).tie_weights is False
    with pytest.raises(ValueError, match='tie_weights must be true or false, got "yes"'):
        lm.LMConfig.from_json({**d, "tie_weights": "yes"})


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "params.npz"
    target.write_bytes(b"old")

    def write(f):
        f.write(b"new, half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        checkpoint._atomic_write(target, write)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["params.npz"]
    checkpoint._atomic_write(target, lambda f: f.write(b"new"))
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["params.npz"]


def test_generate_yields_one_piece_per_token_as_sample_joins_them():
    vocab = CharVocab.build(TEXT)
    net = tiny_net(vocab)
    params = rg.init_params(net.graph, seed=0, dtype="float32")
    step = rg.compile(net, window=1, streams=1, device="cpu")
    step.set_parameters(params)
    pieces = lm.generate(step, vocab, "a truth", 25, temperature=0.5, seed=7)
    first = next(pieces)  # drawn before the others exist
    assert len(first) == 1
    assert first + "".join(pieces) == lm.sample(net, params, vocab, "a truth", 25, temperature=0.5, seed=7)
    with pytest.raises(ValueError, match="--length"):  # at the call, not at the first token
        lm.generate(step, vocab, "a", -1)


@pytest.mark.parametrize("kind", ["char", "word"])
def test_pieces_join_to_the_decoded_text(kind):
    """Word pieces carry the space before them, except at the start and next to a newline."""
    vocab = lm.build_vocab(kind, TEXT + "\nof a single\n\nman\n")
    ids = np.random.default_rng(1).integers(0, len(vocab), 200)
    ids[[0, 1, 5, 6, 7, 50]] = vocab.encode("\n")[0]  # newlines at the start, in a row, alone
    pieces = [vocab.piece(None if k == 0 else int(ids[k - 1]), int(t)) for k, t in enumerate(ids)]
    assert "".join(pieces) == vocab.decode(ids)
    if kind == "word":
        assert pieces[1:3] == ["\n", vocab.tokens[ids[2]]] and pieces[3] == " " + vocab.tokens[ids[3]]
