"""Stream groups (LoopTuning ``groups``, LoopKernelPlan ``stream_groups``): a persistent loop
kernel's blocks split into G groups, each block working on its group's S / G streams as one of
the group's blocks (owning G times the rows). In numba's simulator, with its block split into
"blocks" (``program.SIM_BLOCKS``), each loop kernel must compute like the NumPy backend
(tests/loop_sim.py); the plan takes groups only where the loop allows them."""
import os

import pytest

import rnngraph as rg
from extra_cells import prenorm_rnn
from loop_plans import gpu_loop_plans
from loop_sim import check_loops
from rnngraph.codegen import program
from rnngraph.codegen.loop import emit_loop_kernel
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.schedule import Loop

sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")


def no_flags(S: int) -> rg.ScheduleOptions:
    """The defaults for S without the flagged exchange (on for the backward loops up to S = 8): a
    flagged loop keeps one stream group, as one with early loads (``prefetch``, pinned to 0 here)."""
    return rg.ScheduleOptions.defaults(S).replace(flagged_exchange=False)


@sim
@pytest.mark.parametrize("cell, plan, S, H, G, blocks", [
    ("lstm", "wavefront", 4, 4, 2, 4), ("gru", "scc-sequential", 4, 6, 2, 2), ("lstm", "scc-sequential", 6, 5, 2, 4),
    ("lstm", "wavefront", 4, 8, 4, 4), ("peephole_lstm", "wavefront", 8, 4, 4, 4)])
def test_grouped_loops_compute_like_numpy(cell, plan, S, H, G, blocks, monkeypatch):
    """Two or four groups of one or two "blocks" each, one and two layers: every stream index of
    the GEMMs and the pointwise kernels offset by the group's first stream."""
    monkeypatch.setattr(program, "SIM_BLOCKS", blocks)
    tuning = LoopTuning.defaults(S).replace(prefetch=0, groups=G)
    net = rg.stacked(rg.cells.STANDARD[cell], 2, H, vocab=5, embed=3)
    gpu = rg.compile(net, window=3, streams=S, device="cuda", seed=3, plan=plan, tuning=tuning,
                     options=no_flags(S))
    plans = list(gpu._cuda.program.loop_plans.values())
    assert plans and all(p.stream_groups == G for p in plans)
    assert gpu.kernels.count(f"sbase = sgroup * (S // {G})") == len(plans)
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]


def _plans(cell: str, H: int, S: int, knobs: dict, precision: str = "fp32", blocks: int = 132):
    return gpu_loop_plans(cell, H, S, knobs, precision, blocks)[2]


@sim
@pytest.mark.parametrize("cell, layers, S, H, G, blocks, lnsum", [
    ("layernorm_lstm", 1, 4, 5, 2, 4, 0), ("layernorm_lstm", 2, 4, 4, 2, 4, 1), ("layernorm_lstm", 1, 8, 4, 4, 4, 2),
    ("prenorm_rnn", 1, 4, 5, 2, 4, 2), ("prenorm_rnn", 1, 4, 4, 2, 2, 1), ("layernorm_lstm", 2, 6, 5, 2, 2, 2)])
def test_grouped_layer_norm_loops_compute_like_numpy(cell, layers, S, H, G, blocks, lnsum, monkeypatch):
    """lngroups=1: loops with layer norms in stream groups, the row sums of the three ``lnsum``
    shapes over the group's streams past ``sbase`` (layernorm_lstm's taken one level early,
    prenorm_rnn's forward in a reduction phase), each group zeroing its streams' sums; blocks of
    uneven rows (H = 5 over two "blocks" a group)."""
    monkeypatch.setattr(program, "SIM_BLOCKS", blocks)
    tuning = LoopTuning.defaults(S).replace(prefetch=0, groups=G, lngroups=1, lnsum=lnsum)
    net = rg.stacked(rg.cells.STANDARD.get(cell) or prenorm_rnn, layers, H, vocab=5, embed=3)
    gpu = rg.compile(net, window=3, streams=S, device="cuda", seed=3, tuning=tuning, options=no_flags(S))
    plans = list(gpu._cuda.program.loop_plans.values())
    assert plans and all(p.stream_groups == G and p.ln_zero for p in plans)
    assert gpu.kernels.count(f"sbase = sgroup * (S // {G})") == len(plans)
    assert "[tz, sbase + sz, i % 2] = float32(0.0)" in gpu.kernels and "cuda.atomic.add(N" in gpu.kernels
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]


def test_layer_norm_loops_take_groups_only_with_lngroups():
    """Layer norms keep one group unless lngroups=1; with it, also the layer norms' gain and bias
    gradients summed in the loop (lngrad=0: LocalGradSum, not checked under groups) keep one."""
    assert [p.stream_groups for p in _plans("layernorm_lstm", 512, 64, {"groups": 4, "lngroups": 1})] == [4, 4]
    assert [p.stream_groups for p in _plans("layernorm_lstm", 512, 64, {"groups": 4, "lngroups": 0})] == [1, 1]
    assert [p.stream_groups for p in _plans("layernorm_lstm", 512, 64, {"groups": 4, "lngroups": 1, "lngrad": 0})] == [4, 1]


def test_the_s64_lstm_in_four_groups_keeps_its_weight_rows_in_dynamic_shared_memory():
    """H = 512, S = 64 on 132 blocks, G = 4: a block is one of 33 in its group, so it owns 64
    forward rows (16 units x 4 gates: 128 KiB of weights, past the static budget) and 16 backward
    rows of 2,048 columns (128 KiB); a level's barrier counts the group's 33 blocks (groupbar), or
    with groupbar=0 all 132."""
    fwd, bwd = _plans("lstm", 512, 64, {"groups": 4, "fwdgroups": 0})
    assert fwd.stream_groups == bwd.stream_groups == 4
    assert [(c.rows, c.cols, c.offset >= 0) for c in fwd.weight_copies] == [(64, 512, True)]
    assert [(c.rows, c.cols, c.offset >= 0) for c in bwd.weight_copies] == [(16, 2048, True)]
    assert fwd.grid_sync == "group_barrier(BAR, sgroup, bid, nblocks)"
    assert _plans("lstm", 512, 64, {"groups": 4, "groupbar": 0, "fwdgroups": 0})[0].grid_sync == "grid_barrier(BAR, nblocks * 4)"


@pytest.mark.parametrize("cell, H, S, knobs, precision, blocks, why", [
    ("lstm", 512, 64, {"groups": 1}, "fp32", 132, "not asked for"),
    ("lstm", 512, 63, {"groups": 4}, "fp32", 132, "S not a multiple of G"),
    ("lstm", 512, 64, {"groups": 8}, "fp32", 132, "132 blocks not a multiple of 8"),
    ("layernorm_lstm", 512, 64, {"groups": 4, "lngroups": 0}, "fp32", 132, "layer norms: row sums over a column's blocks"),
    ("lstm", 512, 4, {"groups": 4, "prefetch": 1}, "fp32", 132, "early loads"),
    ("lstm", 1024, 64, {"groups": 4, "mma": 1}, "tf32", 132, "tensor-core products"),
    ("lstm", 1024, 64, {"groups": 4}, "fp32", 132, "four times 32 rows of 1,024 floats past the shared memory"),
])
def test_loops_keep_one_group_where_groups_do_not_apply(cell, H, S, knobs, precision, blocks, why):
    plans = _plans(cell, H, S, knobs, precision, blocks)
    assert plans and all(p.stream_groups == 1 for p in plans), why


def test_four_groups_are_the_default_from_64_streams():
    """LoopTuning.defaults: groups = 4 from S = 64 (codegen/tuning.py ``GROUP_STREAMS``), with
    lngroups, groupbar and fwdgroups = 1, so at S = 64, H = 512 without a knob the LSTM's backward
    loop plans in four groups with a barrier a group and its forward in one, the layer-norm LSTM's
    loops both in four; at S = 32 all in one."""
    assert [LoopTuning.defaults(S).groups for S in (1, 32, 63, 64, 128)] == [1, 1, 1, 4, 4]
    assert [(LoopTuning.defaults(S).lngroups, LoopTuning.defaults(S).groupbar, LoopTuning.defaults(S).fwdgroups)
            for S in (32, 64)] == [(0, 0, 0), (1, 1, 1)]
    assert [(p.stream_groups, p.group_barriers) for p in _plans("lstm", 512, 64, {})] == [(1, False), (4, True)]
    assert [(p.stream_groups, p.group_barriers) for p in _plans("layernorm_lstm", 512, 64, {})] == [(4, True), (4, True)]
    assert [p.stream_groups for p in _plans("lstm", 512, 32, {})] == [1, 1]


@pytest.mark.parametrize("knobs, sync, counters", [
    ({"groups": 4, "groupbar": 1, "fwdgroups": 0}, "group_barrier(BAR, sgroup, bid, nblocks)", 8),
    ({"groups": 4, "groupbar": 1, "barrier": 3, "fwdgroups": 0},
     "bphase = group_barrier(BAR, sgroup, bid, nblocks, bphase)", 8),
    ({"groups": 4, "groupbar": 0, "fwdgroups": 0}, "grid_barrier(BAR, nblocks * 4)", 8),
    ({"groups": 1, "groupbar": 1}, "grid_barrier(BAR, nblocks)", 8),  # one group: the grid's barrier
    ({"groups": 4, "groupbar": 1, "barrier": 0, "fwdgroups": 0}, "grid.sync()", 0)])  # numba's grid sync has no counter
def test_group_barriers_wait_for_the_group_on_its_counter(knobs, sync, counters):
    """groupbar=1: a level ends with a barrier among the group's blocks (its place ``bid`` and
    count ``nblocks`` in the group, counter BAR[sgroup]); the kernel takes one counter a group
    (at most 8), zeroed; the barrier-3 form reads the group's phase at kernel start."""
    g, kernel_of, (plan, _) = gpu_loop_plans("lstm", 512, 64, knobs)
    assert plan.grid_sync == sync and plan.group_barriers == sync.startswith(("group", "bphase"))
    assert plan.zeroed(lambda x: None) == ({"BAR": ((counters,), "uint32")} if counters else {})
    src = emit_loop_kernel(g, plan, kernel_of)[0]
    assert src.count(sync) == 1  # the LSTM forward's one sync a timestep
    assert ("import group_barrier" in src) == plan.group_barriers
    assert ("bphase = group_barrier_phase(BAR, sgroup)" in src) == (plan.group_barriers and plan.barrier == 3)


@pytest.mark.parametrize("cell, H, knobs, groups", [
    ("lstm", 512, {"groups": 4, "fwdgroups": 1}, [1, 4]),
    ("lstm", 512, {"groups": 1, "fwdgroups": 4}, [4, 1]),
    ("lstm", 512, {"groups": 4, "fwdgroups": 0}, [4, 4]),
    ("lstm", 1024, {"groups": 4, "fwdgroups": 4}, [1, 1]),  # four times the rows leave shared memory: re-planned in one
    ("layernorm_lstm", 512, {"groups": 4, "lngroups": 1, "fwdgroups": 1}, [4, 4])])  # layer norms keep ``groups``
def test_forward_loops_take_fwdgroups(cell, H, knobs, groups):
    """fwdgroups (LoopTuning): the stream groups of a forward loop kernel without layer norms where
    set, the backward's and the layer-norm forward's stay ``groups``; a forward whose groups do not
    fit re-plans in one group (no loop)."""
    assert [p.stream_groups for p in _plans(cell, H, 64, knobs)] == groups


@sim
def test_forward_in_one_group_backward_in_two_compute_like_numpy(monkeypatch):
    """fwdgroups=1 with groups=2: the forward loops in one group, the backward loops in two, in
    the same step (each reads the other's buffers by the grid's stream index)."""
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    tuning = LoopTuning.defaults(4).replace(prefetch=0, groups=2, fwdgroups=1)
    net = rg.stacked(rg.cells.STANDARD["lstm"], 2, 4, vocab=5, embed=3)
    gpu = rg.compile(net, window=3, streams=4, device="cuda", seed=3, tuning=tuning, options=no_flags(4))
    plans = list(gpu._cuda.program.loop_plans.values())
    assert sorted((p.reverse, p.stream_groups) for p in plans) == [(False, 1), (True, 2)]  # the wavefront: one loop a way
    assert list(check_loops(gpu)) == [s.name for s in gpu.schedule.forward + gpu.schedule.backward if isinstance(s, Loop)]
