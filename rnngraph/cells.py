"""Standard cells, written only with the public API (the compiler has no special cases for them).

Parameter layouts follow PyTorch so weights can be copied across: ``W.weight`` is
``weight_ih`` (gates x input), ``U.weight`` is ``weight_hh``, ``W.bias``/``U.bias`` are
``bias_ih``/``bias_hh``, gate order i, f, g, o for LSTMs and r, z, n for GRUs. Every cell
takes input x of any size and states of size ``hidden``; each returns (h_next, next states).
"""
from __future__ import annotations

import math

from .ir import Init
from .trace import State, cell, layer_norm, linear, param, sigmoid, split, tanh


def _forget_bias_init(hidden: int, forget_bias: float) -> Init:
    """PyTorch's U(-1/sqrt(H), 1/sqrt(H)) plus ``forget_bias`` on the f rows (H:2H) of a 4H bias."""
    offsets = ((hidden, 2 * hidden, float(forget_bias)),) if forget_bias else ()
    return Init("uniform", 1.0 / math.sqrt(hidden), offsets)


@cell
def elman(x, h: State, *, hidden: int):
    """Elman tanh RNN as torch.nn.RNN: h' = tanh(W x + b_W + U h + b_U)."""
    h_next = tanh(linear(x, hidden, name="W") + linear(h, hidden, name="U"))
    return h_next, {"h": h_next}


@cell
def lstm(x, h: State, c: State, *, hidden: int, forget_bias: float = 0.0):
    """LSTM as torch.nn.LSTM (gate order i, f, g, o; two bias vectors).

    i, f, o = sigmoid(.), g = tanh(.) of (W x + b_W + U h + b_U); c' = f*c + i*g; h' = o*tanh(c').
    forget_bias is added to the initial b_W of the forget gate (Jozefowicz et al. 2015 use 1).
    """
    gates = linear(x, 4 * hidden, name="W", bias_init=_forget_bias_init(hidden, forget_bias)) \
        + linear(h, 4 * hidden, name="U")
    zi, zf, zg, zo = split(gates, 4)
    c_next = sigmoid(zf) * c + sigmoid(zi) * tanh(zg)
    h_next = sigmoid(zo) * tanh(c_next)
    return h_next, {"h": h_next, "c": c_next}


@cell
def peephole_lstm(x, h: State, c: State, *, hidden: int, forget_bias: float = 0.0):
    """LSTM with peepholes (Gers & Schmidhuber 2000; ONNX LSTM with P): the input and forget
    gates read c[t-1], the output gate reads c[t]: i = sigmoid(z_i + w_ci*c), f = sigmoid(z_f +
    w_cf*c), c' = f*c + i*tanh(z_g), o = sigmoid(z_o + w_co*c'), h' = o*tanh(c')."""
    gates = linear(x, 4 * hidden, name="W", bias_init=_forget_bias_init(hidden, forget_bias)) \
        + linear(h, 4 * hidden, name="U")
    zi, zf, zg, zo = split(gates, 4)
    i_gate = sigmoid(zi + param("w_ci", hidden) * c)
    f_gate = sigmoid(zf + param("w_cf", hidden) * c)
    c_next = f_gate * c + i_gate * tanh(zg)
    o_gate = sigmoid(zo + param("w_co", hidden) * c_next)
    h_next = o_gate * tanh(c_next)
    return h_next, {"h": h_next, "c": c_next}


@cell
def gru(x, h: State, *, hidden: int):
    """GRU as torch.nn.GRU (reset applied after the recurrent product; gate order r, z, n):
    r = sigmoid(W_r x + b_Wr + U_r h + b_Ur), z likewise, n = tanh(W_n x + b_Wn + r*(U_n h + b_Un)),
    h' = (1 - z)*n + z*h."""
    xr, xz, xn = split(linear(x, 3 * hidden, name="W"), 3)
    hr, hz, hn = split(linear(h, 3 * hidden, name="U"), 3)
    r = sigmoid(xr + hr)
    z = sigmoid(xz + hz)
    n = tanh(xn + r * hn)
    h_next = (1 - z) * n + z * h
    return h_next, {"h": h_next}


@cell
def gru_reset_before(x, h: State, *, hidden: int):
    """GRU in ONNX's default form (linear_before_reset=0; Cho et al. 2014): the reset gate scales
    h before the candidate's recurrent product: n = tanh(W_n x + b_Wn + Un (r*h) + b_Un).
    Params: W (3H x I, rows r, z, n), U (2H x H, rows r, z), Un (H x H)."""
    xr, xz, xn = split(linear(x, 3 * hidden, name="W"), 3)
    hr, hz = split(linear(h, 2 * hidden, name="U"), 2)
    r = sigmoid(xr + hr)
    z = sigmoid(xz + hz)
    n = tanh(xn + linear(r * h, hidden, name="Un"))
    h_next = (1 - z) * n + z * h
    return h_next, {"h": h_next}


@cell
def layernorm_lstm(x, h: State, c: State, *, hidden: int):
    """LSTM with layer norm on both gate pre-activations and on the cell, as PyTorch's fastrnns
    ``custom_lstms.LayerNormLSTMCell``: gates = LN_i(W x) + LN_h(U h) (no linear biases; the
    layer norms carry them), c' = LN_c(f*c + i*g), h' = o*tanh(c')."""
    gates = layer_norm(linear(x, 4 * hidden, bias=False, name="W"), name="ln_i") \
        + layer_norm(linear(h, 4 * hidden, bias=False, name="U"), name="ln_h")
    zi, zf, zg, zo = split(gates, 4)
    c_next = layer_norm(sigmoid(zf) * c + sigmoid(zi) * tanh(zg), name="ln_c")
    h_next = sigmoid(zo) * tanh(c_next)
    return h_next, {"h": h_next, "c": c_next}


@cell
def skip_rnn(x, h: State, *, hidden: int):
    """A tanh RNN that also reads h[t-2]: h' = tanh(W x + b + U h[t-1] + V h[t-2]).
    Its state has depth 2 (the history keeps the last two values)."""
    h_next = tanh(linear(x, hidden, name="W") + linear(h, hidden, bias=False, name="U")
                  + linear(h.delayed(2), hidden, bias=False, name="V"))
    return h_next, {"h": h_next}


STANDARD = {c.__name__: c for c in (elman, lstm, peephole_lstm, gru, gru_reset_before, layernorm_lstm, skip_rnn)}
