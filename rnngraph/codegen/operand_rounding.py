"""The simulator's stand-in for the tensor cores' operand formats: one float32 value rounded to
TF32 or bf16 as rnngraph/precision.py rounds (to nearest, ties to even on the fp32 bit pattern),
for the persistent loop kernels' FFMA products in a reduced precision (codegen/loop_gemm.py, a
GemmRows with ``rounding``), so that the simulator's step equals the NumPy backend's emulation.

Plain Python over NumPy scalars: numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) runs generated
kernels as Python and calls these as they are. On the GPU the loop kernels' reduced-precision
products run on tensor cores (codegen/loop_mma.py) and nothing calls these.
"""
from __future__ import annotations

import numpy as np

from ..precision import round_bf16, round_tf32

#: the function of this module that rounds to each precision, as generated code names it
ROUNDING = {"tf32": "round_tf32_value", "bf16": "round_bf16_value"}


def round_tf32_value(x) -> np.float32:
    """``x`` (a float) as float32 rounded to TF32 (rnngraph/precision.py ``round_tf32``)."""
    return np.float32(round_tf32(np.float32(x)))


def round_bf16_value(x) -> np.float32:
    """``x`` (a float) as float32 rounded to bf16 (rnngraph/precision.py ``round_bf16``)."""
    return np.float32(round_bf16(np.float32(x)))
