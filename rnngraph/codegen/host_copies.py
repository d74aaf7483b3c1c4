"""Host <-> device copies of a training call through pinned staging buffers and the driver.

numba's ``DeviceNDArray.copy_to_device`` / ``copy_to_host`` cost about 100 us of host time each
for a small array (checks, a pageable copy the driver stages itself); a training step of a small
model makes four of them (inputs, targets, the loss column, the finite sums): on the H200 that
was about a quarter of a 1.5 ms char-LM step at S = 1 (bench/results/h200-20261202-lm-step-trace-step-graph.json).
:class:`Staging` keeps one pinned host buffer per device array it serves and copies with
``cuMemcpyHtoDAsync`` / ``cuMemcpyDtoHAsync`` (``cuda.bindings.driver``) on the step's stream.

A staging buffer is rewritten only after its previous copy finished (a CUDA event recorded after
each copy, waited on before the next write), so back-to-back calls without a synchronisation are
safe. In numba's CUDA simulator (no driver) the copies are numba's.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .device import in_simulator, stream_handle
from .graphs import check as _check
from .graphs import driver as _driver

__all__ = ["Staging"]


class _Buffer:
    """One pinned host array, the event of its last copy, and the device array it serves (its
    address looked up once: a step's buffers never move)."""

    def __init__(self, shape, dtype, sim: bool, dev):
        self.host = np.empty(shape, dtype) if sim else cuda.pinned_array(shape, dtype)
        self.drv = None if sim else _driver()
        self.event = None if sim else _check(self.drv.cuEventCreate(self.drv.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        self.dev = dev
        self.dev_ptr = None if sim else int(dev.__cuda_array_interface__["data"][0])
        self.host_ptr = None if sim else self.host.ctypes.data

    def wait(self) -> None:
        """Until the last copy from or into ``host`` has finished."""
        if self.event is not None:
            _check(self.drv.cuEventSynchronize(self.event))

    def record(self, stream) -> None:
        """After the copies enqueued on ``stream`` (the driver's CUstream) so far."""
        if self.event is not None:
            _check(self.drv.cuEventRecord(self.event, stream))


class Staging:
    """Pinned staging buffers for copies on ``stream``, one per key (a name the caller chooses,
    e.g. the graph input's), made on first use with the device array's shape and dtype."""

    def __init__(self, stream):
        self.stream, self.sim = stream, in_simulator()
        self._buffers: dict[str, _Buffer] = {}
        # the driver module and the stream as its type, once: a small model's training call makes
        # five copies, and looking these up for each was a good part of their host time
        # (bench/results/h100-20261205-step-host-profile.txt)
        self._drv = None if self.sim else _driver()
        self._cu_stream = None if self.sim else self._drv.CUstream(stream_handle(stream))

    def _buffer(self, key: str, dev) -> _Buffer:
        buf = self._buffers.get(key)
        if buf is None or buf.dev is not dev:
            if buf is None or buf.host.shape != dev.shape or buf.host.dtype != dev.dtype:
                buf = self._buffers[key] = _Buffer(dev.shape, dev.dtype, self.sim, dev)
            else:  # the same shape from or into another device array: the pinned buffer serves it
                buf.dev = dev
                buf.dev_ptr = None if self.sim else int(dev.__cuda_array_interface__["data"][0])
        return buf

    def to_device(self, key: str, dst, src) -> None:
        """Enqueue ``dst[...] = src`` (a host array of ``dst``'s size, any dtype NumPy casts to
        ``dst``'s, as ``astype`` would) on the stream; ``src`` may be reused at once.
        ValueError when the sizes differ."""
        src = np.asarray(src)
        if src.size != dst.size:
            raise ValueError(f"{key}: {src.size} values for a buffer of {dst.size}")
        buf = self._buffer(key, dst)
        buf.wait()
        np.copyto(buf.host, src.reshape(dst.shape), casting="unsafe")
        if self.sim:
            dst.copy_to_device(buf.host, stream=self.stream)
            return
        _check(self._drv.cuMemcpyHtoDAsync(buf.dev_ptr, buf.host_ptr, buf.host.nbytes, self._cu_stream))
        buf.record(self._cu_stream)

    def wait(self, key: str) -> None:
        """Until the last copy from or into ``key``'s buffer has finished (nothing in the
        simulator, whose copies are done when enqueued)."""
        self._buffers[key].wait()

    def to_host(self, key: str, src) -> np.ndarray:
        """Enqueue a copy of the device array ``src`` into its staging buffer and return that
        buffer: read it after the stream is synchronised and before the next ``to_host`` of
        ``key`` (copy what you keep)."""
        buf = self._buffer(key, src)
        buf.wait()
        if self.sim:
            src.copy_to_host(buf.host, stream=self.stream)
            return buf.host
        _check(self._drv.cuMemcpyDtoHAsync(buf.host_ptr, buf.dev_ptr, buf.host.nbytes, self._cu_stream))
        buf.record(self._cu_stream)
        return buf.host
