"""rnngraph's standard cells against the ONNX LSTM / GRU / RNN reference cases.

Every case the loader finds (tests/peers/onnx_cases.py: the onnx wheel's node tests, plus
random-weight cases computed by ``onnx.reference`` in both layouts) is converted to PyTorch
layout, copied into the matching cell, run by ``rg.Reference`` in float64 and compared with
ONNX's Y, Y_h and Y_c. Cells: LSTM -> ``peephole_lstm`` when the case has nonzero P, else
``lstm``; GRU -> ``gru_reset_before`` (linear_before_reset=0) or ``gru`` (=1); RNN -> ``elman``.
"""
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
import rnngraph as rg  # noqa: E402

try:
    from tests.peers.convert import TORCH_NAMES, layer_params
    from tests.peers.onnx_cases import OPS, load_case, onnx_rnn_cases, synthetic_case, to_torch_layout
except ImportError:  # tests/ not importable as a package: import peers/ directly
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers.convert import TORCH_NAMES, layer_params
    from peers.onnx_cases import OPS, load_case, onnx_rnn_cases, synthetic_case, to_torch_layout

# The expected outputs were computed in float32: observed error <= 5.2e-8 (shipped cases) and
# <= 1.7e-7 (random cases, 80 seeds), so ATOL = 1e-6 (rtol 0; values are O(1)). That also
# catches a transposed recurrent matrix, which moves one shipped case by only 9e-6.
ATOL = 1e-6
CASES = [pytest.param(partial(load_case, n), id=n) for op in OPS for n in onnx_rnn_cases(op)]
# Random weights (the shipped LSTM cases have identical gates): these pin the gate order.
CASES += [pytest.param(partial(synthetic_case, op, seed=s, layout=lay, **lbr),
                       id=f"synthetic_{op.lower()}_seed{s}_layout{lay}" + "".join(f"_lbr{v}" for v in lbr.values()))
          for op in OPS for lbr in ([{"linear_before_reset": 0}, {"linear_before_reset": 1}] if op == "GRU" else [{}])
          for lay in (0, 1) for s in (0, 1)]


def cell_name(t: dict) -> str:
    if t["op"] == "LSTM":
        peepholes = t["has_peepholes"] and any(np.any(t[p]) for p in ("p_i", "p_f", "p_o"))
        return "peephole_lstm" if peepholes else "lstm"
    if t["op"] == "GRU":
        return "gru" if t["linear_before_reset"] else "gru_reset_before"
    return "elman"


@pytest.mark.parametrize("make_case", CASES)
def test_reference_matches_onnx(make_case):
    t = to_torch_layout(make_case())
    if not t["supported"]:
        pytest.skip(t["reason"])
    cell, (T, S, I), H = cell_name(t), t["x"].shape, t["weight_hh"].shape[1]
    g = rg.Sequential(rg.cells.STANDARD[cell](hidden=H), input_size=I).graph
    params = layer_params(0, cell, *(t[n] for n in TORCH_NAMES), t.get("p_i"), t.get("p_f"), t.get("p_o"))
    states = {k: t[k0][None].astype(np.float64) for k, k0 in (("layer0.h", "h0"), ("layer0.c", "c0")) if k0 in t}
    fwd = rg.Reference(g, dtype="float64").forward(params, {"x": t["x"].astype(np.float64)}, states)
    got = {"y": fwd.values[g.outputs[0]], "h_T": fwd.final_states["layer0.h"][0]}
    if "layer0.c" in fwd.final_states:
        got["c_T"] = fwd.final_states["layer0.c"][0]
    checked = [k for k in ("y", "h_T", "c_T") if k in t]
    assert checked, "case has no expected output"
    for k in checked:
        np.testing.assert_allclose(got[k], t[k], rtol=0, atol=ATOL, err_msg=f"{t['name']} ({cell}): {k}")
