"""rnngraph.torch.RNN on the CPU (the NumPy backend): an nn.Module whose gradients come from the
compiled backward through a torch.autograd.Function.

- gradcheck in float64 of x, every initial state and every parameter, through the outputs and
  the final states, for the standard cells and a custom cell with a delay-2 state;
- nn.LSTM / nn.GRU copied with ``RNN.from_torch``: outputs, final states and every gradient, in
  float64 (1e-10) and float32 (1e-5), 1 and 2 layers, (T, B, I), batch_first and unbatched;
- the plan cache over (T, B), two forwards before one backward, a sine regression and a sequence
  classification trained with torch.optim, no_grad, clip_grad_norm_, state dicts, .double(),
  dropout in train and eval mode, torch.compile around the layer, and bad input (nn.LSTM's
  keyword arguments included) named in its error.

Sizes are tiny (H 2 to 16, T <= 30): the whole file runs in well under a minute on 2 cores.
"""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import rnngraph as rg  # noqa: E402
from rnngraph.torch import RNN  # noqa: E402

F64 = torch.float64


@rg.cell
def gated_delay2(x, h: rg.State, m: rg.State(delay=2), *, hidden: int):
    """A gated cell with two states, one read two timesteps back:
    f = sigmoid(F x + G h[t-1]), h' = f * h[t-1] + (1 - f) * tanh(W x + U h[t-1] + V m[t-2]),
    m' = f * h'. States: h (layers, B, H), m (2 * layers, B, H), each layer's rows oldest first."""
    f = rg.sigmoid(rg.linear(x, hidden, name="F") + rg.linear(h, hidden, bias=False, name="G"))
    cand = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U")
                   + rg.linear(m, hidden, bias=False, name="V"))
    h_next = f * h + (1 - f) * cand
    return h_next, {"h": h_next, "m": f * h_next}


# ---------------------------------------------------------------------------------- helpers
def _flat(out) -> tuple:
    """(y, h_T) -> (y, *states): a tuple of tensors."""
    y, h_T = out
    return (y, *(h_T if isinstance(h_T, tuple) else (h_T,)))


def _h0(m: RNN, B: int | None, dtype=F64, scale: float = 0.5) -> list:
    """Random initial states in the cell's state order: (layers * delay, B, H) each (no B: unbatched)."""
    shapes = [(m.layers * d, *(() if B is None else (B,)), m.hidden) for _, d in m.state_args]
    return [scale * torch.randn(s, dtype=dtype) for s in shapes]


def _pack(h0: list):
    """Initial states as forward takes them: one tensor for a one-state cell, else a tuple."""
    return h0[0] if len(h0) == 1 else tuple(h0)


def _loss(y, h_T):
    """A scalar that reads the outputs (nonlinearly) and every final state, each with other weights."""
    w = torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype)
    states = h_T if isinstance(h_T, tuple) else (h_T,)
    return (y * w).sum() + 0.5 * (y ** 2).sum() + sum((k + 2) * (s * w).sum() for k, s in enumerate(states))


def _close(got, want, tol: float, what: str) -> None:
    """|got - want| <= tol * max(1, max |want|)."""
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    scale = max(1.0, want.abs().max().item())
    err = (got - want).abs().max().item()
    assert err <= tol * scale, f"{what}: max error {err:.3g} (largest value {scale:.3g}, tolerance {tol:g})"


def _torch_name(ours: str) -> str:
    """Our parameter attribute -> nn.LSTM's: layer1_W_weight -> weight_ih_l1."""
    names = {"W_weight": "weight_ih", "U_weight": "weight_hh", "W_bias": "bias_ih", "U_bias": "bias_hh"}
    layer, local = ours.split("_", 1)
    return f"{names[local]}_l{layer[len('layer'):]}"


def _copy(m: RNN, **kw) -> RNN:
    """A fresh module of m's configuration (kw overrides) holding m's weights."""
    cfg = dict(cell=m.cell_name, hidden=m.hidden, layers=m.layers, input_size=m.input_size, dropout=m.dropout,
               batch_first=m.batch_first)
    cfg.update(kw)
    out = RNN(**cfg).to(next(m.parameters()).dtype)
    out.load_state_dict(m.state_dict())
    return out


# ---------------------------------------------------------------------------------- gradcheck
GRADCHECK = [("lstm", 1, 3), ("lstm", 2, 2), ("gru", 2, 3), ("peephole_lstm", 1, 3), ("peephole_lstm", 2, 2),
             ("layernorm_lstm", 1, 3), ("layernorm_lstm", 2, 2), ("gated_delay2", 1, 3), ("gated_delay2", 2, 2)]


@pytest.mark.parametrize("cell, layers, hidden", GRADCHECK, ids=[f"{c}-{n}l-h{h}" for c, n, h in GRADCHECK])
def test_gradcheck_float64_inputs_states_and_parameters(cell, layers, hidden):
    """Finite differences of (y, *h_T) against the compiled backward, for x, every h0 and every
    parameter (the module reads its parameters' memory, so gradcheck's perturbations reach it)."""
    torch.manual_seed(0)
    m = RNN(gated_delay2 if cell == "gated_delay2" else cell, hidden, layers, input_size=2).double()
    x = torch.randn(3, 2, 2, dtype=F64, requires_grad=True)
    h0 = [h.requires_grad_() for h in _h0(m, 2)]
    params = list(m.parameters())
    assert len(params) == len(m.graph.params) and all(p.dtype == F64 for p in params)
    n = len(h0)

    def f(x, *rest):
        return _flat(m(x, _pack(list(rest[:n]))))

    out = f(x, *h0)
    assert len(out) == 1 + n and out[0].shape == (3, 2, hidden)
    assert torch.autograd.gradcheck(f, (x, *h0, *params), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gradcheck_unbatched_batch_first_and_without_h0():
    """The layouts' transposes and squeezes are differentiated too; h0=None means zeros."""
    torch.manual_seed(1)
    m = RNN("gru", 3, 2, input_size=2, batch_first=True).double()
    params = list(m.parameters())
    xb = torch.randn(2, 3, 2, dtype=F64, requires_grad=True)      # (B, T, I)
    assert torch.autograd.gradcheck(lambda x, *p: _flat(m(x)), (xb, *params), eps=1e-6, atol=1e-8)
    xu = torch.randn(3, 2, dtype=F64, requires_grad=True)         # (T, I)
    h0 = (0.5 * torch.randn(2, 3, dtype=F64)).requires_grad_()    # (layers, H)
    assert m(xu, h0)[0].shape == (3, 3) and m(xu, h0)[1].shape == (2, 3)
    assert torch.autograd.gradcheck(lambda x, h, *p: _flat(m(x, h)), (xu, h0, *params), eps=1e-6, atol=1e-8)
    # h0=None is zeros
    y_none, h_none = m(xb)
    y_zero, h_zero = m(xb, torch.zeros(2, 2, 3, dtype=F64))
    assert torch.equal(y_none, y_zero) and torch.equal(h_none, h_zero)


# ---------------------------------------------------------------------------------- against nn.LSTM / nn.GRU
TORCH_CASES = [(kind, layers, dtype, layout) for kind in ("lstm", "gru") for layers in (1, 2)
               for dtype in ("float64", "float32") for layout in ("tbi", "batch_first", "unbatched")]


@pytest.mark.parametrize("kind, layers, dtype, layout", TORCH_CASES, ids=["-".join(map(str, c)) for c in TORCH_CASES])
def test_from_torch_equals_torch_outputs_states_and_every_gradient(kind, layers, dtype, layout):
    torch.manual_seed(2)
    dt, tol = (torch.float64, 1e-10) if dtype == "float64" else (torch.float32, 1e-5)
    T, B, I, H = 6, 3, 4, 5
    ref = getattr(nn, kind.upper())(I, H, layers, batch_first=layout == "batch_first").to(dt)
    ours = RNN.from_torch(ref)
    assert ours.batch_first == (layout == "batch_first") and next(ours.parameters()).dtype == dt
    shape = {"tbi": (T, B, I), "batch_first": (B, T, I), "unbatched": (T, I)}[layout]
    x = torch.randn(shape, dtype=dt)
    h0 = _h0(ours, None if layout == "unbatched" else B, dt)
    results = []
    for module in (ref, ours):
        xs = x.clone().requires_grad_()
        hs = [h.clone().requires_grad_() for h in h0]
        y, h_T = module(xs, _pack(hs))
        params = dict(module.named_parameters())
        grads = torch.autograd.grad(_loss(y, h_T), [xs, *hs, *params.values()])
        results.append((y, h_T, grads[:1 + len(hs)], dict(zip(params, grads[1 + len(hs):]))))
    (y_ref, hT_ref, g_ref, gp_ref), (y, h_T, g, gp) = results
    assert y.shape == y_ref.shape == (*shape[:-1], H)
    _close(y, y_ref, tol, "y")
    for k, (a, b) in enumerate(zip(_flat((y, h_T))[1:], _flat((y_ref, hT_ref))[1:])):
        _close(a, b, tol, f"h_T[{k}]")
    for what, a, b in zip(["x", *[f"h0[{k}]" for k in range(len(h0))]], g, g_ref):
        _close(a, b, tol, f"d {what}")
    assert len(gp) == len(gp_ref) == 4 * layers
    for name, grad in gp.items():
        _close(grad, gp_ref[_torch_name(name)], tol, f"d {name} (torch's {_torch_name(name)})")
    assert gp["layer0_U_weight"].abs().max() > 1e-2  # not trivially zero


@pytest.mark.parametrize("used", ["c_T", "h_T", "y"])
def test_a_loss_of_one_output_alone_equals_torch(used):
    """Outputs the loss does not use reach the backward as None (not zero tensors): the
    gradients of a loss of c_T alone (y unused), h_T alone or y alone match nn.LSTM's, 2 layers."""
    torch.manual_seed(4)
    ref = nn.LSTM(3, 4, 2).double()
    ours = RNN.from_torch(ref)
    x = torch.randn(5, 2, 3, dtype=F64)
    grads = []
    for module in (ref, ours):
        y, (h_T, c_T) = module(x)
        out = {"c_T": c_T, "h_T": h_T, "y": y}[used]
        loss = (out * torch.arange(out.numel(), dtype=F64).reshape(out.shape)).sum()
        params = dict(module.named_parameters())
        grads.append(dict(zip(params, torch.autograd.grad(loss, list(params.values())))))
    assert len(grads[1]) == 8
    for name, grad in grads[1].items():
        _close(grad, grads[0][_torch_name(name)], 1e-10, f"{used}: d {name}")
    assert max(g.abs().max() for g in grads[1].values()) > 1e-3


# ---------------------------------------------------------------------------------- plans, shapes
def test_varying_T_and_B_on_one_module_equals_fresh_modules_and_caches_lru():
    torch.manual_seed(3)
    m = RNN("lstm", 4, 2, input_size=3, cache_size=2).double()
    shapes = [(5, 3), (2, 1), (7, 4), (5, 3), (1, 2)]
    for T, B in shapes:
        fresh = _copy(m)
        x = torch.randn(T, B, 3, dtype=F64)
        h0 = _h0(m, B)
        out = []
        for module in (m, fresh):
            module.zero_grad()
            xs = x.clone().requires_grad_()
            y, h_T = module(xs, _pack(h0))
            _loss(y, h_T).backward()
            out.append((y, *h_T, xs.grad, *[p.grad for p in module.parameters()]))
        for k, (a, b) in enumerate(zip(*out)):
            assert torch.equal(a, b), f"(T, B) = {(T, B)}: result {k} differs from a fresh module's"
    rnn = m.compiled(torch.device("cpu"), F64)
    # (5, 3) left the cache when (7, 4) came, and came back compiled anew
    assert rnn.cached_plans == [(5, 3, True), (1, 2, True)]
    with torch.no_grad():
        m(torch.randn(5, 3, 3, dtype=F64))
    assert rnn.cached_plans == [(1, 2, True), (5, 3, True)]  # the plan with a backward served inference


def test_two_forwards_then_one_backward_add_their_gradients():
    """Each autograd node keeps its own forward's activations (like calling nn.LSTM twice)."""
    torch.manual_seed(4)
    m = RNN("gru", 3, 2, input_size=2).double()
    x1, x2 = torch.randn(4, 2, 2, dtype=F64), torch.randn(4, 2, 2, dtype=F64)  # one plan for both
    separate = []
    for x, s in ((x1, 1.0), (x2, -3.0)):
        m.zero_grad()
        (s * _loss(*m(x))).backward()
        separate.append([p.grad.clone() for p in m.parameters()])
    m.zero_grad()
    (_loss(*m(x1)) - 3.0 * _loss(*m(x2))).backward()
    for p, a, b in zip(m.parameters(), *separate):
        _close(p.grad, a + b, 1e-12, "a gradient of two forwards")


# ---------------------------------------------------------------------------------- training tasks
def test_sine_regression_with_adam_reaches_a_low_mse():
    """Predict sin(t + dt) from sin(t) at every step: RNN("lstm", 12) + nn.Linear(12, 1), MSE,
    Adam(lr=2e-2), 150 steps of B=16 windows of T=30. Measured with this seed: the first batch's
    MSE 0.479 (about 0.5, the sine's variance), a fresh batch's after step 150 0.0027 (0.002 to
    0.003 with other seeds); asserted: > 0.2 at first, < 0.01 at the end."""
    torch.manual_seed(5)
    T, B, dt = 30, 16, 0.3

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = RNN("lstm", 12, input_size=1), nn.Linear(12, 1)

        def forward(self, x):                 # x (T, B, 1) -> (T, B, 1)
            return self.head(self.rnn(x)[0])

    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)

    def batch():
        phase = 2 * np.pi * torch.rand(1, B, 1)
        t = phase + dt * torch.arange(T + 1, dtype=torch.float32).view(-1, 1, 1)
        s = torch.sin(t)
        return s[:-1], s[1:]                  # (T, B, 1) each

    losses = []
    for _ in range(150):
        x, y = batch()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 0.2
    with torch.no_grad():
        x, y = batch()
        final = nn.functional.mse_loss(model(x), y).item()
    assert final < 0.01, f"MSE {final:.4f} after 150 steps (from {losses[0]:.3f})"


def test_sequence_classification_from_the_last_output():
    """Is a sequence's sum positive? RNN("gru", 8) over (T=10, B, 1), nn.Linear on y[T-1],
    cross-entropy, Adam(lr=2e-2), 120 steps of B=64. Measured with this seed on 512 held-out
    sequences: accuracy 0.35 before training, 0.945 (cross-entropy 0.12) after (0.945 to 0.98 with
    other seeds); asserted: < 0.75 before, > 0.9 and < 0.3 after."""
    torch.manual_seed(6)
    rnn, head = RNN("gru", 8, input_size=1), nn.Linear(8, 2)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=2e-2)

    def data(B):
        x = torch.randn(10, B, 1)
        return x, (x.sum(dim=(0, 2)) > 0).long()  # (T, B, 1), (B,)

    def logits(x):
        return head(rnn(x)[0][-1])             # (B, 2)

    x_test, y_test = data(512)
    with torch.no_grad():
        acc0 = (logits(x_test).argmax(1) == y_test).float().mean().item()
    for _ in range(120):
        x, y = data(64)
        loss = nn.functional.cross_entropy(logits(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (logits(x_test).argmax(1) == y_test).float().mean().item()
        test_loss = nn.functional.cross_entropy(logits(x_test), y_test).item()
    assert acc0 < 0.75
    assert acc > 0.9 and test_loss < 0.3, f"accuracy {acc:.3f}, loss {test_loss:.3f} (accuracy at start {acc0:.3f})"


# ---------------------------------------------------------------------------------- torch interplay
def test_double_backward_is_refused_not_silently_dropped():
    """create_graph=True (a gradient penalty) raised nothing and returned gradients that did not
    require grad, so the penalty's term fell out of the loss's gradient unseen."""
    torch.manual_seed(0)
    ref = nn.LSTM(3, 4, 1).double()
    m = RNN.from_torch(ref)
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    y = m(x)[0]
    with pytest.raises(RuntimeError, match="first-order gradients only"):
        torch.autograd.grad(y.sum(), x, create_graph=True)
    dx, = torch.autograd.grad(m(x)[0].sum(), x)  # first order: as before
    want, = torch.autograd.grad(ref(x)[0].sum(), x)
    torch.testing.assert_close(dx, want, rtol=0, atol=1e-12)


def test_no_grad_takes_the_inference_path():
    torch.manual_seed(7)
    m = RNN("lstm", 3, 2, input_size=2)
    x = torch.randn(4, 2, 2)
    with torch.no_grad():
        y, (h, c) = m(x)
    rnn = m.compiled(x.device, x.dtype)
    assert rnn.last is None and rnn.cached_plans == [(4, 2, False)]
    assert y.grad_fn is None and not y.requires_grad
    y2, (h2, c2) = m(x)                       # with grad: a plan with a backward replaces it
    assert rnn.cached_plans == [(4, 2, True)] and y2.requires_grad
    assert torch.equal(y, y2) and torch.equal(h, h2) and torch.equal(c, c2)
    m.requires_grad_(False)                   # nothing needs a gradient: inference too
    y3, _ = m(torch.randn(3, 1, 2))
    assert y3.grad_fn is None and rnn.cached_plans[-1] == (3, 1, False)


def test_clip_grad_norm():
    torch.manual_seed(8)
    m = RNN("lstm", 4, 2, input_size=3)
    _loss(*m(torch.randn(5, 2, 3))).backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in m.parameters())).item()
    assert norm > 0.5
    total = nn.utils.clip_grad_norm_(m.parameters(), max_norm=0.5)
    assert abs(total.item() - norm) < 1e-5 * norm
    after = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in m.parameters())).item()
    assert abs(after - 0.5) < 1e-4


def test_state_dict_round_trip_and_optimizer_steps_are_seen_in_place():
    torch.manual_seed(9)
    a = RNN("peephole_lstm", 4, 2, input_size=3)
    b = RNN("peephole_lstm", 4, 2, input_size=3)       # other initial weights
    x = torch.randn(5, 2, 3)
    assert set(a.state_dict()) == {p.name.replace(".", "_") for p in a.graph.params}
    assert not torch.allclose(a(x)[0], b(x)[0])
    b.load_state_dict(a.state_dict())
    ya, (ha, ca) = a(x)
    yb, (hb, cb) = b(x)
    assert torch.equal(ya, yb) and torch.equal(ha, hb) and torch.equal(ca, cb)
    # the compiled program reads the parameters' memory: an optimizer step changes the output
    rnn = b.compiled(x.device, x.dtype)
    assert np.shares_memory(rnn.parameters["layer1.w_co"], b.layer1_w_co.detach().numpy())
    opt = torch.optim.SGD(b.parameters(), lr=0.5)
    _loss(yb, (hb, cb)).backward()
    opt.step()
    assert b.compiled(x.device, x.dtype) is rnn
    with torch.no_grad():
        assert not torch.allclose(b(x)[0], ya)
        assert torch.equal(b(x)[0], _copy(b)(x)[0])


def test_an_nn_lstm_state_dict_names_load_torch_state_dict():
    """load_state_dict given an nn.LSTM's state dict says how to load it (torch would list every key
    as missing and unexpected) and changes nothing; load_torch_state_dict then takes it."""
    torch.manual_seed(11)
    lstm, rnn = nn.LSTM(3, 4), RNN("lstm", 4, 1, input_size=3)
    before = {k: v.clone() for k, v in rnn.state_dict().items()}
    with pytest.raises(RuntimeError, match=r"nn.LSTM / nn.GRU state dict .*rnn.load_torch_state_dict\(state\)"):
        rnn.load_state_dict(lstm.state_dict())
    assert all(torch.equal(v, before[k]) for k, v in rnn.state_dict().items())
    rnn.load_torch_state_dict(lstm.state_dict())
    x = torch.randn(5, 2, 3)
    torch.testing.assert_close(rnn(x)[0], lstm(x)[0], rtol=1e-5, atol=1e-6)


def test_double_runs_float64_and_matches_float32():
    torch.manual_seed(10)
    m = RNN("layernorm_lstm", 4, 2, input_size=3)
    x = torch.randn(5, 2, 3)
    y32, _ = m(x)
    m.double()
    xd = x.double().requires_grad_()
    y64, (h, c) = m(xd)
    assert y64.dtype == h.dtype == c.dtype == F64
    _close(y64, y32.double(), 1e-5, "float64 against float32")
    _loss(y64, (h, c)).backward()
    assert xd.grad.dtype == F64 and all(p.grad.dtype == F64 for p in m.parameters())
    assert m.compiled(xd.device, F64).dtype == "float64"
    with pytest.raises(TypeError, match="dtype"):
        m(x)  # float32 x into the float64 module


def test_dropout_train_mode_draws_masks_and_eval_mode_is_dropout_free():
    torch.manual_seed(11)
    T, B, I, H, p = 4, 3, 2, 3, 0.5
    m = RNN("lstm", H, 2, input_size=I, dropout=p).double()
    plain = _copy(m, dropout=0.0)
    x = torch.randn(T, B, I, dtype=F64)
    m.train()
    y1, y2 = m(x)[0], m(x)[0]
    assert not torch.allclose(y1, y2)
    # train mode: layer 1 reads layer 0's output times torch's bernoulli mask / (1 - p)
    torch.manual_seed(123)
    y, (h, c) = m(x)
    torch.manual_seed(123)
    mask = torch.empty(T, B, H, dtype=F64).bernoulli_(1 - p).div_(1 - p)
    l0, l1 = RNN("lstm", H, input_size=I).double(), RNN("lstm", H).double()
    sd = m.state_dict()
    l0.load_state_dict({k: v for k, v in sd.items() if k.startswith("layer0_")})
    l1.load_state_dict({k.replace("layer1_", "layer0_"): v for k, v in sd.items() if k.startswith("layer1_")})
    y0, (h0_, c0_) = l0(x)
    y_manual, (h1_, c1_) = l1(y0 * mask)
    _close(y, y_manual, 1e-12, "train-mode output against masks applied by hand")
    _close(c, torch.cat([c0_, c1_]), 1e-12, "train-mode final c")
    # with the generator reseeded each call the masks repeat: gradcheck through the dropout
    params = list(m.parameters())

    def f(x, *ps):
        torch.manual_seed(7)
        return _flat(m(x))
    assert torch.autograd.gradcheck(f, (x.clone().requires_grad_(), *params), eps=1e-6, atol=1e-8)
    m.eval()
    e1, (eh, ec) = m(x)
    e2, _ = m(x)
    assert torch.equal(e1, e2)
    py, (ph, pc) = plain(x)
    _close(e1, py, 1e-14, "eval mode against a dropout-free module")
    _close(ec, pc, 1e-14, "eval mode final c")


# ---------------------------------------------------------------------------------- bad input
def _bad_cases():
    """(name, call(lstm module, gru module), exception type, a fragment of its message)."""
    x = torch.randn(4, 2, 3)
    h = torch.zeros(2, 2, 5)
    return [
        ("x-1d", lambda m, g: m(torch.randn(3)), ValueError, r"x: expected \(T, B, 3\)"),
        ("x-4d", lambda m, g: m(torch.randn(4, 2, 1, 3)), ValueError, r"got shape \(4, 2, 1, 3\)"),
        ("x-size", lambda m, g: m(torch.randn(4, 2, 7)), ValueError, "x: expected input size 3"),
        ("x-float64", lambda m, g: m(x.double()), TypeError, "x has dtype torch.float64"),
        ("x-int", lambda m, g: m(torch.ones(4, 2, 3, dtype=torch.int64)), TypeError, "floating-point"),
        ("x-numpy", lambda m, g: m(np.zeros((4, 2, 3), np.float32)), TypeError, "x must be a torch.Tensor"),
        ("x-list", lambda m, g: m([[0.0, 1.0, 2.0]]), TypeError, "x must be a torch.Tensor, got list"),
        ("h0-shape", lambda m, g: m(x, (h, torch.zeros(2, 3, 5))), ValueError, r"h0 state 'c'.*\(2, 2, 5\)"),
        ("h0-batch", lambda m, g: m(x, (torch.zeros(2, 1, 5), h)), ValueError, r"h0 state 'h'.*\(2, 1, 5\)"),
        ("h0-length", lambda m, g: m(x, (h,)), ValueError,
         r"h0: expected a tuple of 2 state\(s\) \['h', 'c'\], got a tuple of 1"),  # (said "got tuple")
        ("h0-single", lambda m, g: m(x, h), ValueError, "h0: expected a tuple of 2"),
        ("h0-dtype", lambda m, g: m(x, (h, h.double())), ValueError, "h0 state 'c' is torch.float64"),
        ("h0-gru-tuple", lambda m, g: g(x, (h, h)), ValueError, "h0: expected a tensor of 1 state"),
        ("h0-not-tensor", lambda m, g: m(x, (h, np.zeros((2, 2, 5)))), ValueError, "h0 state 'c'.*ndarray"),
        ("x-empty", lambda m, g: m(torch.randn(0, 2, 3)), rg.ShapeError, r"at least one timestep, got 0 in shape \(0, 2, 3\)"),
        # unbatched x (T, I) takes unbatched states (layers, H); the message shows the shape given
        ("h0-unbatched-3d", lambda m, g: m(x[:, 0], (h, h)), ValueError,
         r"h0 state 'h': unbatched x \(T, 3\) takes states of shape \(2, 5\), got \(2, 2, 5\)"),
        ("h0-unbatched-size", lambda m, g: g(x[:, 0], torch.zeros(2, 4)), ValueError,
         r"h0 state 'h': unbatched .* shape \(2, 5\), got \(2, 4\)"),
        ("h0-unbatched-numpy", lambda m, g: m(x[:, 0], (h[:, 0], np.zeros((2, 5)))), ValueError,
         "h0 state 'c': unbatched .* got ndarray"),
        ("h0-unbatched-length", lambda m, g: m(x[:, 0], (h[:, 0],)), ValueError, "h0: expected a tuple of 2"),
        ("h0-unbatched-dict", lambda m, g: m(x[:, 0], {"h": h[:, 0]}), ValueError, "h0: expected a tuple .* got dict"),
    ]


@pytest.mark.parametrize("case", _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_bad_input_is_named(case):
    torch.manual_seed(12)
    _, call, exc, message = case
    with pytest.raises(exc, match=message):
        call(RNN("lstm", 5, 2, input_size=3), RNN("gru", 5, 2, input_size=3))


def test_non_contiguous_x_equals_its_contiguous_copy():
    torch.manual_seed(13)
    m = RNN("lstm", 4, 2, input_size=3).double()
    base = torch.randn(2, 5, 3, dtype=F64)
    x = base.transpose(0, 1)                        # (T, B, I), not contiguous
    assert not x.is_contiguous()
    xs, xc = x.clone().requires_grad_(), x.contiguous().requires_grad_()
    assert not xs.is_contiguous()
    outs = []
    for xx in (xs, xc):
        m.zero_grad()
        y, h_T = m(xx)
        _loss(y, h_T).backward()
        outs.append((y, *h_T, xx.grad, *[p.grad.clone() for p in m.parameters()]))
    for a, b in zip(*outs):
        assert torch.equal(a, b)
    y_every_other, _ = m(torch.randn(8, 2, 6, dtype=F64)[::2, :, ::2])  # strided slices
    assert y_every_other.shape == (4, 2, 4)


def test_backward_twice_needs_retain_graph():
    torch.manual_seed(14)
    m = RNN("gru", 3, 2, input_size=2).double()
    x = torch.randn(4, 2, 2, dtype=F64, requires_grad=True)
    loss = m(x)[0].sum()  # a sum saves no tensors: only the RNN's node can object
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    loss = _loss(*m(x))
    inputs = [x, *m.parameters()]
    g1 = torch.autograd.grad(loss, inputs, retain_graph=True)
    g2 = torch.autograd.grad(loss, inputs, retain_graph=True)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))
    assert g1[0].abs().max() > 1e-3


def test_in_place_change_of_a_parameter_before_backward_is_caught():
    """The backward reads the parameters' memory, so torch's version check must guard it."""
    torch.manual_seed(15)
    m = RNN("lstm", 3, 1, input_size=2)
    loss = _loss(*m(torch.randn(4, 2, 2)))
    with torch.no_grad():
        m.layer0_U_weight.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_constructor_and_weight_loading_errors_are_named():
    from rnngraph.torch import RNN
    with pytest.raises(TypeError, match="@rg.cell function"):
        RNN(torch.nn.LSTM, 4)
    with pytest.raises(ValueError, match="no standard cell 'lstn'"):
        RNN("lstn", 4)
    with pytest.raises(ValueError, match="dropout must be a number"):
        RNN("lstm", 4, layers=2, dropout=1.5)
    with pytest.raises(ValueError, match="plan must be"):
        RNN("lstm", 4, plan="fast")
    assert RNN("lstm", np.int64(4)).hidden == 4
    # printed in the constructor's order and keywords (it printed nn.LSTM's (input, hidden) order,
    # RNN(lstm, 3, 5, layers=1), which read back as 5 layers of H = 3)
    assert repr(RNN("lstm", 5, input_size=3)) == "RNN(lstm, hidden=5, layers=1, input_size=3)"
    assert repr(RNN("gru", 4, 2, batch_first=True, precision="tf32")) == \
        "RNN(gru, hidden=4, layers=2, input_size=4, batch_first=True, precision='tf32')"
    # nn.LSTM's arguments are named with what takes their place (the cell's tracing reported them)
    with pytest.raises(TypeError, match="no argument 'num_layers' .*layers="):
        RNN("lstm", 4, num_layers=2)
    with pytest.raises(TypeError, match=r"no argument 'dtype' .*\.double\(\)"):
        RNN("lstm", 4, dtype=torch.float64)
    with pytest.raises(TypeError, match="unexpected keyword argument 'input_sise'.*cell 'lstm' .*forget_bias"):
        RNN("lstm", 4, input_sise=3)
    assert RNN("lstm", 4, forget_bias=0.5).hidden == 4  # the cell's own configuration passes through
    m = RNN("lstm", 4, input_size=3)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError, match="'weight_ih_l0' has shape"):
        m.load_torch_state_dict(torch.nn.GRU(3, 4).state_dict())
    for k, v in m.state_dict().items():  # nothing was copied
        assert torch.equal(v, before[k]), k


def test_a_non_contiguous_parameter_is_refused_not_silently_copied():
    from rnngraph.torch import RNN
    m = RNN("lstm", 4, input_size=3)
    m.layer0_U_weight.data = m.layer0_U_weight.data.t().contiguous().t()
    with pytest.raises(ValueError, match="layer0_U_weight is not contiguous"):
        m(torch.randn(5, 2, 3))


def test_torch_save_and_load_of_the_whole_module(tmp_path):
    from rnngraph.torch import RNN
    m = RNN("peephole_lstm", 4, 2, input_size=3)
    x = torch.randn(5, 2, 3)
    y, _ = m(x)  # compiled: the compiled program is not part of what is saved
    torch.save(m, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=False)
    torch.testing.assert_close(loaded(x)[0], y, rtol=0, atol=0)



def test_positional_arguments_follow_nn_lstm_and_the_compile_options_are_keyword_only():
    m = RNN("gru", 4, 1, 3, 0.0, True, True)  # ..., batch_first, bidirectional: as README lists them
    assert m.batch_first and m.bidirectional
    with pytest.raises(TypeError, match="positional"):
        RNN("lstm", 4, 1, 3, 0.0, False, False, "wavefront")


@pytest.mark.parametrize("kw", [{}, {"bidirectional": True}, {"batch_first": True}])
def test_an_empty_batch_gives_nn_lstm_shapes_and_zero_gradients(kw):
    torch.manual_seed(0)
    mine, ref = RNN("lstm", 4, 2, input_size=3, **kw), nn.LSTM(3, 4, 2, **kw)
    x = torch.randn((0, 5, 3) if kw.get("batch_first") else (5, 0, 3), requires_grad=True)
    y, (h, c) = mine(x)
    y_ref, (h_ref, c_ref) = ref(x)
    assert (y.shape, h.shape, c.shape) == (y_ref.shape, h_ref.shape, c_ref.shape)
    (y.sum() + h.sum() + c.sum()).backward()  # as nn.LSTM's: every parameter gets a zero gradient
    assert all(p.grad is not None and not p.grad.any() for p in mine.parameters())
    with pytest.raises(ValueError, match="lengths: expected one length per sequence"):
        mine(x, lengths=[2])


def test_no_timestep_is_a_named_error():
    with pytest.raises(rg.ShapeError, match="x: expected at least one timestep"):
        RNN("lstm", 4)(torch.randn(0, 2, 4))


def test_from_torch_does_not_repeat_torchs_dropout_warning():
    with pytest.warns(UserWarning, match="dropout option adds dropout"):
        lstm = nn.LSTM(3, 4, 1, dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RNN.from_torch(lstm).dropout == 0.5


@pytest.mark.parametrize("transform", ["grad", "jacrev", "vmap"])
def test_torch_func_transforms_are_refused_by_name(transform):
    """torch.func's wrapped tensors have no memory for the kernels (torch said only "Cannot access
    data pointer of Tensor that doesn't have storage"); torch.autograd.functional.jacobian works."""
    m = RNN("lstm", 3, input_size=2).double()
    x = torch.randn(4, 2, 2, dtype=torch.float64)
    run = {"grad": lambda: torch.func.grad(lambda v: m(v)[0].sum())(x),
           "jacrev": lambda: torch.func.jacrev(lambda v: m(v)[0].sum(0))(x),
           "vmap": lambda: torch.func.vmap(lambda v: m(v)[0])(x.unsqueeze(0))}[transform]
    with pytest.raises(NotImplementedError, match="does not run under torch.func transforms"):
        run()
    jac = torch.autograd.functional.jacobian(lambda v: m(v)[0].sum(), x)
    v = x.clone().requires_grad_()
    m(v)[0].sum().backward()
    torch.testing.assert_close(jac, v.grad)


def test_torch_compile_runs_the_layer_as_it_is():
    """torch.compile around a model with the layer breaks its graph at the layer (its forward is
    torch.compiler.disable'd) instead of tracing the compiled program's Python: the same loss and
    gradients as eager over three batches (two sizes, lengths), and dynamo compiles a handful of
    frames (it traced 526 of rnngraph's before)."""
    import torch._dynamo
    torch.manual_seed(0)
    rnn, head = RNN("lstm", 8, 2, input_size=4), nn.Linear(8, 3)

    def loss(x, lengths):
        y, (h, c) = rnn(x, lengths=lengths)
        return head(h[-1]).square().sum() + y.sum()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(loss, backend="eager")
    for B in (5, 3, 5):
        x, lengths = torch.randn(6, B, 4), torch.randint(0, 7, (B,))
        want = torch.autograd.grad(loss(x, lengths), list(rnn.parameters()))
        got = torch.autograd.grad(compiled(x, lengths), list(rnn.parameters()))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch._dynamo.utils.counters["frames"]["total"] <= 10
