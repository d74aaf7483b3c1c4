"""Tiled row loops (LoopTuning ``tiles=1``, codegen/loop_tiles.py): lanes own whole outputs of a
slice of the inner dimension, the slices meeting in shared memory. In numba's simulator (its
"warps" are 4 threads there, two a block, so the inner dimension is split in two where it has 8
columns) each loop kernel must compute like the NumPy backend (tests/loop_sim.py); the plan
takes tiles only where a row loop allows them."""
import os

import numpy as np
import pytest

import rnngraph as rg
from backends import assert_lengths_run_close
from gpu_stand_ins import gpu_source_for_simulator
from loop_plans import gpu_loop_plans
from loop_sim import check_loops
from rnngraph.codegen import module
from rnngraph.codegen.pointwise import PRELUDE
from rnngraph.codegen.loop import emit_loop_kernel
from rnngraph.codegen.loop_items import GemmItem
from rnngraph.codegen.loop_plan import plan_loop_kernel
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.schedule import Loop

V, T = 5, 2
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")


@rg.cell
def four_gemms(x, h: rg.State, c: rg.State, *, hidden):
    """An LSTM whose gates are written as separate products: merged GEMM members (forward: one row
    loop each; backward: one row loop of four terms)."""
    i = rg.sigmoid(rg.linear(x, hidden, name="Wi") + rg.linear(h, hidden, name="Ui"))
    f = rg.sigmoid(rg.linear(x, hidden, name="Wf") + rg.linear(h, hidden, name="Uf"))
    g = rg.tanh(rg.linear(x, hidden, name="Wg") + rg.linear(h, hidden, name="Ug"))
    o = rg.sigmoid(rg.linear(x, hidden, name="Wo") + rg.linear(h, hidden, name="Uo"))
    c_next = f * c + i * g
    return o * rg.tanh(c_next), {"h": o * rg.tanh(c_next), "c": c_next}


def _compile(cell: str, H: int, S: int, tiles: int):
    tuning = LoopTuning.defaults(S).replace(tiles=tiles)
    net = rg.stacked(four_gemms if cell == "four_gemms" else rg.cells.STANDARD[cell], 2, H, vocab=V, embed=3)
    return rg.compile(net, window=T, streams=S, device="cuda", seed=3, plan="wavefront", tuning=tuning)


# S = 3 and 5 leave a warp's last stream groups past S (clamped, not stored); H = 6: the recurrent
# products' 6 columns are no multiple of 4, so those row loops keep their work items while the
# backward's (4H = 24 columns) are tiled; H = 12: 48 rows a block, 12 a lane, and slices of 24 and
# 6 columns (steps left over after the trips: the remainder loops); H = 10: a backward slice of
# 20 columns with 4 steps a trip.
@sim
@pytest.mark.parametrize("cell, H, S", [("lstm", 8, 3), ("gru", 8, 3), ("lstm", 4, 2), ("layernorm_lstm", 8, 2),
                                        ("peephole_lstm", 6, 3), ("lstm", 12, 2), ("lstm", 10, 2), ("gru", 4, 5),
                                        ("four_gemms", 8, 3)])
def test_tiled_loops_compute_like_numpy(cell, H, S):
    gpu = _compile(cell, H, S, 1)
    assert gpu.kernels.count("# tiled GEMM partial sums") >= 2
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]


@sim
def test_tiles_off_by_default_and_both_shapes_agree():
    """The default (tiles=0) has no tiled row loop; tiled and untiled loop kernels compute the
    same buffers (to float32 summation order) from the same float64 state."""
    untiled, tiled = _compile("lstm", 8, 3, 0), _compile("lstm", 8, 3, 1)
    assert LoopTuning.defaults(3).tiles == 0 and "kt0[" not in untiled.kernels and "kt0[" in tiled.kernels
    a, b = check_loops(untiled), check_loops(tiled)
    assert list(a) == list(b) and all(list(a[k]) == list(b[k]) for k in a)
    for k in a:
        for buf in a[k]:
            np.testing.assert_allclose(b[k][buf], a[k][buf], rtol=1e-5, atol=1e-6, err_msg=f"{k}: {buf}")


@sim
@pytest.mark.parametrize("cell, H, S, smem_kib", [("lstm", 8, 5, 44), ("four_gemms", 8, 3, 44), ("gru", 12, 3, 44),
                                                  ("lstm", 8, 3, 0)])
def test_gpu_shaped_tiled_kernels_compute_like_numpy(cell, H, S, smem_kib):
    """The loop kernels generated for the GPU (``coop``: 32-lane warps, two of them, the
    16-byte loads of the weight copies and vectors, mad_rows) with tiles=1, run in the simulator
    on one block with Python stand-ins for the intrinsics (tests/gpu_stand_ins.py) in place of
    the simulator's own loop kernels, against the NumPy backend. smem_kib=0: the weight copies
    and the partial sums are views of the dynamic shared memory (``load_f32x4_1d``)."""
    gpu = _compile(cell, H, S, 1)
    prog = gpu._cuda.program
    tuning = LoopTuning.defaults(S).replace(tiles=1, threads=64, barrier=0, bounds=0, smem_kib=smem_kib)
    launches = {}
    for name, plan in prog.loop_plans.items():
        coop = plan_loop_kernel(prog.g, plan.loop, name, True, prog.kernel_of, S, 1, tuning,
                                precision=prog.lib.loop_precision)
        src = emit_loop_kernel(prog.g, coop, prog.kernel_of)[0]
        assert f"load_f32x4_{'2d' if smem_kib else '1d'}(sw" in src and "= mad_rows" in src and "lane = tid % 32" in src
        assert (coop.dynamic_smem > 0) == (smem_kib == 0)
        kern = getattr(module.load(PRELUDE + "\n\n" + gpu_source_for_simulator(src)), name)
        args = [prog.buf.lookup(a) for a in coop.args[2:]]
        launches[plan.loop.name] = lambda kern=kern, args=args, dyn=coop.dynamic_smem: kern[1, 64, 0, dyn](T, S, *args)
    for steps, plan_list in ((gpu.schedule.forward, prog.forward_plan), (gpu.schedule.backward, prog.backward_plan)):
        for i, st in enumerate(steps):
            if isinstance(st, Loop):
                plan_list[i] = [launches[st.name]]
    assert list(check_loops(gpu)) == list(launches)


def _rows(cell: str, H: int, S: int, knobs: dict, precision: str = "fp32"):
    """[(plan, GEMM row loop)] of those kernels."""
    return [(plan, r) for plan in gpu_loop_plans(cell, H, S, knobs, precision)[2] for lv in plan.levels for st in lv.stages
            for it in st.items if isinstance(it, GemmItem) for r in it.rows]


def test_the_s64_lstm_takes_4x4_and_4x2_tiles_with_partials_in_dynamic_shared_memory():
    """H = 512, S = 64 on 132 blocks in one stream group (groups=1; four by default): the forward's
    16 rows a block as 4 row groups of 4 rows by
    8 stream groups of 4 streams (2 warps cover the streams, 8 slices of 64 columns: 32 KiB of
    partial sums past the weights' 32 KiB of static shared memory); the backward's 4 rows by 32
    stream groups of 2 streams (16 slices of 128 columns, 16 KiB)."""
    (fplan, fwd), (bplan, bwd) = _rows("lstm", 512, 64, {"tiles": 1, "groups": 1})
    assert (fwd.rows, fwd.streams, fwd.ksplit, fwd.tile.row_groups, fwd.tile.stream_warps, fwd.tile.kslice) == (4, 4, 8, 4, 2, 64)
    assert (bwd.rows, bwd.streams, bwd.ksplit, bwd.tile.row_groups, bwd.tile.stream_warps, bwd.tile.kslice) == (4, 2, 16, 1, 1, 128)
    assert fwd.tile.offset == 0 and fplan.dynamic_smem == 8 * 16 * 64 * 4
    assert bwd.tile.offset == 0 and bplan.dynamic_smem == 16 * 4 * 64 * 4
    assert all(t.weight4.startswith("load_f32x4_2d(sw") for r in (fwd, bwd) for t in r.terms)


@pytest.mark.parametrize("knobs, precision, why", [
    ({"tiles": 0}, "fp32", "not asked for"),
    ({"tiles": 1, "smem_kib": 0}, "fp32", "weights read from global memory: rows not known to be aligned"),
    ({"tiles": 1, "mma": 1}, "tf32", "tensor-core products"),
])
def test_row_loops_keep_work_items_where_tiles_do_not_apply(knobs, precision, why):
    rows = _rows("lstm", 512, 64, {**knobs, **({"dsmem_kib": 0} if "smem_kib" in knobs else {})}, precision)
    assert rows and all(r.tile is None for _, r in rows), why


def test_a_block_without_rows_runs_no_tiled_job():
    """LSTM H = 64 on 132 blocks: the forward's 64 units leave 68 blocks with no unit (nj = 0), whose
    clamped rows would be -1, a 16-byte load before the weight copy; their job loop does not run."""
    g, kernel_of, plans = gpu_loop_plans("lstm", 64, 64, {"tiles": 1})
    for plan in plans:
        rows = [r for lv in plan.levels for st in lv.stages for it in st.items if isinstance(it, GemmItem)
                for r in it.rows]
        assert rows and all(r.tile is not None for r in rows)
        src = emit_loop_kernel(g, plan, kernel_of)[0]
        assert all(f"while job < nwq * {r.ksplit} and nrows > 0:" in src for r in rows)


@sim
@pytest.mark.parametrize("cells, plan", [((rg.cells.lstm,), "scc-sequential"), ((rg.cells.lstm, rg.cells.lstm), "wavefront"),
                                         ((rg.cells.gru, rg.cells.layernorm_lstm), "scc-sequential")])
def test_tiled_loops_skip_the_padded_streams(cells, plan):
    """With lengths (LoopTuning ``skip``, the default) the tiles take the streams longest first
    and store only those within their lengths: outputs, final states and every gradient equal
    the NumPy backend's, and each in-loop product holds zeros at every padded (t, s) (zeroed
    before the loop, never written). Hidden 4: the recurrent products' 4 columns are tiled."""
    lengths = [2, 5, 0, 3, 1]
    T, S = max(lengths), len(lengths)
    net = rg.Sequential(*[c(hidden=4) for c in cells], input_size=4)
    cpu = rg.compile_rnn(net, device="cpu")
    tuning = rg.LoopTuning.defaults(S).replace(tiles=1)
    gpu = rg.compile_rnn(net, device="cuda", plan=plan, parameters=cpu.parameters, tuning=tuning)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, S, 4)).astype(np.float32)
    h0 = {s.name: rng.standard_normal((s.depth, S, net.graph.by_name[s.node].size)).astype(np.float32)
          for s in net.graph.states}
    assert_lengths_run_close(cpu, gpu, x, h0, lengths, rng)
    dp = gpu._plan(T, S, backward=True, masked=True)
    assert "# tiled GEMM partial sums" in dp.program.source and "nvalid = O1[t]" in dp.program.source
    gemms = [k.ops[0] for loop in dp.schedule.forward if getattr(loop, "mode", "") == "persistent"
             for k in loop.kernels if k.kind == "gemm"]
    assert gemms
    for node in gemms:
        stored = dp.buf.V[node].copy_to_host()[dp.buf.names.depth(node):]  # (T, S, size)
        padded = np.array([stored[t, s] for t in range(T) for s in range(S) if lengths[s] <= t])
        np.testing.assert_array_equal(padded, 0.0, err_msg=node)
