"""Early loads of the persistent loops' pointwise kernels (``prefetch=1``, codegen/loop.py
``_prefetch_plans``): a load may move ahead of the kernels between its new place and the pointwise
kernel only if none of them stores to its buffer. These tests read the generated source (no
simulator); tests/test_loop_tuning.py trains with the knob in the simulator."""
import re

import pytest

import rnngraph as rg
from rnngraph.codegen.loop import LoopEmitter
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
    gemm_writes = set().union(*(e._kernel_writes(k) for k in loop.kernels if k.kind == "gemm"))
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
    assert "_load(" not in src and "_pre(" not in src and "pf_" not in src


def test_wavefront_stages_prefetch_per_stage():
    """Two layers in one wavefront loop (two stages): each stage's pointwise kernel gets its own
    early loads, at its own stage's timestep."""
    src, _ = _loop_source("lstm", False, layers=2, plan="wavefront", prefetch=1)
    params = _load_params(src)
    assert len(params) == 2
    assert {m for m in re.findall(r"tn = \(tick\) - (\d)", src)} == {"0", "1"}
