"""A persistent loop kernel's GEMM rows on tensor cores (a GemmRows with ``mma``: precision
"tf32" or "bf16", GPU only): each warp computes work items of 16 or 32 rows x 8 streams with
``mma.sync`` (codegen/ptx.py: m16n8k8 TF32, m16n8k16 bf16; fp32 accumulation), the same
sum_m W_m[r, :] . v_m[s, :] that codegen/loop_gemm.py's FFMA rows compute, stored the same way.

Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8" / "... m16n8k16"; codegen/ptx.py's
docstring; g = lane // 4, t = lane % 4): A is 16 weight rows x the step's columns, B the step's
columns x 8 streams (B = v^T: lane group g reads stream g's vector), C and D 16 rows x 8 streams,
lane (g, t) holding rows g and g + 8 at streams 2t and 2t + 1. Per k-step of columns c0..:

- TF32 (8 columns): a0 = W[g, c0 + t], a1 = W[g + 8, c0 + t], a2 = W[g, c0 + t + 4],
  a3 = W[g + 8, c0 + t + 4]; b0 = v[g, c0 + t], b1 = v[g, c0 + t + 4]; each rounded with
  ``cvt.rna`` (a shared weight copy is stored rounded: codegen/loop_prologue.py).
- bf16 (16 columns): a0 = W[g, c0 + 2t : + 2], a1 the same of row g + 8, a2 = W[g, c0 + 2t + 8 :
  + 2], a3 row g + 8; b0 = v[g, c0 + 2t : + 2], b1 = v[g, c0 + 2t + 8 : + 2]; each pair packed
  with ``cvt.rn.bf16x2`` (a shared copy holds the packed words: word j = columns 2j, 2j + 1).

Chunks (``chunked``: unflagged vectors whose rows are a multiple of 4 floats, so 16-byte aligned;
codegen/buffers.py aligns the gradient arena's arrays): the inner dimension's whole chunks of four
k-steps (MMA_CHUNK: 32 TF32 columns, 64 bf16) take a permuted k order. Lane t reads its stream's
vector words 4t..4t+3 and 16+4t..16+4t+3 of the chunk (TF32 columns; bf16 columns 8t..8t+7 and
32+8t..32+8t+7) with 16-byte loads (ptx.py ``load_f32x4``) and k-step j takes the j-th word of
each half as its b0 and b1; a0..a3 then hold the weight rows' same words, which a shared copy
stores at the places step j's fragment load reads (loop_plan.chunk_word_order: word 4t+j at
8j+t, 16+4t+j at 8j+4+t) and a weight in global memory is read at directly. The sum over k is
the same. Measured on the H200 (LSTM H = 1024, S = 64, tf32): the forward loop kernel went from
5.91 to 5.16 ms, the backward from 8.86 to 6.25 (bench/results/h200-20261203-loop-mma-profile-h1024.log,
then -loop-mma-profile-h1024-tf32-chunked.json): eight 4-byte global loads a
fragment had kept the L1 85 % busy (-loop-mma-ncu-h1024-tf32-fwd.txt). The rest of the inner
dimension runs k-step by k-step as below.

Swapped items (``swapped``: a block of at most 8 rows, more than 8 streams; the backward of
H = 1024 on 132 blocks owns 8 rows a block): 8 rows x 16 streams, the vectors as A (lane group g
reads streams g and g + 8, in the two stream tiles' registers), the weight row g as B (a lane's
a0 and a2 of the other shape), D [stream, row]: acc0_0_{2h + e} is stream 8h + g, row 2t + e. A
16-row tile there computed 8 rows that were thrown away. (Checked in the simulator and as PTX;
not yet timed on the GPU.)

A shared copy's rows are padded to a length of 4 mod 8 words (codegen/loop_plan.py
``mma_row_words``), so a fragment load's 32 lanes (8 rows x 4 consecutive words) hit 32 distinct
banks. Rows past the block's own are clamped to its last row
and streams past S to stream S - 1 (their products are computed and not stored); a last k-step
that runs past the inner dimension reads zeros there. Every branch is uniform across the warp
(``mma.sync.aligned``); a flagged vector's poll, whose lanes leave the loop at different trips,
ends with ``cuda.syncwarp()``.

K-split (``ksplit`` KS > 1): worker kw takes steps part, part + KS, ... of item kw // KS and puts
its accumulators into ``partials`` [kw, row * streams + stream]; codegen/loop_gemm.py's
``sum_split_partials`` adds them after a block barrier.
"""
from __future__ import annotations

from .loop_items import GemmRows
from .loop_plan import MMA_CHUNK, MMA_K, MMA_ROWS, MMA_STREAMS
from .loop_pointwise import owned_row
from .source import Source

#: the intrinsic of each precision (codegen/ptx.py)
MMA_FUNCTIONS = {"tf32": "mma_tf32_m16n8k8", "bf16": "mma_bf16_m16n8k16"}


class _Step:
    """The reads of one k-step at column ``kb`` (a uint64 variable) of row loop ``r``: which
    lane-column offset each fragment register takes and how a weight or vector element is read,
    converted and (``guarded``: the last, partial step) masked past the inner dimension."""

    def __init__(self, r: GemmRows, kb: str, guarded: bool, real: str = "", lanes: tuple = ()):
        self.r, self.kb, self.guarded, self.bf16 = r, kb, guarded, r.mma == "bf16"
        #: a weight read from global memory: its columns are ``real`` + the lane's ``lanes``
        #: offsets (a chunk's permuted order), by default ``kb`` + LANE_COLUMNS
        self.real, self.lanes = real or kb, lanes or LANE_COLUMNS[r.mma]

    def _element(self, read: str, col: str, limit: int, zero: str = "float32(0.0)") -> str:
        """``read`` (a format string with {c}) at column ``col``; guarded: 0 past ``limit``."""
        if not self.guarded:
            return read.format(c=col)
        return f"({read.format(c=f'min({col}, uint64({limit - 1}))')} if {col} < uint64({limit}) else {zero})"

    def masked(self, value: str, col: str) -> str:
        """``value`` (read at column ``col``, clamped), or 0 past the inner dimension when guarded."""
        return f"({value} if {col} < uint64({self.r.inner}) else float32(0.0))" if self.guarded else value

    def _convert(self, read: str, cols: tuple, kb: str = "") -> str:
        """One register from ``read`` at the lane's columns ``cols`` (offsets from ``kb``, by
        default the step's): TF32, one rounded element; bf16, two elements packed."""
        inner, kb = self.r.inner, kb or self.kb
        if self.bf16:
            lo, hi = (self._element(read, f"{kb} + {c}", inner) for c in cols)
            return f"pack_bf16x2({lo}, {hi})"
        return f"cvt_rna_tf32({self._element(read, f'{kb} + {cols[0]}', inner)})"

    def weight(self, term, a: int, h: int, half: int) -> str:
        """Register a0..a3 (``half`` 0: columns of a0/a1, 1: of a2/a3) of row tile ``a``, row
        g + 8 h, from ``term``'s weight."""
        read = term.weight.format(r=f"r{a}{h}", rem=f"rem{a}{h}", k="{c}")
        if term.prepared:  # a shared copy in the operand format: one word, no conversion
            if self.bf16:
                words = (self.r.inner + 1) // 2
                return self._element(read, f"kh + lq{half}", words, "uint32(0)")
            return self._element(read, f"{self.kb} + lq{half}", self.r.inner)
        return self._convert(read, self.lanes[half], self.real)

    def vector(self, read: str, half: int) -> str:
        """Register b0 / b1 (``half``) from the vector read ``read`` (a format string with {c})."""
        return self._convert(read, LANE_COLUMNS[self.r.mma][half])


#: the lane's column offsets (variables emitted by :func:`emit_mma_rows`) of each register half:
#: TF32 one column (t, t + 4), bf16 two (2t and 2t + 1, 2t + 8 and 2t + 9)
LANE_COLUMNS = {"tf32": (("lq0",), ("lq1",)), "bf16": (("le0", "le1"), ("le2", "le3"))}
#: the same in a chunk (``chunked``), from the chunk's column + the step's (TF32 j, bf16 2j):
#: TF32 4t and 4t + 16, bf16 8t, 8t + 1 and 8t + 32, 8t + 33
CHUNK_LANES = {"tf32": (("lc0",), ("lc1",)), "bf16": (("lc0", "lc0 + uint64(1)"), ("lc1", "lc1 + uint64(1)"))}


def _shape(r: GemmRows) -> tuple[int, int, int]:
    """(RT, ST, HS) of row loop ``r``: its 16-row weight tiles, its 8-stream vector tiles and the
    weight rows a lane reads a tile (2: rows g and g + 8; ``swapped``: 1, row g)."""
    if r.swapped:
        return 1, r.streams // MMA_STREAMS, 1
    return r.rows // MMA_ROWS, r.streams // MMA_STREAMS, 2


def _products(r: GemmRows, m: int, u) -> list[str]:
    """The ``mma`` calls of term ``m`` at step ``u``: a product per (row tile, stream tile) with
    the weights as A; ``swapped``, one, the two stream tiles' vectors as A (streams g, g + 8) and
    the weight row g as B."""
    fn = MMA_FUNCTIONS[r.mma]
    RT, ST, _ = _shape(r)
    if r.swapped:
        acc = ", ".join(f"acc0_0_{c}" for c in range(4))
        a = [f"fb{m}_{i}_{half}_{u}" for half in range(2) for i in range(2)]
        return [f"{acc} = {fn}({', '.join(a)}, fa{m}_0_0_{u}, fa{m}_0_2_{u}, {acc})"]
    out = []
    for a in range(RT):
        for i in range(ST):
            acc = ", ".join(f"acc{a}_{i}_{c}" for c in range(4))
            out.append(f"{acc} = {fn}({', '.join(f'fa{m}_{a}_{q}_{u}' for q in range(4))}, "
                       f"fb{m}_{i}_0_{u}, fb{m}_{i}_1_{u}, {acc})")
    return out


def emit_mma_rows(src: Source, r: GemmRows, vector_loads: bool = True) -> None:
    """The tensor-core row loop ``r`` (see the module docstring): its terms' weight and vector
    reads as in codegen/loop_gemm.py's ``emit_rows`` (the weight with {r}/{rem} and {k}, the
    vector with {s} and {k}; a flagged vector polled from its flag words); ``vector_loads`` False
    (a timing knock-out): B is the first weight register instead."""
    RB, SB, KS, reps, uL, inner = r.rows, r.streams, r.ksplit, r.reps, r.unit, r.inner
    (RT, ST, HS), K = _shape(r), MMA_K[r.mma]
    swapped = " (swapped: the streams as the tile's 16, the rows as its 8)" if r.swapped else ""
    src(f"# tensor cores ({r.mma}): items of {RB} rows x {SB} streams{swapped}, k-steps of {K}",
        "lg = lane // 4", "lt = lane - lg * 4", "lu = uint64(lt)", "lq0 = lu", "lq1 = lu + uint64(4)")
    if r.mma == "bf16":
        src("le0 = lu + lu", "le1 = le0 + uint64(1)", "le2 = le0 + uint64(8)", "le3 = le0 + uint64(9)")
    if r.chunked:
        wide = 8 if r.mma == "bf16" else 4  # a lane's floats of each half of a chunk
        src(f"lc0 = lu * uint64({wide})", f"lc1 = lc0 + uint64({MMA_CHUNK[r.mma] // 2})")
    src(f"nrows = nj * {reps}", f"ngroups = (nrows + {RB - 1}) // {RB}")
    count = f"((S + {SB - 1}) // {SB}) * ngroups"
    src("kw = warp" if KS > 1 else "item = warp")
    with src.block(f"while {'kw' if KS > 1 else 'item'} < {count}{f' * {KS}' if KS > 1 else ''}:"):
        if KS > 1:
            src(f"item = kw // {KS}")
        src("sb = item // ngroups", f"g0 = (item - sb * ngroups) * {RB}")
        for a in range(RT):
            for h in range(HS):
                src(f"rem{a}{h} = min(g0 + {a * MMA_ROWS + 8 * h} + lg, nrows - 1)",
                    *owned_row(f"rem{a}{h}", f"r{a}{h}", reps, uL))
        for i in range(ST):
            src(f"s{i} = min(sb * {SB} + {i * MMA_STREAMS} + lg, S - 1)")
        tiles = [(0, 0)] if r.swapped else [(a, i) for a in range(RT) for i in range(ST)]
        src(*(f"acc{a}_{i}_{c} = float32(0.0)" for a, i in tiles for c in range(4)))
        flagged = [(m, t.flag) for m, t in enumerate(r.terms) if t.flag]
        for m, (_, row) in flagged:
            src(f"ftag{m} = uint32({row}) + uint32(1)")
        start = 0
        if r.chunked:
            CH = MMA_CHUNK[r.mma]
            start = inner // CH * CH
            src(f"kk = (kw - item * {KS}) * {CH}" if KS > 1 else "kk = 0")
            pipelined = r.pipelined and vector_loads
            if pipelined:  # the first chunk's vectors (clamped to the last chunk: a worker with none reads one)
                src(f"kb = uint64(min(kk, {start - CH}))")
                _chunk_vectors(src, r, "p", "kb")
            with src.block(f"while kk < {start}:  # whole chunks: 16-byte vector loads"):
                _chunk(src, r, vector_loads, f"uint64(min(kk + {CH * KS}, {start - CH}))" if pipelined else "")
                src(f"kk += {CH * KS}")
        src(f"kk = {start} + (kw - item * {KS}) * {K}" if KS > 1 else f"kk = {start}")
        stride, U = K * KS, r.unroll
        loops = [(U, f"kk + {(U - 1) * stride + K} <= {inner}")] + ([(1, f"kk + {K} <= {inner}")] if U > 1 else [])
        for unroll, cond in loops:
            with src.block(f"while {cond}:"):
                _steps(src, r, unroll, stride, False, vector_loads)
                src(f"kk += {unroll * stride}")
        if inner % K:
            with src.block(f"if kk < {inner}:  # the last, partial k-step"):
                _steps(src, r, 1, stride, True, vector_loads)
        _store(src, r)
        src(f"kw += nwarps" if KS > 1 else "item += nwarps")


def _steps(src: Source, r: GemmRows, unroll: int, stride: int, guarded: bool, vector_loads: bool) -> None:
    """``unroll`` k-steps at kk, kk + stride, ...: every step's fragments loaded first, then the
    products (independent loads in flight before the first ``mma``)."""
    RT, ST, HS = _shape(r)
    products = []
    for u in range(unroll):
        kb = f"kb{u}"
        src(f"{kb} = uint64(kk + {u * stride})" if u else f"{kb} = uint64(kk)")
        if r.mma == "bf16":
            src(f"kh = {kb} >> uint64(1)")
        step = _Step(r, kb, guarded)
        for m, t in enumerate(r.terms):
            for a in range(RT):
                src(*(f"fa{m}_{a}_{2 * half + h}_{u} = {step.weight(t, a, h, half)}" for half in range(2) for h in range(HS)))
            for i in range(ST):
                if not vector_loads:
                    src(*(f"fb{m}_{i}_{half}_{u} = fa{m}_0_{2 * half}_{u}" for half in range(2)))
                elif t.flag:
                    _poll(src, r, step, m, t, i, u)
                else:
                    src(*(f"fb{m}_{i}_{half}_{u} = {step.vector(t.vector.format(s=f's{i}', k='{c}'), half)}"
                          for half in range(2)))
            products += _products(r, m, u)
    src(*products)


def _chunk_vectors(src: Source, r: GemmRows, prefix: str, kb: str) -> None:
    """The 16-byte vector loads of a chunk at column ``kb`` into ``<prefix><m>_<i>_<half>_<e>``:
    per term and stream tile, the lane's words 4t..4t+3 and 16+4t..16+4t+3 of the chunk (TF32
    columns; bf16 columns 8t..8t+7 and 32+8t..32+8t+7)."""
    bf16 = r.mma == "bf16"
    for m, t in enumerate(r.terms):
        for i in range(_shape(r)[1]):
            for half in range(2):
                v = [f"{prefix}{m}_{i}_{half}_{e}" for e in range(8 if bf16 else 4)]
                col = f"{kb} + lc{half}"
                src(f"{', '.join(v[:4])} = load_f32x4({t.array}, {t.row}, s{i}, {col})")
                if bf16:
                    src(f"{', '.join(v[4:])} = load_f32x4({t.array}, {t.row}, s{i}, {col} + uint64(4))")


def _chunk(src: Source, r: GemmRows, vector_loads: bool, next_kb: str = "") -> None:
    """One chunk of four k-steps at column kk (``chunked``, see the module docstring): the
    vectors (:func:`_chunk_vectors`), k-step j taking the j-th word of each half; the weights at
    the same columns (a permuted shared copy: step j's fragment load at column 8j of the chunk,
    TF32; from global memory, the columns themselves); then the products. ``next_kb``
    (``pipelined``): this chunk's vectors are the ones loaded the trip before (``p...``), and
    the next chunk's, at column ``next_kb``, are loaded into them before this chunk's products."""
    (RT, ST, HS), bf16, K = _shape(r), r.mma == "bf16", MMA_K[r.mma]
    src("kb = uint64(kk)")
    if vector_loads and next_kb:
        words = 8 if bf16 else 4
        src(*(f"v{m}_{i}_{half}_{e} = p{m}_{i}_{half}_{e}" for m in range(len(r.terms)) for i in range(ST)
              for half in range(2) for e in range(words)), f"kn = {next_kb}")
        _chunk_vectors(src, r, "p", "kn")
    elif vector_loads:
        _chunk_vectors(src, r, "v", "kb")
    for m, t in enumerate(r.terms):
        for i in range(ST):
            if not vector_loads:
                continue
            for half in range(2):
                v = [f"v{m}_{i}_{half}_{e}" for e in range(8 if bf16 else 4)]
                for j in range(4):
                    conv = f"pack_bf16x2({v[2 * j]}, {v[2 * j + 1]})" if bf16 else f"cvt_rna_tf32({v[j]})"
                    src(f"fb{m}_{i}_{half}_{j} = {conv}")
    for j in range(4):
        src(f"kb{j} = kb + uint64({j * K})", f"kr{j} = kb + uint64({2 * j if bf16 else j})")
        if bf16:
            src(f"kh = kb{j} >> uint64(1)")
        step = _Step(r, f"kb{j}", False, f"kr{j}", CHUNK_LANES[r.mma])
        for m, t in enumerate(r.terms):
            for a in range(RT):
                src(*(f"fa{m}_{a}_{2 * half + h}_{j} = {step.weight(t, a, h, half)}" for half in range(2) for h in range(HS)))
            if not vector_loads:
                for i in range(ST):
                    src(*(f"fb{m}_{i}_{half}_{j} = fa{m}_0_{2 * half}_{j}" for half in range(2)))
    src(*(p for j in range(4) for m in range(len(r.terms)) for p in _products(r, m, j)))


def _poll(src: Source, r: GemmRows, step: _Step, m: int, t, i: int, u: int) -> None:
    """Stream tile ``i``'s B registers of term ``m`` from flag words: the lane's words (clamped to
    the inner dimension) loaded until every tag is ``ftag<m>`` (codegen/flag_exchange.py), the
    warp reconverged, then the values converted as :meth:`_Step.vector` does."""
    F, row = t.flag
    cols = [c for half in LANE_COLUMNS[r.mma] for c in half]
    words = [(c, f"fw{m}_{i}_{j}_{u}") for j, c in enumerate(cols)]
    src("fspin = 0")
    with src.block("while True:"):
        src(*(f"{w} = flag_load({F}, {row}, s{i}, min({step.kb} + {c}, uint64({r.inner - 1})))" for c, w in words))
        with src.block(f"if ({' | '.join(f'(flag_tag({w}) ^ ftag{m})' for _, w in words)}) == 0:"):
            src("break")
        src("fspin = flag_wait(fspin)")
    src("cuda.syncwarp()")
    for half, cs in enumerate(LANE_COLUMNS[r.mma]):
        vals = [step.masked(f"flag_value({w})", f"{step.kb} + {c}") for c, w in words if c in cs]
        conv = f"pack_bf16x2({vals[0]}, {vals[1]})" if r.mma == "bf16" else f"cvt_rna_tf32({vals[0]})"
        src(f"fb{m}_{i}_{half}_{u} = {conv}")


def _store(src: Source, r: GemmRows) -> None:
    """Each lane's accumulators: rows g0 + 16 a + 8 h + g, streams sb * SB + 8 i + 2 t + e
    (``swapped``: streams sb * SB + 8 h + g, rows g0 + 2 t + e), stored where both exist (KS = 1),
    or all into the worker's row of the split partial sums."""
    if r.swapped:
        _store_swapped(src, r)
        return
    RT, ST, SB = r.rows // MMA_ROWS, r.streams // MMA_STREAMS, r.streams
    for a in range(RT):
        for h in range(2):
            row = a * MMA_ROWS + 8 * h
            for i in range(ST):
                if r.ksplit == 1:
                    src(f"ss = sb * {SB} + {i * MMA_STREAMS} + 2 * lt")
                for e in range(2):
                    acc = f"acc{a}_{i}_{2 * h + e}"
                    if r.ksplit > 1:
                        src(f"{r.partials}[kw, ({row} + lg) * {SB} + {i * MMA_STREAMS + e} + 2 * lt] = {acc}")
                        continue
                    with src.block(f"if g0 + {row} + lg < nrows and ss + {e} < S:"):
                        src(r.store.format(r=f"r{a}{h}", s=f"(ss + {e})", acc=acc))


def _store_swapped(src: Source, r: GemmRows) -> None:
    """:func:`_store` of a ``swapped`` tile: acc0_0_{2h + e} is stream sb * SB + 8 h + g, row
    g0 + 2 t + e."""
    SB = r.streams
    for e in range(2):
        if r.ksplit == 1:
            src(f"rw = g0 + 2 * lt + {e}")
            with src.block("if rw < nrows:"):
                src(*owned_row("rw", "rs", r.reps, r.unit))
                for h in range(2):
                    with src.block(f"if sb * {SB} + {8 * h} + lg < S:"):
                        src(r.store.format(r="rs", s=f"(sb * {SB} + {8 * h} + lg)", acc=f"acc0_0_{2 * h + e}"))
            continue
        for h in range(2):
            src(f"{r.partials}[kw, (2 * lt + {e}) * {SB} + {8 * h} + lg] = acc0_0_{2 * h + e}")
