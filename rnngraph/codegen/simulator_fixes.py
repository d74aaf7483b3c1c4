"""A fix to numba-cuda's CUDA simulator, applied when rnngraph's kernel helpers (codegen/device.py)
are imported with ``NUMBA_ENABLE_CUDASIM=1`` (tests, and users without a GPU).

numba-cuda 0.30.4's simulator runs each thread of a block as a Python thread and gives the
block one array per ``cuda.shared.array`` call site (file, line), made by the first thread that
gets there: ``FakeCUDAShared.array`` looks the site up and inserts a new array without a lock. Two
threads that meet there can each make their own array; they then write and read different
"shared" memory, and a sum reads a never-written ``np.empty`` element. Seen as a recurrent GEMM's
output of 3.1e8 in one of about 40 forward windows of a 3-unit LSTM with
``sys.setswitchinterval(1e-6)`` (and once in a full test run: a training step that disagreed
with an identical one). :func:`apply` takes a lock around the lookup; the array a site gets, its
shape, dtype and the dynamic shared memory are numba's.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["apply"]

_LOCK = threading.Lock()


def _shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` with the call site's array made under a lock."""
    from numba.core import types
    from numba.np import numpy_support

    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:  # dynamic shared memory: one buffer for every such call
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    frame = sys._getframe(1)
    site = (frame.f_code.co_filename, frame.f_lineno)  # numba's key: the caller's file and line
    with _LOCK:
        array = self._allocations.get(site)
        if array is None:
            array = self._allocations[site] = np.empty(shape, dtype)
    return array


def apply() -> None:
    """Install the locked ``FakeCUDAShared.array`` (idempotent; nothing outside the simulator)."""
    from .device import in_simulator

    if not in_simulator():
        return
    from numba.cuda.simulator import kernelapi

    kernelapi.FakeCUDAShared.array = _shared_array
