"""The ``precision`` option: which number format the matrix products' operands take.

- ``"fp32"`` (the default): IEEE fp32 operands and accumulation, on the FFMA units: the same
  results as a step compiled without the option, bit for bit.
- ``"tf32"``: the once-per-window GEMMs (hoisted products over the window, the input-gradient
  products of the backward phases, the weight gradients) run on tensor cores with TF32 operands
  and fp32 accumulation; with ``ScheduleOptions.loop_tensor_cores`` (by default where streams x
  the recurrent products' inner dimension reaches 49,152, or streams >= 16 with that dimension
  >= 1,024, measured faster there and slower below: rnngraph/schedule_options.py
  ``loop_tensor_cores_by_default``) so do the recurrent products inside the persistent loop
  kernels (``mma.sync``, codegen/loop_mma.py). TF32 (NVIDIA, "TensorFloat-32 in the A100 GPU", 2020; the PTX ISA's
  ``.tf32`` type) is fp32's sign and 8-bit exponent with 10 of its 23 mantissa bits: the same
  range as fp32, a unit roundoff of 2^-11.
- ``"bf16"``: the same GEMMs with bf16 operands (the upper 16 bits of an IEEE fp32: sign, 8-bit
  exponent, 7 mantissa bits; unit roundoff 2^-8), fp32 accumulation and output.

Everything else stays fp32 in every precision: states, cell values, pointwise math, the
recurrent products inside the loops (unless ``loop_tensor_cores``), a chunked softmax's products
(a dense head's logits GEMM is a once-per-window GEMM and takes the precision), master weights and
optimizer state.

The NumPy backend emulates a precision by rounding the operands of the same GEMMs to the
format (round to nearest, ties to even, on the fp32 bit pattern: :func:`round_tf32`,
:func:`round_bf16`) and multiplying them in float32, so tests have a reference for the CUDA
backend; the simulator's numba GEMM applies the same rounding (codegen/precision_kernels.py),
and so do its loop kernels' products with ``loop_tensor_cores`` (codegen/operand_rounding.py).
The hardware may round differently where a value lies exactly halfway (cuBLAS does not document
its fp32 -> TF32 conversion; ``mma.sync`` fed raw fp32 bits ignores the low 13), so the GPU is
compared within tolerances, not bit for bit.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PRECISIONS", "check_gpu", "check_precision", "require_tensor_cores", "round_bf16", "round_operand",
           "round_tf32", "to_bf16_bits"]

#: the values of the ``precision`` option, the default first
PRECISIONS = ("fp32", "tf32", "bf16")

#: (mantissa bits dropped from fp32's 23) of each reduced format
_DROPPED = {"tf32": 13, "bf16": 16}

_EXP = np.uint32(0x7F800000)
_QUIET = np.uint32(0x00400000)


def check_precision(precision, dtype: str = "float32", where: str = "precision") -> str:
    """``precision`` if it is one of :data:`PRECISIONS` and fits ``dtype``; ValueError, one line
    naming ``where`` and the value, for another value (``"fp16"`` included) or for ``"tf32"`` /
    ``"bf16"`` with dtype float64 (tensor cores take fp32 inputs at most)."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"{where} must be one of {', '.join(map(repr, PRECISIONS))}; got {precision!r}")
    if precision != "fp32" and dtype != "float32":
        raise ValueError(f"{where}={precision!r} needs dtype float32 (tensor cores take at most fp32 "
                         f"operands), got dtype {dtype!r}")
    return precision


def _round_bits(x, dropped: int) -> np.ndarray:
    """The uint32 bit patterns of float32 ``x`` rounded to ``23 - dropped`` mantissa bits, round
    to nearest, ties to even; infinities unchanged, a NaN stays a (quiet) NaN of the same sign,
    a finite value whose rounding overflows becomes an infinity (IEEE round-to-nearest)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    keep = np.uint32((0xFFFFFFFF << dropped) & 0xFFFFFFFF)
    half = np.uint32((1 << (dropped - 1)) - 1)
    lsb = (b >> np.uint32(dropped)) & np.uint32(1)
    with np.errstate(over="ignore"):
        rounded = (b + half + lsb) & keep  # (a NaN's sum may wrap: it is replaced below)
    nan = ((b & _EXP) == _EXP) & ((b & np.uint32(0x007FFFFF)) != 0)
    inf = (b & np.uint32(0x7FFFFFFF)) == _EXP
    return np.where(nan, (b | _QUIET) & keep, np.where(inf, b, rounded))


def round_tf32(x) -> np.ndarray:
    """float32 ``x`` (any shape) rounded to TF32 (10 mantissa bits: NVIDIA's TF32 definition),
    round to nearest, ties to even on the fp32 bit pattern, returned as float32 of the same
    shape (the low 13 mantissa bits zero). Infinities, signed zeros and subnormals round like
    any value (a subnormal keeps its 10 leading stored mantissa bits); a NaN stays NaN."""
    return _round_bits(x, _DROPPED["tf32"]).view(np.float32).reshape(np.shape(x))


def to_bf16_bits(x) -> np.ndarray:
    """The bf16 encodings (uint16, same shape) of float32 ``x``: its upper 16 bits after rounding
    to nearest, ties to even -- what PyTorch's ``x.to(torch.bfloat16)`` gives (c10's
    ``round_to_nearest_even``), except that a NaN keeps its sign and payload's top bits (quiet)
    where PyTorch writes 0x7FC0."""
    return (_round_bits(x, _DROPPED["bf16"]) >> np.uint32(16)).astype(np.uint16).reshape(np.shape(x))


def round_bf16(x) -> np.ndarray:
    """float32 ``x`` rounded to bf16 (7 mantissa bits) and widened back: float32, same shape, the
    value of :func:`to_bf16_bits`'s encoding."""
    return _round_bits(x, _DROPPED["bf16"]).view(np.float32).reshape(np.shape(x))


def round_operand(x, precision: str) -> np.ndarray:
    """A GEMM operand as ``precision`` stores it, as float32: unchanged for ``"fp32"`` (the same
    object), else :func:`round_tf32` / :func:`round_bf16`."""
    if precision == "fp32":
        return x
    return round_tf32(x) if precision == "tf32" else round_bf16(x)


def require_tensor_cores(precision: str, device) -> None:
    """RuntimeError, one line naming the GPU and its compute capability, when ``precision`` needs
    tensor cores (``"tf32"``, ``"bf16"``: compute capability 8.0 or higher, Ampere on) and
    ``device`` (a numba CUDA device: ``compute_capability``, ``name``) has none."""
    if precision == "fp32":
        return
    cc = tuple(device.compute_capability)
    if cc < (8, 0):
        name = getattr(device, "name", b"this GPU")
        name = name.decode() if isinstance(name, bytes) else str(name)
        raise RuntimeError(f"precision={precision!r} needs tensor cores with {precision.upper()} inputs "
                           f"(compute capability 8.0 or higher); {name} has {cc[0]}.{cc[1]}: use "
                           f"precision='fp32'")


def check_gpu(precision: str, device=None) -> None:
    """:func:`require_tensor_cores` for ``device``, by default numba's current CUDA device; nothing
    in numba's CUDA simulator (its made-up compute capability is no GPU's) or for ``"fp32"``."""
    if precision == "fp32":
        return
    if device is None:
        from .codegen.device import in_simulator
        if in_simulator():
            return
        from numba import cuda
        device = cuda.get_current_device()
    require_tensor_cores(precision, device)
