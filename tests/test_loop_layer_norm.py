"""Layer norms inside persistent loop kernels (``ScheduleOptions.persistent_layer_norms``,
codegen/loop.py; the default up to S=64, rnngraph/schedule_options.py, validated on the H200 by
tests/test_gpu.py): the whole window in one cooperative kernel per direction, each layer norm
adding its row sums across blocks with atomics (at the end of the level before its own, or before
an extra grid sync), its gain and bias gradients summed after the backward loop
(``post_loop_sums``, lngrad=1 below) or inside it (lngrad=0).

In numba's simulator a cooperative grid has one block (its grid.sync is the block barrier and
blocks run one after another), so multi-block runs split the one simulated block into
``program.SIM_BLOCKS`` "blocks" of its threads (LoopEmitter's ``virtual_blocks``): each owns its
slice of the hidden units and adds its own partial sums with atomics, and grid.sync is a true
barrier over all of them. Tiny shapes: T=3, S=2, hidden 8; each loop kernel launched alone against
the NumPy backend (tests/loop_sim.py: the library kernels around the loops, tested on their own and
by tests/test_codegen_sim.py's training steps, would take nearly all the time).
"""
import os
import re

import numpy as np
import pytest

import rnngraph as rg
from extra_cells import prenorm_rnn
from loop_sim import check_loops
from rnngraph.codegen import program
from rnngraph import LoopTuning, ScheduleOptions
from rnngraph.passes import schedule
from rnngraph.schedule import Loop

V, T, S, H = 5, 3, 2, 8
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

# (cell, layers, plan, simulated blocks, lnsum, lngrad): 3 blocks split hidden 8 unevenly (2, 3, 3
# units); lnsum=1: the row sums' shared-memory code shape (codegen/loop.py), lnsum=0 the warp
# shape. layernorm_lstm's layer norms take their row sums one level early (passes/row_sums.py);
# prenorm_rnn's at the start of their own level, before a reduction sync. lnsum=2: the register
# shape (a column per thread, partial sums meeting in shared memory without atomics). lngrad=1
# (the default): the gain and bias gradients summed by a kernel after the backward loop
# (codegen/ln_param_grads.py); lngrad=0: inside it (shared-memory sums with lnsum=1|2, global
# atomics with lnsum=0).
CASES = [("layernorm_lstm", 1, None, 1, 0, 1), ("layernorm_lstm", 1, None, 3, 0, 1), ("layernorm_lstm", 2, "wavefront", 2, 0, 1),
         ("layernorm_lstm", 2, "scc-sequential", 2, 0, 1), ("layernorm_lstm", 1, None, 1, 1, 1),
         ("layernorm_lstm", 1, None, 3, 1, 1), ("layernorm_lstm", 2, "wavefront", 2, 1, 1),
         ("prenorm_rnn", 1, None, 3, 0, 1), ("prenorm_rnn", 1, None, 3, 1, 1), ("prenorm_rnn", 1, None, 1, 1, 1),
         ("layernorm_lstm", 1, None, 3, 2, 1), ("layernorm_lstm", 2, "wavefront", 2, 2, 1), ("prenorm_rnn", 1, None, 3, 2, 1),
         ("layernorm_lstm", 1, None, 3, 0, 0), ("layernorm_lstm", 1, None, 3, 2, 0), ("prenorm_rnn", 1, None, 3, 1, 0)]


def _loops(schedule) -> list[Loop]:
    return [s for s in schedule.forward + schedule.backward if isinstance(s, Loop)]


def _ln_options(streams, lngrad=1) -> ScheduleOptions:
    """Layer norms in the persistent loops, their gain and bias gradients after the backward loop
    (lngrad=1) or inside it (0)."""
    return ScheduleOptions.defaults(streams).replace(persistent_layer_norms=True, post_loop_sums=bool(lngrad))


def _gpu(cell, layers, plan, streams=S, lnsum=None, lngrad=1):
    net = rg.stacked(rg.cells.STANDARD.get(cell) or prenorm_rnn, layers, H, vocab=V, embed=3)
    tuning = LoopTuning.defaults(streams)
    tuning = tuning if lnsum is None else tuning.replace(lnsum=lnsum)
    return rg.compile(net, window=T, streams=streams, device="cuda", seed=1, plan=plan,
                      options=_ln_options(streams, lngrad), tuning=tuning)


def _check_loops(gpu):
    """Every loop kernel of ``gpu`` against the NumPy backend (tests/loop_sim.py), forward and backward."""
    assert list(check_loops(gpu)) == [lp.name for lp in _loops(gpu.schedule)]


@sim
@pytest.mark.parametrize("cell, layers, plan, blocks, lnsum, lngrad", CASES,
                         ids=[f"{c}-{n}l-{p}-b{b}-lnsum{q}-lngrad{d}" for c, n, p, b, q, d in CASES])
def test_layer_norm_loops_compute_like_numpy(monkeypatch, cell, layers, plan, blocks, lnsum, lngrad):
    monkeypatch.setattr(program, "SIM_BLOCKS", blocks)
    gpu = _gpu(cell, layers, plan, lnsum=lnsum, lngrad=lngrad)
    loops = _loops(gpu.schedule)
    assert loops and all(lp.mode == "persistent" for lp in loops)
    # layernorm_lstm: every loop sums rows one level early (2 layers, wavefront: the backward of
    # layer 1's ln_i, at the level 1 of its stage, keeps a reduction sync); prenorm_rnn's forward
    # sums LN(h[t-1]) in a reduction phase, its backward one level early
    early = cell == "layernorm_lstm"
    assert all(lp.early_sums for lp in loops) == early and any(lp.early_sums for lp in loops)
    reduction = bool(re.search(r"\+ \d+ reduction syncs? per timestep", str(gpu.schedule)))
    assert reduction == (not early or plan == "wavefront") == any(lp.reduction_syncs for lp in loops)
    if plan:
        assert gpu.schedule.plan == plan
    src = gpu.kernels
    assert "cuda.atomic.add(N" in src and "cuda.atomic.add(M" in src and "grid.sync()" in src
    assert "layer_norm_forward" not in src  # no per-timestep library layer norm: loops are one kernel each
    assert ("cuda.atomic.add(lns" in src) == (lnsum == 1) and ("lnp[" in src) == (lnsum == 2)
    # the gain and bias gradients: every layer norm's after the loop (lngrad=1), none inside it
    post = re.findall(r"# (\S+): gain and bias gradients over the window", src)
    norms = {m for lp in loops if lp.reverse for k in lp.kernels for m in k.ops if gpu.graph.by_name[m].op == "layer_norm"}
    assert sorted(post) == (sorted(norms) if lngrad else [])
    assert bool(re.search(r"cuda\.atomic\.add\((Z\d+|Q\d+, j \+)", src)) == (not lngrad)  # the loop's own sums
    plan_ = gpu._cuda.program
    assert all(len(step) == 1 for step, s in zip(plan_.forward_plan, gpu.schedule.forward) if isinstance(s, Loop))
    _check_loops(gpu)


@sim
def test_register_row_sums_with_more_columns_than_threads(monkeypatch):
    """lnsum=2 with S = 10 columns over a block of 8 threads: threads 0 and 1 each sum two
    columns (slots v = tid, tid + 8), the others one; every column's sums still meet once."""
    monkeypatch.setattr(program, "SIM_BLOCKS", 1)
    gpu = _gpu("layernorm_lstm", 1, None, streams=10, lnsum=2)
    assert "lnp[" in gpu.kernels
    _check_loops(gpu)


@sim
def test_post_loop_sums_walk_the_rows_in_tiles(monkeypatch):
    """codegen/ln_param_grads.py's kernel turns ROW_TILE rows' sums into moments at a time: with
    ROW_TILE=4, the window's T*S = 9 rows (T=3, S=3) take three tiles, the last of one row, the
    tile boundaries falling inside timesteps (regression guard for the tile's (t, s) walk)."""
    from rnngraph.codegen import ln_param_grads
    monkeypatch.setattr(ln_param_grads, "ROW_TILE", 4)
    gpu = _gpu("layernorm_lstm", 1, None, streams=3, lngrad=1)
    assert "sm = cuda.shared.array((4, 3), float32)" in gpu.kernels
    _check_loops(gpu)  # with the phase after the backward loop: its layer norms' post_sums


@sim
def test_multi_block_simulation_of_plain_loops(monkeypatch):
    """The simulated blocks also run the GEMM + pointwise persistent kernels (flag off)."""
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    gpu = _gpu("lstm", 2, "wavefront")
    assert all(lp.mode == "persistent" for lp in _loops(gpu.schedule))
    _check_loops(gpu)


def test_ln_option_moves_layer_norm_loops_between_graph_mode_and_persistent():
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 512, input_size=512)
    lstm = rg.stacked(rg.cells.lstm, 2, 64, input_size=64)
    no_ln = ScheduleOptions.defaults(1).replace(persistent_layer_norms=False)
    off = schedule(net.graph, window=100, streams=1, options=no_ln)
    lstm_off = schedule(lstm.graph, window=10, streams=1, options=no_ln)
    assert all(lp.mode == "graph" and lp.reduction_syncs == 0 for lp in _loops(off))
    assert "reduction sync" not in str(off)  # graph mode
    assert "options (not the defaults for S=1): persistent_layer_norms=False" in str(off)
    on = schedule(net.graph, window=100, streams=1, options=_ln_options(1))
    fwd, bwd = _loops(on)
    assert fwd.mode == bwd.mode == "persistent"
    # the row sums of ln_h and ln_c (forward) and of their VJPs are taken one level early: no
    # reduction syncs (passes/row_sums.py)
    assert (fwd.reduction_syncs, bwd.reduction_syncs) == (0, 0) and fwd.early_sums and bwd.early_sums
    assert "3 levels per timestep" in str(on)
    assert on.launches < off.launches and on.critical_path == off.critical_path
    lstm_on = schedule(lstm.graph, window=10, streams=1, options=_ln_options(1))
    assert lstm_on.forward + lstm_on.backward == lstm_off.forward + lstm_off.backward  # no layer norms: unchanged
    # the defaults: persistent at S <= 64, graph mode above
    assert str(schedule(net.graph, window=100, streams=1)) == str(on)
    assert all(lp.mode == "graph" for lp in _loops(schedule(net.graph, window=100, streams=65)))


def test_ln_option_defaults_and_validation():
    # validated on the H200: on by default where it was faster (S <= 64), off above; the
    # register row sums from S = 2
    assert ScheduleOptions.defaults(1).persistent_layer_norms and ScheduleOptions.defaults(64).persistent_layer_norms
    assert not ScheduleOptions.defaults(65).persistent_layer_norms and not ScheduleOptions().persistent_layer_norms
    assert LoopTuning.defaults(1).lnsum == 0 and LoopTuning.defaults(2).lnsum == LoopTuning.defaults(64).lnsum == 2
    with pytest.raises(ValueError, match="ScheduleOptions.persistent_layer_norms must be True or False, got 2"):
        ScheduleOptions(persistent_layer_norms=2)


def test_shared_memory_row_sums_need_their_budget():
    """lnsum=1's per-column arrays and gradient sums come out of smem_kib: with the default
    budget the S=64 kernels use them; with smem_kib=0 they fall back to the warp shape and to
    global gradient atomics (codegen/loop.py), rather than exceed what a block may hold (and with
    dsmem_kib=0 the weight rows are read from global memory: no shared array at all)."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 64, input_size=64)
    # the gain and bias gradients inside the loop
    loops = _loops(schedule(net.graph, window=4, streams=64, options=_ln_options(64, lngrad=0)))
    src = lambda loop, kib: LoopEmitter(net.graph, loop, "k", coop=True, streams=64, nblocks=4,  # noqa: E731
                                        tuning=LoopTuning(lnsum=1, smem_kib=kib, dsmem_kib=0)).source()[0]
    fwd, bwd = (src(lp, 44) for lp in loops)
    assert "cuda.atomic.add(lns" in fwd and "cuda.atomic.add(lns" in bwd and "Z" in bwd.split("def k(")[1]
    for lp in loops:
        none = src(lp, 0)
        assert "cuda.atomic.add(lns" not in none and "cuda.shared.array" not in none
        assert "cuda.atomic.add(N" in none or "cuda.atomic.add(M" in none
    # 2 KiB on one block: the per-column arrays (1280 B) and LN_c's gradient sums (512 B) fit,
    # LN_h's (2048 B) do not: its gain and bias gradients go to global memory with atomics
    tight = LoopEmitter(net.graph, loops[1], "k", coop=True, streams=64, nblocks=1,
                        tuning=LoopTuning(lnsum=1, smem_kib=2, dsmem_kib=0)).source()[0]
    assert "cuda.atomic.add(lns" in tight
    zs = [line.split("=")[1] for line in tight.splitlines() if line.strip().startswith("Z") and "shared.array" in line]
    assert zs == [" cuda.shared.array(64, float32)  # the block's layer-norm parameter gradient sums"] * 2  # LN_c's
    adds = [line.strip() for line in tight.splitlines() if "cuda.atomic.add(Q" in line]
    assert len([a for a in adds if ", j + " in a]) == 2  # LN_h's gain and bias: global atomics every timestep
    assert len([a for a in adds if a.endswith("[i])")]) == 2  # LN_c's: the block's sums, added at the end


def test_deferred_gain_and_bias_gradients_need_the_whole_gradient_in_memory():
    """passes/param_grad_sums.py: a layer norm's output gradient is complete in its buffer only if
    other kernels write it and no op of the same backward kernel reads it at delay 0; the
    schedule names the reduce kernel of each such layer norm after its persistent backward loop
    (post_loop_sums), none without or in graph mode; ln_param_grad_kernel takes layer norms only;
    post_loop_sums is True or False."""
    from rnngraph.codegen.ln_param_grads import ln_param_grad_kernel
    from rnngraph.passes.param_grad_sums import grad_in_memory
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=8)
    g = net.graph
    for options, want in ((_ln_options(4), True), (_ln_options(4, lngrad=0), False),
                          (_ln_options(4).replace(persistent_layer_norms=False), False)):
        s = schedule(g, window=4, streams=4, options=options)
        back = next(lp for lp in _loops(s) if lp.reverse)
        reduce = [k for st in s.backward if not isinstance(st, Loop) for k in st.kernels
                  if k.kind == "reduce" and k.op_names == ("layer_norm",)]
        norms = sorted(m for k in back.kernels for m, op in zip(k.ops, k.op_names) if op == "layer_norm")
        assert sorted(back.post_sums) == (norms if want else []) and len(norms) == 2, options
        assert sorted(k.ops[0] for k in reduce) == sorted(back.post_sums), options
        assert ("gain and bias gradients after the loop" in str(s)) == want
    ln = next(n for n in g.nodes if n.op == "layer_norm")
    consumer = next(n for n in g.nodes if any(r.node == ln.name and r.delay == 0 for r in n.args))
    assert grad_in_memory(g, [ln.name], [ln.name], ln.name)
    assert not grad_in_memory(g, [ln.name], [], ln.name)  # its gradient is this kernel's own
    assert not grad_in_memory(g, [ln.name, consumer.name], [ln.name], ln.name)  # a consumer adds in a register
    src, args = ln_param_grad_kernel(g, ln.name, "post")
    assert src.startswith("@cuda.jit\ndef post(T, S, rows_per_chunk, ") and f"# {ln.name}: gain and bias" in src
    assert sum(a.startswith("Q") for a in args) == 2 and any(a.startswith("N") for a in args)
    with pytest.raises(ValueError, match=f"{re.escape(consumer.name)} is a {consumer.op}, not a row reduction"):
        ln_param_grad_kernel(g, consumer.name, "post")
    with pytest.raises(ValueError, match="ScheduleOptions.post_loop_sums must be True or False, got 2"):
        ScheduleOptions(post_loop_sums=2)


@pytest.mark.parametrize("cell", ["layernorm_lstm", "prenorm_rnn"])
@pytest.mark.parametrize("lngrad", [1, 0])
def test_numpy_backend_with_post_loop_sums_equals_naive_time_stepping(cell, lngrad):
    """The NumPy backend runs the schedule's post_sums layer norms as the GPU does (the loop
    computes the input gradient, the reduce kernel after it the gain and bias gradients over the
    window): every gradient equals rnngraph.Reference's naive time-stepping in float64."""
    from rnngraph.executor import ScheduleExecutor
    g = rg.stacked(rg.cells.STANDARD.get(cell) or prenorm_rnn, 2, H, input_size=3).graph
    s = schedule(g, T, S, "float64", None, _ln_options(S, lngrad))
    assert bool([lp for lp in _loops(s) if lp.post_sums]) == bool(lngrad)
    rng = np.random.default_rng(3)
    params = rg.init_params(g, 3)
    inputs = {"x": rng.normal(size=(T, S, 3))}
    states = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()}
    dy = {o: rng.normal(size=(T, S, g.node(o).size)) for o in g.outputs}
    want, got = (ex.backward(ex.forward(params, inputs, states), dy) for ex in (rg.Reference(g), ScheduleExecutor(s)))
    assert any(p.endswith(("ln_h.weight", "ln.weight")) for p in want.params)
    for name, value in want.params.items():
        np.testing.assert_allclose(got.params[name], value, atol=1e-11, err_msg=name)
    for name, value in want.inputs.items():
        np.testing.assert_allclose(got.inputs[name], value, atol=1e-11, err_msg=name)
