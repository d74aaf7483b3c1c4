"""A persistent loop kernel's layer-norm row sums: each block's partial sums per column of the
elements it owns, added into the (t, s, 2) sums buffer (codegen/loop.py's docstring: why and
when), by one of three code shapes (``LoopKernelPlan.ln_shape``, the ``lnsum`` knob); in stream
groups (LoopTuning ``lngroups``) over the block's group's streams, past ``sbase``:

- 0, :func:`_by_warp`: a warp per column, lanes over the block's elements, shuffles;
- 1, :func:`_in_smem`: every thread over (element, column) pairs, partial sums added into shared
  memory by atomics, one thread per column adding the block's sums;
- 2, :func:`_in_registers`: a column per thread slot, sums in registers, meeting in shared
  memory without atomics.

Forward sums: sum(x - K) and sum((x - K)^2) with the shift K = x[t-1, s, 0]; backward:
sum(g * gain) and sum(g * gain * xhat), xhat from the forward's sums.
"""
from __future__ import annotations

from ..ir import Graph
from .loop_items import RowSums
from .loop_plan import LoopKernelPlan
from .loop_pointwise import owned_row
from .layer_norm_fused import ln_moments, ln_row, ln_shift
from .pointwise import Names
from .source import Source
from .warp_reduce import tree_reduce

#: (element, column) pairs whose loads a thread issues before adding them (``lnsum=1|2``)
LN_SUM_UNROLL = 4


def emit_row_sums(src: Source, g: Graph, plan: LoopKernelPlan, sums: RowSums, uL: int) -> None:
    """The block's partial row sums of layer norm ``sums.node`` at timestep t (a level of unit
    ``uL``), added into ``sums.out``, in the plan's code shape."""
    n = g.by_name[sums.node]
    what = "sum(g * gain), sum(g * gain * xhat)" if plan.reverse else "sum(x - K), sum((x - K)^2), K = x[t-1, s, 0]"
    src(f"# {sums.node}: layer norm row sums of the owned elements ({what})")
    shape = {1: _in_smem, 2: _in_registers}.get(plan.ln_shape, _by_warp)
    shape(src, _Terms(g, n, plan.reverse, n.size // uL, uL), plan, sums.out)


def _first(plan: LoopKernelPlan) -> str:
    """The prefix that makes a column place among the block's streams a stream index: ``sbase + ``
    in stream groups (``plan.stream_groups``; S is then the group's streams), else nothing."""
    return "sbase + " if plan.stream_groups > 1 else ""


class _Terms:
    """The per-element terms and per-column values of one layer norm's row sums."""

    def __init__(self, g: Graph, n, reverse: bool, reps: int, uL: int):
        self.names, self.n, self.reverse, self.reps, self.uL = Names(g), n, reverse, reps, uL

    def at(self, s: str, place: str, column) -> tuple[list[str], str, str]:
        """(lines, first term, second term) of the block's owned element at ``place`` of column s:
        forward x - K and its square, backward g * gain and g * gain * xhat; ``column(v)`` reads
        the column's value v (K, or the moments mu, m, rs)."""
        n, names = self.n, self.names
        X, row = names.value(n.args[0].node), f"{ln_row(names, n.args[0])} + t"
        index = owned_row(place, "r", self.reps, self.uL)
        if not self.reverse:
            return index + [f"d = {X}[{row}, {s}, r] - {column('k')}"], "d", "d * d"
        G, P = names.grad(n.name), names.param(n.params[0])
        return index + [f"xh = (({X}[{row}, {s}, r] - {column('mu')}) - {column('m')}) * {column('rs')}",
                        f"gg = {G}[{names.depth(n.name)} + t, {s}, r] * {P}[r]"], "gg", "gg * xh"

    def column_values(self, src: Source) -> list[tuple[str, str]]:
        """Write the per-column values the sums need at column ``s``; returns (name, local) pairs:
        the shift K (forward) or the moments mu, m, rs (backward, from the forward sums)."""
        if not self.reverse:
            src(f"kx = {ln_shift(self.names, self.n.args[0])}")
            return [("k", "kx")]
        tag = str(self.names.idx(self.n.name))
        ln_moments(self.names, self.n, src, tag)
        return [("mu", f"mu{tag}"), ("m", f"m{tag}"), ("rs", f"rs{tag}")]


def _by_warp(src: Source, t: _Terms, plan: LoopKernelPlan, out: str) -> None:
    """A warp per column (a thread in the simulator), lanes over the block's elements of the row,
    shuffles, one atomic add per sum: few loads in flight when S is large (the columns run one
    after another in each warp)."""
    coop = plan.coop
    start, step, estart, estep = ("warp", "nwarps", "lane", 32) if coop else ("tid", "bdim", "0", 1)
    src(f"item = {start}")
    with src.block("while item < S:"):
        src(f"s = {_first(plan)}item")
        values = dict(t.column_values(src))
        src("p1 = float32(0.0)", "p2 = float32(0.0)", f"el = {estart}")
        with src.block(f"while el < nj * {t.reps}:"):
            lines, a, b = t.at("s", "el", values.get)
            src(*lines, f"p1 += {a}", f"p2 += {b}", f"el += {estep}")
        if coop:
            src(*tree_reduce(["p1", "p2"]))
        with src.block(f"if {'lane == 0 and ' if coop else ''}nj > 0:"):
            src(f"cuda.atomic.add({out}, (t, s, 0), p1)", f"cuda.atomic.add({out}, (t, s, 1), p2)")
        src(f"item += {step}")


def _in_smem(src: Source, t: _Terms, plan: LoopKernelPlan, out: str) -> None:
    """Every thread over (element, column) pairs, columns fastest (the lanes of a warp add into
    different shared-memory sums when S >= 32), LN_SUM_UNROLL pairs' loads issued before their
    adds; the block's per-column values (shift or moments) and partial sums live in shared memory
    (``lnv``, ``lns``), and one thread per column adds the block's sums into the global buffer.
    Three block barriers; the loads of a phase are about one round trip."""
    U = LN_SUM_UNROLL
    vb = "vbid, " if plan.virtual_blocks else ""  # simulated blocks share the one real block's memory
    src("c = int64(tid)")
    with src.block("while c < S:"):
        src(f"s = {_first(plan)}c")
        values = t.column_values(src)
        src(*(f"lnv[{vb}c, {i}] = {local}" for i, (_, local) in enumerate(values)),
            f"lns[{vb}c, 0] = float32(0.0)", f"lns[{vb}c, 1] = float32(0.0)", "c += bdim")
    src("cuda.syncthreads()", f"npairs = S * nj * {t.reps}", "item = int64(tid)")
    with src.block("while item < npairs:"):
        index = {name: i for i, (name, _) in enumerate(values)}
        for u in range(U):
            src(f"it = min(item + {u} * bdim, npairs - 1)", f"s{u} = it % S", "el = it // S")
            lines, a, b = t.at(f"{_first(plan)}s{u}", "el", lambda v, u=u: f"lnv[{vb}s{u}, {index[v]}]")
            src(*lines, f"a{u} = {a}", f"b{u} = {b}")
        for u in range(U):
            with src.block(f"if item + {u} * bdim < npairs:"):
                src(f"cuda.atomic.add(lns, ({vb}s{u}, 0), a{u})", f"cuda.atomic.add(lns, ({vb}s{u}, 1), b{u})")
        src(f"item += {U} * bdim")
    src("cuda.syncthreads()", "c = int64(tid)")
    with src.block("while c < S and nj > 0:"):
        src(f"cuda.atomic.add({out}, (t, {_first(plan)}c, 0), lns[{vb}c, 0])",
            f"cuda.atomic.add({out}, (t, {_first(plan)}c, 1), lns[{vb}c, 1])",
            "c += bdim")
    src("cuda.syncthreads()  # lns and lnv are reused by the next layer norm")


def _in_registers(src: Source, t: _Terms, plan: LoopKernelPlan, out: str) -> None:
    """Each thread keeps one column s = v % S (R = bdim // S threads a column, at least 1; a thread
    serves slots v = tid, tid + bdim, ... < S * R) and adds that column's elements el = v // S,
    + R, ... in registers (LN_SUM_UNROLL elements' loads in flight), reading the column's shift or
    moments itself; the R partial sums of a column meet in shared memory (``lnp``, no atomics: a
    slot per thread) and one thread per column adds them into the global buffer. Two block
    barriers."""
    U = LN_SUM_UNROLL
    vb = "vbid, " if plan.virtual_blocks else ""
    src("nrep = max(1, bdim // S)  # threads a column", f"nel = nj * {t.reps}", "v = int64(tid)")
    with src.block("while v < S * nrep:"):
        src(f"s = {_first(plan)}v % S")
        values = dict(t.column_values(src))
        src("p1 = float32(0.0)", "p2 = float32(0.0)", "el = v // S")
        for unroll, cond in ((U, f"el + {U - 1} * nrep < nel"), (1, "el < nel")):
            with src.block(f"while {cond}:"):
                for u in range(unroll):
                    lines, a, b = t.at("s", f"(el + {u} * nrep)" if u else "el", values.get)
                    src(*lines, f"a{u} = {a}", f"b{u} = {b}")
                src("p1 += " + " + ".join(f"a{u}" for u in range(unroll)),
                    "p2 += " + " + ".join(f"b{u}" for u in range(unroll)), f"el += {unroll} * nrep")
        src(f"lnp[{vb}v, 0] = p1", f"lnp[{vb}v, 1] = p2", "v += bdim")
    src("cuda.syncthreads()", "c = int64(tid)")
    with src.block("while c < S and nj > 0:"):
        src(f"q1 = lnp[{vb}c, 0]", f"q2 = lnp[{vb}c, 1]", "v = c + S")
        with src.block("while v < S * nrep:"):
            src(f"q1 += lnp[{vb}v, 0]", f"q2 += lnp[{vb}v, 1]", "v += S")
        src(f"cuda.atomic.add({out}, (t, {_first(plan)}c, 0), q1)", f"cuda.atomic.add({out}, (t, {_first(plan)}c, 1), q2)",
            "c += bdim")
    src("cuda.syncthreads()  # lnp is reused by the next layer norm")
