"""Copy PyTorch-layout RNN weights into rnngraph parameters (shared by the peer tests).

PyTorch layout: ``weight_ih`` (G*H, I), ``weight_hh`` (G*H, H), ``bias_ih``/``bias_hh`` (G*H,),
gate order i, f, g, o (LSTM) / r, z, n (GRU). Layer k goes to ``layer{k}.``.
"""
from __future__ import annotations

import numpy as np

TORCH_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def layer_params(k: int, cell: str, weight_ih, weight_hh, bias_ih, bias_hh,
                 p_i=None, p_f=None, p_o=None) -> dict[str, np.ndarray]:
    """rnngraph params of layer ``k`` of standard cell ``cell`` (a name in ``rg.cells.STANDARD``).

    gru_reset_before splits the recurrent rows into ``U`` (r, z) and ``Un`` (n);
    peephole_lstm also takes the peephole vectors p_i, p_f, p_o (ONNX P = [Pi, Po, Pf]).
    """
    pre, H = f"layer{k}.", np.shape(weight_hh)[1]
    out = {"W.weight": weight_ih, "W.bias": bias_ih}
    if cell == "gru_reset_before":
        out |= {"U.weight": weight_hh[:2 * H], "U.bias": bias_hh[:2 * H],
                "Un.weight": weight_hh[2 * H:], "Un.bias": bias_hh[2 * H:]}
    else:
        out |= {"U.weight": weight_hh, "U.bias": bias_hh}
    if cell == "peephole_lstm":
        out |= {"w_ci": p_i, "w_cf": p_f, "w_co": p_o}
    return {pre + n: np.array(v) for n, v in out.items()}


def torch_params(module, cell: str, grad: bool = False) -> dict[str, np.ndarray]:
    """Every layer of a unidirectional torch ``nn.LSTM``/``nn.GRU``/``nn.RNN`` as rnngraph params
    (with ``grad=True``: their ``.grad`` instead, to compare with rnngraph's gradients)."""
    out = {}
    for k in range(module.num_layers):
        ps = (getattr(module, f"{n}_l{k}") for n in TORCH_NAMES)
        out |= layer_params(k, cell, *((p.grad if grad else p).detach().numpy() for p in ps))
    return out
