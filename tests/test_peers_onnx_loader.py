"""Check the ONNX reference-case loader (tests/peers/onnx_cases.py) with tiny NumPy cells.

Each cell uses the *PyTorch* equations on the converted torch-layout weights; reproducing
ONNX's outputs therefore proves the gate-order / bias / layout conversion is right.
Independent of ``rnngraph``.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
try:
    from tests.peers.onnx_cases import OPS, load_case, onnx_rnn_cases, synthetic_case, to_torch_layout
except ImportError:  # tests/ not importable as a package: import peers/ directly
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers.onnx_cases import OPS, load_case, onnx_rnn_cases, synthetic_case, to_torch_layout

ALL = [n for op in OPS for n in onnx_rnn_cases(op)]
if not ALL:
    pytest.skip("onnx has no backend node test data", allow_module_level=True)


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def run_cell(t: dict):
    """Run the torch-layout case ``t`` in float64. Returns y (T, S, H), h_T (S, H), c_T (S, H) or None."""
    f64 = {k: np.asarray(v, np.float64) for k, v in t.items() if isinstance(v, np.ndarray)}
    Wi, Wh, bi, bh = f64["weight_ih"], f64["weight_hh"], f64["bias_ih"], f64["bias_hh"]
    h, c, ys = f64["h0"], f64.get("c0"), []
    for x in f64["x"]:  # x: (S, I)
        gi, gh = x @ Wi.T + bi, h @ Wh.T + bh  # (S, G*H)
        if t["op"] == "LSTM":  # torch order i, f, g, o; ONNX peepholes on i, f (c) and o (c')
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            i, f = sigmoid(i + f64["p_i"] * c), sigmoid(f + f64["p_f"] * c)
            c = f * c + i * np.tanh(g)
            h = sigmoid(o + f64["p_o"] * c) * np.tanh(c)
        elif t["op"] == "GRU":  # torch order r, z, n
            (xr, xz, xn), (hr, hz, hn) = np.split(gi, 3, axis=1), np.split(gh, 3, axis=1)
            r, z = sigmoid(xr + hr), sigmoid(xz + hz)
            if t["linear_before_reset"]:  # torch: n = tanh(W_in x + b_in + r*(W_hn h + b_hn))
                n = np.tanh(xn + r * hn)
            else:  # ONNX default: n = tanh(W_in x + b_in + W_hn (r*h) + b_hn)
                Hs = h.shape[1]
                n = np.tanh(xn + (r * h) @ Wh[2 * Hs:].T + bh[2 * Hs:])
            h = (1 - z) * n + z * h
        else:  # simple RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh)
            h = np.tanh(gi + gh)
        ys.append(h)
    return np.stack(ys), h, c


@pytest.mark.parametrize("op", OPS)
def test_cases_found(op):
    assert onnx_rnn_cases(op), f"no ONNX {op} cases found"


@pytest.mark.parametrize("name", ALL)
def test_loader_shapes(name):
    case = load_case(name)
    assert case.op in OPS and {"X", "W", "R"} <= case.inputs.keys() and case.outputs
    H, D = case.attrs["hidden_size"], 1 + (case.attrs["direction"] == "bidirectional")
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[case.op]
    assert case.inputs["W"].shape[:2] == (D, G * H) and case.inputs["R"].shape == (D, G * H, H)


def check(case):
    """Run the NumPy cell on ``to_torch_layout(case)`` and compare with every expected output."""
    t = to_torch_layout(case)
    if not t["supported"]:
        pytest.skip(t["reason"])
    T, S, _ = t["x"].shape
    H = t["weight_hh"].shape[1]
    assert t["h0"].shape == (S, H)
    y, h_T, c_T = run_cell(t)
    checked = 0
    for key, got in (("y", y), ("h_T", h_T), ("c_T", c_T)):
        if key in t:
            assert t[key].shape == got.shape
            np.testing.assert_allclose(got, t[key], rtol=1e-5, atol=1e-5, err_msg=key)
            checked += 1
    assert checked, "case has no expected output"


@pytest.mark.parametrize("name", ALL)
def test_numpy_cell_reproduces_onnx(name):
    check(load_case(name))


# The shipped LSTM cases have constant W/R/P (all gates alike) and no GRU case uses
# linear_before_reset=1, so random-weight cases from onnx.reference close those gaps.
SYNTH = [dict(op=op, layout=lay, seed=s) for op in OPS for lay in (0, 1) for s in (0, 1)]
SYNTH += [dict(op="GRU", layout=lay, linear_before_reset=1) for lay in (0, 1)]


@pytest.mark.parametrize("kw", SYNTH, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_numpy_cell_reproduces_onnx_reference_random(kw):
    check(synthetic_case(**kw))
