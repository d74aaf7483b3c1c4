"""Persistent-loop code shapes (rnngraph/codegen/tuning.py): weights in shared memory or not,
unrolled inner products with a remainder loop. Every variant must train exactly like the NumPy
backend (in numba's simulator), and bad RNNGRAPH_LOOP values must name the variable."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.codegen.tuning import LoopTuning, default_tuning, loop_tuning
from rnngraph.schedule import Loop

V, T, S, H = 5, 2, 2, 4
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

# (RNNGRAPH_LOOP, shared arrays expected): unroll 3 over an inner size of 4 (hidden) leaves a
# remainder trip; smem_kib=0 reads the weights from global memory.
# cols=1: one stream per GEMM work item (S = 2 streams: two items per row group).
# ksplit=1: no split (the default, 8, splits the backward GEMMs in the simulator too);
# ksplit=4: the backward GEMMs (4 rows a block, 2 work items of 2 rows for the simulator's 8
# threads) split their inner dimension over 4 threads an item, meeting in shared array kp<n>.
# prefetch=1: pointwise kernels' loads issued a level early (the 2-layer wavefront plan: stages,
# and the backward's previous-tick level).
VARIANTS = [("unroll=3,rows=1,smem_kib=0,ksplit=1", False), ("unroll=3,rows=3,smem_kib=44,ksplit=1", True),
            ("unroll=1,smem_kib=1,rows=2,ksplit=1", True), ("unroll=1,rows=2,cols=1,ksplit=1", True),
            ("unroll=2,rows=2,ksplit=4", True), ("unroll=3,rows=2,ksplit=1,prefetch=1", True),
            ("unroll=2,rows=2,ksplit=4,prefetch=1", True)]


@sim
@pytest.mark.parametrize("env, shared", VARIANTS, ids=[v for v, _ in VARIANTS])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_loop_variants_train_like_numpy(monkeypatch, env, shared, cell):
    monkeypatch.setenv("RNNGRAPH_LOOP", env)
    net = rg.stacked(rg.cells.STANDARD[cell], 2, H, vocab=V, embed=3)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.Adam(lr=1e-2), seed=3,
                                plan="wavefront")
    cpu, gpu = mk("cpu"), mk("cuda")
    rng = np.random.default_rng(4)
    for _ in range(2):
        x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    for name, value in cpu.parameters.items():
        np.testing.assert_allclose(gpu.parameters[name], value, atol=1e-5, err_msg=name)
    assert ("cuda.shared.array" in gpu.kernels) == shared
    unrolled = "unroll=3" in env  # loads of the third unrolled copy (w0_2) and the remainder loop
    assert ("w0_0_2 = " in gpu.kernels and "kk + 2 < " in gpu.kernels) == unrolled
    knobs = dict(kv.split("=") for kv in env.split(","))
    assert ("w0_0_1 = " in gpu.kernels) == (int(knobs["unroll"]) >= 2)
    rows = int(knobs.get("rows", 1))  # row blocking: rows 0 .. rows-1
    assert f"w0_{rows - 1}_0 = " in gpu.kernels and f"w0_{rows}_0 = " not in gpu.kernels
    cols = min(S, int(knobs.get("cols", 8)))  # streams 0 .. cols-1
    assert f"acc0_{cols - 1} " in gpu.kernels and f"acc0_{cols} " not in gpu.kernels
    assert ("kp0 = cuda.shared.array" in gpu.kernels) == (knobs["ksplit"] != "1")
    # early loads: in the forward (after the GEMM in its level) and the backward (previous level)
    assert gpu.kernels.count("_fwd_pre(t, s, j, pf_") + gpu.kernels.count("_bwd_pre(t, s, j, pf_") >= (
        2 if knobs.get("prefetch") == "1" else 0)
    assert ("_bwd_load(tn, ps, pj" in gpu.kernels) == (knobs.get("prefetch") == "1")


def test_budget_limits_the_shared_arrays():
    """smem_kib=1 holds one 4x4-hidden LSTM's rows (4*4*4 floats = 256 B per weight in one block)
    but not a hidden-32 one's (4*32*32*4 B = 16 KiB)."""
    from rnngraph.codegen.loop import LoopEmitter
    for hidden, expect in ((4, True), (32, False)):
        net = rg.stacked(rg.cells.lstm, 1, hidden, input_size=3)
        sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
        loop = next(s for s in sched.forward if isinstance(s, Loop))
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=1, tuning=LoopTuning(smem_kib=1)).source()
        assert ("cuda.shared.array" in src) == expect, hidden


@pytest.mark.parametrize("text, msg", [("threads=100", "multiple of 32"), ("unroll=0", "unroll"),
                                       ("smem_kib=64", "smem_kib"), ("rows=17", "rows"),
                                       ("cols=0", "cols must be in"), ("cols=17", "cols must be in"), ("blocks=3", "keys"),
                                       ("threads=lots", "integer"), ("barrier=4", "barrier must be 0, 1, 2 or 3"), ("lnsum=3", "lnsum must be 0, 1 or 2"),
                                       ("bounds=2", "bounds must be 0 or 1"), ("carveout=101", "carveout must be"),
                                       ("ksplit=0", "ksplit must be in"), ("ksplit=33", "ksplit must be in"),
                                       ("prefetch=2", "prefetch must be 0 or 1"), ("flags=2", "flags must be 0 or 1"),
                                       ("loads=1", "unknown key 'loads'")])  # a dropped knob
def test_bad_environment_names_the_variable(monkeypatch, text, msg):
    monkeypatch.setenv("RNNGRAPH_LOOP", text)
    with pytest.raises(ValueError, match=msg) as err:
        loop_tuning()
    # the whole text, for range errors too (regression: "rows=17" printed without it)
    assert f"RNNGRAPH_LOOP={text!r}" in str(err.value)


def test_environment_overrides_defaults(monkeypatch):
    monkeypatch.setenv("RNNGRAPH_LOOP", "threads=256, unroll=2,")  # a trailing comma is harmless
    assert loop_tuning() == LoopTuning(threads=256, unroll=2, rows=LoopTuning().rows, smem_kib=LoopTuning().smem_kib)
    # the keys the variable leaves out keep the defaults of the step's number of streams
    assert loop_tuning(1) == LoopTuning(threads=256, unroll=2, rows=4, cols=8, smem_kib=44, ln=1, xreduce=0, lnsum=0,
                                        barrier=0, bounds=0, ksplit=8, prefetch=1, flags=1)
    assert loop_tuning(64) == LoopTuning(threads=256, unroll=2, ln=1)
    assert loop_tuning() == loop_tuning(65) == LoopTuning(threads=256, unroll=2)
    monkeypatch.delenv("RNNGRAPH_LOOP")
    assert loop_tuning() == loop_tuning(65) == LoopTuning()
    assert loop_tuning(2) == LoopTuning(ln=1) and loop_tuning(64) == LoopTuning(ln=1)
    assert default_tuning(1).rows == 4 and default_tuning(2).rows == 8
    assert (default_tuning(1).unroll, default_tuning(1).prefetch) == (16, 1) and default_tuning(2).prefetch == 0
    # H200 (bench/results/h200-20261201-launch-bounds-sweep-*.json): launch bounds, 4 streams an item and unroll 8
    # from S=2 (LSTM S=64 4.33 vs 5.21 ms)
    assert (default_tuning(1).bounds, default_tuning(1).cols, default_tuning(1).unroll) == (0, 8, 16)
    assert (default_tuning(2).bounds, default_tuning(2).cols, default_tuning(2).unroll) == (1, 4, 8)
    assert default_tuning(1).barrier == 0 and default_tuning(2).barrier == default_tuning().barrier == 1
    assert default_tuning(1).xreduce == 0 and default_tuning(2).xreduce == 1


def test_bad_environment_fails_for_every_graph(monkeypatch):
    """Regression: RNNGRAPH_LOOP=rows=99 was parsed only for graphs with a
    layer norm, so `rnngraph schedule lstm` and CPU training ran on, silently ignoring it."""
    from rnngraph.passes import schedule
    monkeypatch.setenv("RNNGRAPH_LOOP", "rows=99")
    for cell in ("lstm", "gru"):
        with pytest.raises(ValueError, match="RNNGRAPH_LOOP=.rows=99.: rows must be in"):
            schedule(rg.stacked(rg.cells.STANDARD[cell], 1, 8).graph, 4, 2)
    with pytest.raises(ValueError, match="RNNGRAPH_LOOP"):
        rg.compile(rg.stacked(rg.cells.lstm, 1, 8, vocab=5), window=2, streams=1, device="cpu")


def test_inline_barrier_replaces_the_level_syncs():
    """barrier=2 (1 without its sleeps) on the GPU emitter: every level's grid sync becomes
    codegen/grid_barrier.py's inline barrier on the kernel's counter BAR (an argument after S);
    one grid.sync() stays at kernel start (numba then launches the kernel cooperatively)."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=3)
    sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
    for loop in [s for s in sched.forward + sched.backward if isinstance(s, Loop)]:
        syncs = len(loop.syncs) + loop.reduction_syncs
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(barrier=2, ln=1)).source()
        assert src.count("grid_barrier(BAR, nblocks)") == syncs > 0 and src.count("grid.sync()") == 1, loop.name
        assert "def k(T, S, BAR, " in src
        assert "from rnngraph.codegen.grid_barrier import grid_barrier_backoff as grid_barrier" in src
        plain, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(ln=1, barrier=0)).source()
        assert plain.count("grid.sync()") == syncs + 1 and "BAR" not in plain  # + the row sums' zeroing
        sim, _ = LoopEmitter(net.graph, loop, "k", coop=False, tuning=LoopTuning(barrier=1, ln=1)).source()
        assert "BAR" not in sim  # the simulator: numba's grid.sync()


def test_compile_options_reach_the_gpu_kernel_only():
    """bounds=1 and carveout=N become numba's launch_bounds / shared_memory_carveout on the GPU
    emitter's kernel; the simulator's jit takes neither, so its kernel has a bare @cuda.jit."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.lstm, 1, 8, input_size=3)
    loop = next(s for s in rg.compile(net, window=2, streams=2, device="cpu").schedule.forward if isinstance(s, Loop))
    tuning = LoopTuning(threads=256, bounds=1, carveout=25)
    gpu, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=tuning).source()
    assert "@cuda.jit(launch_bounds=(256, 1), shared_memory_carveout=25)\ndef k(" in gpu
    sim, _ = LoopEmitter(net.graph, loop, "k", coop=False, tuning=tuning).source()
    assert "@cuda.jit\ndef k(" in sim
    plain, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(bounds=0)).source()
    assert "@cuda.jit\ndef k(" in plain


def test_gemm_work_items_take_at_most_the_blocks_rows():
    """rows and cols are upper bounds (LoopEmitter._item_shape). Regression (H200):
    rows=8,cols=4 applied to every GEMM slowed the LSTM S=64 backward, whose blocks own 4 rows
    (fwd+bwd 6.33 vs 5.60 ms). Hidden 8 on 4 blocks, S=64, rows=8: the forward's blocks own 2
    units x 4 gates = 8 rows -> 8 rows x 4 streams (32 accumulators); the backward's own 2 rows
    -> 2 rows x 8 streams (cols=8 bounds it before 32 // 2)."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.lstm, 1, 8, input_size=8)
    sched = rg.compile(net, window=2, streams=64, device="cpu").schedule
    loops = {s.reverse: s for s in sched.forward + sched.backward if isinstance(s, Loop)}
    src = {rev: LoopEmitter(net.graph, lp, "k", coop=True, streams=64, nblocks=4,
                            tuning=LoopTuning(rows=8, cols=8)).source()[0] for rev, lp in loops.items()}
    fwd, bwd = src[False], src[True]
    assert "acc7_3 " in fwd and "acc0_4 " not in fwd and "acc8_0 " not in fwd
    assert "acc1_7 " in bwd and "acc2_0 " not in bwd and "acc0_8 " not in bwd
