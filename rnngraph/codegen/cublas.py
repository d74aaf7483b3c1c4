"""cuBLAS SGEMM on a given stream, callable under CUDA-graph stream capture.

The library is the cuBLAS that CuPy loads (``cupy_backends.cuda.libs.cublas``); its Python
wrappers cannot serve a training step's GEMMs for two reasons (CuPy 14,
``cupy_backends/cuda/libs/cublas.pyx``):

- every BLAS wrapper first sets the handle's stream to *CuPy's current stream* (the legacy
  default stream unless a CuPy stream is in use), so a GEMM asked for on the step's own stream
  ran on the legacy stream, ordered with the step's kernels only by the legacy stream's
  implicit synchronisation;
- ``setStream`` raises ``NotImplementedError("calling cuBLAS API during stream capture is
  currently unsupported")`` on a capturing stream, so no phase with a GEMM could be replayed
  from a CUDA graph: the host's launch time showed as idle GPU time at S=1 (H200:
  0.105 ms of the LSTM's 1.18 ms step, 0.341 of layernorm_lstm's 2.94, bench/kernel_trace.py).

So this module calls the shared library's C entry points through ``ctypes``
(``cublasCreate_v2``, ``cublasSetStream_v2``, ``cublasSetWorkspace_v2``, ``cublasSgemm_v2``)
on a handle of its own, with a workspace it owns for each stream (cuBLAS's graph-capture
guidance: no allocation during capture; a captured split-K GEMM keeps its workspace address, so
GEMMs of two streams that may overlap -- two programs, each with its own stream -- must not share
one; ``cublasSetStream`` resets the workspace, so it is set after each stream change). The
library is the first ``libcublas.so*`` mapped into the process once CuPy's cuBLAS module is
imported: CuPy's, or torch's if torch loaded one first (either serves: the handle is ours).
cuBLAS supports capture of SGEMM with host-pointer scalars (the cuBLAS documentation, "CUDA
Graphs Support"). The math mode stays the default (no TF32), as CuPy's: a TF32 product asks for it
by its compute type (``cublasGemmEx`` with :data:`COMPUTE_32F_FAST_TF32`, codegen/gemm_precision.py). The handles live as
long as the process (one a thread and device; never destroyed).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading

import numpy as np

#: workspace bytes per handle: cuBLAS recommends 32 MiB on Hopper (cuBLAS documentation,
#: cublasSetWorkspace)
WORKSPACE_BYTES = 32 << 20
OP_N, OP_T = 0, 1  # cublasOperation_t
R_32F, R_16BF = 0, 14  # cudaDataType_t
COMPUTE_32F = 68  # cublasComputeType_t: fp32 accumulation
COMPUTE_32F_FAST_TF32 = 77  # cublasComputeType_t: fp32 operands rounded to TF32 on tensor cores, fp32 accumulation
GEMM_DEFAULT = -1  # cublasGemmAlgo_t


def cublas_in_maps(lines) -> str | None:
    """The first libcublas (not libcublasLt) path among ``/proc/<pid>/maps`` lines, or None."""
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[-1].rsplit("/", 1)[-1].startswith("libcublas.so"):
            return fields[-1]
    return None


def _loaded_cublas_path() -> str | None:
    """The path of the libcublas this process has loaded (from /proc/self/maps), if any."""
    try:
        with open("/proc/self/maps") as f:
            return cublas_in_maps(f)
    except OSError:
        return None


#: cublasStatus_t names (cublas_api.h)
STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
          8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
          14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""


class Cublas:
    """One cuBLAS handle of the current device, with a workspace of its own for each stream it
    has run on; :meth:`sgemm` runs on the stream given. A lock serialises the stream switch and
    the call (a launcher built on one thread may run on another)."""

    def __init__(self):
        from cupy_backends.cuda.libs import cublas as _cupy_cublas  # noqa: F401 (loads libcublas)

        path = _loaded_cublas_path() or ctypes.util.find_library("cublas")
        if path is None:
            raise CublasError("cuBLAS: CuPy is importable but no libcublas is loaded or findable")
        self.lib = ctypes.CDLL(path)
        f = self.lib
        f.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        f.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        f.cublasSetWorkspace_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        f.cublasSgemm_v2.argtypes = ([ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int])
        i, p = ctypes.c_int, ctypes.c_void_p
        f.cublasGemmEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]
        for fn in (f.cublasCreate_v2, f.cublasSetStream_v2, f.cublasSetWorkspace_v2, f.cublasSgemm_v2,
                   f.cublasGemmEx):
            fn.restype = ctypes.c_int
        h = ctypes.c_void_p()
        self._check(f.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        self.handle = h
        self.workspaces: dict[int, tuple] = {}  # raw stream -> (its device workspace, address)
        self.stream: int | None = None
        self.lock = threading.Lock()

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise CublasError(f"{what} failed: {STATUS.get(status, 'cuBLAS status')} ({status})")

    def _set_stream(self, stream: int) -> None:
        """Make later calls run on the raw CUDA stream ``stream`` (0: the legacy default), with
        that stream's workspace (allocated on its first use; call with the lock held)."""
        if stream == self.stream:
            return
        if stream not in self.workspaces:
            self.workspaces[stream] = self._new_workspace()
        self._check(self.lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        self._check(self.lib.cublasSetWorkspace_v2(self.handle, self.workspaces[stream][1], WORKSPACE_BYTES),
                    "cublasSetWorkspace")
        self.stream = stream

    @staticmethod
    def _new_workspace() -> tuple[object, int]:
        """(a device array of WORKSPACE_BYTES bytes, its address)."""
        from numba import cuda

        ws = cuda.device_array(WORKSPACE_BYTES, np.uint8)
        return ws, int(ws.__cuda_array_interface__["data"][0])

    def sgemm(self, stream: int, op_a: int, op_b: int, m: int, n: int, k: int, alpha_ptr: int, a: int, lda: int,
              b: int, ldb: int, beta_ptr: int, c: int, ldc: int) -> None:
        """cublasSgemm (column-major, host-pointer scalars) on ``stream``; CublasError, naming
        the shape, on failure."""
        with self.lock:
            self._set_stream(stream)
            status = self.lib.cublasSgemm_v2(self.handle, op_a, op_b, m, n, k, alpha_ptr, a, lda, b, ldb, beta_ptr,
                                             c, ldc)
        if status:  # the message is formatted only on failure: this is every GEMM launch's path
            self._check(status, f"cublasSgemm (m={m}, n={n}, k={k}, lda={lda}, ldb={ldb}, ldc={ldc})")

    def gemm_ex(self, stream: int, op_a: int, op_b: int, m: int, n: int, k: int, alpha_ptr: int, a: int,
                a_type: int, lda: int, b: int, b_type: int, ldb: int, beta_ptr: int, c: int, c_type: int, ldc: int,
                compute: int = COMPUTE_32F) -> None:
        """cublasGemmEx (column-major, host-pointer float32 scalars, the default algorithm) on
        ``stream``, e.g. bf16 operands (:data:`R_16BF`) into a float32 C with fp32 accumulation;
        CublasError, naming the shape, on failure."""
        with self.lock:
            self._set_stream(stream)
            status = self.lib.cublasGemmEx(self.handle, op_a, op_b, m, n, k, alpha_ptr, a, a_type, lda, b, b_type,
                                           ldb, beta_ptr, c, c_type, ldc, compute, GEMM_DEFAULT)
        if status:
            self._check(status, f"cublasGemmEx (m={m}, n={n}, k={k}, types {a_type}/{b_type}/{c_type})")


_local = threading.local()


def handle() -> Cublas:
    """This thread's :class:`Cublas` for the current CUDA device (created on first use)."""
    from numba import cuda

    dev = cuda.get_current_device().id
    cache = getattr(_local, "handles", None)
    if cache is None:
        cache = _local.handles = {}
    if dev not in cache:
        cache[dev] = Cublas()
    return cache[dev]
