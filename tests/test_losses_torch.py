"""The loss heads against the same computation in PyTorch (float64): nn.LSTM (+ nn.Linear) with
nn.MSELoss / nn.CrossEntropyLoss, its parameters copied into rnngraph; losses and parameter
gradients agree to 1e-10, through rg.Reference's BPTT and through a TrainingStep's SGD update."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rnngraph as rg  # noqa: E402

try:
    from tests.peers.convert import torch_params
except ImportError:  # tests/ not importable as a package: import peers/ directly
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers.convert import torch_params

T, S, I, H, C = 4, 3, 3, 4, 5
TOL = 1e-10


def _case(kind: str, rng):
    """(rnngraph head, the torch loss of (lstm output, linear), targets for train, head width)."""
    if kind == "mse":
        y = rng.normal(size=(T, S, H))
        return rg.MSE(), lambda out, lin: torch.nn.MSELoss()(out, torch.tensor(y)), y, None
    if kind == "mse_projected":
        y = rng.normal(size=(T, S, 2))
        return rg.MSE(2), lambda out, lin: torch.nn.MSELoss()(lin(out), torch.tensor(y)), y, 2
    if kind == "sequence_classifier":
        labels = rng.integers(0, C, size=S)
        return (rg.SequenceClassifier(C),
                lambda out, lin: torch.nn.CrossEntropyLoss()(lin(out[-1]), torch.tensor(labels)), labels, C)
    ignore = {"ignore_negative": -100, "ignore_class": 0}[kind]
    ids = rng.integers(1, C, size=(T, S))
    ids[rng.random((T, S)) < 0.4] = ignore
    ids[0, 0] = ignore
    loss = torch.nn.CrossEntropyLoss(ignore_index=ignore)
    return (rg.SoftmaxCrossEntropy(C, ignore_index=ignore),
            lambda out, lin: loss(lin(out).reshape(T * S, C), torch.tensor(ids).reshape(-1)), ids, C)


KINDS = ["mse", "mse_projected", "sequence_classifier", "ignore_negative", "ignore_class"]


def _torch(kind: str):
    """(rnngraph net, its parameters copied from torch, x, targets, torch loss, torch gradients)."""
    rng = np.random.default_rng(KINDS.index(kind))
    head, torch_loss, targets, width = _case(kind, rng)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(I, H).double()
    lin = torch.nn.Linear(H, width).double() if width else None
    x = rng.normal(size=(T, S, I))
    out, _ = lstm(torch.tensor(x))
    loss = torch_loss(out, lin)
    loss.backward()
    params, grads = torch_params(lstm, "lstm"), torch_params(lstm, "lstm", grad=True)
    if lin is not None:
        params |= {"head.W.weight": lin.weight.detach().numpy().copy(), "head.W.bias": lin.bias.detach().numpy().copy()}
        grads |= {"head.W.weight": lin.weight.grad.numpy(), "head.W.bias": lin.bias.grad.numpy()}
    net = rg.Sequential(rg.cells.lstm(hidden=H), head, input_size=I)
    return net, params, x, targets, float(loss.detach()), grads


@pytest.mark.parametrize("kind", KINDS)
def test_reference_loss_and_gradients_match_torch(kind):
    net, params, x, targets, loss, grads = _torch(kind)
    y = net.head.feed(targets, T, S, net.graph.by_name["y"].size)
    ref = rg.Reference(net.graph, "float64")
    fwd = ref.forward(params, {"x": x, "y": y})
    assert abs(fwd.loss - loss) < TOL
    ours = ref.backward(fwd).params
    assert set(ours) == set(grads)
    for name, g in grads.items():
        np.testing.assert_allclose(ours[name], g, rtol=0, atol=TOL, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_training_step_sgd_update_matches_torch(kind):
    net, params, x, targets, loss, grads = _torch(kind)
    lr = 0.1
    step = rg.compile(net, window=T, streams=S, device="cpu", dtype="float64", optimizer=rg.SGD(lr=lr))
    step.set_parameters(params)
    assert abs(step.train(x, targets) - loss) < TOL
    for name, g in grads.items():
        np.testing.assert_allclose(step.parameters[name], params[name] - lr * g, rtol=0, atol=TOL, err_msg=name)


def test_all_targets_ignored_gives_zero_loss_and_gradient():
    """PyTorch's mean over no targets is nan; rnngraph's is 0 with a zero gradient."""
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(C, ignore_index=-100), input_size=I)
    ids = np.full((T, S), -100)
    x = np.random.default_rng(0).normal(size=(T, S, I))
    logits = torch.zeros(T * S, C, requires_grad=True)
    assert torch.isnan(torch.nn.CrossEntropyLoss(ignore_index=-100)(logits, torch.tensor(ids).reshape(-1)))
    step = rg.compile(net, window=T, streams=S, device="cpu", dtype="float64", optimizer=rg.SGD(lr=1.0))
    before = {k: v.copy() for k, v in step.parameters.items()}
    assert step.train(x, ids) == 0.0
    for name, value in step.parameters.items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
