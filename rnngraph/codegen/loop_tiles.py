"""A persistent loop kernel's GEMM rows as lane-owned tiles (GemmRows ``tile``; LoopTuning ``tiles``).

The work items of codegen/loop_gemm.py stride their lanes over the inner dimension k and reduce
each item's partial sums across the warp before the store: at S = 64 an item's set-up, reduction
and store were a third of the forward loop kernel's instructions (bench/HISTORY.md section 14).
Here a lane owns whole outputs instead: ``rows`` (RT) of the block's rows by ``streams`` (ST)
streams, for one slice of k. A warp's W lanes are RG row groups (lane // SGW) by SGW stream
groups, RG x RT rows >= the rows a block owns; a warp covers PW = SGW x ST streams, so WQ =
ceil(S / PW) warps cover all streams, and the block's warps take the jobs (k slice, the streams'
warp), KS (``ksplit``) slices of ``kslice`` columns. A lane reads 4 neighbouring columns at a
time (on the GPU one 16-byte load of each of its RT weight rows and ST vectors, then RT x ST x 4
FFMA; ``unroll`` such steps a trip). The slices' partial sums go to the shared array ``partials``
(laid out [slice, row, stream] over RG x RT rows and WQ x PW streams); after a block barrier a
thread per (row, stream) adds them and stores the output. No shuffles, so the simulator runs the
same code with "warps" of 4 of its 8 threads (its loads one float at a time, its products one
statement each).

With ``skip`` (a variable-length graph, GemmRows ``skip``) the lanes' stream places go through the
stream order ``O0`` and only the warps over the first ``O1[t]`` places run, only those places are
stored: the streams past their lengths skip their work, as the work items do.

Used where the tuning asks for it and every term allows it: FFMA products (not tensor cores),
vectors that are plain buffers (not flag words), k a multiple of 4 (16-byte alignment of every
row), all weights in shared copies (codegen/loop_plan.py ``_tiles``).
"""
from __future__ import annotations

from .loop_items import GemmRows
from .loop_pointwise import owned_row
from .operand_rounding import ROUNDING
from .pointwise import VALID_STREAMS
from .source import Source

#: columns a lane reads at a time (one 16-byte load of float32)
TILE_STEP = 4


def emit_tile_rows(src: Source, r: GemmRows, coop: bool, vector_loads: bool = True) -> None:
    """The tiled row loop ``r`` (terms read at {rem} or {r}, {k}; on the GPU the terms'
    ``weight4`` and 16-byte vector loads); ``vector_loads`` False (a timing knock-out): the
    vectors are the first row's weights. A block that owns no rows (fewer units than blocks:
    ``nj`` 0) runs no job: its clamped rows would be -1, before its weight copy."""
    RT, ST, KS, U, inner, kp, tile = r.rows, r.streams, r.ksplit, r.unroll, r.inner, r.partials, r.tile
    RG, SGW, WQ, lanes, kslice = tile.row_groups, tile.stream_lane_groups, tile.stream_warps, tile.lanes, tile.kslice
    PW = SGW * ST
    TR, SP = RG * RT, WQ * PW
    rnd = (lambda x: f"{ROUNDING[r.rounding]}({x})") if r.rounding else (lambda x: x)  # noqa: E731
    mad = f"mad_rows{RT}" if coop and not r.rounding else ""  # RT <= MAX_ROWS: codegen/loop_plan.py
    src(f"nrows = nj * {r.reps}", f"tw = tid // {lanes}", f"tl = tid - tw * {lanes}",
        f"trg = tl // {SGW}", f"tsg = tl - trg * {SGW}")
    for a in range(RT):
        src(f"rem{a} = min(trg * {RT} + {a}, nrows - 1)", *owned_row(f"rem{a}", f"r{a}", r.reps, r.unit))
    for m, t in enumerate(r.terms):
        src(f"vrow{m} = {t.row}")
    # the places (in the stream order where ``skip``: the streams within their lengths first) of
    # the streams that run at t, and the warps that cover them
    src(f"nvalid = {VALID_STREAMS}[t]" if r.skip else "nvalid = S", f"nwq = (nvalid + {PW - 1}) // {PW}",
        "job = int64(tw)")
    with src.block(f"while job < nwq * {KS} and nrows > 0:"):
        src("ks = job // nwq", "wq = job - ks * nwq")
        for i in range(ST):
            place = f"min(wq * {PW} + tsg * {ST} + {i}, S - 1)"
            src(f"s{i} = {r.stream_at(place)}",
                *(f"acc{a}_{i} = float32(0.0)" for a in range(RT)))
        src(f"kk = ks * {kslice}")
        if inner % kslice == 0 and kslice % (TILE_STEP * U) == 0:  # every slice whole trips: a constant count
            loops = [(U, f"for q in range({kslice // (TILE_STEP * U)}):")]
        else:
            src(f"kend = min(kk + {kslice}, {inner})")
            loops = [(U, f"while kk + {TILE_STEP * U} <= kend:")] + ([(1, "while kk < kend:")] if U > 1 else [])
        for L, (steps, header) in enumerate(loops):
            with src.block(header):
                _trip(src, r, steps, "r" * L, coop, mad, rnd, vector_loads)
                src(f"kk += {TILE_STEP * steps}")
        for a in range(RT):
            for i in range(ST):
                src(f"{kp}[(ks * {TR} + trg * {RT} + {a}) * {SP} + wq * {PW} + tsg * {ST} + {i}] = acc{a}_{i}")
        src(f"job += bdim // {lanes}")
    src("cuda.syncthreads()", "# the slices' partial sums: a thread per (row, stream place)", "o = int64(tid)")
    with src.block("while o < nrows * nvalid:"):
        src("rem = o // nvalid", "sp = o - rem * nvalid", f"ss = {r.stream_at('sp')}",
            *owned_row("rem", "rr", r.reps, r.unit),
            f"acc = {' + '.join(f'{kp}[({q} * {TR} + rem) * {SP} + sp]' for q in range(KS))}",
            r.store.format(r="rr", s="ss", acc="acc"), "o += bdim")


def _trip(src: Source, r: GemmRows, steps: int, x: str, coop: bool, mad: str, rnd, vector_loads: bool) -> None:
    """One trip: ``steps`` steps of 4 columns from ``kk``, all their loads first (names suffixed
    ``x``), then their products."""
    RT, ST = r.rows, r.streams
    names = []
    for u in range(steps):
        k = f"kc{x}{u}"  # on the GPU one column index a step; in the simulator one a column
        cols = [k] if coop else [f"{k}_{c}" for c in range(TILE_STEP)]
        src(*(f"{col} = uint64(kk + {TILE_STEP * u + c})" for c, col in enumerate(cols)))
        for m, t in enumerate(r.terms):
            w = [[f"w{m}_{a}_{c}{x}{u}" for c in range(TILE_STEP)] for a in range(RT)]
            v = [[f"v{m}_{i}_{c}{x}{u}" for c in range(TILE_STEP)] for i in range(ST)]
            for a in range(RT):
                if coop:
                    src(f"{', '.join(w[a])} = {t.weight4.format(r=f'r{a}', rem=f'rem{a}', k=k)}")
                else:
                    src(*(f"{w[a][c]} = {t.weight.format(r=f'r{a}', rem=f'rem{a}', k=col)}" for c, col in enumerate(cols)))
            for i in range(ST):
                if not vector_loads:
                    src(f"{', '.join(v[i])}, = {', '.join(w[0])},")
                elif coop:
                    src(f"{', '.join(v[i])} = load_f32x4({t.array}, vrow{m}, s{i}, {k})")
                else:
                    src(*(f"{v[i][c]} = {t.vector_at(f'vrow{m}').format(s=f's{i}', k=col)}" for c, col in enumerate(cols)))
            names.append((w, v))
    cur = {}  # stream i -> the name of its accumulators' tuple (every name assigned once)
    if mad:
        for i in range(ST):
            cur[i] = f"ap{i}{x}"
            src(f"{cur[i]} = ({', '.join(f'acc{a}_{i}' for a in range(RT))},)")
    for u, (w, v) in enumerate(names):
        for c in range(TILE_STEP):
            for i in range(ST):
                if mad:
                    nxt = f"a{i}_{c}{x}{u}"
                    src(f"{nxt} = {mad}({cur[i]}, {', '.join(w[a][c] for a in range(RT))}, {v[i][c]})")
                    cur[i] = nxt
                else:
                    src(*(f"acc{a}_{i} += {rnd(w[a][c])} * {rnd(v[i][c])}" for a in range(RT)))
    for i, tup in cur.items():
        src(f"{', '.join(f'acc{a}_{i}' for a in range(RT))}, = {tup}")
