"""passes/twin_biases.py: which biased linear nodes share their output gradient, so that one column
sum fills both bias gradients (codegen/library_launches.py), and whose gradients the backward writes
whole without reading them (``written_once``: not zeroed by the step); the GPU step's gradients with
both are checked in the simulator against the NumPy backend (here over two steps, and by
tests/test_codegen_sim.py)."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.passes.twin_biases import scheduled_twins, twin_biases, written_once


def test_each_lstm_layer_sums_its_gate_gradient_once_for_both_biases():
    g = rg.stacked(rg.cells.lstm, 2, 4, vocab=7).graph
    assert twin_biases(g) == {"layer0.W": "layer0.U", "layer1.W": "layer1.U"}
    assert twin_biases(rg.stacked(rg.cells.peephole_lstm, 1, 4, input_size=3).graph) == {"layer0.W": "layer0.U"}


def test_the_launches_take_the_twins_the_schedule_lowered():
    """The code generator reads the twins from the schedule's weight-gradient steps (what the dump
    shows), not from the graph again: a schedule whose steps each sum their own biases launches so."""
    import dataclasses
    from rnngraph.passes import schedule
    from rnngraph.schedule import Kernel
    g = rg.stacked(rg.cells.lstm, 2, 8, vocab=5, embed=3).graph
    s = schedule(g, 4, 2, "float32", None)
    assert scheduled_twins(g, s.backward) == twin_biases(g) == {"layer0.W": "layer0.U", "layer1.W": "layer1.U"}

    def own(k):  # each weight-gradient step writes its own parameters' gradients only
        return dataclasses.replace(k, writes=tuple(f"d.{q}" for q in k.params)) if k.kind == "wgrad" else k
    steps = [dataclasses.replace(st, kernels=tuple(own(k) for k in st.kernels)) if hasattr(st, "kernels") else
             own(st) if isinstance(st, Kernel) else st for st in s.backward]
    assert scheduled_twins(g, steps) == {}


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_a_program_launches_the_schedules_twins(monkeypatch):
    """The generated program's launchers take the pairs from its schedule: lowered without twins,
    each weight-gradient launcher sums its own bias (it recomputed them from the graph)."""
    import importlib
    from rnngraph.codegen.program import CudaProgram
    from rnngraph.passes import schedule
    lower = importlib.import_module("rnngraph.passes.lower")  # the module (the package binds its function)
    g = rg.stacked(rg.cells.lstm, 1, 4, input_size=3).graph
    assert CudaProgram(schedule(g, 3, 2), replay=False, compile_workers=1).lib.twins == {"layer0.W": "layer0.U"}
    monkeypatch.setattr(lower, "twin_biases", lambda graph: {})
    assert CudaProgram(schedule(g, 3, 2), replay=False, compile_workers=1).lib.twins == {}


def test_cells_whose_products_meet_elsewhere_have_no_twins():
    # the GRU's products are split and meet in three adds, one of them through r * (U_n h)
    assert twin_biases(rg.stacked(rg.cells.gru, 1, 4, input_size=3).graph) == {}
    # the layer-norm LSTM normalises each product before the add
    assert twin_biases(rg.stacked(rg.cells.layernorm_lstm, 1, 4, input_size=3).graph) == {}


def test_a_product_read_beyond_the_add_or_without_a_bias_is_no_twin():
    @rg.cell
    def also_read(x, h: rg.State, *, hidden: int):
        wx = rg.linear(x, hidden, name="W")
        h_next = rg.tanh(wx + rg.linear(h, hidden, name="U")) * rg.sigmoid(wx)
        return h_next, {"h": h_next}

    @rg.cell
    def unbiased(x, h: rg.State, *, hidden: int):
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U"))
        return h_next, {"h": h_next}

    @rg.cell  # nn.RNN's tanh cell, with its two biases
    def elman(x, h: rg.State, *, hidden: int):
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next}

    @rg.cell
    def product_state(x, h: rg.State, c: rg.State, *, hidden: int):
        c_next = rg.linear(x, hidden, name="W")  # a state's node: the layer seeds its gradient with d.c_T
        h_next = rg.tanh(c_next + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next, "c": c_next}

    assert twin_biases(rg.stacked(also_read, 1, 4, input_size=3).graph) == {}
    with pytest.warns(rg.UnusedWarning):
        assert twin_biases(rg.stacked(product_state, 1, 4, input_size=3).graph) == {}
    assert twin_biases(rg.stacked(unbiased, 1, 4, input_size=3).graph) == {}
    assert twin_biases(rg.stacked(elman, 1, 4, input_size=3).graph) == {"layer0.W": "layer0.U"}


def test_written_once_leaves_out_flagged_gradients_not_graphs_with_lengths():
    g = rg.stacked(rg.cells.lstm, 1, 4, input_size=3).graph
    assert written_once(g) == {"layer0.W", "layer0.U"}
    assert written_once(g, {"layer0.U"}) == {"layer0.W"}  # S = 1: d.U handed between blocks as flagged words
    masked = rg.stacked(rg.cells.lstm, 1, 4, input_size=3).masked_graph  # variable lengths: padded steps write zeros
    assert written_once(masked) == {"layer0.W", "layer0.U"}


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
@pytest.mark.parametrize("layers, streams, unzeroed", [
    (1, 1, {"layer0.W"}),  # one layer at S = 1: d.U handed between blocks as flagged words, zeroed as before
    (2, 1, {"layer0.W", "layer0.U", "layer1.W", "layer1.U"}),  # the wavefront: no flagged words
    (2, 2, {"layer0.W", "layer0.U", "layer1.W", "layer1.U"})])
def test_unzeroed_gate_gradients_give_the_numpy_backends_steps(layers, streams, unzeroed):
    """The gate gradients d.W and d.U are stored whole by the backward without a read and left out
    of the step's zeroing (codegen/buffers.py ``zeroed_grads``): a second training call must not
    see the first one's values (a backward that still added into them would: the parameters after
    the second SGD step differ)."""
    net = rg.stacked(rg.cells.lstm, layers, 4, vocab=5, embed=3)
    # plain SGD without clipping: a wrong gradient moves the parameters by a wrong amount
    cpu, gpu = (rg.compile(net, window=2, streams=streams, device=d, optimizer=rg.SGD(lr=0.5), clip_norm=None,
                           seed=1) for d in ("cpu", "cuda"))
    buf = gpu._cuda.buf
    assert buf.zeroed_grads.size == buf.grad_arena.size - sum(buf.G[m].size for m in unzeroed)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x, y = rng.integers(0, 5, (2, streams)), rng.integers(0, 5, (2, streams))
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
        for name, want in cpu.parameters.items():
            np.testing.assert_allclose(gpu.parameters[name], want, atol=1e-5, err_msg=name)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
@pytest.mark.filterwarnings("ignore::rnngraph.errors.UnusedWarning")  # the state c is never read
def test_a_layer_seeding_a_product_state_gets_the_numpy_gradients():
    """Regression: a state whose node is a biased product read by one add (``c_next = W x``, the
    state unread) was taken for a twin; the layer's final-state gradient d.c_T seeded into d.W was
    then overwritten by the backward's store, and its history rows left unzeroed (dh0 7e37)."""
    @rg.cell
    def product_state(x, h: rg.State, c: rg.State, *, hidden: int):
        c_next = rg.linear(x, hidden, name="W")
        h_next = rg.tanh(c_next + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next, "c": c_next}

    net = rg.stacked(product_state, 1, 4, input_size=3)
    rng = np.random.default_rng(0)
    x, dy = rng.normal(size=(3, 2, 3)).astype(np.float32), rng.normal(size=(3, 2, 4)).astype(np.float32)
    dh_T = {"layer0.c": rng.normal(size=(1, 2, 4)).astype(np.float32)}
    results = []
    for device in ("cpu", "cuda"):
        rnn = rg.compile_rnn(net, device=device, seed=0)
        for _ in range(2):  # the second call sees what the first left in the buffers
            rnn.forward(x)
            dx, dh0, dparams = rnn.backward(dy, dh_T)
        results.append((np.asarray(dx), {k: np.asarray(v) for k, v in dh0.items()},
                        {k: np.asarray(v) for k, v in dparams.items()}))
    (cx, ch, cp), (gx, gh, gp) = results
    np.testing.assert_allclose(gx, cx, atol=1e-5)
    for k in ch:
        np.testing.assert_allclose(gh[k], ch[k], atol=1e-5, err_msg=k)
    for k in cp:
        np.testing.assert_allclose(gp[k], cp[k], atol=1e-5, err_msg=k)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_buffers_that_skip_zeroing_a_flagged_gradient_are_refused():
    """A program given another's Buffers (codegen/program.py ``buffers=``) must zero what its backward
    adds into: at S = 1 with flagged words d.U is accumulated, so buffers made without flags (d.U
    unzeroed) would add the last step's values."""
    from rnngraph.codegen.program import CudaProgram
    from rnngraph.passes import schedule

    g = rg.stacked(rg.cells.lstm, 1, 4, input_size=3).graph
    plain = schedule(g, 2, 1, options=rg.ScheduleOptions.defaults(1).replace(flagged_exchange=False))
    flagged = schedule(g, 2, 1)
    made = CudaProgram(plain, replay=False, compile_workers=1)
    assert made.buf.unzeroed == {"layer0.W", "layer0.U"}
    with pytest.raises(ValueError, match="gradients of layer0.U are not zeroed"):
        CudaProgram(flagged, replay=False, buffers=made.buf, compile_workers=1)
    CudaProgram(flagged, replay=False, buffers=made.buf, backward=False, compile_workers=1)  # no backward: fine
