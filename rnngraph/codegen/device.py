"""Device helpers shared by the fixed kernel library and generated code.

- :func:`in_simulator`, :func:`have_cupy`: what this process can run on.
- :func:`as_device`: any array to a numba device array, without copies or per-launch syncs for
  ``__cuda_array_interface__`` objects (CuPy, PyTorch).
- :func:`allow_dynamic_shared_memory`: a kernel's opt-in to its dynamic shared memory (past 48 KiB in all).
- launch helpers (:func:`launch_stream`, :func:`flat`, :func:`blocks`, :func:`row_threads`,
  :func:`check`) that every launcher uses, so launch configurations live in one place;
  :func:`cached_scratch`, the float32 scratch arrays launchers keep between calls.

numba-cuda decides simulator or GPU when ``numba.cuda`` is first imported (from the
``NUMBA_ENABLE_CUDASIM`` environment variable), so nothing here can switch it afterwards.
"""
from __future__ import annotations

import functools
import os

import numpy as np
from numba import cuda

# Threads per block of the elementwise / grid-stride kernels. The simulator runs each
# simulated thread in Python (~0.1 ms), so it gets small blocks.
ELEMENTWISE_THREADS = 256
# Largest block of the one-block-per-row kernels (layer norm, softmax); a power of two.
# Tests lower it to exercise the strided loops on tiny rows.
MAX_ROW_THREADS = 256
# Grid-stride kernels (reductions into a scalar, atomics) launch at most this many blocks.
MAX_REDUCE_BLOCKS = 264  # 2 per SM on an H200


def in_simulator() -> bool:
    """Whether numba-cuda runs kernels in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` was set
    before ``numba.cuda`` was first imported)."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


@functools.lru_cache(maxsize=None)
def have_cupy() -> bool:
    """Whether cuBLAS can be used (the library CuPy loads, codegen/cublas.py): CuPy importable,
    not in the simulator, a GPU present, and ``RNNGRAPH_NO_CUPY`` not set to a non-empty value other than ``0``."""
    if os.environ.get("RNNGRAPH_NO_CUPY", "0") not in ("", "0"):
        return False
    if in_simulator():
        return False
    try:
        if not cuda.is_available():
            return False
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CuPy absent, or built for another CUDA, or no driver
        return False


def is_device_array(x) -> bool:
    """Whether ``x`` is a numba device array (real or simulated)."""
    return bool(getattr(x, "__cuda_ndarray__", False))


def as_device(x, stream=None):
    """``x`` as a numba device array.

    - a numba device array is returned as is;
    - an object with ``__cuda_array_interface__`` (CuPy, PyTorch) is wrapped without a copy by
      ``cuda.as_cuda_array(x, sync=False)``: passing such objects straight to a kernel makes
      numba synchronize on their stream at every launch (ARCHITECTURE.md, numba quirks), so wrap once
      and reuse the result;
    - anything else is taken as host data (``np.asarray``) and copied to the device on ``stream``.
    """
    if is_device_array(x):
        return x
    if hasattr(x, "__cuda_array_interface__"):
        if in_simulator():  # the simulator has no as_cuda_array; its arrays are host arrays
            raise TypeError("a __cuda_array_interface__ array cannot be used in the CUDA simulator")
        return cuda.as_cuda_array(x, sync=False)
    return cuda.to_device(np.ascontiguousarray(x), stream=launch_stream(stream))


def launch_stream(stream):
    """The stream argument of a launch: numba's default stream (0) for ``None``."""
    return 0 if stream is None else stream


def stream_handle(stream) -> int:
    """The raw ``CUstream`` value of a numba stream (0 for the legacy default stream)."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        return 0
    h = stream.handle
    try:
        return int(h)
    except TypeError:  # older bindings: a ctypes handle
        return int(h.value or 0)


def allow_dynamic_shared_memory(compiled, nbytes: int) -> None:
    """Let the compiled kernel ``compiled`` (numba's ``_Kernel``, from ``dispatcher.compile``)
    launch with ``nbytes`` of dynamic shared memory: a kernel whose static and dynamic shared
    memory together pass 48 KiB must opt in (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``,
    CUDA Programming Guide, "Shared Memory"; the H200 allows 227 KiB a block, static and dynamic
    together), so any nonzero ``nbytes`` is allowed (a loop kernel's 32 KiB of tiled partial sums
    beside its 32 KiB of static weight rows need it). Nothing to do in the simulator or for none.
    Raises numba's CudaAPIError where the device cannot give that much."""
    if nbytes <= 0 or in_simulator():
        return
    from numba.cuda.cudadrv.driver import binding, driver

    cufunc = compiled._codelibrary.get_cufunc()
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)


def flat(x):
    """A 1-D view of a C-contiguous device array (no copy)."""
    return x if x.ndim == 1 else x.reshape(x.size)


def elementwise_threads() -> int:
    return 32 if in_simulator() else ELEMENTWISE_THREADS


def blocks(n: int, threads: int, cap: int | None = None) -> int:
    """Blocks of ``threads`` covering ``n`` items (at least 1; at most ``cap`` for grid-stride
    kernels)."""
    b = max(1, -(-int(n) // threads))
    return b if cap is None else min(b, cap)


def row_threads(n: int) -> int:
    """Threads of a one-block-per-row kernel for rows of ``n``: a power of two, at least 32 on
    the GPU (a warp), at most :data:`MAX_ROW_THREADS`."""
    lo = 1 if in_simulator() else 32
    t = lo
    while t < n and t < MAX_ROW_THREADS:
        t *= 2
    return min(t, MAX_ROW_THREADS)


def check(name: str, x, ndim: int, dtypes=(np.float32,), shape: tuple | None = None) -> None:
    """ValueError unless ``x`` has ``ndim`` dimensions, a dtype in ``dtypes`` and, where given,
    ``shape`` (None entries match any extent)."""
    if x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {tuple(x.shape)}")
    if np.dtype(x.dtype) not in [np.dtype(d) for d in dtypes]:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise ValueError(f"{name}: expected {want}, got {np.dtype(x.dtype).name}")
    if shape is not None:
        got = tuple(x.shape)
        if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise ValueError(f"{name}: expected shape {want}, got {got}")


def check_ragged(prefix: str, ids, offsets, rows: int) -> None:
    """:func:`check` of a compact ragged list of ``rows`` rows (rnngraph/lsh/ragged.py's layout):
    ``{prefix}ids`` int32 (nnz,), ``{prefix}offsets`` int64 (rows + 1,); ValueError naming either."""
    check(f"{prefix}ids", ids, 1, (np.int32,))
    check(f"{prefix}offsets", offsets, 1, (np.int64,), shape=(rows + 1,))


INDEX_DTYPES = (np.int32, np.int64)


@cuda.jit(device=True)
def column_chunk(x, rows_per_chunk):
    """The (column j, rows [r0, r1)) of this thread in a column-sum grid over the 2-D array ``x``
    (grid (ceil(n / threads), row chunks)); j = -1 for a thread past the last column."""
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r0 = cuda.blockIdx.y * rows_per_chunk
    return (j if j < x.shape[1] else -1), r0, min(r0 + rows_per_chunk, x.shape[0])


# Scratch arrays of the library launchers, one per (tag, device, stream, shape) and kept for the
# life of the process (a few distinct shapes in practice), so the hot path allocates nothing.
# Per stream: calls on two streams may overlap, calls on one stream run in order.
_SCRATCH: dict = {}


def cached_scratch(tag: str, shape: tuple, stream):
    """A float32 device array of ``shape`` for launcher ``tag`` on ``stream`` (None: the default
    stream), allocated on first use and returned again to later calls with the same key (its
    contents are whatever the last call left)."""
    if in_simulator():  # simulated launches run synchronously, one device
        key = (tag, None, None, tuple(shape))
    else:
        key = (tag, cuda.current_context().device.id, stream_handle(stream), tuple(shape))
    buf = _SCRATCH.get(key)
    if buf is None:
        buf = cuda.device_array(tuple(shape), np.float32, stream=launch_stream(stream))
        _SCRATCH[key] = buf
    return buf


# numba's simulator gives a block's threads one array per shared-memory call site only with this
# fix (rnngraph/codegen/simulator_fixes.py); every module that launches a kernel imports this one
from .simulator_fixes import apply as _apply_simulator_fixes  # noqa: E402

_apply_simulator_fixes()

# on a GPU, the CUDA target's first registry load without SciPy's import (0.3 s of a warm first call
# on the H200, once more in each compile worker: rnngraph/codegen/target_startup.py)
if not in_simulator():
    from .target_startup import apply as _apply_target_startup  # noqa: E402

    _apply_target_startup()
