"""The fragment layouts of the tensor-core instructions of codegen/ptx.py, in NumPy: which lane
of a warp holds which element of A, B and C/D (PTX ISA, "Matrix Fragments for mma.m16n8k8" and
"Matrix Fragments for mma.m16n8k16 with floating point type"; described in codegen/ptx.py's
docstring), a matrix split into its per-lane fragments and back, and a reference of one warp's
MMA computed from the fragments -- what a GPU test compares the intrinsics against, the layout
codegen/loop_mma.py's lane offsets follow, and what tests/mma_stand_ins.py computes the products
with in the simulator. CPU only, no numba.

Index tables (int arrays; the last axis is (row, column) of the matrix):

- :data:`A_TF32` (32, 4, 2): lane, register a0..a3 -> element of A (16 x 8), m16n8k8 TF32;
- :data:`B_TF32` (32, 2, 2): lane, register b0, b1 -> element of B (8 x 8);
- :data:`C_M16N8` (32, 4, 2): lane, register c0..c3 -> element of C and D (16 x 8), both shapes;
- :data:`A_BF16` (32, 4, 2, 2): lane, register a0..a3, half (0 low, 1 high) -> element of A
  (16 x 16), m16n8k16 bf16;
- :data:`B_BF16` (32, 2, 2, 2): lane, register b0, b1, half -> element of B (16 x 8).
"""
from __future__ import annotations

import numpy as np

from ..precision import round_tf32, to_bf16_bits

_LANE = np.arange(32)
_G, _T = _LANE // 4, _LANE % 4  # the lane's group (0..7) and its place in the group (0..3)


def _table(*pairs) -> np.ndarray:
    """Stack (row, col) arrays of shape (32,) into (32, len(pairs), 2)."""
    return np.stack([np.stack([r, c], axis=-1) for r, c in pairs], axis=1)


A_TF32 = _table((_G, _T), (_G + 8, _T), (_G, _T + 4), (_G + 8, _T + 4))
B_TF32 = _table((_T, _G), (_T + 4, _G))
C_M16N8 = _table((_G, 2 * _T), (_G, 2 * _T + 1), (_G + 8, 2 * _T), (_G + 8, 2 * _T + 1))
A_BF16 = np.stack([_table((r, c), (r, c + 1)) for r, c in
                   [(_G, 2 * _T), (_G + 8, 2 * _T), (_G, 2 * _T + 8), (_G + 8, 2 * _T + 8)]], axis=1)
B_BF16 = np.stack([_table((k, _G), (k + 1, _G)) for k in [2 * _T, 2 * _T + 8]], axis=1)


def fragments(matrix, table) -> np.ndarray:
    """The per-lane fragments of ``matrix`` under ``table`` (one of the index tables above):
    an array of ``table.shape[:-1]`` (lane first), of matrix's dtype."""
    m = np.asarray(matrix)
    return m[table[..., 0], table[..., 1]]


def from_fragments(frags, table, shape) -> np.ndarray:
    """The matrix of ``shape`` whose fragments under ``table`` are ``frags`` (the inverse of
    :func:`fragments`; every table covers its matrix exactly once). ValueError if ``frags`` is
    not of ``table.shape[:-1]``."""
    frags = np.asarray(frags)
    if frags.shape != table.shape[:-1]:
        raise ValueError(f"fragments of shape {table.shape[:-1]} expected, got {frags.shape}")
    out = np.zeros(shape, frags.dtype)
    out[table[..., 0], table[..., 1]] = frags
    return out


def _check(name, x, shape, dtype) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != shape:
        raise ValueError(f"{name}: per-lane fragments of shape {shape} expected, got {x.shape}")
    return x.astype(dtype, copy=False)


def _product(A, B, c) -> np.ndarray:
    """D = A B + C in float64 from the operands' exact values, rounded once to float32, as C's
    fragments (32, 4)."""
    C = from_fragments(_check("c", c, (32, 4), np.float32), C_M16N8, (16, 8)).astype(np.float64)
    D = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
    return fragments(D, C_M16N8)


def mma_tf32_m16n8k8_reference(a, b, c) -> np.ndarray:
    """What ``mma_tf32_m16n8k8`` (codegen/ptx.py) returns in each lane of one warp, from every
    lane's fragments: ``a`` (32, 4), ``b`` (32, 2), ``c`` (32, 4), float32 (lane first, then the
    register). A (16 x 8) and B (8 x 8) are assembled from the fragments (:data:`A_TF32`,
    :data:`B_TF32`) and rounded to TF32 with rnngraph/precision.py's ``round_tf32`` (ties to
    even; the GPU's ``cvt.rna`` rounds ties away from zero and raw fp32 bits are truncated, so
    feed values exact in TF32 where bits must agree), multiplied and added to C in float64 and
    rounded once to float32; returns D's fragments (32, 4) float32 (:data:`C_M16N8`).

    The tensor core's summation order and intermediate precision are not documented: a GPU
    result may differ from this by a few fp32 ulps of sum |A||B| + |C| (products of two TF32
    values are exact in fp32). ValueError for fragments of another shape."""
    A = round_tf32(from_fragments(_check("a", a, (32, 4), np.float32), A_TF32, (16, 8)))
    B = round_tf32(from_fragments(_check("b", b, (32, 2), np.float32), B_TF32, (8, 8)))
    return _product(A, B, c)


def pack_bf16x2_reference(lo, hi) -> np.ndarray:
    """``pack_bf16x2`` (codegen/ptx.py) in NumPy: float32 ``lo`` and ``hi`` (same shape) rounded
    to bf16 (ties to even), ``lo``'s encoding in the low 16 bits of a uint32, ``hi``'s high."""
    return to_bf16_bits(lo).astype(np.uint32) | (to_bf16_bits(hi).astype(np.uint32) << np.uint32(16))


def _bf16_values(bits) -> np.ndarray:
    """float32 values of packed uint32 words (..., ) -> (..., 2): low half, high half."""
    bits = np.asarray(bits, np.uint32)
    halves = np.stack([bits & np.uint32(0xFFFF), bits >> np.uint32(16)], axis=-1)
    return (halves << np.uint32(16)).astype(np.uint32).view(np.float32)


def mma_bf16_m16n8k16_reference(a, b, c) -> np.ndarray:
    """What ``mma_bf16_m16n8k16`` (codegen/ptx.py) returns in each lane of one warp: ``a``
    (32, 4) and ``b`` (32, 2) uint32, two bf16 encodings a word (lower-indexed element low:
    :data:`A_BF16`, :data:`B_BF16`), ``c`` (32, 4) float32; D = A B + C in float64, rounded once
    to float32, as fragments (32, 4) (same caveat on summation order as
    :func:`mma_tf32_m16n8k8_reference`). ValueError for fragments of another shape."""
    A = from_fragments(_bf16_values(_check("a", a, (32, 4), np.uint32)), A_BF16, (16, 16))
    B = from_fragments(_bf16_values(_check("b", b, (32, 2), np.uint32)), B_BF16, (16, 8))
    return _product(A, B, c)
