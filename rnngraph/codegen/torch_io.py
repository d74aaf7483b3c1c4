"""PyTorch tensors in and out of one compiled program, as torch operations on torch's stream.

Measured on the H200 (bench/results/h200-20261202-torch-layer-lstm-numba-copies.json): moving a call's
arrays with numba (``cuda.as_cuda_array`` of every tensor, numba copies and events) made a
2-layer LSTM's forward and backward at B = 1 take 3.8 ms where its kernels take about 1.5. Here
the program's buffers are wrapped as torch tensors once (zero-copy, ``__cuda_array_interface__``),
every copy, zeroing and transposition is one torch operation on the caller's current stream, and
the program's own stream (a ``torch.cuda.ExternalStream`` over it) is ordered against that
stream with ``wait_stream`` before and after its launches.
"""
from __future__ import annotations

import numpy as np
import torch

from ..ir import INDEX
from ..lengths import LENGTHS, stream_order
from .device import stream_handle


class TorchIO:
    """Torch views of a :class:`~rnngraph.codegen.program.CudaProgram`'s buffers (see the module
    docstring); ``run_forward`` / ``run_backward`` take and return torch CUDA tensors."""

    def __init__(self, program, device: torch.device):
        b, g, T = program.buf, program.g, program.T
        self.program, self.g, self.T = program, g, T
        t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731  (zero-copy)
        out = g.outputs[0]
        D = b.names.depth(out)
        self.x = t(b.V["x"])
        self.y, self.gy = t(b.V[out][D:D + T]), t(b.G[out][D:D + T])
        self.h0 = {s.name: t(b.V[s.node][:s.depth]) for s in g.states}
        self.h_T = {s.name: t(b.V[s.node][T:T + s.depth]) for s in g.states}
        self.dh0 = {s.name: t(b.G[s.node][:s.depth]) for s in g.states}
        self.dh_T = {s.name: t(b.G[s.node][T:T + s.depth]) for s in g.states}
        self.masks = {n.name: t(b.V[n.name]) for n in g.inputs if "dropout" in n.attr or LENGTHS in n.attr}
        self.length_masks = [self.masks[n.name] for n in g.inputs if LENGTHS in n.attr]
        self._keep: list = []  # (pinned host, device, pinned order and counts, event) x 2, made on first use: the
        # valid steps (T, S) as bools; the stream order (S,) and valid streams (T,) of Buffers.set_stream_order
        self.order, self.valid_streams = t(b.order), t(b.valid_streams)
        self._zeros: dict = {}  # dtype -> a 0-dim zero on the device
        self.dx = None if g.by_name["x"].dtype == INDEX else t(b.G["x"][:T])
        # the part of the gradient arena a backward zeroes first: the gradients it writes whole without
        # reading them (Buffers ``unzeroed``, passes/twin_biases.py) lie past it
        self.zeroed_grads, self.param_grads = t(b.zeroed_grads), t(b.param_grad_arena)
        self.transposed = [(t(b.P[name]), t(pt)) for name, pt in b.PT.items()]
        self.sizes = [int(np.prod(p.shape)) for p in g.params]
        self.shapes = [p.shape for p in g.params]
        self.h0_zero = False  # the history rows hold zeros from the last call (nothing else writes them)
        self.last_caller = None
        self.stream = torch.cuda.ExternalStream(stream_handle(program.stream), device=device)

    def _caller(self):
        """Torch's current stream; when it is not the previous call's, it first waits for our
        stream (that call's launches may still read the buffers this call is about to write)."""
        caller = torch.cuda.current_stream(self.x.device)
        if caller != self.last_caller:
            caller.wait_stream(self.stream)
            self.last_caller = caller
        return caller

    def _launch(self, caller, run) -> None:
        self.stream.wait_stream(caller)
        run()
        caller.wait_stream(self.stream)

    def _zero(self, dtype) -> torch.Tensor:
        """A 0-dim zero of ``dtype`` on the device, made once (a CPU scalar made torch.where copy
        it to the device and synchronise the stream: 2.4 ms a call on the H200)."""
        if dtype not in self._zeros:
            self._zeros[dtype] = torch.zeros((), dtype=dtype, device=self.x.device)
        return self._zeros[dtype]

    def _keep_on_device(self, valid: np.ndarray) -> torch.Tensor:
        """``valid`` (T, S) > 0 as a bool tensor on the device, and the program's stream order and
        valid streams set from it (rnngraph.lengths.stream_order), enqueued on torch's current
        stream through two pinned buffers taken in turn, each rewritten only after its previous
        copies finished (an event): the host may run a call ahead of the device without waiting."""
        T, S = valid.shape
        if not self._keep:
            self._keep = [(torch.empty((T, S), dtype=torch.bool, pin_memory=True),
                           torch.empty((T, S), dtype=torch.bool, device=self.x.device),
                           torch.empty(S + T, dtype=torch.int32, pin_memory=True), torch.cuda.Event())
                          for _ in range(2)]
        self._keep.reverse()
        host, dev, order_and_counts, copied = self._keep[0]
        copied.synchronize()
        np.greater(valid, 0, out=host.numpy())
        order_and_counts.numpy()[:S], order_and_counts.numpy()[S:] = stream_order(valid)
        dev.copy_(host, non_blocking=True)
        self.order.copy_(order_and_counts[:S], non_blocking=True)
        self.valid_streams.copy_(order_and_counts[S:], non_blocking=True)
        copied.record()
        return dev

    @torch.no_grad()
    def forward(self, x, h0: dict, masks: dict, copy_states: bool = True, valid=None):
        """(y, h_T): y a new tensor, h_T new tensors (``copy_states``) or views of the program's
        buffers (valid until its next forward); x (T, S, I) (int ids for an embedding), h0 every
        state or {}; valid (T, S) NumPy (rnngraph.lengths.valid_steps) for the program of a
        variable-length graph: its length masks are filled from it and x's padded float steps
        stored as zeros (rnngraph.lengths.zero_padded_steps's rule), else None."""
        caller = self._caller()
        if valid is None:
            self.x.copy_(x)
        else:
            keep = self._keep_on_device(valid)
            for m in self.length_masks:
                m.copy_(keep[:, :, None].expand_as(m))
            if not x.is_floating_point():
                self.x.copy_(x)
            else:
                kept = keep.view(keep.shape + (1,) * (x.dim() - 2))
                if x.device != self.x.device:  # copy_ moved it; torch.where(out=) does not
                    x = x.to(self.x.device)
                zero = self._zero(x.dtype)
                if x.dtype == self.x.dtype:
                    torch.where(kept, x, zero, out=self.x)
                else:
                    self.x.copy_(torch.where(kept, x, zero))
        if h0 or not self.h0_zero:
            for name, dst in self.h0.items():
                dst.copy_(_tensor(h0[name])) if name in h0 else dst.zero_()
        self.h0_zero = not h0
        for name, m in masks.items():
            self.masks[name].copy_(_tensor(m))
        for p, pt in self.transposed:  # the parameters may have changed since the last call
            pt.copy_(p.t())
        self._launch(caller, self.program.run_forward)
        return self.y.clone(), {name: v.clone() if copy_states else v for name, v in self.h_T.items()}

    @torch.no_grad()
    def backward(self, dy, dh_T: dict, input_grads: bool = True):
        """(dx, dh0, dparams) as new tensors (dparams: a list in graph order, views of one);
        dx and dh0 None unless ``input_grads``."""
        caller = self._caller()
        self.zeroed_grads.zero_()
        self.param_grads.zero_()
        self.gy.copy_(_tensor(dy))
        for name, d in dh_T.items():
            self.dh_T[name].add_(_tensor(d).to(self.dh_T[name].device))
        self._launch(caller, self.program.run_backward)
        flat = self.param_grads.clone()
        dparams = [v.view(shape) for v, shape in zip(flat.split(self.sizes), self.shapes)]
        if not input_grads:
            return None, None, dparams
        dx = None if self.dx is None else self.dx.clone()
        return dx, {name: v.clone() for name, v in self.dh0.items()}, dparams


def _tensor(a):
    """A tensor as it is; host arrays (NumPy: the default dropout masks, states given so) as
    CPU tensors, which ``copy_`` moves to the device."""
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
