"""GPU tier for rnngraph.torch.RNN (pytest -m gpu; skipped without a GPU and torch with CUDA):
outputs, final states and every gradient against nn.LSTM / nn.GRU run in float64 on the CPU with
the same weights, at H = 512, on a non-default torch stream; the plan cache across (T, S); no
host<->device copy in a forward + backward of the module; and the gate gradients the layer leaves
unzeroed written whole by each backward (padded and with lengths).

The GPU computes in float32: outputs and states are held to 2e-4 absolute (they lie in [-1, 1]),
gradients to 2e-3 of the largest gradient of each tensor (float32 rounding over 100 timesteps is
~1e-5 relative; an indexing error or a race is of the order of the values themselves).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from rnngraph.torch import RNN  # noqa: E402

H = 512
CASES = [("lstm", 1, 1, 100), ("lstm", 2, 1, 100), ("lstm", 2, 7, 100), ("lstm", 2, 64, 100), ("lstm", 1, 7, 1),
         ("gru", 2, 7, 100), ("gru", 1, 64, 1)]


def _needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")


def _reference(kind: str, layers: int, T: int, S: int, seed: int = 0):
    torch.manual_seed(seed)
    ref = getattr(torch.nn, kind.upper())(H, H, layers).double()
    x = torch.randn(T, S, H, dtype=torch.float64, requires_grad=True)
    n_states = 2 if kind == "lstm" else 1
    h0 = [(0.5 * torch.randn(layers, S, H, dtype=torch.float64)).requires_grad_() for _ in range(n_states)]
    return ref, x, h0


def _loss(y, states):
    """A scalar reading every output and state with different weights (so each seed differs)."""
    w = torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype, device=y.device)
    states = states if isinstance(states, tuple) else (states,)
    return (y * w).sum() + sum((k + 2) * (s * w).sum() for k, s in enumerate(states))


def _grads(module, x, h0, loss_of):
    params = [p for _, p in sorted(module.named_parameters())]
    y, hT = module(x, tuple(h0) if len(h0) > 1 else h0[0])
    grads = torch.autograd.grad(loss_of(y, hT), [x, *h0, *params])
    return y, hT, grads


def _close(got, want, what, rel=2e-3):
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    scale = max(want.abs().max().item(), 1e-12)
    err = (got - want).abs().max().item()
    assert err <= rel * scale, f"{what}: max error {err:.3g} against a largest value of {scale:.3g}"


def _torch_names(module: RNN):
    """Our parameter -> nn.LSTM's name, so gradients pair up."""
    names = {"W.weight": "weight_ih", "U.weight": "weight_hh", "W.bias": "bias_ih", "U.bias": "bias_hh"}
    out = {}
    for name in module.graph_parameters():
        layer, local = name.split(".", 1)
        out[name.replace(".", "_")] = f"{names[local]}_l{layer[5:]}"
    return out


@pytest.mark.parametrize("kind, layers, S, T", CASES, ids=[f"{k}-{n}l-s{s}-t{t}" for k, n, s, t in CASES])
def test_module_matches_torch_float64(kind, layers, S, T):
    _needs_cuda()
    ref, x, h0 = _reference(kind, layers, T, S)
    y_ref, hT_ref, g_ref = _grads(ref, x, h0, _loss)
    ref_grads = dict(zip(["x", *[f"h{k}" for k in range(len(h0))], *sorted(n for n, _ in ref.named_parameters())],
                         g_ref))
    module = RNN.from_torch(ref).to(device="cuda", dtype=torch.float32)
    xc = x.detach().float().cuda().requires_grad_()
    h0c = [h.detach().float().cuda().requires_grad_() for h in h0]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y, hT, grads = _grads(module, xc, h0c, _loss)
    torch.cuda.synchronize()
    _close(y, y_ref, "y", rel=2e-4)
    for k, (a, b) in enumerate(zip(hT if isinstance(hT, tuple) else (hT,),
                                   hT_ref if isinstance(hT_ref, tuple) else (hT_ref,))):
        _close(a, b, f"h_T[{k}]", rel=2e-4)
    ours = dict(zip(["x", *[f"h{k}" for k in range(len(h0))], *sorted(n for n, _ in module.named_parameters())],
                    grads))
    names = _torch_names(module)
    for name, g in ours.items():
        _close(g, ref_grads[names.get(name, name)], f"d{name}")


def test_plans_cached_per_shape_and_reused():
    _needs_cuda()
    torch.manual_seed(1)
    ref = torch.nn.LSTM(H, H, 1)
    module = RNN.from_torch(ref).cuda()
    compiled = None
    for T, S in ((100, 7), (1, 7), (100, 7)):
        x = torch.randn(T, S, H, device="cuda")
        y, _ = module(x)
        with torch.no_grad():
            torch.backends.cudnn.allow_tf32 = False
            y_ref, _ = ref.cuda()(x)
        _close(y, y_ref, f"y at T={T} S={S}", rel=2e-4)
        compiled = module.compiled(x.device, x.dtype)
    assert sorted(compiled.cached_plans) == [(1, 7, True), (100, 7, True)]


def test_no_host_device_copies_in_a_training_step():
    _needs_cuda()
    from torch.profiler import ProfilerActivity, profile
    module = RNN("lstm", H, 2).cuda()
    x = torch.randn(100, 16, H, device="cuda", requires_grad=True)
    h0 = (torch.zeros(2, 16, H, device="cuda"), torch.zeros(2, 16, H, device="cuda"))
    for _ in range(2):  # compile, then capture the CUDA graphs
        y, (h, c) = module(x, h0)
        (y.sum() + h.sum()).backward()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        y, (h, c) = module(x, h0)
        (y.sum() + h.sum()).backward()
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "HtoD" in e.name or "DtoH" in e.name]
    assert copies == [], copies
    assert np.isfinite(x.grad.cpu().numpy()).all()


@pytest.mark.parametrize("lengths", [False, True], ids=["padded", "lengths"])
def test_unzeroed_gate_gradients_are_written_whole_each_call(lengths):
    """A backward zeroes only the front of the gradient arena (Buffers ``zeroed_grads``): the LSTM's
    gate gradients past it are written whole by the backward (passes/twin_biases.py
    ``written_once``). With that part filled with NaN before a second call, the second call's
    gradients are finite and equal the first's (to float32 reordering: 1e-6 of the largest)."""
    _needs_cuda()
    torch.manual_seed(2)
    T, S = 100, 64
    module = RNN("lstm", H, 2).cuda()
    x = torch.randn(T, S, H, device="cuda")
    given = {"lengths": torch.randint(0, T + 1, (S,))} if lengths else {}

    def grads():
        y, states = module(x, **given)
        return torch.autograd.grad(_loss(y, states), [p for _, p in sorted(module.named_parameters())])
    first = grads()
    plans = module.compiled(x.device, x.dtype)._plans
    (plan,) = [p for key, p in plans.items() if key[:3] == (T, S, True) and ("lengths" in key) == lengths]
    b = plan.buf
    assert len(b.unzeroed) == 4  # d.W and d.U of both layers
    assert plan._torch.zeroed_grads.numel() == b.zeroed_grads.size < b.grad_arena.size  # the layer zeroes the front
    torch.cuda.synchronize()
    torch.as_tensor(b.grad_arena[b.zeroed_grads.size:], device="cuda").fill_(float("nan"))
    torch.cuda.synchronize()
    second = grads()
    for k, (a, c) in enumerate(zip(first, second)):
        assert torch.isfinite(c).all(), f"parameter {k}"
        _close(c, a, f"parameter {k}", rel=1e-6)
