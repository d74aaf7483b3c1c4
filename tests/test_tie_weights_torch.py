"""Tied embeddings against PyTorch (float64): the word_language_model example's tied model
(``nn.Embedding(V, H)``, ``nn.LSTM(H, H)``, ``nn.Linear(H, V)`` with ``decoder.weight =
encoder.weight``, cross-entropy), its parameters copied into ``rg.SoftmaxCrossEntropy(V,
tie_weights=True)``'s network: the loss and every gradient (the shared weight's is the sum torch's
autograd makes) agree to 1e-10 through rg.Reference, dense and chunked head, and a TrainingStep's
SGD update equals ``torch.optim.SGD``'s."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import rnngraph as rg  # noqa: E402

try:
    from tests.peers.convert import torch_params
except ImportError:  # tests/ not importable as a package: import peers/ directly
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers.convert import torch_params

T, S, V, H = 5, 3, 11, 4
TOL = dict(rtol=0, atol=1e-10)


def _torch_model():
    """(encoder, lstm, decoder) of the tied model, float64, seeded; one shared weight."""
    torch.manual_seed(0)
    encoder, lstm, decoder = torch.nn.Embedding(V, H).double(), torch.nn.LSTM(H, H).double(), \
        torch.nn.Linear(H, V).double()
    decoder.weight = encoder.weight  # PyTorch's word_language_model, tie_weights=True
    return encoder, lstm, decoder


def _loss(model, ids, targets):
    encoder, lstm, decoder = model
    logits = decoder(lstm(encoder(torch.tensor(ids)))[0])
    return F.cross_entropy(logits.reshape(-1, V), torch.tensor(targets).reshape(-1))


def _params(model, grad: bool = False) -> dict:
    encoder, lstm, decoder = model
    pick = (lambda p: p.grad.numpy().copy()) if grad else (lambda p: p.detach().numpy().copy())
    return {"embed.weight": pick(encoder.weight), **torch_params(lstm, "lstm", grad=grad),
            "head.W.bias": pick(decoder.bias)}


def _net(chunk=None):
    return rg.Sequential(rg.Embedding(V, H), rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(V, chunk=chunk,
                                                                                            tie_weights=True))


def _window():
    rng = np.random.default_rng(1)
    return rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))


@pytest.mark.parametrize("chunk", [None, 4])
def test_loss_and_gradients_match_torch(chunk):
    model = _torch_model()
    ids, targets = _window()
    loss = _loss(model, ids, targets)
    loss.backward()
    ref = rg.Reference(_net(chunk).graph, "float64")
    fwd = ref.forward(_params(model), {"x": ids, "y": targets})
    assert abs(fwd.loss - loss.item()) < TOL["atol"]
    ours, theirs = ref.backward(fwd).params, _params(model, grad=True)
    assert ours.keys() == theirs.keys()
    for name, g in theirs.items():
        np.testing.assert_allclose(ours[name], g, **TOL, err_msg=name)


def test_sgd_step_matches_torch():
    model = _torch_model()
    step = rg.compile(_net(), window=T, streams=S, device="cpu", dtype="float64", optimizer=rg.SGD(lr=0.5))
    step.set_parameters(_params(model))
    ids, targets = _window()
    shared = [model[0].weight, *model[1].parameters(), model[2].bias]  # the tied weight once
    optimizer = torch.optim.SGD(shared, lr=0.5)
    loss = _loss(model, ids, targets)
    loss.backward()
    optimizer.step()
    assert step.train(ids, targets) == pytest.approx(loss.item(), rel=0, abs=1e-10)
    for name, value in _params(model).items():
        np.testing.assert_allclose(step.parameters[name], value, **TOL, err_msg=name)
