"""The persistent loop kernel's plan (codegen/loop_plan.py), checked as data: what gets shared
memory and in which priority, work-item shapes and K-split, the kernel's argument order, the
arrays a caller zeroes. Fast: no kernel is compiled."""
import ast
import re

import pytest

import rnngraph as rg
from rnngraph.codegen.loop import emit_loop_kernel
from rnngraph.codegen.loop_items import GemmItem, PointwiseItem
from rnngraph.codegen.loop_plan import plan_loop_kernel
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.passes import schedule
from rnngraph.schedule import Loop


def _loops(cell: str, hidden: int, S: int, **options):
    net = rg.stacked(rg.cells.STANDARD[cell], 1, hidden, input_size=hidden)
    s = schedule(net.graph, 4, S, "float32", None, rg.ScheduleOptions.defaults(S).replace(**options))
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    fwd, bwd = [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]
    return net.graph, fwd, bwd, kernel_of


def _rows(plan):
    return [r for lv in plan.levels for st in lv.stages for it in st.items if isinstance(it, GemmItem) for r in it.rows]


def _pointwise(plan):
    return [it for lv in plan.levels for st in lv.stages for it in st.items if isinstance(it, PointwiseItem)]


@pytest.fixture(scope="module")
def ln64():
    """layernorm_lstm, H=16, S=64, gain and bias gradients kept in the loop (so the backward may sum
    them in shared memory)."""
    return _loops("layernorm_lstm", 16, 64, post_loop_sums=False)


def test_layer_norm_arrays_come_first_then_the_work_in_kernel_order(ln64):
    """lnsum=1 takes lnv (S x 3) and lns (S x 2) first; then the backward's pointwise kernels,
    which run before its GEMM in the level order, take their gradient sums Z<i> before the
    GEMM's weight rows."""
    g, fwd, bwd, ko = ln64
    plan = plan_loop_kernel(g, bwd, "k", True, ko, 64, 4, LoopTuning(lnsum=1, smem_kib=44))
    assert [(a.name, a.shape, a.charged) for a in plan.smem[:2]] == [("lnv", (64, 3), 768), ("lns", (64, 2), 512)]
    uses = [a.use for a in plan.smem]
    assert uses == ["layer-norm sums"] * 2 + ["layer-norm gradients"] * 4 + ["weight rows"]
    assert plan.ln_shape == 1 and plan.smem_left == 44 * 1024 - sum(a.charged for a in plan.smem)
    assert [w.rows for w in plan.weight_copies] == [4]  # 4 blocks own 16 / 4 = 4 units of W^T's 64 rows' unit


def test_a_tight_budget_keeps_the_first_priorities(ln64):
    """smem_kib=2 (2048 bytes): the layer-norm arrays (1280) fit, then the backward's gradient sums
    (32 + 128 bytes); the weight rows (1024) no longer do and are read from global memory
    (``dsmem_kib=0``), or from the dynamic shared memory (the default), 4 rows x 64 words flat."""
    g, fwd, bwd, ko = ln64
    plan = plan_loop_kernel(g, bwd, "k", True, ko, 64, 4, LoopTuning(lnsum=1, smem_kib=2, dsmem_kib=0))
    assert plan.ln_shape == 1 and not plan.weight_copies and plan.smem_left == 2048 - 1280 - 160
    assert all(t.weight.startswith("T") and "{r}" in t.weight for r in _rows(plan) for t in r.terms)
    assert sum(it.local for it in _pointwise(plan)) == 2
    dynamic = plan_loop_kernel(g, bwd, "k", True, ko, 64, 4, LoopTuning(lnsum=1, smem_kib=2))
    assert [c.offset for c in dynamic.weight_copies] == [0] and dynamic.dynamic_smem == 4 * 64 * 4
    assert dynamic.smem_left == plan.smem_left  # nothing of the static budget
    assert {t.weight for r in _rows(dynamic) for t in r.terms} == {"sw0[uint64({rem}) * uint64(64) + uint64({k})]"}
    simulated = plan_loop_kernel(g, bwd, "k", False, ko, 64, 1, LoopTuning(lnsum=1, smem_kib=0))
    assert simulated.dynamic_smem == 0 and not simulated.weight_copies  # the simulator: no dynamic memory


def test_layer_norm_arrays_that_do_not_fit_leave_the_budget_to_the_rest(ln64):
    """smem_kib=1: lnsum=1's arrays (1280 bytes at S=64) do not fit: the warp shape (0), no
    gradient sums in shared memory (they need the row-sum arrays), the weights take the budget."""
    g, fwd, bwd, ko = ln64
    for loop in (fwd, bwd):
        plan = plan_loop_kernel(g, loop, "k", True, ko, 64, 4, LoopTuning(lnsum=1, smem_kib=1))
        assert plan.ln_shape == 0 and [a.use for a in plan.smem] == ["weight rows"] and plan.smem_left == 0
        assert not plan.local_grads and not any(it.local for it in _pointwise(plan))


def test_the_simulator_does_not_charge_layer_norm_arrays_and_simulated_blocks_get_no_budget(ln64):
    g, fwd, bwd, ko = ln64
    sim = plan_loop_kernel(g, bwd, "k", False, ko, 64, 1, LoopTuning(lnsum=2, smem_kib=1))
    assert sim.ln_shape == 2 and sim.arrays("layer-norm sums")[0].charged == 0
    assert sim.arrays("layer-norm sums")[0].shape == (sim.ln_slots, 2)
    virtual = plan_loop_kernel(g, bwd, "k", False, ko, 64, 1, LoopTuning(lnsum=2, smem_kib=44), virtual_blocks=2)
    assert virtual.arrays("layer-norm sums")[0].shape == (2, virtual.ln_slots, 2)
    assert not virtual.weight_copies and not virtual.local_grads and virtual.smem_left == 0
    assert all(r.ksplit == 1 for r in _rows(virtual))


def test_work_item_shapes_and_split():
    """The H=512 LSTM on 132 blocks at S=64 with rows=8, cols=8: forward 16 rows a block -> items of
    8 rows x 4 streams (32 accumulators), backward 4 rows -> 4 x 8, split in 2 (8 items for 16
    warps) with a (16, 32) partial-sum array. At S=1 the backward's one item is split 8 ways."""
    g, fwd, bwd, ko = _loops("lstm", 512, 64)
    tuning = LoopTuning(rows=8, cols=8, threads=512, ksplit=8)
    (f,), (b,) = _rows(plan_loop_kernel(g, fwd, "k", True, ko, 64, 132, tuning)), \
        _rows(bplan := plan_loop_kernel(g, bwd, "k", True, ko, 64, 132, tuning))
    assert (f.rows, f.streams, f.items, f.ksplit) == (8, 4, 32, 1)
    assert (b.rows, b.streams, b.items, b.ksplit) == (4, 8, 8, 2)
    # unrolled tuning.unroll times (8), at most inner // (32 x split), at least once
    assert f.unroll == b.unroll == 8
    assert f.butterfly and b.butterfly  # 32 accumulators: the transpose butterfly (xreduce)
    g16, fwd16, _, ko16 = _loops("lstm", 16, 64)
    (short,) = _rows(plan_loop_kernel(g16, fwd16, "k", True, ko16, 64, 4, tuning))
    assert short.unroll == 1  # 16 columns: less than a warp's one stride
    (tree,) = _rows(plan_loop_kernel(g, fwd, "k", True, ko, 64, 132, tuning.replace(xreduce=0)))
    (sim,) = _rows(plan_loop_kernel(g, fwd, "k", False, ko, 64, 1, tuning))
    assert not tree.butterfly and not sim.butterfly and sim.unroll == 8
    assert [(a.name, a.shape) for a in bplan.arrays("split partial sums")] == [("kp0", (16, 32))]
    g, fwd, bwd, ko = _loops("lstm", 512, 1)
    (b,) = _rows(plan_loop_kernel(g, bwd, "k", True, ko, 1, 132, rg.LoopTuning.defaults(1)))
    assert (b.rows, b.streams, b.items, b.ksplit) == (4, 1, 1, 8)


def test_argument_order_is_the_kernels_signature():
    """(T, S, BAR, flag buffers, buffers sorted by kind letter then index) -- the order
    CudaProgram passes arrays in -- is the generated kernel's parameter list; zeroed() names BAR
    and the flag buffers with the shapes a caller allocates."""
    g, fwd, bwd, ko = _loops("lstm", 16, 1, flagged_exchange=True)
    for loop, barrier in ((fwd, 1), (bwd, 0)):
        plan = plan_loop_kernel(g, loop, "k", True, ko, 1, 4, LoopTuning.defaults(1).replace(barrier=barrier))
        flags = [f for _, f in plan.flag_buffers]
        assert plan.args[:2] == ("T", "S") and flags and all(f.startswith("F") for f in flags)
        assert plan.args[2:] == (("BAR",) if barrier else ()) + tuple(flags) + plan.buffers
        assert list(plan.buffers) == sorted(plan.buffers, key=lambda b: (b[0], int(b[1:])))
        assert not set(plan.buffers) & set(flags)
        src, args = emit_loop_kernel(g, plan, ko)
        assert list(args) == list(plan.buffers)
        assert re.search(r"^def k\((.*)\):$", src, re.M).group(1) == ", ".join(plan.args)
        zeroed = plan.zeroed(lambda x: (7, 1, 16))
        assert list(zeroed) == list(plan.args[2:2 + len(zeroed)])
        assert zeroed == ({"BAR": ((8,), "uint32")} if barrier else {}) | {f: ((7, 1, 16), "uint64") for f in flags}


def test_backward_reads_transposed_weights():
    g, fwd, bwd, ko = _loops("gru", 16, 2)
    fplan, bplan = (plan_loop_kernel(g, lp, "k", True, ko, 2, 4, LoopTuning()) for lp in (fwd, bwd))
    names = [p.name for p in g.params]
    assert not fplan.transposed and bplan.transposed == {"layer0.U.weight"}
    assert {f"T{names.index(p)}" for p in bplan.transposed} <= set(bplan.buffers)
    assert not any(b.startswith("T") for b in fplan.buffers)


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tensor_core_items_swap_for_blocks_of_few_rows_and_chunk_aligned_vectors(precision):
    """LSTM H = 1024 at S = 64 on 132 blocks with the loops on tensor cores: the forward's blocks
    own 32 rows of 4,096 (items of 32 rows x 8 streams), the backward's 8 of 1,024, so its items
    swap to 8 rows x 16 streams (a 16-row tile would throw 8 away); both read whole chunks with
    16-byte loads (plain vectors, rows of a multiple of 4 floats) from weight copies stored
    permuted. At S = 8 the backward keeps 16-row tiles (a 16-stream tile would waste 8 streams);
    at H = 1022 the forward's vectors (rows of 1,022 floats: not 16-byte aligned) are read k-step by
    k-step, the backward's (4,088 floats) still in chunks."""
    def rows(H, S, loop, nblocks=132):
        g, fwd, bwd, ko = _loops("lstm", H, S, loop_tensor_cores=True)
        plan = plan_loop_kernel(g, fwd if loop == "fwd" else bwd, "k", True, ko, S, nblocks, LoopTuning(),
                                precision=precision)
        (r,) = _rows(plan)
        return r, plan
    fwd, pf = rows(1024, 64, "fwd")
    bwd, pb = rows(1024, 64, "bwd")
    assert (fwd.rows, fwd.streams, fwd.swapped, fwd.chunked, fwd.mma) == (32, 8, False, True, precision)
    assert (bwd.rows, bwd.streams, bwd.swapped, bwd.chunked) == (8, 16, True, True)
    assert all(c.permuted for c in pf.weight_copies + pb.weight_copies)
    assert not rows(1024, 8, "bwd")[0].swapped
    assert not rows(1022, 64, "fwd")[0].chunked and rows(1022, 64, "bwd")[0].chunked
    # tests/test_loop_mma_sim.py's one-block shapes: H = 8 and 6 at S = 9 swap their backward
    small = rows(8, 9, "bwd", 1)[0]
    assert small.swapped and small.chunked == (precision == "tf32")  # inner 32: a whole TF32 chunk only
    assert small.ksplit <= 32 * 4 // {"tf32": 32, "bf16": 8}[precision]  # no more parts than chunks / k-steps
    assert rows(6, 9, "bwd", 1)[0].swapped and not rows(6, 9, "bwd", 1)[0].chunked


def test_chunk_word_order_puts_each_lanes_words_where_its_k_steps_read_them():
    """loop_plan.chunk_word_order (the generated prologue's expression): word 4t + j of a chunk
    (lane t's first 16-byte load, element j) is stored at 8j + t (k-step j's fragment load at
    lane t), word 16 + 4t + j at 8j + 4 + t; only a word's place in its chunk of 32 counts."""
    from rnngraph.codegen.loop_plan import chunk_word_order
    place = [eval(chunk_word_order(str(o))) for o in range(64)]  # noqa: S307 (our own expression)
    want = {4 * t + j: 8 * j + t for t in range(4) for j in range(4)}
    want.update({16 + 4 * t + j: 8 * j + 4 + t for t in range(4) for j in range(4)})
    assert place[:32] == [want[o] for o in range(32)] and place[32:] == place[:32]


@pytest.mark.parametrize("cell,S", [("lstm", 64), ("gru", 8), ("peephole_lstm", 32)])
def test_loop_kernels_have_no_conditional_expressions(cell, S):
    """Each ``a if c else b`` in a kernel is three basic blocks to numba's front end, whose liveness
    and SSA passes cost about blocks x length: the GEMM reductions' selections are ``cuda.selp``
    (codegen/source.py ``select``): with one name per column read, the S = 64 LSTM forward kernel's
    compile went from 7.5 to 3.6 s for the same PTX (bench/results/cpu-20261204-loop-kernel-compile-selp.txt)."""
    g, fwd, bwd, kernel_of = _loops(cell, 64, S)
    for loop in (fwd, bwd):
        plan = plan_loop_kernel(g, loop, "k", coop=True, recompute=kernel_of, streams=S, nblocks=132,
                                tuning=LoopTuning.defaults(S))
        src, _ = emit_loop_kernel(g, plan, kernel_of)
        kernel = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "k")
        assert not [n for n in ast.walk(kernel) if isinstance(n, ast.IfExp)], loop.name
        assert "cuda.selp(up, " in src, loop.name  # the transpose reduction took the rows x streams
