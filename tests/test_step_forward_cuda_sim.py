"""``TrainingStep.forward`` returns the same StepForward on the CPU backend and on the CUDA backend
(numba's simulator without a GPU, the GPU in the GPU tier; tiny shapes: H=4, T=3, S=2): the same fields and keys, shapes and dtypes, and
values equal to float32 tolerance, with and without ``all_values``, with and without targets."""
import os

import numpy as np
import pytest

import rnngraph as rg

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

V, E, H, T, S = 5, 3, 4, 3, 2
TOL = dict(rtol=0, atol=1e-5)
FIELDS = ("outputs", "values", "states", "final_states")


def _pair(cell, layers, plan=None, streams=S):
    net = rg.stacked(rg.cells.STANDARD[cell], layers, H, vocab=V, embed=E)
    return [rg.compile(net, window=T, streams=streams, device=dev, seed=1, plan=plan) for dev in ("cpu", "cuda")]


def _assert_same(a: rg.StepForward, b: rg.StepForward) -> None:
    """Same keys, shapes, dtypes (float32 host arrays) and values; the same loss."""
    assert type(a) is type(b) is rg.StepForward
    for field in FIELDS:
        x, y = getattr(a, field), getattr(b, field)
        assert list(x) == list(y), field
        for name in x:
            assert type(y[name]) is np.ndarray and y[name].dtype == x[name].dtype == np.float32, (field, name)
            assert y[name].shape == x[name].shape, (field, name)
            np.testing.assert_allclose(y[name], x[name], **TOL, err_msg=f"{field}[{name!r}]")
    assert (a.loss is None) == (b.loss is None)
    if a.loss is not None:
        assert b.loss == pytest.approx(a.loss, abs=1e-5)


@pytest.mark.parametrize("all_values", [False, True])
def test_forward_result_is_the_same_on_both_backends(all_values):
    cpu, gpu = _pair("lstm", 1)
    rng = np.random.default_rng(0)
    x1, x2, y2 = (rng.integers(0, V, (T, S)) for _ in range(3))
    loss = cpu.graph.loss  # "head.loss": per-column losses
    computed = {n.name for n in cpu.graph.nodes if n.op not in ("input", "param")} - {loss}
    first = [step.forward(x1, all_values=all_values) for step in (cpu, gpu)]  # no targets; carries
    _assert_same(*first)
    a, b = first
    assert a.loss is None and set(a.outputs) == {"head.logits"}
    assert set(a.values) == (computed if all_values else {"head.logits"})  # no loss node without targets
    assert a.outputs["head.logits"].shape == (T, S, V) and a.final_states["layer0.c"].shape == (1, S, H)
    assert all(np.all(v == 0) for v in a.states.values()) and np.abs(a.final_states["layer0.h"]).min() > 0
    second = [step.forward(x2, y2, carry=False, all_values=all_values) for step in (cpu, gpu)]
    _assert_same(*second)
    c, d = second
    assert set(c.values) == (computed if all_values else {"head.logits"}) | {loss}
    assert c.values[loss].shape == (T, S, 1) and c.loss == pytest.approx(float(c.values[loss].mean()))
    for step, r in ((cpu, c), (gpu, d)):  # it started where the first call ended; carry=False kept them
        for name, s in a.final_states.items():
            np.testing.assert_allclose(r.states[name], s, **TOL)
            np.testing.assert_allclose(step.state[name], s, **TOL)
        assert not np.allclose(r.final_states["layer0.h"], a.final_states["layer0.h"])
        r.final_states["layer0.h"][...] = 7  # the result's arrays are its own
        assert not np.any(step.state["layer0.h"] == 7)


@pytest.mark.parametrize("cell, layers, plan, streams", [
    ("peephole_lstm", 1, None, S), ("layernorm_lstm", 2, "wavefront", S), ("gru", 2, "scc-sequential", S),
    ("lstm", 1, None, 1)])  # S = 1: h handed over by flagged exchange
def test_all_values_stores_every_node_on_cuda(cell, layers, plan, streams):
    """The kernels keep gates and other intermediates in registers; all_values=True stores them:
    every computed node equals the CPU backend's, and the usual result after it is unchanged."""
    cpu, gpu = _pair(cell, layers, plan, streams)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, V, (T, streams)), rng.integers(0, V, (T, streams))
    a, b = (step.forward(x, y, all_values=True) for step in (cpu, gpu))
    _assert_same(a, b)
    params = {n.name for n in cpu.graph.nodes if n.op == "param"}
    assert set(a.values) == {n.name for n in cpu.graph.nodes if n.op != "input"} - params
    assert len(a.values) > 15 and (cell != "peephole_lstm" or "layer0.w_ci" in params)
    _assert_same(*(step.forward(x, y) for step in (cpu, gpu)))  # carried on from the same states


def test_an_evaluation_only_step_has_no_backward_and_refuses_to_train():
    """rg.compile(..., backward=False) (what rnngraph.lm.Evaluator makes): no backward kernel is
    generated (so none is compiled on a GPU), its forward equals the training step's, and train
    raises, naming the option."""
    net = rg.stacked(rg.cells.lstm, 1, 4, vocab=5, embed=3)
    full, ev = (rg.compile(net, window=2, streams=2, device="cuda", seed=1, backward=b) for b in (True, False))
    assert "_bwd_" in full.kernels and "_bwd_" not in ev.kernels and ev._cuda.program.backward_plan == []
    assert full.schedule.backward and ev.schedule.backward == ()  # what it compiles: its dump shows no backward
    x = np.array([[1, 2], [3, 4]])
    assert ev.forward(x, x).loss == pytest.approx(full.forward(x, x).loss, abs=1e-6)
    with pytest.raises(RuntimeError, match="backward=False"):
        ev.train(x, x)


def test_backward_must_be_a_bool():
    net = rg.stacked(rg.cells.lstm, 1, 4, vocab=5, embed=3)
    with pytest.raises(TypeError, match="backward must be True or False, got 'False'"):
        rg.compile(net, window=2, streams=2, device="cpu", backward="False")
