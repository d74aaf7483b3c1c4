"""Tied input and output embeddings (``rg.SoftmaxCrossEntropy(V, tie_weights=True)``; Press &
Wolf 2017, PyTorch's word_language_model ``--tied``) on the NumPy backends, float64: the tied
table's gradient is the untied network's embedding and head gradients summed (1e-12), and
central differences agree, dense and chunked head; a training step (with lengths too) moves the
one parameter once by that sum (SGD, AdamW), the clipping norm counts it once; the bad inputs.
Checkpoints of a tied language model: tests/test_lm.py."""
import numpy as np
import pytest

import rnngraph as rg
from gradcheck import check_graph
from rnngraph.errors import GraphError

T, S, V, E = 3, 2, 7, 4
TOL = dict(rtol=0, atol=1e-12)


def lm_net(tie: bool = True, chunk=None, dropout: float = 0.0) -> rg.Sequential:
    drop = [rg.Dropout(dropout)] if dropout else []
    return rg.Sequential(rg.Embedding(V, E), rg.cells.lstm(hidden=E), *drop,
                         rg.SoftmaxCrossEntropy(V, chunk=chunk, tie_weights=tie))


def untied(params: dict) -> dict:
    """The tied network's parameters for the untied one: its head weight a copy of the table."""
    return {**params, "head.W.weight": params["embed.weight"].copy()}


def copied(step) -> dict:
    """A step's parameters, copied (the CPU backend's are live)."""
    return {k: np.array(v) for k, v in step.parameters.items()}


def window(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, size=(T, S)), rng.integers(0, V, size=(T, S))


def test_the_head_reads_the_embedding_table():
    g = lm_net().graph
    assert [p.name for p in g.params] == ["embed.weight", "layer0.W.weight", "layer0.W.bias", "layer0.U.weight",
                                          "layer0.U.bias", "head.W.bias"]
    assert g.node("embed.e").params == ("embed.weight",)
    assert g.node("head.logits").params == ("embed.weight", "head.W.bias")
    assert lm_net(chunk=3).graph.node("head.loss").params == ("embed.weight", "head.W.bias")
    assert repr(rg.SoftmaxCrossEntropy(V, chunk=3, tie_weights=True)) == "SoftmaxCrossEntropy(7, chunk=3, tie_weights=True)"


@pytest.mark.parametrize("chunk", [None, 3])
def test_gradient_is_the_untied_networks_two_gradients_summed(chunk):
    tied, free = lm_net(True, chunk).graph, lm_net(False, chunk).graph
    rng = np.random.default_rng(2)
    params = rg.init_params(tied, seed=1)
    x, y = window()
    states = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(tied, S).items()}
    got, want = ({}, {})
    for g, p, out in ((tied, params, got), (free, untied(params), want)):
        ref = rg.Reference(g, "float64")
        fwd = ref.forward(p, {"x": x, "y": y}, states)
        out.update(ref.backward(fwd).params, loss=fwd.loss)
    assert got["loss"] == pytest.approx(want["loss"], rel=0, abs=1e-12)
    embedding_part, head_part = want.pop("embed.weight"), want.pop("head.W.weight")
    assert np.abs(embedding_part).max() > 1e-3 and np.abs(head_part).max() > 1e-3  # both readers count
    np.testing.assert_allclose(got.pop("embed.weight"), embedding_part + head_part, **TOL)
    for name, value in want.items():
        if name != "loss":
            np.testing.assert_allclose(got[name], value, **TOL, err_msg=name)


@pytest.mark.parametrize("chunk", [None, 3])
def test_gradient_check_against_central_differences(chunk):
    y = np.random.default_rng(3).integers(0, V, size=(T, S))
    assert check_graph(lm_net(True, chunk).graph, T=T, S=S, given={"y": y}, most=28) < 1e-6


def _steps(optimizer, chunk=None, clip=None, dropout=0.0, plan=None):
    """A tied and an untied step (CPU, float64) holding the same parameters."""
    tied, free = (rg.compile(lm_net(tie, chunk, dropout), window=T, streams=S, device="cpu", dtype="float64",
                             optimizer=optimizer(), clip_norm=clip, seed=1, plan=plan) for tie in (True, False))
    free.set_parameters(untied(copied(tied)))
    return tied, free


@pytest.mark.parametrize("chunk, lengths, plan, dropout", [
    (None, None, None, 0.0), (3, None, None, 0.0), (None, [3, 1], None, 0.0), (3, [2, 3], None, 0.0),
    (None, None, "naive", 0.0), (3, None, None, 0.3)])
def test_an_sgd_step_moves_the_table_once_by_the_summed_gradient(chunk, lengths, plan, dropout):
    """Both steps draw the same dropout masks (same seed)."""
    tied, free = _steps(lambda: rg.SGD(lr=0.5), chunk, dropout=dropout, plan=plan)
    before = copied(tied)["embed.weight"]
    x, y = window(4)
    kw = {} if lengths is None else {"lengths": np.array(lengths)}
    assert tied.train(x, y, **kw) == pytest.approx(free.train(x, y, **kw), rel=0, abs=1e-12)
    after = copied(free)
    summed = before + (after.pop("embed.weight") - before) + (after.pop("head.W.weight") - before)
    np.testing.assert_allclose(tied.parameters["embed.weight"], summed, **TOL)
    assert set(tied.parameters) == set(after) | {"embed.weight"}  # listed once, no head.W.weight
    for name, value in after.items():
        np.testing.assert_allclose(tied.parameters[name], value, **TOL, err_msg=name)


def test_adamw_updates_the_tied_parameter_once():
    lr, wd = 0.01, 0.1
    tied = rg.compile(lm_net(), window=T, streams=S, device="cpu", dtype="float64",
                      optimizer=rg.AdamW(lr=lr, weight_decay=wd), seed=1)
    p0 = copied(tied)
    x, y = window(5)
    ref = rg.Reference(tied.graph, "float64")
    g = ref.backward(ref.forward(p0, {"x": x, "y": y})).params["embed.weight"]
    tied.train(x, y)
    # torch.optim.AdamW's first step: p (1 - lr wd) - lr m^ / (sqrt(v^) + eps), m^ = g, v^ = g^2
    want = p0["embed.weight"] * (1 - lr * wd) - lr * g / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(tied.parameters["embed.weight"], want, **TOL)
    slots = [k for k in tied.optimizer.state_dict() if k != "steps"]
    assert sorted(k for k in slots if "embed" in k or "head" in k) == \
        ["m/embed.weight", "m/head.W.bias", "v/embed.weight", "v/head.W.bias"]


@pytest.mark.parametrize("chunk", [None, 3])
def test_the_clipping_norm_counts_the_tied_gradient_once(chunk):
    lr, clip = 1.0, 1e-3
    tied, free = _steps(lambda: rg.SGD(lr=lr), chunk, clip=clip)
    p0 = copied(tied)
    x, y = window(6)
    ref = rg.Reference(tied.graph, "float64")
    grads = ref.backward(ref.forward(p0, {"x": x, "y": y})).params
    norm = np.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    tied.train(x, y)
    free.train(x, y)
    assert tied.last_grad_norm == pytest.approx(norm, rel=1e-12)  # clip_grad_norm_'s factor clip / (norm + 1e-6)
    assert free.last_grad_norm != pytest.approx(norm, rel=1e-6)  # two parameters: another norm
    np.testing.assert_allclose(tied.parameters["embed.weight"],
                               p0["embed.weight"] - lr * clip / (norm + 1e-6) * grads["embed.weight"], **TOL)


# ---- bad inputs ------------------------------------------------------------------------------
def test_no_embedding_first_layer():
    with pytest.raises(GraphError, match=r"rg\.SoftmaxCrossEntropy\(7, tie_weights=True\): tie_weights needs an "
                                         r"rg\.Embedding as the first layer .* starts with lstm\(hidden=4\)"):
        rg.Sequential(rg.cells.lstm(hidden=4), rg.SoftmaxCrossEntropy(V, tie_weights=True), input_size=3)


def test_another_vocabulary():
    with pytest.raises(GraphError, match=r"rg\.Embedding\(8, 4\) has 8 tokens and the head 7 classes"):
        rg.Sequential(rg.Embedding(8, E), rg.cells.lstm(hidden=E), rg.SoftmaxCrossEntropy(V, tie_weights=True))


@pytest.mark.parametrize("chunk", [None, 3])
def test_last_layer_width_other_than_the_embedding_size(chunk):
    net = rg.Sequential(rg.Embedding(V, E), rg.cells.lstm(hidden=5), rg.SoftmaxCrossEntropy(V, chunk=chunk,
                                                                                            tie_weights=True))
    with pytest.raises(GraphError, match=r"tie_weights needs the last layer's width equal to the embedding size, "
                                         r"but 'layer0\.h_next' has width 5 and 'embed\.weight' is \(7, 4\)"):
        net.graph


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_tie_weights_must_be_a_bool(value):
    with pytest.raises(GraphError, match=rf"rg\.SoftmaxCrossEntropy\(7, tie_weights={value!r}\): tie_weights "
                                         r"must be True or False"):
        rg.SoftmaxCrossEntropy(V, tie_weights=value)


def test_heads_without_the_option_refuse_it():
    for make in (lambda: rg.MSE(V, tie_weights=True), lambda: rg.SequenceClassifier(V, tie_weights=True),
                 lambda: rg.LSHSoftmax(V, tie_weights=True)):
        with pytest.raises(TypeError, match="tie_weights"):
            make()


def test_stacked():
    net = rg.stacked(rg.cells.lstm, 2, 6, vocab=V, tie_weights=True)  # embed defaults to hidden
    assert net.head.tie_weights and "head.W.weight" not in net.graph.param_by_name
    with pytest.raises(GraphError, match=r"rg\.stacked\(tie_weights=True\): .* embed \(4\) must equal hidden \(6\)"):
        rg.stacked(rg.cells.lstm, 1, 6, vocab=V, embed=4, tie_weights=True)
    with pytest.raises(GraphError, match=r"rg\.stacked\(tie_weights=True\): .* needs vocab="):
        rg.stacked(rg.cells.lstm, 1, 6, tie_weights=True)
