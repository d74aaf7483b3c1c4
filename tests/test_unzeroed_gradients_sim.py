"""The gradients the backward writes whole without reading them (passes/twin_biases.py
``written_once``: an LSTM's gate gradients d.W and d.U) are left out of the step's zeroing
(codegen/buffers.py ``zeroed_grads``). Every plan and code shape must then overwrite them whole
before anything reads them: with that part of the gradient arena filled with NaN before the
backward, the parameter gradients must equal, bit for bit, those of a backward after zeroing the
whole arena (simulator; a read or an unwritten element shows as NaN or a difference)."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.codegen import library
from rnngraph.loop_env import parse, resolve

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                reason="simulator tests (the GPU tier runs tests/test_gpu.py)")
V, T = 5, 3


def _param_grads(step, feed, poison: bool) -> dict:
    """The parameter gradients of one forward and backward (the loss's gradient seeded 1), after
    zeroing the whole gradient arena, then with ``poison`` its unzeroed part filled with NaN; each
    unzeroed gradient must hold no NaN after the backward (written whole)."""
    be = step._cuda
    b = be.buf
    be._feed(feed)
    be.program.run_forward()
    library.fill(b.grad_arena, 0.0, stream=be.stream)
    if poison:
        library.fill(b.grad_arena[b.zeroed_grads.size:], np.nan, stream=be.stream)
    library.fill(b.param_grad_arena, 0.0, stream=be.stream)
    library.fill(b.window(step.schedule.graph.loss, grad=True), 1.0, stream=be.stream)  # the masked graph's too
    be.program.run_backward()
    out = {k: v.copy_to_host(stream=be.stream) for k, v in b.PG.items()}
    written = {k: b.G[k].copy_to_host(stream=be.stream) for k in b.unzeroed}
    be.stream.synchronize()
    for k, v in written.items():  # every element, padded steps included
        assert np.isfinite(v).all(), f"d.{k}: {np.isnan(v).sum()} elements left unwritten"
    return out


@pytest.mark.parametrize("cell, layers, S, plan, knobs, precision, unzeroed", [
    ("lstm", 1, 2, "naive", "", "fp32", 2),  # one kernel per op per timestep
    ("lstm", 2, 2, "scc-sequential", "flags=0", "fp32", 4),
    ("lstm", 2, 2, "wavefront", "flags=0", "fp32", 4),
    ("peephole_lstm", 1, 2, None, "flags=0", "fp32", 2),  # grid syncs
    ("lstm", 1, 1, None, "", "fp32", 1),  # S = 1: d.U handed between blocks as flagged words, zeroed
    ("lstm", 1, 2, None, "", "fp32", 1),  # S = 2 to 8: the backward's d.U flagged alone
    ("lstm", 1, 2, None, "tiles=1,flags=0", "fp32", 2),
    ("lstm", 1, 4, None, "groups=2,fwdgroups=0,flags=0", "fp32", 2),
    ("lstm", 1, 2, None, "mma=1,flags=0", "tf32", 2)])  # the loops' products on tensor cores (their stand-in here)
def test_unzeroed_gradients_are_overwritten_whole(cell, layers, S, plan, knobs, precision, unzeroed):
    net = rg.stacked(rg.cells.STANDARD[cell], layers, 4, vocab=V, embed=3)
    options, tuning = resolve(S, overrides=parse(knobs)) if knobs else (None, None)
    step = rg.compile(net, window=T, streams=S, device="cuda", seed=0, plan=plan, options=options, tuning=tuning,
                      precision=precision)
    assert len(step._cuda.buf.unzeroed) == unzeroed  # the case exercises what it tests
    rng = np.random.default_rng(0)
    feed = {n.name: rng.integers(0, V, (T, S)) for n in step.graph.inputs}
    zeroed, poisoned = _param_grads(step, feed, False), _param_grads(step, feed, True)
    for name, want in zeroed.items():
        assert np.isfinite(want).all(), name
        np.testing.assert_array_equal(poisoned[name], want, err_msg=name)


@pytest.mark.parametrize("plan, knobs, unzeroed", [(None, "flags=0", 2), (None, "cols=1,flags=0", 2),
                                                   (None, "tiles=1,flags=0", 2),
                                                   ("naive", "", 2),
                                                   (None, "", 1)])  # d.U flagged in the backward (S = 3)
def test_unzeroed_gradients_are_overwritten_whole_with_lengths(plan, knobs, unzeroed):
    """Variable lengths (the network's masked graph): the padded steps' gate gradients are written
    too (as zeros), though the loops' GEMM items skip the streams that ended (cols=1: an item a
    stream; tiles=1: the tiled row loops' own skip) and a stream of length 0 has no valid step."""
    net = rg.Sequential(rg.cells.lstm(hidden=4), rg.SoftmaxCrossEntropy(V), input_size=3)
    S = 3
    options, tuning = resolve(S, overrides=parse(knobs)) if knobs else (None, None)
    step = rg.compile(net, window=T, streams=S, device="cuda", seed=0, plan=plan, options=options, tuning=tuning)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(T, S, 3)).astype(np.float32), rng.integers(0, V, (T, S))
    feed = step._feed(x, y, lengths=[1, T, 0])  # the masked graph's plan, its stream order set
    assert step.schedule.graph is net.masked_graph
    assert len(step._cuda.buf.unzeroed) == unzeroed  # d.W and d.U, or d.W alone
    zeroed, poisoned = _param_grads(step, feed, False), _param_grads(step, feed, True)
    for name, want in zeroed.items():
        assert np.isfinite(want).all(), name
        np.testing.assert_array_equal(poisoned[name], want, err_msg=name)
