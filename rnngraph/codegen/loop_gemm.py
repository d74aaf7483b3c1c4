"""A persistent loop kernel's GEMM rows: the loop over a block's owned rows in work items, and the
polls of flagged vectors (codegen/flag_exchange.py).

A work item (a warp on the GPU, a thread in the simulator) computes RB rows x SB streams of
sum_m W_m[r, kk] * v_m[s, kk] over kk < inner, its lanes striding over kk; the partial sums are
reduced across the warp by a tree a sum or the transpose butterfly (codegen/warp_reduce.py,
``xreduce``). Register blocking: a weight element is loaded once for SB streams and a vector
element once for RB rows; the kk loop is unrolled ``GemmRows.unroll`` times (independent loads in
flight), with a remainder loop. The source is shaped for numba's front end, which is most of a
loop kernel's compile: on the GPU a vector element's RB products are one ``mad_rows<RB>`` call
(codegen/mad_rows.py) on the stream's accumulators as one tuple within a trip, and every name of
a row loop's unrolled steps is assigned once (the same PTX,
bench/results/cpu-20261204-loop-kernel-compile-mad-rows.txt,
cpu-20261205-loop-kernel-compile-tuple-accumulators.txt). The column index is cast to
uint64 (it is never negative): numba wraps a negative signed index (a sign test and an add per
read, in 64 bits), and that wrap kept ptxas from folding the unrolled offsets kk + 32 * u
(u < unroll) into the loads' immediates; the cast took the S=64 LSTM's inner loop from 417 to
250 SASS instructions a trip (128 of them FFMA; bench/results/cpu-20261201-u64-sass-inner-loop.txt).

Split inner dimension (``GemmRows.ksplit`` = KS > 1, e.g. the S=1 LSTM backward: 4 rows a block,
2 work items for 8 warps): worker kw takes part kw % KS of item kw // KS, i.e. the inner chunks
part, part + KS, ...; its reduced partial sums go to the shared array ``kp<n>`` (one per row
loop: stages of a level run without a block barrier between them), and after a block barrier
thread (item, row, stream) adds the item's KS partial sums and stores the output.
"""
from __future__ import annotations

from .loop_items import GemmRows
from .loop_mma import emit_mma_rows
from .loop_tiles import emit_tile_rows
from .loop_pointwise import owned_row
from .mad_rows import MAX_ROWS
from .operand_rounding import ROUNDING
from .pointwise import VALID_STREAMS
from .source import Source, select
from .warp_reduce import transpose_reduce, tree_reduce


def emit_rows(src: Source, r: GemmRows, coop: bool, vector_loads: bool = True) -> None:
    """The row loop ``r``: its terms are (weight read with {r}, {rem}, {k}; vector read with {s},
    {k}; flag) and its store a statement with {r}, {s} and {acc}. A term whose flag is (F, row)
    reads its vector from flag buffer F: each trip first loads all its words, then polls until
    every word carries the tag row + 1 (:func:`emit_poll`), and takes the values from them.
    ``vector_loads`` False (a timing knock-out): an unflagged vector element is the first row's
    weight of the same step instead, already in a register."""
    if r.tile is not None:
        emit_tile_rows(src, r, coop, vector_loads)
        return
    if r.mma:
        emit_mma_rows(src, r, vector_loads)
        if r.ksplit > 1:
            sum_split_partials(src, r)
        return
    RB, SB, KS, reps, uL, inner = r.rows, r.streams, r.ksplit, r.reps, r.unit, r.inner
    start, step, kstep = ("warp", "nwarps", 32) if coop else ("tid", "bdim", 1)
    rnd = (lambda x: f"{ROUNDING[r.rounding]}({x})") if r.rounding else (lambda x: x)  # noqa: E731
    src(f"nrows = nj * {reps}", f"ngroups = (nrows + {RB - 1}) // {RB}")
    if r.skip:
        src(f"nitems = (({VALID_STREAMS}[t] + {SB - 1}) // {SB}) * ngroups  # the items with a stream within its length")
    items = _item_count(r)
    for m, t in enumerate(r.terms):
        if not t.flag:
            src(f"vrow{m} = {t.row}")  # the vector's row, once: not typed again at every read
    if KS > 1:
        src(f"kw = {start}")
        header = f"while kw < {items} * {KS}:"
    else:
        src(f"item = {start}")
        header = f"while item < {items}:"
    with src.block(header):
        if KS > 1:
            src(f"item = kw // {KS}")
        _item_rows_and_streams(src, r)
        flagged = [(m, t.flag) for m, t in enumerate(r.terms) if t.flag]
        for m, (_, row) in flagged:
            src(f"ftag{m} = uint32({row}) + uint32(1)")
        src(f"kk = {'lane' if coop else '0'}" + (f" + (kw - item * {KS}) * {kstep}" if KS > 1 else ""))
        stride, U = kstep * KS, r.unroll
        mad = mad_function(r, coop)
        loops = [(U, f"kk + {(U - 1) * stride} < {inner}")] + ([(1, f"kk < {inner}")] if U > 1 else [])
        for L, (unroll, cond) in enumerate(loops):
            with src.block(f"while {cond}:"):
                kof = lambda u: f"uint64(kk + {u * stride})" if u else "uint64(kk)"  # noqa: E731
                if flagged:
                    emit_poll(src, flagged, unroll, SB, kof)
                tuples = {}  # stream i -> the name of its accumulators' tuple in this trip (mad calls)
                if mad:
                    for i in range(SB):
                        tuples[i] = f"ap{i}{'r' * L}"
                        src(f"{tuples[i]} = ({', '.join(f'acc{a}_{i}' for a in range(RB))},)")
                for u in range(unroll):
                    # every name assigned once in the row loop: numba's SSA pass costs about the number of
                    # names assigned more than once times the kernel's length
                    x = f"{'r' * L}{u}"
                    k = f"kc{x}"
                    src(f"{k} = {kof(u)}")  # one name for the step's reads: fewer ops for numba to type
                    for m, t in enumerate(r.terms):
                        _emit_products(src, r, m, t, u, x, k, rnd, mad, vector_loads, tuples)
                for i, tup in tuples.items():
                    src(f"{', '.join(f'acc{a}_{i}' for a in range(RB))}, = {tup}")
                src(f"kk += {unroll * stride}")
        _reduce_and_store(src, r, coop)
        src(f"{'kw' if KS > 1 else 'item'} += {step}")
    if KS > 1:
        sum_split_partials(src, r)


def _emit_products(src: Source, r: GemmRows, m: int, t, u: int, x: str, k: str, rnd, mad: str,
                   vector_loads: bool, tuples: dict) -> None:
    """Term ``t`` (the m-th) of unroll step u (names suffixed ``x``, column ``k``): its RB weights,
    then for each of the SB streams its vector element and the RB products added to the
    accumulators, in one ``mad`` call (codegen/mad_rows.py) where there is one: it takes stream
    i's tuple ``tuples[i]`` and returns the next, ``a<m>_<i>_<x>`` (``tuples`` updated)."""
    RB, SB = r.rows, r.streams
    src(*(f"w{m}_{a}_{x} = {rnd(t.weight.format(r=f'r{a}', rem=f'rem{a}', k=k))}" for a in range(RB)))
    vec = t.vector_at(f"vrow{m}") if vector_loads else f"w{m}_0_{x}"
    for i in range(SB):
        v = f"v{m}_{i}_{x}"
        src(f"{v} = {rnd(f'flag_value(fw{m}_{i}_{u})' if t.flag else vec.format(s=f's{i}', k=k))}")
        if mad:
            weights = ", ".join(f"w{m}_{a}_{x}" for a in range(RB))
            src(f"a{m}_{i}_{x} = {mad}({tuples[i]}, {weights}, {v})")
            tuples[i] = f"a{m}_{i}_{x}"
        else:
            src(*(f"acc{a}_{i} += w{m}_{a}_{x} * {v}" for a in range(RB)))


def mad_function(r: GemmRows, coop: bool) -> str:
    """The name of the intrinsic (codegen/mad_rows.py) that adds an FFMA row loop's products of
    a vector element to its RB accumulators on the GPU; "" where the loop writes them one a
    statement (the simulator, rounded operands, more rows than MAX_ROWS)."""
    return f"mad_rows{r.rows}" if coop and not r.mma and not r.rounding and r.rows <= MAX_ROWS else ""


def _item_count(r: GemmRows) -> str:
    """The number of the block's work items of a row loop that run at t: ``nitems`` (set before
    the loop: those over the streams within their lengths) where ``r.skip``, else all of them
    (``ngroups`` groups of rows a stream group)."""
    return "nitems" if r.skip else f"((S + {r.streams - 1}) // {r.streams}) * ngroups"


def _item_rows_and_streams(src: Source, r: GemmRows) -> None:
    """A work item's place (``sb``, its stream group; ``g0``, its first row), its rows r<a> (and
    their places rem<a>), its streams s<i> (through the stream order where ``r.skip``) and its
    partial sums acc<a>_<i> set to zero."""
    RB, SB = r.rows, r.streams
    src("sb = item // ngroups", f"g0 = (item - sb * ngroups) * {RB}")
    for a in range(RB):
        src(f"rem{a} = min(g0 + {a}, nrows - 1)", *owned_row(f"rem{a}", f"r{a}", r.reps, r.unit))
    for i in range(SB):
        src(f"s{i} = {r.stream_at(f'min(sb * {SB} + {i}, S - 1)')}", *(f"acc{a}_{i} = float32(0.0)" for a in range(RB)))


def sum_split_partials(src: Source, r: GemmRows) -> None:
    """After a split row loop (``r.ksplit`` > 1): a block barrier, then a thread per (item, row,
    stream) adds the item's parts from ``r.partials`` (laid out [item * KS + part, row * streams +
    stream]) and stores the sum."""
    RB, SB, KS, kp, reps, uL = r.rows, r.streams, r.ksplit, r.partials, r.reps, r.unit
    src("cuda.syncthreads()", "# the items' split partial sums: a thread per (item, row, stream)", "i = int64(tid)")
    with src.block(f"while i < {_item_count(r)} * {RB * SB}:"):
        src(f"item = i // {RB * SB}", f"c = i - item * {RB * SB}", f"aa = c // {SB}", "sb = item // ngroups",
            f"rem = (item - sb * ngroups) * {RB} + aa", f"ss = sb * {SB} + c - aa * {SB}")
        with src.block("if rem < nrows and ss < S:"):
            src(*owned_row("rem", "rr", reps, uL), f"acc = {' + '.join(f'{kp}[item * {KS} + {p}, c]' for p in range(KS))}",
                r.store.format(r="rr", s=r.stream_at("ss"), acc="acc"))
        src("i += bdim")


def _reduce_and_store(src: Source, r: GemmRows, coop: bool) -> None:
    """A work item's partial sums reduced across the warp, then stored (or, split, put into the
    item's row of ``kp<n>``)."""
    RB, SB, KS, kp = r.rows, r.streams, r.ksplit, r.partials
    accs = [(a, i) for a in range(RB) for i in range(SB)]
    if r.butterfly:
        lines, index, leader = transpose_reduce([f"acc{a}_{i}" for a, i in accs])
        src(*lines, f"ix = {index}")
        if KS > 1:
            with src.block(f"if {leader} and ix < {len(accs)}:"):
                src(f"{kp}[kw, ix] = red")
            return
        src(f"aa = ix // {SB}", f"ii = ix - aa * {SB}", "rsel = r0", "ssel = s0",
            *(f"rsel = {select(f'aa == {a}', f'r{a}', 'rsel')}" for a in range(1, RB)),
            *(f"ssel = {select(f'ii == {i}', f's{i}', 'ssel')}" for i in range(1, SB)))
        with src.block(f"if {leader} and ix < {len(accs)} and g0 + aa < nrows and sb * {SB} + ii < S:"):
            src(r.store.format(r="rsel", s="ssel", acc="red"))
        return
    if coop:
        for a, i in accs:
            src(*tree_reduce([f"acc{a}_{i}"]))
    for a, i in accs:
        if KS > 1:
            put = f"{kp}[kw, {a * SB + i}] = acc{a}_{i}"
            src(f"if lane == 0: {put}" if coop else put)
            continue
        with src.block(f"{'if lane == 0 and ' if coop else 'if '}g0 + {a} < nrows and sb * {SB} + {i} < S:"):
            src(r.store.format(r=f"r{a}", s=f"s{i}", acc=f"acc{a}_{i}"))


def emit_poll(src: Source, flagged, unroll: int, SB: int, kof) -> None:
    """A trip's loads of its flagged vector words ``fw<m>_<i>_<u>`` (term m, stream i, unroll
    step u at column ``kof(u)``), repeated until every tag is ``ftag<m>``; a reader polling for
    too long traps (codegen/flag_exchange.py)."""
    words = [(m, F, row, i, u) for m, (F, row) in flagged for i in range(SB) for u in range(unroll)]
    src("fspin = int64(0)")
    with src.block("while True:"):
        src(*(f"fw{m}_{i}_{u} = flag_load({F}, {row}, s{i}, {kof(u)})" for m, F, row, i, u in words))
        with src.block(f"if ({' | '.join(f'(flag_tag(fw{m}_{i}_{u}) ^ ftag{m})' for m, F, row, i, u in words)}) == 0:"):
            src("break")
        src("fspin = flag_wait(fspin)")
