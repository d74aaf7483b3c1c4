"""GEMMs in a reduced precision (rnngraph/precision.py): ``"tf32"`` and ``"bf16"`` operands with
fp32 accumulation and a float32 output, for codegen/gemm.py's :func:`gemm_launcher`.

- cuBLAS (codegen/cublas.py, the step's own handle, stream and workspace; capturable into a CUDA
  graph like the SGEMMs): TF32 is ``cublasGemmEx`` on the float32 operands with compute type
  ``CUBLAS_COMPUTE_32F_FAST_TF32`` (77); bf16 converts both operands to bf16 copies
  (codegen/precision_kernels.py, before each product) and calls ``cublasGemmEx`` with
  ``CUDA_R_16BF`` (14) operands, a ``CUDA_R_32F`` output and ``CUBLAS_COMPUTE_32F`` (68).
- numba's GEMM (the simulator, no CuPy): both operands are rounded into float32 copies exactly as
  the NumPy backend's emulation rounds them, then the fp32 tiled kernel multiplies those, so the
  simulator's step matches the NumPy backend in the same precision to float32 rounding.
"""
from __future__ import annotations

import numpy as np

from . import cublas
from .device import in_simulator, stream_handle
from .precision_kernels import conversion_launcher

#: cuBLAS's (operand type, compute type) of each reduced precision
CUBLAS_TYPES = {"tf32": (cublas.R_32F, cublas.COMPUTE_32F_FAST_TF32), "bf16": (cublas.R_16BF, cublas.COMPUTE_32F)}


def gemm_ex_arguments(precision: str, m: int, n: int, k: int, trans_a: bool, trans_b: bool, a: tuple, b: tuple,
                      out: tuple, scalars: int) -> tuple:
    """The arguments after the stream of :meth:`Cublas.gemm_ex` for the row-major product
    ``out (M, N) = alpha op(a) op(b) + beta out`` in ``precision`` ("tf32" or "bf16").

    a, b, out: (device address, row stride in elements) of the matrices cuBLAS reads -- for bf16
    the bf16 copies; scalars: the host address of float32 [alpha, beta]. As codegen/gemm.py's
    SGEMM: cuBLAS is column-major, so it computes out^T = op(b)^T op(a)^T (its A is our b).
    KeyError for another precision."""
    dtype, compute = CUBLAS_TYPES[precision]
    op_a = cublas.OP_T if trans_a else cublas.OP_N
    op_b = cublas.OP_T if trans_b else cublas.OP_N
    return (op_b, op_a, n, m, k, scalars, b[0], dtype, b[1], a[0], dtype, a[1], scalars + 4, out[0], cublas.R_32F,
            out[1], compute)


def reduced_gemm_launcher(a, b, out, m, n, k, trans_a, trans_b, alpha, beta, stream, backend, precision,
                          row_stride, device_ptr, numba_launcher):
    """A function launching ``out = alpha op(a) op(b) + beta out`` in ``precision`` on device
    float32 arrays (k > 0): cuBLAS for ``backend="cublas"``, else numba's GEMM on rounded copies
    (``numba_launcher(a, b)`` makes that launch; ``row_stride`` / ``device_ptr`` are
    codegen/gemm.py's helpers). RuntimeError for cuBLAS in the simulator."""
    if backend != "cublas":
        conv_a, ra = conversion_launcher(a, precision, "float32", "round-a", stream)
        conv_b, rb = conversion_launcher(b, precision, "float32", "round-b", stream)
        product = numba_launcher(ra, rb)
        return lambda: (conv_a(), conv_b(), product())
    if in_simulator():
        raise RuntimeError("gemm: the cuBLAS backend cannot run in the CUDA simulator")
    lib = cublas.handle()
    scalars = np.array([alpha, beta], dtype=np.float32)  # read by cuBLAS during each call; kept alive here
    convs = []
    if precision == "bf16":
        conv_a, a = conversion_launcher(a, precision, "bf16", "bf16-a", stream)
        conv_b, b = conversion_launcher(b, precision, "bf16", "bf16-b", stream)
        convs = [conv_a, conv_b]
    args = gemm_ex_arguments(precision, m, n, k, trans_a, trans_b, (device_ptr(a), row_stride(a)),
                             (device_ptr(b), row_stride(b)), (device_ptr(out), row_stride(out)), scalars.ctypes.data)
    stream_h = stream_handle(stream)

    def run():
        for conv in convs:
            conv()
        lib.gemm_ex(stream_h, *args)
        return scalars  # (keeps the scalars referenced by the closure)

    return run
