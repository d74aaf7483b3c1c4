"""``abs(z)`` and ``z ** k`` in a cell, built from existing ops (relu(z) + relu(-z); products),
against the same tanh RNN in PyTorch (float64, the NumPy backend): outputs, final state, input
and parameter gradients agree to 1e-12, abs's gradient at exactly 0 included (PyTorch's 0)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rnngraph as rg  # noqa: E402

T, S, I, H = 3, 2, 2, 3
TOL = 1e-12


def _powers(z):
    return z ** 1 - 0.5 * z ** 2 + 0.25 * z ** 3 - 0.125 * z ** np.int64(4) + 0.1 * z ** 2.0


@rg.cell
def powered(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = rg.tanh(_powers(z))
    return h_next, {"h": h_next}


@rg.cell
def absolute(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = rg.tanh(abs(z) - 0.5)
    return h_next, {"h": h_next}


def _torch_run(params: dict, x: np.ndarray, dy: np.ndarray, expression):
    """The tanh RNN ``h' = tanh(expression(W x + b_W + U h + b_U))`` from h = 0: (y, dx, dparams, z
    of every step), by torch.autograd."""
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    xt = torch.tensor(x, requires_grad=True)
    h, ys, zs = torch.zeros(S, H, dtype=torch.float64), [], []
    for t in range(T):
        z = xt[t] @ p["layer0.W.weight"].T + p["layer0.W.bias"] + h @ p["layer0.U.weight"].T + p["layer0.U.bias"]
        h = torch.tanh(expression(z))
        ys.append(h)
        zs.append(z.detach().numpy())
    y = torch.stack(ys)
    (y * torch.tensor(dy)).sum().backward()
    return y.detach().numpy(), xt.grad.numpy(), {k: v.grad.numpy() for k, v in p.items()}, np.stack(zs)


def _compare(cell, expression, x, params=None):
    """Run ``cell`` (hidden H) through rg.compile_rnn on the CPU in float64 and PyTorch; assert
    they agree. Returns PyTorch's pre-activations z (T, S, H)."""
    rnn = rg.compile_rnn(rg.Sequential(cell(hidden=H), input_size=I), device="cpu", dtype="float64", seed=3)
    if params is not None:
        rnn.set_parameters(params)
    dy = np.random.default_rng(4).normal(size=(T, S, H))
    y, h_T = rnn.forward(x)
    dx, _, dparams = rnn.backward(dy)
    ty, tdx, tdparams, z = _torch_run(rnn.parameters, x, dy, expression)
    np.testing.assert_allclose(y, ty, rtol=0, atol=TOL)
    np.testing.assert_allclose(h_T["layer0.h"][-1], ty[-1], rtol=0, atol=TOL)
    np.testing.assert_allclose(dx, tdx, rtol=0, atol=TOL)
    assert sorted(dparams) == sorted(tdparams)
    for name, g in dparams.items():
        np.testing.assert_allclose(g, tdparams[name], rtol=0, atol=TOL, err_msg=name)
    assert np.abs(tdx).max() > 0.1  # the gradients compared are not all zero
    return z


def test_integer_powers_match_torch():
    """z ** 1 .. z ** 4 (NumPy's and float exponents too) are products of z: 6 mul nodes, no more."""
    x = np.random.default_rng(2).normal(size=(T, S, I))
    z = _compare(powered, _powers, x)
    assert np.abs(z).max() > 0.5  # the powers differ from z itself
    graph = rg.Sequential(powered(hidden=H), input_size=I).graph
    assert sum(n.op == "mul" for n in graph.nodes) == 6  # z**2 (1), z**3 (2), z**4 (2), z**2.0 (1)


def test_abs_matches_torch_with_its_gradient_at_zero():
    """abs(z) = relu(z) + relu(-z) is exact and has PyTorch's gradient 0 at z = 0: with x[0] = 0,
    h0 = 0 and the two biases of unit 0 cancelling, z is exactly 0 there at t = 0 (a gradient of
    +-1 there would change d W.bias[0], d U.bias[0] and dx[1:])."""
    x = np.random.default_rng(2).normal(size=(T, S, I))
    x[0] = 0.0
    rnn = rg.compile_rnn(rg.Sequential(absolute(hidden=H), input_size=I), device="cpu", dtype="float64", seed=3)
    params = dict(rnn.parameters)
    params["layer0.W.bias"], params["layer0.U.bias"] = params["layer0.W.bias"].copy(), params["layer0.U.bias"].copy()
    params["layer0.W.bias"][0], params["layer0.U.bias"][0] = 0.25, -0.25
    z = _compare(absolute, lambda z: torch.abs(z) - 0.5, x, params)
    assert (z[0, :, 0] == 0).all() and (z[1:] != 0).all() and (z < 0).any() and (z > 0).any()
