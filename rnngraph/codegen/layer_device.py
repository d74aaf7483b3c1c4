"""The CUDA backend of :class:`rnngraph.layer.CompiledRNN`: shared parameters, one
:class:`~rnngraph.codegen.program.CudaProgram` per (T, S), arrays in and out without host copies.

Every launch runs on the RNN's one numba stream. PyTorch tensors are copied in and out by torch
operations on torch's current stream (codegen/torch_io.py); for CuPy arrays the copies run on
our stream, ordered after the caller's current stream (an event recorded there, waited on by
ours), and the caller's stream waits for ours at the end: no host synchronisation (NumPy
outputs excepted: they are copied to the host and the stream synchronised). Inputs are copied device to
device into the program's buffers (its launches are captured in CUDA graphs with fixed
addresses); outputs are new arrays of the caller's kind, so the next call cannot overwrite them.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..arrays import array_kind
from ..ir import INDEX
from ..lengths import stream_order, with_lengths
from ..schedule import Schedule
from . import library
from .device import as_device, in_simulator
from .program import CudaProgram
from .tuning import LoopTuning


class DeviceParameters:
    """name -> float32 device array of every parameter, shared by the plans of one RNN, and the
    RNN's stream. ``given`` arrays with ``__cuda_array_interface__`` (torch, CuPy, numba) are
    used in place (their owner keeps the memory); other values are copied in. Raises
    ValueError for a given device array of the wrong dtype, shape or layout."""

    def __init__(self, graph, init: dict[str, np.ndarray], given: dict | None = None):
        self.stream = cuda.stream()
        self.arrays = {}
        given = given or {}
        for p in graph.params:
            v = given.get(p.name)
            if v is not None and (hasattr(v, "__cuda_array_interface__") or getattr(v, "__cuda_ndarray__", False)):
                arr = as_device(v, self.stream)
                if np.dtype(arr.dtype) != np.float32 or tuple(arr.shape) != p.shape or not arr.is_c_contiguous():
                    raise ValueError(f"parameter {p.name!r}: expected a C-contiguous float32 device array of shape "
                                     f"{p.shape}, got {np.dtype(arr.dtype).name} {tuple(arr.shape)}")
                self.arrays[p.name] = arr
            else:
                value = init[p.name] if v is None else np.asarray(v)
                self.arrays[p.name] = cuda.to_device(np.ascontiguousarray(value, np.float32), stream=self.stream)

    def set(self, values: dict) -> None:
        for name, v in values.items():
            src = as_device(v, self.stream) if hasattr(v, "__cuda_array_interface__") else \
                np.ascontiguousarray(v, np.float32)
            self.arrays[name].copy_to_device(src, stream=self.stream)


def caller_stream(kind: str, like):
    """The numba stream of the caller's current stream for CuPy arrays, else None (PyTorch's
    tensors take codegen/torch_io.py's path)."""
    if in_simulator():
        return None
    if kind == "cupy":
        import cupy
        handle = cupy.cuda.get_current_stream().ptr
    else:
        return None
    return cuda.legacy_default_stream() if handle == 0 else cuda.external_stream(handle)


def _wait(waiting, on) -> None:
    """Work enqueued on ``waiting`` from now on starts after the work enqueued on ``on`` so far."""
    if waiting is None or on is None:
        return
    ev = cuda.event(timing=False)
    ev.record(on)
    ev.wait(waiting)


class DevicePlan:
    """The generated program of one (T, S), its parameters shared (see the module docstring), its
    loop kernels of code shape ``tuning`` (None: the defaults for the schedule's S)."""

    def __init__(self, schedule: Schedule, params: DeviceParameters, backward: bool, tuning: LoopTuning | None = None):
        self.schedule = schedule
        self.params = params
        self.stream = params.stream
        self.program = CudaProgram(schedule, stream=self.stream, params=params.arrays, backward=backward,
                                   tuning=tuning)
        self.buf, self.g = self.program.buf, schedule.graph
        self.T, self.S = schedule.window, schedule.streams
        self.generation = 0
        self.key: tuple = ()
        self._torch = None  # TorchIO, made at the first call with torch tensors

    def torch_io(self, like):
        if self._torch is None:
            from .torch_io import TorchIO
            self._torch = TorchIO(self.program, like.device)
        return self._torch

    # ------------------------------------------------------------------ arrays in and out
    def _device_in(self, what: str, x, dtype=np.float32):
        """``x`` as a device array on our stream: device arrays in place, host arrays copied."""
        kind = array_kind(x)
        if kind == "cupy":
            import cupy
            x = cupy.ascontiguousarray(x.astype(dtype, copy=False))
        elif kind == "host":
            return cuda.to_device(np.ascontiguousarray(np.asarray(x), dtype), stream=self.stream)
        arr = as_device(x, self.stream)
        if np.dtype(arr.dtype) != np.dtype(dtype):
            raise ValueError(f"{what}: expected {np.dtype(dtype).name}, got {np.dtype(arr.dtype).name}")
        if not arr.is_c_contiguous():
            raise ValueError(f"{what}: a non-contiguous numba device array; pass a contiguous copy")
        return arr

    def _new(self, kind: str, like, shape: tuple):
        """A new float32 array of ``shape`` of the caller's kind, and its numba view."""
        if kind == "cupy":
            import cupy
            c = cupy.empty(shape, np.float32)
            return c, cuda.as_cuda_array(c, sync=False)
        d = cuda.device_array(shape, np.float32, stream=self.stream)
        return d, d

    def _out(self, kind: str, like, src):
        """A copy of the device array ``src`` as the caller's kind (host: a NumPy array, valid
        after the stream is synchronised)."""
        if kind == "host":
            return src.copy_to_host(stream=self.stream)
        out, view = self._new(kind, like, tuple(src.shape))
        view.copy_to_device(src, stream=self.stream)
        return out

    def _finish(self, kind: str, caller) -> None:
        if kind == "host":
            self.stream.synchronize()
        else:
            _wait(caller, self.stream)

    # ------------------------------------------------------------------ forward / backward
    def forward(self, x, h0: dict, masks: dict, keep: bool, copy_states: bool = True, valid=None):
        """(y, h_T, None) as arrays of x's kind; with torch tensors and not ``copy_states``, h_T
        are views of the plan's buffers (other kinds are always copied); valid (T, S) of
        rnngraph.lengths.valid_steps for a plan of the variable-length graph, else None."""
        kind = array_kind(x)
        if kind == "torch":
            y, h_T = self.torch_io(x).forward(x, h0, masks, copy_states, valid)
            return y, h_T, None
        x, masks = with_lengths(self.g, x, masks, valid)
        caller = caller_stream(kind, x)
        _wait(self.stream, caller)
        if self._torch is not None:
            self._torch.h0_zero = False  # this path writes the history rows too
        b, g = self.buf, self.g
        b.refresh_transposed(self.stream)  # the parameters may have changed since the last call
        xin = g.by_name["x"]
        src = self._device_in("x", x, np.int32 if xin.dtype == INDEX else np.float32)
        b.V["x"].copy_to_device(src, stream=self.stream)
        for s in g.states:
            dst = b.V[s.node][:s.depth]
            if s.name in h0:
                dst.copy_to_device(self._device_in(f"h0[{s.name!r}]", h0[s.name]), stream=self.stream)
            else:
                library.fill(dst, 0.0, stream=self.stream)
        for m, v in masks.items():
            b.V[m].copy_to_device(self._device_in(f"masks[{m!r}]", v), stream=self.stream)
        if valid is not None:
            b.set_stream_order(*stream_order(valid))
        self.program.run_forward()
        out = g.outputs[0]
        D = b.names.depth(out)
        y = self._out(kind, x, b.V[out][D:D + self.T])
        h_T = {s.name: self._out(kind, x, b.V[s.node][self.T:self.T + s.depth]) for s in g.states}
        self._finish(kind, caller)
        return y, h_T, None

    def backward(self, pending, dy, dh_T: dict, input_grads: bool = True):
        kind, like = pending.kind, pending.like
        if kind == "torch":
            dx, dh0, grads = self.torch_io(like).backward(dy, dh_T, input_grads)
            return dx, dh0, {p.name: v for p, v in zip(self.g.params, grads)}
        caller = caller_stream(kind, like)
        _wait(self.stream, caller)
        b, g = self.buf, self.g
        library.fill(b.zeroed_grads, 0.0, stream=self.stream)
        library.fill(b.param_grad_arena, 0.0, stream=self.stream)
        out = g.outputs[0]
        D = b.names.depth(out)
        b.G[out][D:D + self.T].copy_to_device(self._device_in("dy", dy), stream=self.stream)
        for s in g.states:
            if s.name in dh_T:
                library.add_into(b.G[s.node][self.T:self.T + s.depth], self._device_in(f"dh_T[{s.name!r}]",
                                                                                       dh_T[s.name]),
                                 stream=self.stream)
        self.program.run_backward()
        dx = None if g.by_name["x"].dtype == INDEX or not input_grads else self._out(kind, like, b.G["x"][:self.T])
        dh0 = {s.name: self._out(kind, like, b.G[s.node][:s.depth]) for s in g.states} if input_grads else None
        flat = self._out(kind, like, b.param_grad_arena)
        dparams, off = {}, 0
        for p in g.params:
            n = int(np.prod(p.shape))
            dparams[p.name] = flat[off:off + n].reshape(p.shape)
            off += n
        self._finish(kind, caller)
        return dx, dh0, dparams


__all__ = ["DeviceParameters", "DevicePlan", "caller_stream"]
