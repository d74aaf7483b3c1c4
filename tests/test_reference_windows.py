"""The reference executor across windows: state carry, stream reset, extremes, dtypes."""
import numpy as np
import pytest

import rnngraph as rg

CELLS = sorted(rg.cells.STANDARD)


def _setup(name, T=9, S=3, hidden=4, inp=2, seed=0):
    g = rg.Sequential(rg.cells.STANDARD[name](hidden=hidden), input_size=inp).graph
    rng = np.random.default_rng(seed)
    params = rg.init_params(g, seed=seed)
    x = rng.normal(size=(T, S, inp))
    states = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()}
    return g, params, x, states


@pytest.mark.parametrize("name", CELLS)
def test_three_windows_equal_one_long_window(name):
    g, params, x, states = _setup(name)
    ref = rg.Reference(g)
    whole = ref.forward(params, {"x": x}, states)
    out, carry = [], states
    for chunk in np.split(x, [2, 5]):  # windows of 2, 3 and 4 timesteps
        f = ref.forward(params, {"x": chunk}, carry)
        out.append(f.values[g.outputs[0]])
        carry = f.final_states
    np.testing.assert_allclose(np.concatenate(out), whole.values[g.outputs[0]], rtol=0, atol=1e-12)
    for k in carry:
        np.testing.assert_allclose(carry[k], whole.final_states[k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["lstm", "skip_rnn"])
def test_reset_stream_equals_fresh_run(name):
    g, params, x, states = _setup(name)
    ref = rg.Reference(g)
    reset = rg.reset_streams(states, [1])
    f = ref.forward(params, {"x": x}, reset)
    fresh = ref.forward(params, {"x": x[:, 1:2]}, None)  # stream 1 alone from zero states
    np.testing.assert_allclose(f.values[g.outputs[0]][:, 1:2], fresh.values[g.outputs[0]], atol=1e-14)
    other = ref.forward(params, {"x": x}, states)
    np.testing.assert_array_equal(f.values[g.outputs[0]][:, 0], other.values[g.outputs[0]][:, 0])
    assert not np.allclose(states["layer0.h"][:, 1], 0)  # the reset really changed something


@pytest.mark.parametrize("name", CELLS)
def test_huge_preactivations_give_no_nan_and_no_warning(name):
    g, params, x, states = _setup(name, T=3, S=2)
    big = {k: np.sign(v) * 1000.0 + v for k, v in params.items()}  # pre-activations of order +-1000
    ref = rg.Reference(g)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        f = ref.forward(big, {"x": x * 1000}, states)
        grads = ref.backward(f, {g.outputs[0]: np.ones_like(f.values[g.outputs[0]])})
    assert np.isfinite(f.values[g.outputs[0]]).all()
    assert all(np.isfinite(v).all() for v in grads.params.values())


def test_lm_extreme_logits_finite_loss():
    g = rg.Sequential(rg.Embedding(5, 3), rg.cells.lstm(hidden=3), rg.SoftmaxCrossEntropy(5)).graph
    params = {k: v * 1000 for k, v in rg.init_params(g).items()}
    ids = np.arange(6).reshape(3, 2) % 5
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        f = rg.Reference(g).forward(params, {"x": ids, "y": ids})
        rg.Reference(g).backward(f)
    assert np.isfinite(f.loss) and f.loss > 0


def test_float32_close_to_float64():
    g, params, x, states = _setup("lstm")
    f64 = rg.Reference(g, "float64").forward(params, {"x": x}, states)
    f32 = rg.Reference(g, "float32").forward(params, {"x": x}, states)
    y32 = f32.values[g.outputs[0]]
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, f64.values[g.outputs[0]], atol=1e-5)
    assert not np.array_equal(y32, f64.values[g.outputs[0]])


def test_lm_loss_is_mean_cross_entropy():
    g = rg.Sequential(rg.Embedding(6, 3), rg.cells.elman(hidden=4), rg.SoftmaxCrossEntropy(6)).graph
    rng = np.random.default_rng(2)
    ids, tgt = rng.integers(0, 6, (4, 2)), rng.integers(0, 6, (4, 2))
    f = rg.Reference(g).forward(rg.init_params(g), {"x": ids, "y": tgt})
    z = f.values["head.logits"]
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    expected = -np.take_along_axis(logp, tgt[..., None], -1).mean()
    assert f.loss == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad, match", [
    ({"x": np.zeros((3, 2))}, r"input 'x': expected shape \(T, S, 2\)"),
    ({}, "input 'x' of graph 'lstm' is missing"),
    ({"x": np.zeros((3, 2, 2)), "z": 1}, r"no input\(s\) \['z'\]"),
    ({"x": np.zeros((0, 2, 2))}, "T >= 1 and S >= 1"),
])
def test_bad_inputs_are_named(bad, match):
    g, params, x, states = _setup("lstm")
    with pytest.raises(rg.GraphError, match=match):
        rg.Reference(g).forward(params, bad)


def test_bad_state_and_param_shapes_are_named():
    g, params, x, states = _setup("lstm")
    with pytest.raises(rg.ShapeError, match=r"state 'layer0.c': expected shape \(1, 3, 4\)"):
        rg.Reference(g).forward(params, {"x": x}, {"layer0.c": np.zeros((3, 4))})
    with pytest.raises(rg.ShapeError, match="parameter 'layer0.U.weight'"):
        rg.Reference(g).forward({**params, "layer0.U.weight": np.zeros((4, 4))}, {"x": x})


def test_forget_bias_option_shifts_only_the_forget_rows():
    g = rg.Sequential(rg.cells.lstm(hidden=4, forget_bias=1.0), input_size=2).graph
    plain = rg.Sequential(rg.cells.lstm(hidden=4), input_size=2).graph
    b1 = rg.init_params(g, seed=5)["layer0.W.bias"]
    b0 = rg.init_params(plain, seed=5)["layer0.W.bias"]
    np.testing.assert_allclose(b1 - b0, np.r_[np.zeros(4), np.ones(4), np.zeros(8)])
    assert np.abs(b0).max() <= 0.5  # U(-1/sqrt(H), 1/sqrt(H)) with H = 4
