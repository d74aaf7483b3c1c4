"""rnngraph's standard cells written as PyTorch modules, looped over time in Python.

The baselines ``torch-eager``, ``torchscript`` and ``torch-compile`` of the benchmark: the form
of PyTorch's fastrnns ``custom_lstms.py`` (a cell module called once per timestep by a layer
module; both input and recurrent products inside the cell, every timestep), with the equations
of :mod:`rnngraph.cells` (gate order i, f, g, o; r, z, n for the GRU; layer norm eps 1e-5).
Parameter names mirror rnngraph's with ``_`` for ``.`` (``W.weight`` -> ``W_weight``), so
:func:`load_rnngraph_params` copies an rnngraph parameter dict in (the tests compare the two).

Every module takes and returns float tensors: a stack maps x (T, S, I) to the last layer's
h (T, S, H), starting from zero states. TorchScript compiles the modules as written.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LAYER_NORM_EPS = 1e-5  # as rnngraph.ops.LAYER_NORM_EPS and nn.LayerNorm


def _uniform(*shape: int, hidden: int) -> nn.Parameter:
    """PyTorch's RNN initialisation: U(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1.0 / math.sqrt(hidden)
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class LSTMCell(nn.Module):
    """c' = sigmoid(f)*c + sigmoid(i)*tanh(g), h' = sigmoid(o)*tanh(c') of W x + b_W + U h + b_U."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.W_weight = _uniform(4 * hidden, input_size, hidden=hidden)
        self.W_bias = _uniform(4 * hidden, hidden=hidden)
        self.U_weight = _uniform(4 * hidden, hidden, hidden=hidden)
        self.U_bias = _uniform(4 * hidden, hidden=hidden)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        gates = torch.mm(x, self.W_weight.t()) + self.W_bias + torch.mm(h, self.U_weight.t()) + self.U_bias
        i, f, g, o = gates.chunk(4, 1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c_next), c_next


class PeepholeLSTMCell(LSTMCell):
    """The LSTM with peepholes: i and f read c[t-1] (w_ci, w_cf), o reads c[t] (w_co)."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__(input_size, hidden)
        self.w_ci, self.w_cf, self.w_co = (_uniform(hidden, hidden=hidden) for _ in range(3))

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        gates = torch.mm(x, self.W_weight.t()) + self.W_bias + torch.mm(h, self.U_weight.t()) + self.U_bias
        zi, zf, zg, zo = gates.chunk(4, 1)
        i = torch.sigmoid(zi + self.w_ci * c)
        f = torch.sigmoid(zf + self.w_cf * c)
        c_next = f * c + i * torch.tanh(zg)
        o = torch.sigmoid(zo + self.w_co * c_next)
        return o * torch.tanh(c_next), c_next


class GRUCell(nn.Module):
    """torch.nn.GRU's cell: r, z = sigmoid(.), n = tanh(W_n x + b + r*(U_n h + b)), h' = (1-z)*n + z*h.
    Takes and returns an unused c so that every cell has one signature."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.W_weight = _uniform(3 * hidden, input_size, hidden=hidden)
        self.W_bias = _uniform(3 * hidden, hidden=hidden)
        self.U_weight = _uniform(3 * hidden, hidden, hidden=hidden)
        self.U_bias = _uniform(3 * hidden, hidden=hidden)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        xr, xz, xn = (torch.mm(x, self.W_weight.t()) + self.W_bias).chunk(3, 1)
        hr, hz, hn = (torch.mm(h, self.U_weight.t()) + self.U_bias).chunk(3, 1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h, c


class LayerNormLSTMCell(nn.Module):
    """fastrnns' LayerNormLSTMCell: gates = LN_i(W x) + LN_h(U h) (no linear biases),
    c' = LN_c(sigmoid(f)*c + sigmoid(i)*tanh(g)), h' = sigmoid(o)*tanh(c')."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden, self.eps = hidden, LAYER_NORM_EPS
        self.W_weight = _uniform(4 * hidden, input_size, hidden=hidden)
        self.U_weight = _uniform(4 * hidden, hidden, hidden=hidden)
        for name, n in (("ln_i", 4 * hidden), ("ln_h", 4 * hidden), ("ln_c", hidden)):
            setattr(self, f"{name}_weight", nn.Parameter(torch.ones(n)))
            setattr(self, f"{name}_bias", nn.Parameter(torch.zeros(n)))

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
        n4 = [4 * self.hidden]
        gates = F.layer_norm(torch.mm(x, self.W_weight.t()), n4, self.ln_i_weight, self.ln_i_bias, self.eps) \
            + F.layer_norm(torch.mm(h, self.U_weight.t()), n4, self.ln_h_weight, self.ln_h_bias, self.eps)
        i, f, g, o = gates.chunk(4, 1)
        c_next = F.layer_norm(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g), [self.hidden],
                              self.ln_c_weight, self.ln_c_bias, self.eps)
        return torch.sigmoid(o) * torch.tanh(c_next), c_next


CELLS = {"lstm": LSTMCell, "peephole_lstm": PeepholeLSTMCell, "gru": GRUCell, "layernorm_lstm": LayerNormLSTMCell}


class Layer(nn.Module):
    """One cell looped over the window from zero states: x (T, S, I) -> h (T, S, H)."""

    def __init__(self, cell: nn.Module):
        super().__init__()
        self.cell = cell
        self.hidden = cell.hidden

    def forward(self, x: Tensor) -> Tensor:
        h = torch.zeros(x.size(1), self.hidden, dtype=x.dtype, device=x.device)
        c = torch.zeros_like(h)
        inputs = x.unbind(0)
        outputs = torch.jit.annotate(List[Tensor], [])
        for t in range(len(inputs)):
            h, c = self.cell(inputs[t], h, c)
            outputs += [h]
        return torch.stack(outputs)


class Stack(nn.Module):
    """``layers`` Layers of one cell, layer k reading layer k-1's h."""

    def __init__(self, cell: str, layers: int, input_size: int, hidden: int):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"no PyTorch form of cell {cell!r} (have {', '.join(CELLS)})")
        self.layers = nn.ModuleList([Layer(CELLS[cell](input_size if k == 0 else hidden, hidden))
                                     for k in range(layers)])

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def load_rnngraph_params(stack: Stack, params: dict) -> None:
    """Copy rnngraph parameters (``layer{k}.W.weight`` ... as NumPy arrays) into ``stack``."""
    with torch.no_grad():
        for name, value in params.items():
            layer, _, rest = name.partition(".")
            cell = stack.layers[int(layer.removeprefix("layer"))].cell
            target = getattr(cell, rest.replace(".", "_"))
            target.copy_(torch.as_tensor(value, dtype=target.dtype))
