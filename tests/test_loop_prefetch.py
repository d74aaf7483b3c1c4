"""Early loads of the persistent loops' pointwise kernels (``prefetch=1``, codegen/loop.py
``_prefetch_plans``): a load may move ahead of the kernels between its new place and the pointwise
kernel only if none of them stores to its buffer. These tests read the generated source; the
last one and tests/test_loop_tuning.py run the loop kernels with the knob in the simulator."""
import os
import re

import pytest

import rnngraph as rg
from loop_sim import assert_same_results, check_loops
from rnngraph.codegen.loop import LoopEmitter
from rnngraph.codegen.loop_prefetch import kernel_writes
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.passes import schedule
from rnngraph.schedule import Loop


def _loop_source(cell, reverse, layers=1, plan=None, **knobs):
    net = rg.stacked(rg.cells.STANDARD[cell], layers, 16, input_size=16)
    s = schedule(net.graph, 4, 1, "float32", plan)
    loop = next(st for st in (s.backward if reverse else s.forward) if isinstance(st, Loop))
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    e = LoopEmitter(net.graph, loop, "k", coop=True, recompute=kernel_of, streams=1, nblocks=4,
                    tuning=LoopTuning(threads=256, rows=2, **knobs))
    src, _ = e.source()
    gemm_writes = set().union(*(kernel_writes(net.graph, loop, k, kernel_of, e.flag_buffers)
                                for k in loop.kernels if k.kind == "gemm"))
    return src, gemm_writes


def _load_params(src):
    """{device function: the buffers of its ``_load`` function}."""
    return {m.group(1): m.group(2).split(", ") for m in re.finditer(r"def (\w+)_load\(t, s, j, ([^)]*)\):", src)}


@pytest.mark.parametrize("cell", ["lstm", "gru", "peephole_lstm"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
def test_early_loads_skip_what_the_gemms_store(cell, reverse):
    """The forward's pointwise kernels run after the level's GEMMs, the backward's first level a
    level after the previous timestep's GEMMs: neither may read a GEMM output early (it would be
    the previous timestep's), and that read must stay in the pointwise function."""
    src, gemm_writes = _loop_source(cell, reverse, prefetch=1)
    params = _load_params(src)
    assert params, "no pointwise kernel of the loop loads early"
    for fn, bufs in params.items():
        assert not set(bufs) & gemm_writes, (fn, bufs, gemm_writes)
        direct = src.split(f"def {fn}(")[1].split("@cuda.jit")[0]
        pre = src.split(f"def {fn}_pre(")[1].split("@cuda.jit")[0]
        for b in gemm_writes:
            assert (f"= {b}[" in pre) == (f"= {b}[" in direct), f"{fn}_pre lost its read of {b}"


def test_backward_lstm_loads_the_next_timestep_during_the_product():
    """The backward LSTM's pointwise kernel (level 1) issues the forward values and old gradients
    of timestep t-1 at the start of level 2 (after the grid sync, before the product), and those
    of the first timestep before the time loop."""
    src, gemm_writes = _loop_source("lstm", True, prefetch=1)
    (fn, bufs), = _load_params(src).items()
    loop = src.split("for tick in range(")[1]
    level2 = loop.split("# level 2")[1]
    assert level2.index(f"= {fn}_load(tn") < level2.index("sum W^T")  # before the GEMM section
    assert "tn = T - 1 - ((tick + 1) - 0)" in level2
    assert f"= {fn}_load(tn" in src.split("for tick in range(")[0]
    assert f"{fn}_pre(t, s, j, pf_" in loop.split("# level 2")[0]


def test_off_by_default_and_without_plans_the_source_is_unchanged():
    """prefetch=0 (LoopTuning's default) emits no early loads."""
    src, _ = _loop_source("lstm", True)
    assert "_bwd_load(" not in src and "_pre(" not in src and "pf_" not in src  # (flag_load: S=1's flags)


def test_wavefront_stages_prefetch_per_stage():
    """Two layers in one wavefront loop (two stages): each stage's pointwise kernel gets its own
    early loads, at its own stage's timestep."""
    src, _ = _loop_source("lstm", False, layers=2, plan="wavefront", prefetch=1)
    params = _load_params(src)
    assert len(params) == 2
    assert {m for m in re.findall(r"tn = \(tick\) - (\d)", src)} == {"0", "1"}


_STORE = re.compile(r"^\s*(\w+)\[[^=]*\]\s*\+?=(?!=)")  # buf[...] = / += (not ==)
_ATOMIC = re.compile(r"cuda\.atomic\.add\((\w+),")


def _functions(src):
    """{name: (parameter list, body lines)} of every function in a generated module."""
    return {m.group(1): (m.group(2).split(", "), m.group(3).splitlines())
            for m in re.finditer(r"@cuda\.jit[^\n]*\ndef (\w+)\(([^)]*)\):\n((?:    .*\n?|\n)*)", src)}


def _stores(lines, fns):
    """The buffers the lines store to, through the device functions they call too (their
    parameters mapped to the call's arguments)."""
    out = set()
    for line in lines:
        out |= {m.group(1) for m in [_STORE.match(line)] if m} | set(_ATOMIC.findall(line))
        for name in re.findall(r"\b(\w+)\(", line):
            if name in fns and not name.endswith("_load"):
                params, body = fns[name]
                args = line.split(name + "(", 1)[1].rsplit(")", 1)[0].split(", ")
                out |= {dict(zip(params, args)).get(b, b) for b in _stores(body, fns)}
    return out


CELL_PLANS = [(cell, layers, plan, S, prefetch) for cell in rg.cells.STANDARD for layers in (1, 3)
              for plan in (None, "wavefront") for S in (1, 2)
              for prefetch in ((1, 2) if S == 1 else (2,))]  # S = 2's default: 2


@pytest.mark.parametrize("cell, layers, plan, S, prefetch", CELL_PLANS)
def test_nothing_stores_to_an_early_load_before_its_use(cell, layers, plan, S, prefetch):
    """In the generated source itself: no statement between a plan's early loads (in the time
    loop) and the ``_pre`` call using them -- wrapping into the next tick where the loads are for
    it -- stores to one of the loaded buffers, directly, through a device function or by an
    atomic; a plan for the next tick also loads before the loop (the first tick). Every block
    runs this source, so the check covers the other blocks' stores between the two points too
    (prefetch=2 also plans where no grid sync comes before the early loads)."""
    net = rg.stacked(rg.cells.STANDARD[cell], layers, 16, input_size=16)
    s = schedule(net.graph, 4, S, "float32", plan)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    plans = 0
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]:
        e = LoopEmitter(net.graph, loop, "k", coop=True, recompute=kernel_of, streams=S, nblocks=4,
                        tuning=LoopTuning(threads=256, rows=2, prefetch=prefetch))
        src, _ = e.source()
        fns = _functions(src)
        body = fns["k"][1]
        start = next(i for i, line in enumerate(body) if line.strip().startswith("for tick in range("))
        for k, plan in e.prefetch_plans.items():
            plans += 1
            use, = [i for i, line in enumerate(body) if f"{plan.fn}_pre(" in line]
            loads = [i for i, line in enumerate(body) if f"pf_{k} = {plan.fn}_load(tn" in line]
            at, = [i for i in loads if i > start]
            between = body[at + 1:use] if at < use else body[at + 1:] + body[start + 1:use]
            assert (at > use) == bool(plan.shift) and (any(i < start for i in loads) or not plan.shift)
            assert not _stores(between, fns) & set(plan.args), (loop.name, k, plan)
    # layernorm_lstm at S=1: the flagged d.U leaves no grid sync before the backward's GEMM level,
    # where its first kernel's early loads would go (prefetch=1 needs one there; 2 does not)
    assert plans or cell == "elman" or S > 1 and cell in ("skip_rnn",) \
        or S == 1 and cell == "layernorm_lstm" and prefetch == 1, "no plan to check"


def test_prefetch_2_plans_the_layer_norm_backward_across_its_flagged_level():
    """layernorm_lstm at S=1: the backward's grid syncs follow levels 1 and 2 (row sums); the
    flagged d.U took the one before the GEMM level (4) away. prefetch=1 plans nothing there;
    prefetch=2 plans the first kernel (level 1) at the GEMM level of the tick before, with early
    loads of what no kernel of levels 3 and 4 (after the last grid sync) stores: the forward
    values and the old gradients of levels 1 and 2, not the GEMM's product."""
    from rnngraph.codegen.loop_prefetch import _unsynced_levels

    net = rg.stacked(rg.cells.STANDARD["layernorm_lstm"], 1, 16, input_size=16)
    s = schedule(net.graph, 4, 1, "float32")
    loop = next(st for st in s.backward if isinstance(st, Loop))
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    assert loop.sync_after == (1, 2) and loop.flagged and _unsynced_levels(loop, 4) == {3, 4}
    assert _unsynced_levels(loop, 2) == {2} and _unsynced_levels(loop, 1) == {1, 4, 3}

    def plans(prefetch):
        e = LoopEmitter(net.graph, loop, "k", coop=True, recompute=kernel_of, streams=1, nblocks=4,
                        tuning=LoopTuning(threads=256, rows=2, prefetch=prefetch))
        return e, e.prefetch_plans

    assert plans(1)[1] == {}
    e, got = plans(2)
    (name, plan), = got.items()
    first = next(k for k in loop.kernels if k.name == name)
    assert first.level == 1 and first.kind == "pointwise" and plan.level == 4 and plan.shift == 1
    late = set().union(*(kernel_writes(net.graph, loop, k, kernel_of, e.flag_buffers)
                         for k in loop.kernels if k.level in (3, 4)))
    written_earlier = set().union(*(kernel_writes(net.graph, loop, k, kernel_of, e.flag_buffers)
                                    for k in loop.kernels if k.level in (1, 2)))
    assert not set(plan.args) & late and set(plan.args) & written_earlier and any(a[0] == "V" for a in plan.args)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                    reason="simulator tests (the GPU tier runs tests/test_gpu.py)")
@pytest.mark.parametrize("cell, prefetch, layers, plan", [
    pytest.param("layernorm_lstm", 1, 2, "wavefront", marks=pytest.mark.slow),
    pytest.param("layernorm_lstm", 2, 1, None, marks=pytest.mark.slow),  # the flagged backward's plan
    ("gru_reset_before", 1, 2, "wavefront")])
def test_early_loads_compute_exactly_like_late_ones(monkeypatch, cell, prefetch, layers, plan):
    """S=1 (prefetch=1 by default, or 2) against prefetch=0, in the simulator with the block split in
    two "blocks" of 4 threads (SIM_BLOCKS): 8 units a block leave threads with two items (the
    second one loads late), 2 layers in the wavefront plan's stages (1 layer and the default plan
    for the layer-norm backward's plan that only prefetch=2 makes). Same float32 code but the load
    order: every loop kernel, launched alone from the same inputs
    (tests/loop_sim.py), must store the same values and gradients bit for bit (and the NumPy
    backend's to float32 tolerance)."""
    from rnngraph.codegen import program
    monkeypatch.setattr(program, "SIM_BLOCKS", 2)
    V, T = 5, 3
    net = rg.stacked(rg.cells.STANDARD[cell], layers, 16, vocab=V, embed=3)

    def step(env):
        monkeypatch.setenv("RNNGRAPH_LOOP", env)
        return rg.compile(net, window=T, streams=1, device="cuda", optimizer=rg.Adam(lr=1e-2), seed=3, plan=plan)
    early, late = step(f"unroll=2,prefetch={prefetch}"), step("unroll=2,prefetch=0")
    assert "_pre(t, s, j, pf_" in early.kernels and "_pre(" not in late.kernels
    if prefetch == 2:  # plans prefetch=1 does not make (the layer-norm backward's first kernels)
        assert early.kernels.count("_pre(t, s, j, pf_") > step("unroll=2").kernels.count("_pre(t, s, j, pf_")
    assert_same_results(check_loops(early), check_loops(late))
