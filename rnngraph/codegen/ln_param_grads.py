"""Gain and bias gradients of a layer norm inside a persistent backward loop, summed after the loop.

For layer norm y = xhat * gain + bias over rows of n (PyTorch's ``nn.LayerNorm`` convention):
``d gain[j] = sum_{t,s} g[t, s, j] * xhat[t, s, j]`` and ``d bias[j] = sum_{t,s} g[t, s, j]``, with g
the gradient of y. For the layer norms of a backward loop's ``post_sums`` (passes/param_grad_sums.py:
g is complete in its gradient buffer once the loop is done; ``post_loop_sums``, rnngraph/schedule_options.py) the
loop kernel skips these sums, and the schedule's ``reduce`` kernel in the phase after the loop is
the kernel emitted here, over the whole window: threads over the n columns, a grid
whose second dimension splits the T*S rows into chunks, one global atomic per column per chunk
(the grid of reductions.layer_norm_backward's column kernel, reductions.column_grid). xhat is
recomputed from the loop's inputs exactly as the loop does it: the forward row sums N (T, S, 2)
of the shifted one-pass moments (layer_norm_fused.ln_moments; mean, rstd per row) and the layer norm's
input x. A block first turns a tile of ROW_TILE rows' sums into moments in shared memory (a
thread a row), then its column threads walk the tile: the first form of this kernel, which recomputed
each row's moments (a division, a square root and a reciprocal) in every column thread, took
0.11 ms for layernorm_lstm S=64's 6400 x 2048 gradient, about 4x its memory time.

Why not in the loop: there each block adds its own elements' terms every timestep, and numba's
float atomics on shared memory are compare-and-swap loops on the H200 (``ATOMS.CAST.SPIN``), which
retry when lanes of a warp share an address and the values change: measured on the H200
(bench/results/h200-20261201-lngrad-trace-modes.json), the layernorm_lstm S=64 backward loop at 4.35 ms with real
gradients against 3.45 ms with an all-zero
output gradient (bench/kernel_trace.py --modes).
"""
from __future__ import annotations

from .. import ops
from ..ir import Graph
from .device import blocks
from .layer_norm_fused import ln_moments, ln_row
from .pointwise import Names, buffer_key
from .reductions import column_grid

KERNEL_INDENT = "        "
#: rows whose moments a block computes at once (one thread a row) into shared memory, before its
#: column threads walk them
ROW_TILE = 128


def ln_param_grad_kernel(g: Graph, node: str, fn: str) -> tuple[str, list[str]]:
    """(source of the global kernel ``fn``, its buffer arguments in order) summing layer norm
    ``node``'s gain and bias gradients over the window into its parameter-gradient buffers
    (``+=``, atomics). The kernel's arguments are (T, S, rows_per_chunk, *buffers); launch it
    with :func:`ln_param_grad_grid`. The layer norm entry of codegen/row_reductions.py names it.
    Raises KeyError for a node not in ``g``, ValueError for a node that is not a row reduction."""
    n = g.by_name[node]
    if not ops.is_row_reduction(n.op):
        raise ValueError(f"ln_param_grad_kernel: {node} is a {n.op}, not a row reduction (layer norm)")
    names, ref = Names(g), n.args[0]
    X, G = names.value(ref.node), names.grad(node)
    qg, qb = (names.param_grad(p) for p in n.params)
    moments: list[str] = []
    ln_moments(names, n, lambda line: moments.append(KERNEL_INDENT + line), "")
    buffers = sorted({X, G, names.ln_sums(node), qg, qb}, key=buffer_key)
    lines = [
        "@cuda.jit",
        f"def {fn}(T, S, rows_per_chunk, {', '.join(buffers)}):",
        f"    # {node}: gain and bias gradients over the window (codegen/ln_param_grads.py)",
        f"    sm = cuda.shared.array(({ROW_TILE}, 3), float32)  # a tile of rows' (shift, mean - shift, rstd)",
        "    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x",
        "    r0 = cuda.blockIdx.y * rows_per_chunk",
        "    r1 = min(r0 + rows_per_chunk, T * S)",
        "    sg = float32(0.0)",
        "    sb = float32(0.0)",
        f"    for base in range(r0, r1, {ROW_TILE}):",
        f"        nr = min({ROW_TILE}, r1 - base)",
        "        cuda.syncthreads()  # the previous tile's moments are read",
        "        i = cuda.threadIdx.x",
        "        while i < nr:",
        "            t = (base + i) // S",
        "            s = base + i - t * S",
        *["    " + line for line in moments],
        "            sm[i, 0] = mu",
        "            sm[i, 1] = m",
        "            sm[i, 2] = rs",
        "            i += cuda.blockDim.x",
        "        cuda.syncthreads()",
        f"        if j < {n.size}:",
        "            t = base // S",
        "            s = base - t * S",
        "            for q in range(nr):",
        f"                gy = {G}[{names.depth(node)} + t, s, j]",
        f"                sg += gy * ((({X}[{ln_row(names, ref)} + t, s, j] - sm[q, 0]) - sm[q, 1]) * sm[q, 2])",
        "                sb += gy",
        "                s += 1",
        "                if s == S:",
        "                    s = 0",
        "                    t += 1",
        f"    if j < {n.size}:",
        f"        cuda.atomic.add({qg}, j, sg)",
        f"        cuda.atomic.add({qb}, j, sb)",
    ]
    return "\n".join(lines) + "\n", buffers


def ln_param_grad_grid(size: int, rows: int) -> tuple[tuple[int, int], int, int]:
    """((column blocks, row chunks), threads a block, rows a chunk) of the kernel of
    :func:`ln_param_grad_kernel` for a layer norm over ``size`` elements and ``rows`` = T*S rows
    (reductions.column_grid: about LN_COLUMN_BLOCKS blocks)."""
    threads, col_blocks, per_chunk = column_grid(size, rows)
    return (col_blocks, blocks(rows, per_chunk)), threads, per_chunk
