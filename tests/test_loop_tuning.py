"""Persistent-loop code shapes (rnngraph/codegen/tuning.py): weights in shared memory or not,
unrolled inner products with a remainder loop. Every variant's loop kernels must compute like the
NumPy backend (in numba's simulator, launched alone: tests/loop_sim.py); LoopTuning and
ScheduleOptions check their values; RNNGRAPH_LOOP is read at the API boundary only
(rnngraph/loop_env.py), and bad values name the variable."""
import os

import numpy as np
import pytest

import rnngraph as rg
from loop_sim import check_loops
from rnngraph import loop_env
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.schedule import Loop
from rnngraph.schedule_options import ScheduleOptions

V, T, S, H = 5, 2, 2, 4
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

# (knobs over the defaults for S, shared arrays expected): unroll 3 over an inner size of 4 (hidden) leaves a
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
def test_loop_variants_compute_like_numpy(env, shared, cell):
    knobs = dict(kv.split("=") for kv in env.split(","))
    tuning = LoopTuning.defaults(S).replace(**{"prefetch": 0, **{k: int(v) for k, v in knobs.items()}})
    net = rg.stacked(rg.cells.STANDARD[cell], 2, H, vocab=V, embed=3)
    no_flags = rg.ScheduleOptions.defaults(S).replace(flagged_exchange=False)  # the grid-synced code shapes
    gpu = rg.compile(net, window=T, streams=S, device="cuda", seed=3, plan="wavefront", tuning=tuning, options=no_flags)
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]
    assert ("cuda.shared.array" in gpu.kernels) == shared
    unrolled = "unroll=3" in env  # loads of the third unrolled copy (w0_2) and the remainder loop
    assert ("w0_0_2 = " in gpu.kernels and "kk + 2 < " in gpu.kernels) == unrolled
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
    but not a hidden-32 one's (4*32*32*4 B = 16 KiB), which without dynamic shared memory
    (dsmem_kib=0) are read from global memory."""
    from rnngraph.codegen.loop import LoopEmitter
    for hidden, expect in ((4, True), (32, False)):
        net = rg.stacked(rg.cells.lstm, 1, hidden, input_size=3)
        sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
        loop = next(s for s in sched.forward if isinstance(s, Loop))
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=1, tuning=LoopTuning(smem_kib=1, dsmem_kib=0)).source()
        assert ("cuda.shared.array" in src) == expect, hidden


@pytest.mark.parametrize("text, msg", [("threads=100", "multiple of 32"), ("unroll=0", "unroll"),
                                       ("smem_kib=64", "smem_kib"), ("rows=17", "rows"),
                                       ("cols=0", "cols must be in"), ("cols=17", "cols must be in"), ("warps=3", "keys"),
                                       ("blocks=2000", "blocks must be"),
                                       ("threads=lots", "integer"), ("barrier=4", "barrier must be 0, 1, 2 or 3"), ("lnsum=3", "lnsum must be 0, 1 or 2"),
                                       ("bounds=2", "bounds must be 0 or 1"), ("carveout=101", "carveout must be"),
                                       ("ksplit=0", "ksplit must be in"), ("ksplit=33", "ksplit must be in"),
                                       ("prefetch=3", "prefetch must be 0, 1 or 2"), ("flags=2", "flags must be 0 or 1"),
                                       ("ln=2", "ln must be 0 or 1"), ("lngrad=2", "lngrad must be 0 or 1, got 2"),
                                       ("rows", "expected key=value"), ("loads=1", "unknown key 'loads'"),  # a dropped knob
                                       ("mma=2", "mma must be 0 or 1"), ("mma=1,rows=4,mma=0", "mma given twice")])
def test_bad_environment_names_the_variable(monkeypatch, text, msg):
    """RNNGRAPH_LOOP is parsed at the API boundary: rg.compile fails at once, naming the variable
    and its whole text (regression: "rows=17" printed without it), for every graph (regression:
    it was parsed only for graphs with a layer norm, so CPU training ran on, ignoring it)."""
    monkeypatch.setenv("RNNGRAPH_LOOP", text)
    with pytest.raises(ValueError, match=msg) as err:
        loop_env.from_environment()
    assert f"RNNGRAPH_LOOP={text!r}" in str(err.value)
    for cell in ("lstm", "gru"):
        with pytest.raises(ValueError, match=f"RNNGRAPH_LOOP={text!r}"):
            rg.compile(rg.stacked(rg.cells.STANDARD[cell], 1, 8, vocab=5), window=2, streams=1, device="cpu")
    with pytest.raises(ValueError, match=f"RNNGRAPH_LOOP={text!r}"):
        rg.compile_rnn(rg.stacked(rg.cells.lstm, 1, 8, input_size=3), device="cpu")


def test_environment_is_read_at_the_boundary_only(monkeypatch):
    """RNNGRAPH_LOOP overrides the defaults of each S key by key (a trailing comma is harmless),
    read once when the step is created; the passes and code generation never read it."""
    from rnngraph.passes import schedule
    monkeypatch.setenv("RNNGRAPH_LOOP", "flags=0, unroll=2,")
    net = rg.stacked(rg.cells.lstm, 1, 8, vocab=5)
    step = rg.compile(net, window=2, streams=1, device="cpu")
    monkeypatch.setenv("RNNGRAPH_LOOP", "rows=99")  # too late for this step, and never read below it
    assert step.schedule.options == ScheduleOptions.defaults(1).replace(flagged_exchange=False)
    step.forward(np.zeros((2, 3), np.int64))  # another S: the keys read at creation
    assert step.schedule.options == ScheduleOptions.defaults(3).replace(flagged_exchange=False) and step.streams == 3
    assert schedule(net.graph, 2, 1).options == ScheduleOptions.defaults(1)
    # explicit values are used as given, whatever the variable says
    monkeypatch.setenv("RNNGRAPH_LOOP", "flags=0")
    given = ScheduleOptions.defaults(1)
    assert rg.compile(net, window=2, streams=1, device="cpu", options=given).schedule.options is given


def test_resolve_overrides_the_defaults_of_each_streams():
    over = loop_env.parse("threads=256, unroll=2,")
    assert loop_env.resolve(1, overrides=over) == (ScheduleOptions.defaults(1), LoopTuning(
        threads=256, unroll=2, rows=4, cols=8, smem_kib=44, dsmem_kib=0, xreduce=0, lnsum=0, barrier=0, bounds=0, ksplit=8,
        prefetch=1))
    assert loop_env.resolve(64, overrides=over)[1] == LoopTuning(threads=256, unroll=2, groups=4, lngroups=1, groupbar=1,
                                                                   fwdgroups=1)
    assert loop_env.resolve(65, overrides=loop_env.parse("ln=1,lngrad=0"))[0] == ScheduleOptions(
        persistent_layer_norms=True, post_loop_sums=False)
    assert loop_env.resolve(2) == (ScheduleOptions(persistent_layer_norms=True, flagged_exchange=True),
                                   LoopTuning(prefetch=2, threads=256))
    assert loop_env.resolve(9) == (ScheduleOptions(persistent_layer_norms=True), LoopTuning())
    assert loop_env.as_keys(*loop_env.resolve(1))["flags"] == 1 and len(loop_env.as_keys(*loop_env.resolve(1))) == 28  # 6 schedule keys, 22 code-shape knobs
    with pytest.raises(TypeError, match="tuning must be an rg.LoopTuning, got dict"):
        loop_env.resolve(1, tuning={"rows": 2})
    with pytest.raises(TypeError, match="options must be an rg.ScheduleOptions, got LoopTuning"):
        rg.compile(rg.stacked(rg.cells.lstm, 1, 8, vocab=5), window=2, streams=1, device="cpu", options=LoopTuning())


def test_defaults_depend_on_the_streams():
    assert LoopTuning.defaults(65) == LoopTuning(groups=4, lngroups=1, groupbar=1, fwdgroups=1)
    assert LoopTuning.defaults(9) == LoopTuning()
    assert LoopTuning.defaults(2) == LoopTuning.defaults(8) == LoopTuning(prefetch=2, threads=256)
    assert LoopTuning.defaults(1).rows == 4 and LoopTuning.defaults(2).rows == 8
    assert (LoopTuning.defaults(1).unroll, LoopTuning.defaults(1).prefetch) == (16, 1)
    assert LoopTuning.defaults(9).prefetch == 0
    # H200 (bench/results/h200-20261201-launch-bounds-sweep-*.json): launch bounds, 4 streams an item and unroll 8
    # from S=2 (LSTM S=64 4.33 vs 5.21 ms)
    assert (LoopTuning.defaults(1).bounds, LoopTuning.defaults(1).cols, LoopTuning.defaults(1).unroll) == (0, 8, 16)
    assert (LoopTuning.defaults(2).bounds, LoopTuning.defaults(2).cols, LoopTuning.defaults(2).unroll) == (1, 4, 8)
    assert LoopTuning.defaults(1).barrier == 0 and LoopTuning.defaults(2).barrier == LoopTuning().barrier == 1
    assert LoopTuning.defaults(1).xreduce == 0 and LoopTuning.defaults(2).xreduce == 1
    assert ScheduleOptions.defaults(8).flagged_exchange and not ScheduleOptions.defaults(9).flagged_exchange
    assert ScheduleOptions.defaults(1).post_loop_sums and ScheduleOptions.defaults(65).post_loop_sums
    with pytest.raises(ValueError, match="streams must be a positive integer, got 0"):
        LoopTuning.defaults(0)


@pytest.mark.parametrize("make, msg", [
    (lambda: LoopTuning(threads=100), "LoopTuning.threads must be a multiple of 32 in [32, 1024], got 100"),
    (lambda: LoopTuning(rows=17), "LoopTuning.rows must be in [1, 16], got 17"),
    (lambda: LoopTuning(unroll="8"), "LoopTuning.unroll must be an integer in [1, 16], got '8'"),
    (lambda: LoopTuning().replace(barrier=4), "LoopTuning.barrier must be 0, 1, 2 or 3, got 4"),
    (lambda: ScheduleOptions(flagged_exchange=1), "ScheduleOptions.flagged_exchange must be True or False, got 1"),
    (lambda: ScheduleOptions.defaults(1).replace(persistent_layer_norms="yes"),
     "ScheduleOptions.persistent_layer_norms must be True or False, got 'yes'"),
    (lambda: ScheduleOptions.defaults(64, 1024, "TF32"), "precision must be one of 'fp32', 'tf32', 'bf16'; got 'TF32'")])
def test_values_are_checked_on_construction(make, msg):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == msg


def test_inline_barrier_replaces_the_level_syncs():
    """barrier=2 (1 without its sleeps) on the GPU emitter: every level's grid sync becomes
    codegen/grid_barrier.py's inline barrier on the kernel's counter BAR (an argument after S);
    one grid.sync() stays at kernel start (numba then launches the kernel cooperatively)."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=3)
    sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
    for loop in [s for s in sched.forward + sched.backward if isinstance(s, Loop)]:
        syncs = len(loop.syncs) + loop.reduction_syncs
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(barrier=2)).source()
        assert src.count("grid_barrier(BAR, nblocks)") == syncs > 0 and src.count("grid.sync()") == 1, loop.name
        assert "def k(T, S, BAR, " in src
        assert "from rnngraph.codegen.grid_barrier import grid_barrier_backoff as grid_barrier" in src
        plain, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(barrier=0)).source()
        assert plain.count("grid.sync()") == syncs + 1 and "BAR" not in plain  # + the row sums' zeroing
        sim, _ = LoopEmitter(net.graph, loop, "k", coop=False, tuning=LoopTuning(barrier=1)).source()
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
    """rows and cols are upper bounds (codegen/loop_plan.py, the item shape). Regression (H200):
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


def test_layer_and_torch_module_pass_their_values_down(monkeypatch):
    """rg.compile_rnn and rnngraph.torch.RNN take options and tuning too: given values reach every
    (T, S)'s schedule; left out, the defaults for each S with RNNGRAPH_LOOP as it was when made."""
    net = rg.stacked(rg.cells.lstm, 1, 8, input_size=3)
    given = ScheduleOptions.defaults(4).replace(flagged_exchange=True)
    rnn = rg.compile_rnn(net, device="cpu", options=given)
    monkeypatch.setenv("RNNGRAPH_LOOP", "ln=0")
    default = rg.compile_rnn(net, device="cpu")
    monkeypatch.delenv("RNNGRAPH_LOOP")
    assert rnn.schedule(2, 4).options is given and rnn.schedule(3, 1).options is given
    assert default.schedule(2, 4).options == ScheduleOptions.defaults(4).replace(persistent_layer_norms=False)
    torch = pytest.importorskip("torch")
    from rnngraph.torch import RNN
    with pytest.raises(TypeError, match="tuning must be an rg.LoopTuning, got str"):
        RNN("lstm", 8, tuning="unroll=2")
    module = RNN("lstm", 8, input_size=3, options=given)
    y, _ = module(torch.zeros(2, 4, 3))
    assert y.shape == (2, 4, 8) and module.compiled(y.device, y.dtype).schedule(2, 4).options is given


def test_wide_loops_take_tensor_cores_by_default_in_a_reduced_precision():
    """From S x K = 49,152 (K the widest recurrent product's inner dimension), or from S = 16
    where K >= 1,024, a tf32 / bf16 schedule runs the loops' products on tensor cores by default;
    below, in fp32 or with K unknown (0) they stay on FFMA (H200:
    bench/results/h200-20261203-precision-grid-*.json, h200-20261204-precision-h1024-s1-s16-loop-kinds.json)."""
    assert ScheduleOptions.defaults(48, 1024, "tf32").loop_tensor_cores
    assert ScheduleOptions.defaults(16, 1024, "tf32").loop_tensor_cores
    assert not ScheduleOptions.defaults(15, 1024, "tf32").loop_tensor_cores
    assert not ScheduleOptions.defaults(47, 1023, "tf32").loop_tensor_cores
    assert ScheduleOptions.defaults(49, 1023, "tf32").loop_tensor_cores
    assert ScheduleOptions.defaults(128, 512, "bf16").loop_tensor_cores
    assert not ScheduleOptions.defaults(64, 512, "bf16").loop_tensor_cores
    assert not ScheduleOptions.defaults(64, 1024, "fp32").loop_tensor_cores
    assert not ScheduleOptions.defaults(64).loop_tensor_cores
    assert ScheduleOptions.defaults(48, 1024, "tf32").changed(48, 1024, "tf32") == {}
    assert ScheduleOptions.defaults(48).changed(48, 1024, "bf16") == {"loop_tensor_cores": False}
    with pytest.raises(ValueError, match="recurrent_width must be a non-negative integer, got -1"):
        ScheduleOptions.defaults(1, -1)


def test_recurrent_width_is_the_widest_product_inside_a_recurrence():
    """K of rg.stacked LSTMs and GRUs is H, whatever feeds them (an embedding, a wider input: the
    input products are hoisted out of the loop); a two-layer net of different widths takes the wider."""
    from rnngraph.passes.recurrence import recurrent_width
    assert recurrent_width(rg.stacked(rg.cells.lstm, 2, 12, input_size=40).graph) == 12
    assert recurrent_width(rg.stacked(rg.cells.gru, 1, 9, vocab=50).graph) == 9
    assert recurrent_width(rg.Sequential(rg.Embedding(7, 5), rg.cells.lstm(hidden=6),
                                         rg.cells.gru(hidden=11)).graph) == 11


def test_the_api_resolves_tensor_cores_by_the_graphs_width(monkeypatch):
    """rg.compile_rnn chooses per (T, S) with the network's K and its precision; RNNGRAPH_LOOP's
    mma key overrides the choice; the schedule dump says why the loops took their precision."""
    net = rg.stacked(rg.cells.lstm, 1, 64, input_size=3)  # K = 64: on from S = 768
    rnn = rg.compile_rnn(net, device="cpu", precision="tf32")
    on, off = rnn.schedule(2, 768), rnn.schedule(2, 767)
    assert on.options.loop_tensor_cores and not off.options.loop_tensor_cores
    rule = "S x K >= 49,152, or S >= 16 with K >= 1,024"
    assert f"S = 768, K = 64 meet the default's rule, {rule}" in str(on) and "not the defaults" not in str(on)
    assert f"S = 767, K = 64 do not meet the default's rule, {rule}" in str(off)
    assert not rg.compile_rnn(net, device="cpu").schedule(2, 768).options.loop_tensor_cores  # fp32
    monkeypatch.setenv("RNNGRAPH_LOOP", "mma=0")
    forced = rg.compile_rnn(net, device="cpu", precision="bf16").schedule(2, 768)
    assert not forced.options.loop_tensor_cores
    assert "options (not the defaults for S=768, K=64, bf16): loop_tensor_cores=False" in str(forced)


def test_training_step_cli_and_torch_module_choose_by_width_too(capsys):
    """rg.compile's training step, ``rnngraph schedule`` and rnngraph.torch.RNN pass K and the
    precision down as rg.compile_rnn does."""
    from rnngraph.cli import main
    step = rg.compile(rg.stacked(rg.cells.lstm, 1, 64, vocab=5), window=2, streams=768, device="cpu", precision="tf32")
    assert step.schedule.options.loop_tensor_cores
    assert main(["schedule", "lstm", "--hidden", "64", "--streams", "767", "--window", "2", "--precision", "bf16"]) == 0
    assert "S = 767, K = 64 do not meet the default's rule" in capsys.readouterr().out
    torch = pytest.importorskip("torch")
    from rnngraph.torch import RNN
    module = RNN("lstm", 64, input_size=3, precision="bf16")
    assert module.compiled(torch.device("cpu"), torch.float32).schedule(2, 768).options.loop_tensor_cores


def test_dynamic_shared_memory_is_lowered_to_what_the_device_allows(monkeypatch):
    """dsmem_kib (176 by default from S = 2) is capped for a GPU whose blocks may opt in to less
    shared memory than the H200's 227 KiB (an A100: 163 KiB; an sm_86 card: 99), beside the
    static budget and 1 KiB for numba's own arrays, so that an H = 1024 layer's rows are read
    from global memory there rather than failing the launch; the H200 keeps the value."""
    from types import SimpleNamespace

    from rnngraph.codegen import program_loops
    from rnngraph.codegen.program import CudaProgram

    def on(kib, tuning):
        device = SimpleNamespace(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=kib * 1024)
        monkeypatch.setattr(program_loops.cuda, "get_current_device", lambda: device)
        return CudaProgram.device_tuning(SimpleNamespace(tuning=tuning)).dsmem_kib

    assert LoopTuning.defaults(64).dsmem_kib == 176 and LoopTuning.defaults(1).dsmem_kib == 0
    assert on(227, LoopTuning.defaults(64)) == 176
    assert on(163, LoopTuning.defaults(64)) == 163 - 44 - 1
    assert on(99, LoopTuning.defaults(64).replace(smem_kib=48)) == 99 - 48 - 1
    assert on(40, LoopTuning.defaults(64)) == 0


def test_the_loop_grid_is_one_block_a_multiprocessor_unless_blocks_asks_for_fewer(monkeypatch):
    """LoopTuning ``blocks``: the persistent loop kernels' grid (codegen/program_loops.py) on a
    device of 132 multiprocessors."""
    from types import SimpleNamespace

    from rnngraph.codegen import program_loops
    monkeypatch.setattr(program_loops.cuda, "get_current_device", lambda: SimpleNamespace(MULTIPROCESSOR_COUNT=132))
    grid = program_loops.LoopLaunches.loop_blocks
    assert [grid(LoopTuning(blocks=b)) for b in (0, 66, 132, 200)] == [132, 66, 132, 132]
    assert LoopTuning.defaults(8).blocks == LoopTuning.defaults(64).blocks == 0
