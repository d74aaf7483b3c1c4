"""rnngraph.torch.RNN on variable-length sequences and bidirectional (CPU, the NumPy backend): a
PackedSequence and ``lengths=`` against nn.LSTM / nn.GRU on the same PackedSequence, in float64
— outputs, final states and every gradient, unidirectional and bidirectional — and the cases
that break libraries, each with its input."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence  # noqa: E402

import numpy as np  # noqa: E402

import rnngraph as rg  # noqa: E402
from rnngraph.torch import RNN  # noqa: E402
from rnngraph.torch_bidirectional import reverse, reverse_index  # noqa: E402

F64 = torch.float64
TORCH_NAMES = {"weight_ih": "W_weight", "weight_hh": "U_weight", "bias_ih": "W_bias", "bias_hh": "U_bias"}


def _pair(kind, layers, seed=0, batch_first=False, bidirectional=False):
    torch.manual_seed(seed)
    ref = kind(3, 4, layers, batch_first=batch_first, bidirectional=bidirectional).double()
    return ref, RNN.from_torch(ref)


def _ours(torch_name: str, bidirectional: bool) -> str:
    """nn.LSTM's parameter name -> ours: weight_ih_l1 -> layer1_W_weight; bidirectional
    weight_hh_l1_reverse -> pairs.1.layer0_reverse_U_weight."""
    base, layer = torch_name.removesuffix("_reverse").rsplit("_l", 1)
    if bidirectional:
        direction = "_reverse" if torch_name.endswith("_reverse") else ""
        return f"pairs.{layer}.layer0{direction}_{TORCH_NAMES[base]}"
    return f"layer{layer}_{TORCH_NAMES[base]}"


def _states(h):
    return h if isinstance(h, tuple) else (h,)


def _loss(y, h):
    data = y.data if hasattr(y, "batch_sizes") else y
    return (data * data.cos()).sum() + sum((s * s).sum() for s in _states(h))


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("enforce_sorted, bidirectional", [(False, False), (True, False), (False, True)])
def test_packed_sequence_equals_torch(kind, layers, enforce_sorted, bidirectional):
    ref, mine = _pair(kind, layers, bidirectional=bidirectional)
    layers *= 1 + bidirectional  # the states' rows
    lengths = torch.tensor([6, 4, 2, 1]) if enforce_sorted else torch.tensor([2, 6, 1, 4])
    x = torch.randn(6, 4, 3, dtype=F64)
    h0 = tuple(torch.randn(layers, 4, 4, dtype=F64) for _ in range(2 if kind is nn.LSTM else 1))
    h0 = h0 if kind is nn.LSTM else h0[0]
    outs, grads = [], []
    for module in (ref, mine):
        xi = x.clone().requires_grad_()
        hi = tuple(s.clone().requires_grad_() for s in _states(h0))
        y, h = module(pack_padded_sequence(xi, lengths, enforce_sorted=enforce_sorted),
                      hi if kind is nn.LSTM else hi[0])
        _loss(y, h).backward()
        outs.append((y, _states(h)))
        grads.append((xi.grad, [s.grad for s in hi]))
    (ya, ha), (yb, hb) = outs
    assert torch.equal(ya.batch_sizes, yb.batch_sizes)
    assert (ya.sorted_indices is None) == (yb.sorted_indices is None)
    torch.testing.assert_close(yb.data, ya.data, rtol=0, atol=1e-10)
    for a, b in zip(ha, hb):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=0, atol=1e-10)
    for a, b in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    mine_params = dict(mine.named_parameters())
    assert len(mine_params) == len(dict(ref.named_parameters()))
    for name, p in ref.named_parameters():
        torch.testing.assert_close(mine_params[_ours(name, bidirectional)].grad, p.grad, rtol=0, atol=1e-10)
    assert ya.data.abs().max() > 0.05


def test_lengths_with_padded_input_equal_the_packed_call_and_pad_with_zeros():
    ref, mine = _pair(nn.LSTM, 2, seed=1, batch_first=True)
    x = torch.randn(3, 5, 3, dtype=F64)  # (B, T, I)
    lengths = [5, 2, 3]
    y, (h, c) = mine(x, lengths=lengths)
    yp, (hp, cp) = ref(pack_padded_sequence(x, torch.tensor(lengths), batch_first=True, enforce_sorted=False))
    y_ref, _ = pad_packed_sequence(yp, batch_first=True)
    assert y.shape == (3, 5, 4)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-10)  # zeros past each length, as torch pads
    torch.testing.assert_close(h, hp, rtol=0, atol=1e-10)
    torch.testing.assert_close(c, cp, rtol=0, atol=1e-10)


def test_bidirectional_packed_equals_padded_with_lengths():
    _, mine = _pair(nn.LSTM, 2, seed=6, bidirectional=True)
    x, lengths = torch.randn(5, 3, 3, dtype=F64), torch.tensor([2, 5, 4])
    y, (h, c) = mine(x, lengths=lengths)
    yp, (hp, cp) = mine(pack_padded_sequence(x, lengths, enforce_sorted=False))
    y_unpacked, _ = pad_packed_sequence(yp)
    torch.testing.assert_close(y_unpacked, y, rtol=0, atol=1e-12)
    torch.testing.assert_close(hp, h, rtol=0, atol=1e-12)
    torch.testing.assert_close(cp, c, rtol=0, atol=1e-12)
    assert torch.equal(y[2:, 0], torch.zeros(3, 8, dtype=F64))


def test_a_sequence_of_length_zero_keeps_its_state_outputs_zeros_and_no_nan():
    _, mine = _pair(nn.LSTM, 1, seed=2)
    x = torch.randn(4, 2, 3, dtype=F64)
    x[:, 1] = float("nan")  # the empty sequence's padding is garbage
    h0 = (torch.randn(1, 2, 4, dtype=F64, requires_grad=True), torch.randn(1, 2, 4, dtype=F64, requires_grad=True))
    xg = x.clone().requires_grad_()
    y, (h, c) = mine(xg, h0, lengths=torch.tensor([3, 0]))
    assert torch.equal(y[:, 1], torch.zeros(4, 4, dtype=F64)) and torch.equal(y[3, 0], torch.zeros(4, dtype=F64))
    assert torch.equal(h[:, 1], h0[0][:, 1]) and torch.equal(c[:, 1], h0[1][:, 1])
    (y.sum() + h.sum() + c.sum()).backward()
    assert torch.isfinite(xg.grad).all() and torch.equal(xg.grad[:, 1], torch.zeros(4, 3, dtype=F64))
    assert torch.equal(h0[0].grad[0, 1], torch.ones(4, dtype=F64))  # dh_T passes straight to dh0
    assert all(torch.isfinite(p.grad).all() for p in mine.parameters())


def test_no_grad_inference_takes_lengths_too():
    ref, mine = _pair(nn.GRU, 1, seed=3)
    x, lengths = torch.randn(5, 3, 3, dtype=F64), torch.tensor([5, 1, 3])
    with torch.no_grad():
        y, h = mine(pack_padded_sequence(x, lengths, enforce_sorted=False))
        ya, ha = ref(pack_padded_sequence(x, lengths, enforce_sorted=False))
    torch.testing.assert_close(y.data, ya.data, rtol=0, atol=1e-10)
    torch.testing.assert_close(h, ha, rtol=0, atol=1e-10)


@pytest.mark.parametrize("call, error, match", [
    (lambda m, x: m(x, lengths=[5, 1]), ValueError, r"lengths\[0\] = 5 is outside \[0, T = 4\]"),
    (lambda m, x: m(x, lengths=[-1, 1]), ValueError, r"lengths\[0\] = -1"),
    (lambda m, x: m(x, lengths=[1, 2, 3]), ValueError, r"shape \(2,\)"),
    # batch-first data given to a time-major module: T lengths for B streams, and a hint
    (lambda m, x: m(x, lengths=[1, 2, 3, 4]), ValueError, r"shape \(2,\), got shape \(4,\) \(x's window is 4: "
                                                           r"were its time and batch axes swapped\? see batch_first\)"),
    (lambda m, x: m(x, lengths=torch.tensor([1.5, 2.0])), TypeError, "integer lengths"),
    (lambda m, x: m(x[:, 0], lengths=[2]), ValueError, "unbatched"),
    (lambda m, x: m(pack_padded_sequence(x, torch.tensor([4, 2])), lengths=[4, 2]), ValueError,
     "PackedSequence carries its own lengths"),
])
def test_bad_lengths_are_named(call, error, match):
    _, mine = _pair(nn.LSTM, 1)
    with pytest.raises(error, match=match):
        call(mine, torch.randn(4, 2, 3, dtype=F64))


def test_a_bidirectional_modules_bad_lengths_are_named():
    """The module checks lengths once, before either direction's path (rnngraph/torch.py)."""
    _, mine = _pair(nn.LSTM, 1, bidirectional=True)
    with pytest.raises(ValueError, match=r"lengths\[0\] = 5 is outside \[0, T = 4\]"):
        mine(torch.randn(4, 2, 3, dtype=F64), lengths=[5, 1])


def test_the_swapped_axes_hint_is_the_torch_modules_alone():
    """The native API has no batch_first: T lengths for S streams get no hint there."""
    rnn = rg.compile_rnn(rg.Sequential(rg.cells.lstm(hidden=2), input_size=1), device="cpu")
    with pytest.raises(rg.ShapeError) as info:
        rnn.forward(np.zeros((4, 2, 1), np.float32), lengths=[1, 2, 3, 4])
    assert str(info.value) == "lengths: expected one length per stream, shape (2,), got shape (4,)"


def test_the_reverse_direction_reads_each_sequence_reversed_over_its_own_length():
    idx = reverse_index(torch.tensor([3, 1, 0]), 4, 3, "cpu")
    assert idx.tolist() == [[2, 0, 0], [1, 1, 1], [0, 2, 2], [3, 3, 3]]
    x = torch.arange(12.0).view(4, 3, 1)  # x[t, b] = 3 t + b
    assert reverse(x, idx)[:, 0, 0].tolist() == [6.0, 3.0, 0.0, 9.0]  # b = 0, length 3: x[2], x[1], x[0], pad
    assert torch.equal(reverse(reverse(x, idx), idx), x)


def test_bidirectional_final_states_are_the_forward_at_its_length_and_the_reverse_after_t0():
    """h_T[0] (forward) equals the forward direction run alone over x[:L]; h_T[1] (reverse)
    equals the reverse direction run alone over x[:L] flipped: its state after reading t = 0."""
    _, mine = _pair(nn.GRU, 1, seed=4, bidirectional=True)
    x, lengths = torch.randn(5, 2, 3, dtype=F64), [3, 5]
    y, h = mine(x, lengths=lengths)
    fwd, rev = RNN("gru", 4, input_size=3).double(), RNN("gru", 4, input_size=3).double()
    weights = dict(mine.pairs[0].named_parameters())
    with torch.no_grad():
        for name, p in fwd.named_parameters():
            p.copy_(weights[name])
            dict(rev.named_parameters())[name].copy_(weights[name.replace("layer0_", "layer0_reverse_")])
    for b, L in enumerate(lengths):
        xb = x[:L, b:b + 1]
        yf, hf = fwd(xb)
        yr, hr = rev(torch.flip(xb, [0]))
        torch.testing.assert_close(h[0, b], hf[0, 0], rtol=0, atol=1e-12)
        torch.testing.assert_close(h[1, b], hr[0, 0], rtol=0, atol=1e-12)
        torch.testing.assert_close(y[:L, b], torch.cat([yf[:, 0], torch.flip(yr, [0])[:, 0]], -1), rtol=0, atol=1e-12)
    assert y.shape == (5, 2, 8) and torch.equal(y[3:, 0], torch.zeros(2, 8, dtype=F64))


def test_bidirectional_with_dropout_in_eval_mode_and_h0_equals_torch():
    ref, mine = _pair(nn.LSTM, 2, seed=5, bidirectional=True)
    ref.dropout = mine.dropout = 0.3
    ref.eval(), mine.eval()
    x = torch.randn(4, 3, 3, dtype=F64)
    h0 = (torch.randn(4, 3, 4, dtype=F64), torch.randn(4, 3, 4, dtype=F64))
    (ya, (ha, ca)), (yb, (hb, cb)) = ref(x, h0), mine(x, h0)
    for a, b in ((ya, yb), (ha, hb), (ca, cb)):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"expected a tensor of shape \(4, 3, 4\)"):
        mine(x, (h0[0][:2], h0[1][:2]))
    with pytest.raises(ValueError, match="pairs"):
        mine.compiled(x.device, x.dtype)


def test_a_packed_sequence_on_another_device_is_named():
    _, mine = _pair(nn.LSTM, 1)
    elsewhere = PackedSequence(torch.empty(5, 3, dtype=F64, device="meta"), torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="the PackedSequence is on meta but the module's parameters are on cpu"):
        mine(elsewhere)
