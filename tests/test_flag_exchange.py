"""Flagged exchange (``ScheduleOptions.flagged_exchange``; passes/flag_exchange.py, codegen/flag_exchange.py): the values a
persistent loop's GEMMs read whole travel as (value, timestep tag) words that the readers poll,
instead of after a grid sync. Which loops get it, that the polled reads come after their writes
(the element-level race check of tests/test_grid_syncs.py), the words themselves, the loop kernels
in the simulator computing bit for bit like the grid-synced ones, and the PTX of the polls."""
import os

import numpy as np
import pytest

import extra_cells
import rnngraph as rg
from conftest import PTX_PREAMBLE, run_outside_simulator
from loop_sim import assert_same_results, check_loops
from rnngraph.passes import schedule
from rnngraph.passes.flag_exchange import flag_candidates
from rnngraph.schedule import Kernel, Loop
from test_grid_syncs import NO_FLAGS, loops, races

sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")
FLAGS = rg.ScheduleOptions.defaults(1).replace(flagged_exchange=True)  # S=1's defaults: on


def test_lstm_loops_drop_their_grid_syncs():
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), options=FLAGS)
    assert (fwd.flagged, fwd.syncs) == (("layer0.h_next",), ())  # h[t-1] feeds every block's gate rows
    assert (bwd.flagged, bwd.syncs) == (("d.layer0.U",), ())  # the gate gradients feed dh[t-1] += U^T dG[t]
    assert "flagged exchange (readers poll each element's timestep tag): layer0.h_next" in str(s)
    assert "1 level per timestep (initiation interval), no grid sync, 4 ticks" in str(s)
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), options=NO_FLAGS)
    assert (fwd.flagged, fwd.syncs, bwd.flagged, bwd.syncs) == ((), (1,), (), (1,))
    assert "flagged exchange" not in str(s) and "options (not the defaults for S=1): flagged_exchange=False" in str(s)


@pytest.mark.parametrize("S, forward, backward", [(1, True, True), (2, False, True), (8, False, True),
                                                   (9, False, False)])
def test_the_defaults_flag_both_ways_at_one_stream_and_the_backward_up_to_eight(S, forward, backward):
    """S = 1 flags both directions by default, S = 2 to 8 the backward loops alone (flagged forward
    loops were slower in the S = 8 char-LM step, flagged backward ones faster: bench/HISTORY.md
    sections 21 and 23), above nothing; the dump names the options that differ from those."""
    _, s, (fwd, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), S=S)
    assert (bool(fwd.flagged), bool(bwd.flagged)) == (forward, backward)
    assert "options (not the defaults" not in str(s)
    options = rg.ScheduleOptions.defaults(S).replace(flagged_exchange=True, flagged_forward=False)
    _, s, (fwd, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), S=S, options=options)
    assert fwd.flagged == () and bwd.flagged == ("d.layer0.U",)
    assert ("flagged_forward=False" in str(s)) == (S == 1) and ("flagged_exchange=True" in str(s)) == (S > 8)


def test_loops_on_tensor_cores_are_not_flagged_by_default():
    """In a reduced precision where the loops' products take tensor cores by default (S x K >=
    49,152: S = 8, K = 6,144), the flags stay off: a flagged vector forgoes the tensor-core chunks."""
    assert rg.ScheduleOptions.defaults(8, 6144, "tf32").flagged_exchange is False
    assert rg.ScheduleOptions.defaults(8, 6144, "fp32").flagged_exchange is True
    assert rg.ScheduleOptions.defaults(8, 512, "tf32").flagged_exchange is True


def test_layer_norm_loops_flag_the_gemm_vectors_and_keep_the_row_sum_syncs():
    """A layer-norm LSTM's row sums still need the grid (syncs after levels 1 and 2, where its
    layer norms' sums are completed), but the vector its GEMM reads whole travels in flag words:
    h[t-1] forward (written by the level-3 kernel with LN(c)), d.U backward (written by the
    level-3 kernel with LN_h's VJP); one grid sync fewer a timestep each way."""
    g, s, (fwd, bwd) = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=FLAGS)
    assert (fwd.flagged, fwd.syncs) == (("layer0.h_next",), (1, 2))
    assert (bwd.flagged, bwd.syncs) == (("d.layer0.U",), (1, 2))
    _, _, (fwd, bwd) = loops(rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=4), options=NO_FLAGS)
    assert (fwd.syncs, bwd.syncs) == ((1, 2, 3), (1, 2, 3))


def test_off_where_syncs_stay():
    """Wavefront stages keep their grid syncs."""
    net = rg.stacked(rg.cells.lstm, 3, 8, input_size=4)
    s = schedule(net.graph, 4, 1, "float32", "wavefront", FLAGS)
    ls = [st for st in s.forward + s.backward if isinstance(st, Loop)]
    assert len(ls[0].stages) == 3 and [lp.flagged for lp in ls] == [(), ()]


def _kernel(name, kind, reads, writes, level):
    return Kernel(name, kind, (name,), ("matmul" if kind == "gemm" else "add",), reads, writes, (), 4, 1, 0, level)


@pytest.mark.parametrize("writer, reader, reverse, ok", [
    (("x", 1, "pointwise"), ("x", 2), False, True),       # written earlier in the timestep
    (("x", 2, "pointwise"), ("x", 1), False, False),      # read before the write: would wait forever
    (("x", 1, "pointwise"), ("x", 1), False, False),      # same level: no order between them
    (("x", 2, "pointwise"), ("x[t-1]", 1), False, True),  # the previous timestep's (the initial state first)
    (("x", 2, "pointwise"), ("x[t-1]", 1), True, False),  # backward: t-1 comes after t
    (("x[t-1]", 1, "pointwise"), ("x", 2), False, False),  # stored a timestep away from its read
    (("x", 1, "gemm"), ("x", 2), False, False),           # a GEMM's output: split by rows, not flagged
    (("x", 1, "reduction"), ("x", 2), False, True),       # a kernel with a layer norm writes it whole
])
def test_candidates_are_written_before_they_are_read(writer, reader, reverse, ok):
    w, r = _kernel("k1", writer[2], ("y",), (writer[0],), writer[1]), _kernel("k2", "gemm", (reader[0],), ("z",), reader[1])
    loop = Loop("loop0", ((0, "layer0"),), (w, r), 2, "persistent", 4, reverse, (1, 2))
    assert flag_candidates(loop) == (("x",) if ok else ())


def test_two_writers_are_not_flagged():
    ks = (_kernel("k1", "pointwise", ("y",), ("x",), 1), _kernel("k3", "pointwise", ("y",), ("x",), 1),
          _kernel("k2", "gemm", ("x",), ("z",), 2))
    assert flag_candidates(Loop("loop0", ((0, "layer0"),), ks, 2, "persistent", 4, False, (1, 2))) == ()


@pytest.mark.parametrize("cell", sorted(rg.cells.STANDARD))
@pytest.mark.parametrize("layers", [1, 2])
def test_flagged_reads_come_after_their_writes_and_nothing_races(cell, layers):
    g, s, ls = loops(rg.stacked(rg.cells.STANDARD[cell], layers, 6, input_size=5), options=FLAGS)
    for loop in ls:
        assert races(g, s, loop, B=4) == [], loop.name


def test_the_race_check_sees_a_flagged_read_before_its_write():
    """The same check fails for the LSTM backward with its GEMM moved before the pointwise VJP."""
    from dataclasses import replace
    g, s, (_, bwd) = loops(rg.stacked(rg.cells.lstm, 1, 8, input_size=4), options=FLAGS)
    swapped = tuple(replace(k, level=3 - k.level) for k in bwd.kernels)
    assert any("read before it is written" in r for r in races(g, s, replace(bwd, kernels=swapped)))


@sim
def test_words_round_trip(monkeypatch):
    from rnngraph.codegen import flag_exchange as fx
    F = np.zeros((3, 2, 4), np.uint64)
    values = np.array([0.0, -0.0, 1e-40, -3.5, np.inf, 1e30, np.float32(np.pi), -1.0], np.float32)
    for i, v in enumerate(values):
        r, s, j = i % 3, i % 2, i % 4
        fx.flag_store(F, r, s, j, v)
        w = fx.flag_load(F, r, s, j)
        assert fx.flag_tag(w) == r + 1
        assert fx.flag_value(w).tobytes() == v.tobytes()  # the bits, -0.0 and denormals too
    assert fx.flag_tag(np.uint64(0)) == 0  # a zeroed word: not written yet
    monkeypatch.setattr(fx, "SPIN_LIMIT", 3)
    assert fx.flag_wait(2) == 3
    with pytest.raises(RuntimeError, match="did not come after 3 polls"):
        fx.flag_wait(3)


def test_a_value_read_unordered_by_another_gemm_is_not_flagged():
    """Every GEMM read of a flagged value polls its words: one read ordered after the write is not
    enough (regression: a backward loop with a second GEMM reading x[t-1])."""
    ks = (_kernel("k1", "pointwise", ("y",), ("x",), 1), _kernel("k2", "gemm", ("x",), ("z",), 2),
          _kernel("k3", "gemm", ("x[t-1]",), ("w",), 2))
    assert flag_candidates(Loop("loop0", ((0, "layer0"),), ks, 2, "persistent", 4, False, (1, 2))) == ("x",)
    assert flag_candidates(Loop("loop0", ((0, "layer0"),), ks, 2, "persistent", 4, True, (1, 2))) == ()


@sim
@pytest.mark.parametrize("cell", ["lstm", "gru", "skip_rnn", "slice_out_rnn", "layernorm_lstm", "peephole_lstm",
                                  "prenorm_rnn"])
def test_flagged_kernels_compute_exactly_like_synced_ones(monkeypatch, cell):
    """S=1, the simulator's block split in two "blocks" (SIM_BLOCKS=2): flags=1 against flags=0,
    the same float32 arithmetic with the GEMM inputs read from the flag words: every loop kernel,
    launched alone from the same inputs (tests/loop_sim.py), must store the same values and
    gradients bit for bit (and the NumPy backend's to float32 tolerance). slice_out_rnn
    (tests/extra_cells.py): the backward's pointwise kernel adds nothing to one slice of the
    flagged gradient and must still store its words (a poll limit of 20000 turns the old
    deadlock into a RuntimeError). layernorm_lstm: the flagged h and d.U are written by kernels
    with a layer norm, whose row sums still go through atomics and grid syncs; prenorm_rnn
    (tests/extra_cells.py): the flagged value is a layer norm's own output, after its
    reduction phase."""
    from rnngraph.codegen import flag_exchange, program
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    monkeypatch.setattr(flag_exchange, "SPIN_LIMIT", 20000)
    V, T = 5, 3
    net = rg.stacked(getattr(extra_cells, cell, None) or rg.cells.STANDARD[cell], 1, 16, vocab=V, embed=3)

    def step(flags):
        return rg.compile(net, window=T, streams=1, device="cuda", optimizer=rg.Adam(lr=1e-2), seed=3,
                          options=FLAGS.replace(flagged_exchange=flags), tuning=rg.LoopTuning.defaults(1).replace(unroll=2))
    flagged, synced = step(True), step(False)
    assert "flag_load(" in flagged.kernels and "flag_load(" not in synced.kernels
    assert_same_results(check_loops(flagged), check_loops(synced))


_PTX = PTX_PREAMBLE + r"""
import rnngraph as rg
from rnngraph.codegen import module
from rnngraph.codegen.loop import LoopEmitter
from rnngraph.codegen.pointwise import PRELUDE
from rnngraph.passes import schedule
from rnngraph.schedule import Loop
net = rg.stacked(rg.cells.lstm, 1, 64, input_size=64)
g = net.graph
s = schedule(g, 4, 1, "float32", None, rg.ScheduleOptions.defaults(1).replace(flagged_exchange=True))
kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
out = {}
for loop in [st for st in s.forward + s.backward if isinstance(st, Loop)]:
    e = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, streams=1, nblocks=132, tuning=rg.LoopTuning.defaults(1))
    src, args = e.source()
    kern = module.load(PRELUDE + "\n\n" + src).k
    params = {f"P{i}": p.shape for i, p in enumerate(g.params)}
    arrays = [np.zeros((2, 2, 2), np.uint64) for _ in e.flag_buffers] + [
        np.zeros(params["P" + a[1:]][::-1 if a[0] == "T" else 1], np.float32) if a[0] in "PT" else
        np.zeros((2, 2, 2), np.float32) for a in args]
    ptx, _ = cuda.compile_ptx(kern.py_func, tuple(typeof(v) for v in [4, 1] + arrays), cc=(9, 0))
    body = "\n".join(l for l in ptx.splitlines() if not l.strip().startswith("//"))
    out[loop.name] = {"loads": ptx.count("ld.relaxed.gpu.global.u64"), "stores": ptx.count("st.relaxed.gpu.global.u64"),
                      "trap": ptx.count("trap;"), "cg_syncs": ptx.count("cudaCGSynchronize,"),
                      "f64": len(re.findall(r"\.f64\b", body))}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_ptx_polls_relaxed_words_and_syncs_the_grid_once(tmp_path):
    """The flagged S=1 LSTM loops (H=64) on sm_90: the GEMM's vector words are read with
    ``ld.relaxed.gpu`` (each lane's two words of the unrolled trip, in the poll loop and the
    remainder loop), stored with ``st.relaxed.gpu`` (forward: h and the initial state's words;
    backward: the four gate gradients), a trap after too many polls, no f64, and numba's grid
    sync only once (after the words are zeroed), none a timestep."""
    r = run_outside_simulator(_PTX, cache_dir=tmp_path, timeout=900)
    assert sorted(r) == ["loop0", "loop0 (backward)"], r
    for name, c in r.items():
        assert c["loads"] >= 2 and c["trap"] >= 1 and c["f64"] == 0 and c["cg_syncs"] == 1, (name, c)
    assert r["loop0"]["stores"] >= 2 and r["loop0 (backward)"]["stores"] >= 4, r


@pytest.mark.parametrize("cell", sorted(rg.cells.STANDARD))
def test_only_the_writer_stores_a_flagged_gradient(cell):
    """In a backward loop the flagged gradient's words (and its buffer) are stored by its one
    writer kernel, whose device functions (``k<i>_bwd`` and the early-load ``_pre`` twin) are the
    only ones calling flag_store on it (regression: the completion of untouched chunks
    first ran in every pointwise kernel of the loop, e.g. peephole_lstm's peephole VJPs stored
    d.U's old values, racing with its writer)."""
    import re
    from rnngraph.codegen.loop import LoopEmitter
    g, s, ls = loops(rg.stacked(rg.cells.STANDARD[cell], 1, 8, input_size=4), options=FLAGS)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    for loop in [lp for lp in ls if lp.reverse and lp.flagged]:
        e = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, streams=1, nblocks=4, tuning=rg.LoopTuning.defaults(1))
        src, _ = e.source()
        for F in e.flag_buffers.values():
            storers = {m.group(1) for m in re.finditer(r"def (k\d+)_bwd\w*\(([^)]*)\):\n((?:    .*\n)*)", src)
                       if f"flag_store({F}," in m.group(3)}
            assert len(storers) == 1, (loop.name, F, storers)


@sim
@pytest.mark.parametrize("cell", ["lstm", "gru", "peephole_lstm", "layernorm_lstm"])
def test_the_default_backward_flags_at_three_streams_compute_like_grid_syncs(monkeypatch, cell):
    """S = 3's defaults (the backward loops flagged, early loads prefetch=2) on two simulated blocks
    against the same with flags=0: every loop kernel launched alone stores the same values and
    gradients bit for bit (and the NumPy backend's to float32 tolerance)."""
    from rnngraph.codegen import flag_exchange, program
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    monkeypatch.setattr(flag_exchange, "SPIN_LIMIT", 20000)
    net = rg.stacked(rg.cells.STANDARD[cell], 1, 8, vocab=5, embed=3)
    defaults = rg.ScheduleOptions.defaults(3)

    def step(options):
        return rg.compile(net, window=3, streams=3, device="cuda", optimizer=rg.Adam(lr=1e-2), seed=3, options=options,
                          tuning=rg.LoopTuning.defaults(3).replace(unroll=2))
    flagged, synced = step(defaults), step(defaults.replace(flagged_exchange=False))
    assert "flag_load(" in flagged.kernels and "flag_load(" not in synced.kernels
    assert_same_results(check_loops(flagged), check_loops(synced))


@sim
def test_a_bidirectional_layer_with_the_default_backward_flags_computes_like_grid_syncs(monkeypatch):
    """rg.Bidirectional at S = 4 (the PyTorch layer's small batches): its backward loop flags both
    directions' d.U by default; forward outputs, final states and every gradient equal those of the
    grid-synced loops bit for bit, on two simulated blocks."""
    from rnngraph.codegen import flag_exchange, program
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    monkeypatch.setattr(flag_exchange, "SPIN_LIMIT", 20000)
    T, S, I, H = 3, 4, 3, 4
    rng = np.random.default_rng(0)
    x = rng.normal(size=(T, S, I)).astype(np.float32)
    x = np.concatenate([x, rg.Bidirectional.reverse(x)], axis=-1)  # the layer's input: [x, x reversed]
    dy = rng.normal(size=(T, S, 2 * H)).astype(np.float32)
    defaults = rg.ScheduleOptions.defaults(S)
    results = []
    for options in (defaults, defaults.replace(flagged_exchange=False)):
        rnn = rg.compile_rnn(rg.Sequential(rg.Bidirectional(rg.cells.lstm(hidden=H)), input_size=I), device="cuda",
                             seed=2, options=options)
        y, h_T = rnn.forward(x)
        dx, dh0, dparams = rnn.backward(dy)
        results.append((y, h_T, dx, dh0, dparams))
        assert ("flag_load(" in rnn.program(T, S).source) == (options is defaults)
    (a, b) = results
    for what, u, v in zip(("y", "h_T", "dx", "dh0", "dparams"), a, b):
        u, v = (u, v) if isinstance(u, dict) else ({"": u}, {"": v})
        assert sorted(u) == sorted(v) and u, what
        for k in u:
            np.testing.assert_array_equal(np.asarray(u[k]), np.asarray(v[k]), err_msg=f"{what} {k}")
