"""GPU tier for variable-length sequences and bidirectional layers (pytest -m gpu; skipped without a GPU and torch with
CUDA): rnngraph.torch.RNN on a PackedSequence at H = 512, S = 64 (and 4), random lengths, against
nn.LSTM run in float64 on the CPU on the same PackedSequence with the same weights — outputs,
final states and every gradient — and the padded call with lengths equal to the packed one.

Tolerances as tests/test_gpu_torch_layer.py (float32 on the GPU): values 2e-4 absolute,
gradients 2e-3 of each tensor's largest gradient.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

from rnngraph.torch import RNN  # noqa: E402

H, S, T = 512, 64, 60


def _close(got, want, what, rel):
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    scale = max(want.abs().max().item(), 1e-12) if rel else 1.0
    err = (got - want).abs().max().item()
    assert err <= (rel or 2e-4) * scale, f"{what}: max error {err:.3g} against a largest value of {scale:.3g}"


def _ours(torch_name: str, bidirectional: bool) -> str:
    """nn.LSTM's parameter name (``weight_ih_l1``, ``weight_ih_l1_reverse``) -> rnngraph.torch.RNN's
    (``layer1_W_weight``; bidirectional ``pairs.1.layer0_reverse_W_weight``)."""
    names = {"weight_ih": "W_weight", "weight_hh": "U_weight", "bias_ih": "W_bias", "bias_hh": "U_bias"}
    base, layer = torch_name.removesuffix("_reverse").rsplit("_l", 1)
    if bidirectional:
        direction = "_reverse" if torch_name.endswith("_reverse") else ""
        return f"pairs.{layer}.layer0{direction}_{names[base]}"
    return f"layer{layer}_{names[base]}"


@pytest.mark.parametrize("layers, bidirectional, S", [(1, False, S), (2, False, S), (2, True, S), (1, False, 4),
                                                      (2, True, 4)])  # S = 4: the backward loops flagged
def test_packed_lstm_on_the_gpu_equals_torch_in_float64(layers, bidirectional, S):
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    torch.manual_seed(layers)
    ref = torch.nn.LSTM(H, H, layers, bidirectional=bidirectional).double()
    mine = RNN.from_torch(ref).float().cuda()
    x = torch.randn(T, S, H, dtype=torch.float64)
    lengths = torch.randint(1, T + 1, (S,))
    lengths[3] = T
    w = torch.linspace(-1, 1, H * (1 + bidirectional), dtype=torch.float64)
    v = w[:H]
    outs = []
    for module, dev, dt in ((ref, "cpu", torch.float64), (mine, "cuda", torch.float32)):
        xi = x.to(dev, dt).requires_grad_()
        y, (h, c) = module(pack_padded_sequence(xi, lengths, enforce_sorted=False))
        loss = (y.data * w.to(dev, dt)).sum() + 2 * (h * v.to(dev, dt)).sum() + 3 * (c * v.to(dev, dt)).sum()
        params = dict(module.named_parameters())
        names = ["x"] + [n if module is ref else _ours(n, bidirectional) for n, _ in ref.named_parameters()]
        grads = torch.autograd.grad(loss, [xi] + [params[n] for n in names[1:]])
        outs.append((y.data, h, c, dict(zip(["x"] + [n for n, _ in ref.named_parameters()], grads))))
    (y0, h0, c0, g0), (y1, h1, c1, g1) = outs
    _close(y1, y0, "y", 0)
    _close(h1, h0, "h_T", 0)
    _close(c1, c0, "c_T", 0)
    for name in g0:
        _close(g1[name], g0[name], f"gradient of {name}", 2e-3)


def test_padded_with_lengths_equals_packed_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    torch.manual_seed(5)
    mine = RNN("lstm", H, 2).cuda()
    x = torch.randn(T, S, H, device="cuda")
    lengths = torch.randint(0, T + 1, (S,))
    with torch.no_grad():
        y, (h, c) = mine(x, lengths=lengths)
        yp, (hp, cp) = mine(pack_padded_sequence(x, lengths.clamp(min=1), enforce_sorted=False))
    keep = lengths > 0
    torch.testing.assert_close(h[:, keep], hp[:, keep])
    assert torch.equal(h[:, ~keep], torch.zeros_like(h[:, ~keep]))  # length 0: the zero h0 unchanged
    assert torch.isfinite(y).all() and torch.equal(y[lengths.max():], torch.zeros_like(y[lengths.max():]))


def test_nan_padding_and_calls_back_to_back_on_the_gpu():
    """The padded steps of x are stored as zeros on the device (codegen/torch_io.py): NaN there
    gives the results of zero padding, outputs and gradients. Two calls with other lengths are
    issued without a synchronisation in between (the valid steps go through two pinned buffers
    in turn); a call with lengths does not synchronise the stream. A float64 x given to the
    compiled float32 RNN is converted on the way in."""
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    torch.manual_seed(6)
    mine = RNN("lstm", 16, 1, input_size=8).cuda()
    lengths = [[5, 0, 2], [1, 5, 3], [4, 4, 5]]
    results = []
    for fill in (0.0, float("nan")):
        outs = []
        for k, lens in enumerate(lengths):
            x = torch.randn(5, 3, 8, device="cuda", generator=torch.Generator("cuda").manual_seed(k))
            for s, n in enumerate(lens):
                x[n:, s] = fill
            x.requires_grad_()
            y, (h, c) = mine(x, lengths=lens)
            (gx,) = torch.autograd.grad((y * y).sum() + h.sum() + c.sum(), [x])
            outs.append((y, h, c, gx))
        results.append(outs)
    for (y0, h0, c0, g0), (y1, h1, c1, g1) in zip(*results):
        assert torch.isfinite(y1).all() and torch.isfinite(g1).all()
        torch.testing.assert_close((y1, h1, c1, g1), (y0, h0, c0, g0), rtol=0, atol=0)
    # regression: a 0-dim CPU zero given to torch.where made torch copy it to the device and
    # synchronise the stream on every call (bench/results/h200-20261203-torch-lengths-profile-cpu-scalar-zero.txt)
    torch.cuda.set_sync_debug_mode("error")
    try:
        y, _ = mine(x.detach(), lengths=lengths[0])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    compiled = mine.compiled(torch.device("cuda"), torch.float32)
    ones = torch.ones(5, 3, 8, device="cuda")
    y32, _ = compiled.forward(ones, train=False, lengths=[5, 1, 0])
    y64, _ = compiled.forward(ones.double(), train=False, lengths=[5, 1, 0])  # converted on the way in
    assert torch.equal(y64, y32) and torch.equal(y64[1:, 1:], torch.zeros_like(y64[1:, 1:]))
