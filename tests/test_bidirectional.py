"""rg.Bidirectional in rg.Sequential: a cell and its reverse direction as one layer, two
independent loop SCCs the schedule runs in one loop, and the errors of misplacing it."""
import numpy as np
import pytest

import rnngraph as rg
from rnngraph.schedule import Loop


def test_the_two_directions_are_independent_sccs_in_one_loop():
    net = rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=4)), input_size=3)
    g = net.graph
    assert g.by_name["x"].size == 6 and g.by_name[g.outputs[0]].size == 8
    assert [s.name for s in g.states] == ["layer0.h", "layer0.c", "layer0_reverse.h", "layer0_reverse.c"]
    assert {"layer0.U.weight", "layer0_reverse.U.weight"} <= {p.name for p in g.params}
    sched = rg.compile_rnn(net, device="cpu").schedule(5, 1)
    loops = [st for st in sched.forward if isinstance(st, Loop)]
    assert len(loops) == 1  # both directions step in the same loop
    gemms = {op for k in loops[0].kernels if k.kind == "gemm" for op in k.ops}
    assert gemms == {"layer0.U", "layer0_reverse.U"}


def test_each_direction_reads_its_half_of_the_input():
    """The forward half of the output depends on the first half of the input only, the reverse
    half on the second only."""
    rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.gru(hidden=2)), input_size=2),
                         device="cpu", dtype="float64")
    x = np.random.default_rng(0).standard_normal((3, 1, 4))
    y, _ = rnn.forward(x)
    x2 = x.copy()
    x2[..., 2:] += 1.0
    y2, _ = rnn.forward(x2)
    np.testing.assert_array_equal(y2[..., :2], y[..., :2])
    assert np.abs(y2[..., 2:] - y[..., 2:]).max() > 1e-3


@pytest.mark.parametrize("layers, match", [
    ((rg.Bidirectional(rg.cells.lstm(hidden=2)), rg.cells.lstm(hidden=2)), "only recurrent layer"),
    ((rg.Embedding(5, 3), rg.Bidirectional(rg.cells.lstm(hidden=2))), "only recurrent layer, on float inputs"),
    ((rg.Bidirectional(rg.cells.lstm(hidden=2)), rg.MSE()), "a loss head cannot follow rg.Bidirectional"),
])
def test_a_bidirectional_layer_must_be_the_only_recurrent_layer(layers, match):
    with pytest.raises(rg.GraphError, match=match):
        rg.Sequential(*layers, input_size=3)


def test_bidirectional_takes_a_configured_cell():
    with pytest.raises(rg.GraphError, match="configured cell"):
        rg.Bidirectional(rg.cells.lstm)


def test_an_undoubled_input_is_named():
    rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=4)), input_size=3), device="cpu")
    with pytest.raises(rg.ShapeError, match=r"\(T, S, 6\) .*doubled for rg.Bidirectional: \[x, x reversed"):
        rnn.forward(np.zeros((5, 2, 3), np.float32))


def test_reverse_within_lengths():
    x = np.arange(12.0).reshape(4, 3, 1)  # x[t, s] = 3 t + s
    r = rg.Bidirectional.reverse(x, [3, 1, 0])
    assert r[:, 0, 0].tolist() == [6.0, 3.0, 0.0, 9.0]  # length 3: x[2], x[1], x[0], then its padding
    assert r[:, 1, 0].tolist() == [1.0, 4.0, 7.0, 10.0] and r[:, 2, 0].tolist() == [2.0, 5.0, 8.0, 11.0]
    np.testing.assert_array_equal(rg.Bidirectional.reverse(r, [3, 1, 0]), x)
    np.testing.assert_array_equal(rg.Bidirectional.reverse(x), x[::-1])
    with pytest.raises(ValueError, match=r"lengths\[0\] = 5 is outside \[0, T = 4\]"):
        rg.Bidirectional.reverse(x, [5, 1, 0])
    with pytest.raises(rg.ShapeError, match=r"x must be \(T, S, \.\.\.\), got shape \(4,\)"):
        rg.Bidirectional.reverse(np.zeros(4))


def test_the_native_layer_with_reversed_input_is_a_bidirectional_nn_lstm():
    """README's recipe on the native API: the input doubled with Bidirectional.reverse, lengths
    given, the output's second half reversed back: nn.LSTM(bidirectional=True) on a
    PackedSequence, outputs and final states (float64)."""
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    T, S, I, H = 5, 3, 2, 4
    ref = torch.nn.LSTM(I, H, bidirectional=True).double()
    rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=H)), input_size=I),
                         device="cpu", dtype="float64")
    for suffix, prefix in (("l0", "layer0."), ("l0_reverse", "layer0_reverse.")):
        for ours, theirs in (("W", "ih"), ("U", "hh")):
            rnn.parameters[f"{prefix}{ours}.weight"][...] = getattr(ref, f"weight_{theirs}_{suffix}").detach().numpy()
            rnn.parameters[f"{prefix}{ours}.bias"][...] = getattr(ref, f"bias_{theirs}_{suffix}").detach().numpy()
    x, lengths = np.random.default_rng(1).standard_normal((T, S, I)), [5, 2, 3]
    y, h = rnn.forward(np.concatenate([x, rg.Bidirectional.reverse(x, lengths)], axis=-1), lengths=lengths,
                       train=False)
    y = np.concatenate([y[..., :H], rg.Bidirectional.reverse(y[..., H:], lengths)], axis=-1)
    packed, (h_ref, c_ref) = ref(pack_padded_sequence(torch.from_numpy(x), torch.tensor(lengths),
                                                       enforce_sorted=False))
    y_ref = pad_packed_sequence(packed, total_length=T)[0].detach().numpy()
    np.testing.assert_allclose(y, y_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(h["layer0.h"][-1], h_ref[0].detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h["layer0_reverse.h"][-1], h_ref[1].detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h["layer0_reverse.c"][-1], c_ref[1].detach().numpy(), rtol=0, atol=1e-12)
