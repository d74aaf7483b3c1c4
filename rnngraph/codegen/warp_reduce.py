"""Source lines that sum N per-lane values across a warp: the tree and the transpose reductions.

A persistent loop's GEMM work item (codegen/loop.py) leaves each of the 32 lanes of a warp with
N partial dot products (rows x streams of the item, the lanes having split the inner dimension).

- :func:`tree_reduce`: each value is tree-reduced on its own (``shfl_down``, 5 steps), so lane 0
  ends with all N sums: 5 N shuffles, and lane 0 stores the N outputs one after another.
- :func:`transpose_reduce` (the "transpose" or reduce-scatter butterfly): with P = N rounded up
  to a power of two (P <= 32), step k (XOR offset 16, 8, ...) pairs lane l with lane l ^ offset;
  the lane whose offset bit is 0 keeps the lower half of its values and sends the upper half, its
  partner the other way round, and each adds what it receives to what it kept. After log2(P)
  steps every lane holds one value, the sum over its group of 32 / P lanes of value index
  ``lane >> (5 - log2 P)``; the remaining offsets finish those sums with plain XOR adds. That is
  P - 1 + (5 - log2 P) shuffles instead of 5 N (31 instead of 160 for N = 32), and the N outputs
  are stored by N lanes at once. The same butterfly as the "transpose reduction" of register-
  blocked GEMV kernels; the lane-to-index rule is derived in the docstring of the function.
"""
from __future__ import annotations

from .source import select

MASK = "0xFFFFFFFF"


def tree_reduce(names: list[str]) -> list[str]:
    """Lines (no indent) leaving in lane 0 the warp sum of each variable of ``names`` (in place)."""
    lines = ["off = int64(16)", "while off > 0:"]
    lines += [f"    {v} += cuda.shfl_down_sync({MASK}, {v}, off)" for v in names]
    return lines + ["    off //= 2"]


def transpose_reduce(names: list[str], out: str = "red") -> tuple[list[str], str, str]:
    """Lines (no indent) summing the N = len(names) <= 32 per-lane variables across the warp.

    Returns (lines, index expression, leader condition): after the lines, variable ``out`` of lane ``l`` holds the
    warp sum of ``names[i]`` for i = ``l >> (5 - p)`` (p = log2 of N rounded up to a power of
    two; indices >= N are padding zeros), and every lane of the group of 2**(5 - p) lanes that
    share i holds it; the leader condition is true in the first lane of each group (the one to
    store the sum). Derivation: the step with offset 2**(4 - j) (j = 0..p-1) keeps, in the lane
    whose offset bit is set, the upper half of the values it still holds; so the bit of offset
    16 chooses +P/2 of the index, the bit of offset 8 +P/4, ..., i.e. index = lane >> (5 - p).
    Raises ValueError for N outside [1, 32].
    """
    n = len(names)
    if not 1 <= n <= 32:
        raise ValueError(f"transpose_reduce: 1 to 32 values per lane, got {n}")
    p = (n - 1).bit_length()
    vals = list(names) + ["float32(0.0)"] * ((1 << p) - n)
    lines, step, off = [], 0, 16
    while len(vals) > 1:
        half = len(vals) // 2
        lines.append(f"up = (lane & {off}) != 0")
        new = []
        for q in range(half):
            lo, hi = vals[q], vals[q + half]
            v = f"t{step}_{q}"
            lines.append(f"{v} = {select('up', hi, lo)} + cuda.shfl_xor_sync({MASK}, {select('up', lo, hi)}, {off})")
            new.append(v)
        vals, step, off = new, step + 1, off // 2
    lines.append(f"{out} = {vals[0]}")
    while off >= 1:
        lines.append(f"{out} += cuda.shfl_xor_sync({MASK}, {out}, {off})")
        off //= 2
    return lines, f"(lane >> {5 - p})", f"(lane & {(1 << (5 - p)) - 1}) == 0"
