"""rnngraph's ``lstm``/``gru`` cells and LM head against PyTorch: outputs, final states and
every gradient (parameters, initial states, input), with weights copied from seeded torch modules."""
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

torch.set_num_threads(1)
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-10)}  # values are O(1)
I, H = 3, 5


def leaf(a):
    return torch.tensor(a, requires_grad=True)


def assert_close(got: dict, want: dict, dtype: str):
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("T", [1, 7])
@pytest.mark.parametrize("S", [1, 5])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_matches_torch(kind, layers, S, T, dtype):
    torch.manual_seed(layers + 2 * S + 3 * T)
    mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(I, H, num_layers=layers).to(getattr(torch, dtype))
    rng = np.random.default_rng(0)
    rand = lambda *shape: rng.uniform(-1, 1, shape).astype(dtype)  # noqa: E731
    names = ["h", "c"] if kind == "lstm" else ["h"]
    x, dy = rand(T, S, I), rand(T, S, H)
    s0, ds = ({n: rand(layers, S, H) for n in names} for _ in range(2))

    tx, ts0 = leaf(x), {n: leaf(a) for n, a in s0.items()}
    y, tsT = mod(tx, (ts0["h"], ts0["c"]) if kind == "lstm" else ts0["h"])
    tsT = dict(zip(names, tsT if kind == "lstm" else [tsT]))
    torch.autograd.backward([y, *tsT.values()], [torch.tensor(dy), *(torch.tensor(ds[n]) for n in names)])

    g = rg.Sequential(*[rg.cells.STANDARD[kind](hidden=H) for _ in range(layers)], input_size=I).graph
    ref = rg.Reference(g, dtype=dtype)
    per_layer = lambda d: {f"layer{k}.{n}": a[k:k + 1] for n, a in d.items() for k in range(layers)}  # noqa: E731
    fwd = ref.forward(torch_params(mod, kind), {"x": x}, per_layer(s0))
    grads = ref.backward(fwd, d_outputs={g.outputs[0]: dy}, d_final_states=per_layer(ds))

    for v in fwd.values.values():
        assert v.dtype == np.dtype(dtype)
    assert_close({"y": fwd.values[g.outputs[0]], **fwd.final_states},
                 {"y": y.detach().numpy(), **per_layer({n: a.detach().numpy() for n, a in tsT.items()})}, dtype)
    assert_close({**grads.params, **grads.states, "x": grads.inputs["x"]},
                 {**torch_params(mod, kind, grad=True), **per_layer({n: a.grad.numpy() for n, a in ts0.items()}),
                  "x": tx.grad.numpy()}, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_language_model_matches_torch(dtype):
    V, E, T, S = 11, 4, 7, 3
    torch.manual_seed(0)
    tdt = getattr(torch, dtype)
    emb, lstm, head = torch.nn.Embedding(V, E).to(tdt), torch.nn.LSTM(E, H).to(tdt), torch.nn.Linear(H, V).to(tdt)
    rng = np.random.default_rng(1)
    ids, targets = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    h0, c0 = leaf(rng.uniform(-1, 1, (1, S, H)).astype(dtype)), leaf(rng.uniform(-1, 1, (1, S, H)).astype(dtype))
    logits = head(lstm(emb(torch.tensor(ids)), (h0, c0))[0])
    loss = F.cross_entropy(logits.reshape(-1, V), torch.tensor(targets).reshape(-1))
    loss.backward()

    g = rg.Sequential(rg.Embedding(V, E), rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(V)).graph
    ref = rg.Reference(g, dtype=dtype)
    params = {"embed.weight": emb.weight.detach().numpy(), **torch_params(lstm, "lstm"),
              "head.W.weight": head.weight.detach().numpy(), "head.W.bias": head.bias.detach().numpy()}
    fwd = ref.forward(params, {"x": ids, "y": targets}, {"layer0.h": h0.detach().numpy(), "layer0.c": c0.detach().numpy()})
    grads = ref.backward(fwd)

    np.testing.assert_allclose(fwd.loss, loss.item(), **TOL[dtype])
    np.testing.assert_allclose(fwd.values[g.outputs[0]], logits.detach().numpy(), **TOL[dtype])
    assert_close({**grads.params, **grads.states},
                 {"embed.weight": emb.weight.grad.numpy(), **torch_params(lstm, "lstm", grad=True),
                  "head.W.weight": head.weight.grad.numpy(), "head.W.bias": head.bias.grad.numpy(),
                  "layer0.h": h0.grad.numpy(), "layer0.c": c0.grad.numpy()}, dtype)
    assert grads.inputs == {}
