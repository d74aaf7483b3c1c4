"""Tiled row loops (LoopTuning ``tiles=1``, codegen/loop_tiles.py): lanes own whole outputs of a
slice of the inner dimension, the slices meeting in shared memory. In numba's simulator (its
"warps" are 4 threads there, two a block, so the inner dimension is split in two where it has 8
columns) each loop kernel must compute like the NumPy backend (tests/loop_sim.py); the plan
takes tiles only where a row loop allows them."""
import os

import pytest

import rnngraph as rg
from loop_sim import assert_same_results, check_loops
from rnngraph.codegen.loop_items import GemmItem
from rnngraph.codegen.loop_plan import plan_loop_kernel
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.loop_env import resolve
from rnngraph.passes import schedule
from rnngraph.schedule import Loop

V, T = 5, 2
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")


def _compile(cell: str, H: int, S: int, tiles: int):
    tuning = LoopTuning.defaults(S).replace(tiles=tiles)
    net = rg.stacked(rg.cells.STANDARD[cell], 2, H, vocab=V, embed=3)
    return rg.compile(net, window=T, streams=S, device="cuda", seed=3, plan="wavefront", tuning=tuning)


@sim
@pytest.mark.parametrize("cell, H, S", [("lstm", 8, 3), ("gru", 8, 3), ("lstm", 4, 2), ("layernorm_lstm", 8, 2),
                                        ("peephole_lstm", 6, 3)])
def test_tiled_loops_compute_like_numpy(cell, H, S):
    """S = 3 leaves a warp's last stream groups past S (clamped, not stored); H = 6: the
    recurrent products' 6 columns are no multiple of 4, so those row loops keep their work items
    while the backward's (4H = 24 columns) are tiled."""
    gpu = _compile(cell, H, S, 1)
    assert gpu.kernels.count("# tiled GEMM partial sums") >= 2
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]


@sim
def test_tiles_off_by_default_and_both_shapes_agree():
    """The default (tiles=0) has no tiled row loop; tiled and untiled loop kernels agree to the
    comparison's tolerance against the same float64 state."""
    untiled, tiled = _compile("lstm", 8, 3, 0), _compile("lstm", 8, 3, 1)
    assert LoopTuning.defaults(3).tiles == 0 and "# tiled GEMM partial sums" not in untiled.kernels
    a, b = check_loops(untiled), check_loops(tiled)
    assert list(a) == list(b)
    with pytest.raises(AssertionError):  # summed in another order: not bit for bit
        assert_same_results(a, b)


def _rows(cell: str, H: int, S: int, knobs: dict, precision: str = "fp32", coop: bool = True):
    """The GEMM row loops of the forward and backward persistent loop kernels of a one-layer
    ``cell`` (H = I) at S on 132 blocks."""
    g = rg.stacked(rg.cells.STANDARD[cell], 1, H, input_size=H).graph
    options, tuning = resolve(S, overrides=knobs, recurrent_width=H, precision=precision)
    s = schedule(g, 4, S, "float32", None, options, precision)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    out = []
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]:
        plan = plan_loop_kernel(g, loop, "k", coop, kernel_of, S, 132, tuning, precision=precision)
        out += [(plan, r) for lv in plan.levels for st in lv.stages for it in st.items if isinstance(it, GemmItem)
                for r in it.rows]
    return out


def test_the_s64_lstm_takes_4x4_and_4x2_tiles_with_partials_in_dynamic_shared_memory():
    """H = 512, S = 64 on 132 blocks: the forward's 16 rows a block as 4 row groups of 4 rows by
    8 stream groups of 4 streams (2 warps cover the streams, 8 slices of 64 columns: 32 KiB of
    partial sums past the weights' 32 KiB of static shared memory); the backward's 4 rows by 32
    stream groups of 2 streams (16 slices of 128 columns, 16 KiB)."""
    (fplan, fwd), (bplan, bwd) = _rows("lstm", 512, 64, {"tiles": 1})
    assert (fwd.rows, fwd.streams, fwd.ksplit, fwd.tile.groups, fwd.tile.quarters, fwd.tile.kslice) == (4, 4, 8, 4, 2, 64)
    assert (bwd.rows, bwd.streams, bwd.ksplit, bwd.tile.groups, bwd.tile.quarters, bwd.tile.kslice) == (4, 2, 16, 1, 1, 128)
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
