"""Ownership: how a persistent loop kernel splits one level's work among its blocks.

A level has a *unit* u (:func:`level_unit`: the gcd of its kernels' units and GEMM sizes); block b
of B owns units [(b*u) // B, ((b+1)*u) // B) (floor division: some blocks own one unit more, and
with u < B some own none) and, of every value of the level, the elements e with e mod u among
them (element e belongs to unit e mod u). A fused pointwise kernel works on a
block's own elements only; a GEMM writes its owned output rows and reads whole input vectors.
Two levels with the same unit therefore give element e of any value to the same block: what one
of them writes at e, the other reads at e from its own block (codegen/loop.py, passes/grid_syncs.py).
"""
from __future__ import annotations

import math

from ..ir import Graph


def kernel_unit(g: Graph, names) -> int:
    """The gcd of the sizes of the kernel's nodes and arguments and of its slice/concat offsets."""
    vals = []
    for m in names:
        n = g.by_name[m]
        vals.append(n.size)
        vals += [g.by_name[r.node].size for r in n.args]
        if n.op == "slice":
            vals.append(n.attr["start"])
        if n.op == "concat":
            off = 0
            for r in n.args:
                vals.append(off or g.by_name[r.node].size)
                off += g.by_name[r.node].size
    return math.gcd(*vals)


def gemm_sizes(g: Graph, k, reverse: bool) -> list[int]:
    """Rows a GEMM kernel's blocks split: its outputs' sizes (forward), or the size of its input,
    whose gradient it adds to (backward: dx += W^T g). The members of a merged GEMM read one
    input (passes/merge_gemms.py), so the first member's is the kernel's."""
    if reverse:
        return [g.by_name[g.by_name[k.ops[0]].args[0].node].size]
    return [g.by_name[m].size for m in k.ops]


def level_unit(g: Graph, ks, reverse: bool, recompute: dict | None = None) -> int:
    """The unit of one level's kernels ``ks`` (schedule Kernels). A backward pointwise kernel
    also works in the unit of the forward kernel it recomputes (``recompute``: node -> ops of
    the forward kernel computing it)."""
    recompute = recompute or {}
    vals = []
    for k in ks:
        if k.kind == "gemm":
            vals += gemm_sizes(g, k, reverse)
        else:
            vals.append(kernel_unit(g, k.ops))
            if reverse and k.ops[0] in recompute:
                vals.append(kernel_unit(g, recompute[k.ops[0]]))
    return math.gcd(*vals)
