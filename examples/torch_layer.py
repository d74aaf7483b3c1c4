"""A custom cell as a PyTorch layer: rnngraph.torch.RNN inside an nn.Module, trained with torch.optim.

    python examples/torch_layer.py            # about 10 s on a CPU; on CUDA when torch has it

The cell is an LSTM with a coupled input and forget gate and peepholes (CIFG, Greff et al.
2017): the input gate is 1 - f, so the gates take 3H rows instead of 4H:
    f  = sigmoid(W_f x + U_f h + w_cf * c)
    c' = f * c + (1 - f) * tanh(W_g x + U_g h)
    o  = sigmoid(W_o x + U_o h + w_co * c')
    h' = o * tanh(c')
``RNN(cifg_lstm, hidden, layers)`` compiles the stack (CPU tensors run the NumPy backend, CUDA
tensors generated kernels); its parameters are ordinary nn.Parameters (``layer0_W_weight``,
...), its gradients come from the compiled backward, so Adam, clip_grad_norm_ and state_dict
work as for nn.LSTM.

The task: echo the input three timesteps late, y[t] = x[t-3] (0 for t < 3), x ~ U(-1, 1). The
mean squared error starts at about 1/3 (the variance of x) and falls as the cell learns to hold
three values.
"""
import time

import torch
from torch import nn

import rnngraph as rg
from rnngraph.torch import RNN

DELAY = 3


@rg.cell
def cifg_lstm(x, h: rg.State, c: rg.State, *, hidden: int):
    z = rg.linear(x, 3 * hidden, name="W") + rg.linear(h, 3 * hidden, name="U")   # (3H,) rows f, g, o
    zf, zg, zo = rg.split(z, 3)
    f = rg.sigmoid(zf + rg.param("w_cf", hidden) * c)         # the peephole reads c[t-1]
    c_next = f * c + (1 - f) * rg.tanh(zg)
    o = rg.sigmoid(zo + rg.param("w_co", hidden) * c_next)    # the output gate reads c[t]
    h_next = o * rg.tanh(c_next)
    return h_next, {"h": h_next, "c": c_next}


class Echo(nn.Module):
    """x (T, B, 1) -> prediction (T, B, 1): two CIFG layers and a linear head."""

    def __init__(self, hidden: int = 24, layers: int = 2):
        super().__init__()
        self.rnn = RNN(cifg_lstm, hidden, layers, input_size=1)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        y, (h, c) = self.rnn(x)    # y (T, B, H); h, c (layers, B, H)
        return self.head(y)


def batch(T: int, B: int, device) -> tuple:
    """Inputs x (T, B, 1) uniform in [-1, 1] and targets x delayed by DELAY, (T, B, 1)."""
    x = torch.rand(T, B, 1, device=device) * 2 - 1
    y = torch.zeros_like(x)
    y[DELAY:] = x[:-DELAY]
    return x, y


def main(steps: int = 300, T: int = 30, B: int = 32, budget_s: float = 20.0):
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Echo().to(device)
    print(model)
    x, y = batch(T, B, device)
    print(model.rnn.compiled(x.device, x.dtype).schedule(T, B))   # the parallel schedule of (T, B)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        x, y = batch(T, B, device)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == 1 or step % 25 == 0:
            print(f"step {step:3d}  mse {loss.item():.4f}  {time.perf_counter() - start:5.1f} s")
        if time.perf_counter() - start > budget_s:
            print(f"stopping at step {step}: the time budget of {budget_s:.0f} s is spent")
            break
    model.eval()
    with torch.no_grad():               # inference: no activations kept for a backward
        x, y = batch(T, 256, device)
        print(f"held-out mse {nn.functional.mse_loss(model(x), y).item():.4f} (an output of 0 scores 0.33) on {device}")


if __name__ == "__main__":
    main()
