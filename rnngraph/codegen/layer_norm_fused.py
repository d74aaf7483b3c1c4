"""Layer norm inside a fused kernel of a persistent loop: the column's moments from its row sums,
the normalisation (forward) and its VJP (backward), written into a :class:`~.pointwise.PointwiseEmitter`'s
device function. The layer norm entry of codegen/row_reductions.py names :func:`forward` and
:func:`backward`; codegen/loop_layer_norm.py (the row sums) and codegen/ln_param_grads.py (gain
and bias gradients after the loop) use the moments of :func:`ln_moments` too.

The row sums (shifted one-pass moments, codegen/loop.py's docstring): forward, sum(x - K) and
sum((x - K)^2) per column with the shift K of :func:`ln_shift`; backward, sum(g * gain) and
sum(g * gain * xhat).
"""
from __future__ import annotations

from .. import ops
from ..ir import Node
from .pointwise import Names, f32, local_grad


def ln_row(names: Names, ref) -> str:
    """The history row offset of a layer norm's argument ``ref`` (read at ``{row} + t``)."""
    return str(names.depth(ref.node) - ref.delay)


def ln_shift(names: Names, ref) -> str:
    """The shift K of the one-pass moments of a layer norm over ``ref`` at column (t, s): the
    first element of the row one timestep earlier, x[t-1, s, 0] (0 at t = 0). Every block knows
    it before the row at t is complete, so the row sums can be taken where x is written
    (passes/row_sums.py); the sums are of x - K, and var = E[(x-K)^2] - E[x-K]^2 cancels only as
    much as K is away from the row's mean: about a standard deviation when consecutive rows
    are alike (at t = 0, by the mean itself)."""
    X = names.value(ref.node)
    return f"({X}[{ln_row(names, ref)} + t - 1, s, 0] if t > 0 else float32(0.0))"


def ln_moments(names: Names, node: Node, emit, tag: str) -> None:
    """Emit ``mu{tag}`` (the shift K of :func:`ln_shift`), ``m{tag}`` (mean - K) and ``rs{tag}``
    (1 / sqrt(var + eps)) of layer norm ``node`` at column (t, s) from its forward row sums
    (shifted one-pass moments, see codegen/loop.py)."""
    N, n = names.ln_sums(node.name), f32(node.size)
    emit(f"mu{tag} = {ln_shift(names, node.args[0])}")
    emit(f"m{tag} = {N}[t, s, 0] / {n}")
    emit(f"v{tag} = max({N}[t, s, 1] / {n} - m{tag} * m{tag}, float32(0.0))")
    emit(f"rs{tag} = float32(1.0) / math.sqrt(v{tag} + {f32(ops.LAYER_NORM_EPS)})")


def _inputs(e, n: Node, loaded: dict) -> tuple[str, str]:
    """Emit the column's moments (once per kernel); returns (tag, gain buffer). The argument
    must come from memory: a layer norm starts a new level (levels.py), so its input was
    computed by another kernel, and its other elements by other blocks."""
    ref = n.args[0]
    if ref.node in e.computed and ref.delay == 0:
        raise NotImplementedError(f"layer norm {n.name}: its input {ref.node} is computed in the same kernel")
    tag = str(e.names.idx(n.name))
    if ("ln", n.name) not in loaded:
        ln_moments(e.names, n, e.emit, tag)
        e.buffers |= {e.names.value(ref.node), e.names.ln_sums(n.name)}
        loaded[("ln", n.name)] = tag
    gain, bias = (e.names.param(p) for p in n.params)
    e.buffers |= {gain, bias}
    return tag, gain


def _xhat(e, n: Node, i: int, loaded: dict, tag: str) -> str:
    key = ("xhat", n.name, i)
    if key not in loaded:
        x = e.operand(n.args[0], i, loaded)
        var = loaded[key] = f"xh{tag}_{i}"
        e.emit(f"{var} = (({x} - mu{tag}) - m{tag}) * rs{tag}")
    return loaded[key]


def forward(e, n: Node, loaded: dict) -> None:
    """Into emitter ``e``: y = xhat * gain + bias of the unit's elements of layer norm ``n``, from
    the column's moments."""
    tag, gain = _inputs(e, n, loaded)
    bias = e.names.param(n.params[1])
    for i in range(e.chunks(n.name)):
        at = f"j + {i * e.u}"
        e.emit(f"{e.local(n.name, i)} = {_xhat(e, n, i, loaded, tag)} * {gain}[{at}] + {bias}[{at}]")


def backward(e, n: Node, loaded: dict, target) -> None:
    """Into emitter ``e``: dx += rstd * (g*gain - mean(g*gain) - xhat * mean(g*gain*xhat)) of
    layer norm ``n`` (``target(ref, chunk)``: the variable adding to an argument's gradient), the
    means from the column's backward row sums (added by every block before a grid sync: at the
    end of the previous level or in a reduction phase, codegen/loop.py); the gain and bias
    gradients (sums over t, s) are added with global atomics, or into the block's shared-memory
    sums ``Z<i>`` at place ``rem`` (``e.local_param_grads``), or left to a kernel after the loop
    (``e.deferred``)."""
    tag, gain = _inputs(e, n, loaded)
    M, size = e.names.ln_grad_sums(n.name), f32(n.size)
    qg, qb = (e.names.param_grad(p) for p in n.params)
    if e.local_param_grads:
        qg, qb = local_grad(qg), local_grad(qb)
    deferred = n.name in e.deferred
    e.buffers |= {M} if deferred else {M, qg, qb}
    if ("lnb", n.name) not in loaded:
        e.emit(f"a{tag} = {M}[t, s, 0] / {size}")
        e.emit(f"b{tag} = {M}[t, s, 1] / {size}")
        loaded[("lnb", n.name)] = True
    for i in range(e.chunks(n.name)):
        g, at, xh = f"g{e.local(n.name, i)}", f"j + {i * e.u}", _xhat(e, n, i, loaded, tag)
        tgt = target(n.args[0], i)
        e.emit(f"{tgt} = {tgt} + rs{tag} * ({g} * {gain}[{at}] - a{tag} - {xh} * b{tag})")
        if deferred:
            continue
        where = f"rem * {e.chunks(n.name)} + {i}" if e.local_param_grads else at
        e.emit(f"cuda.atomic.add({qg}, {where}, {g} * {xh})")
        e.emit(f"cuda.atomic.add({qb}, {where}, {g})")
