"""The CUDA backend's buffers hold the values and gradients of the schedule's value_nodes and
gradient_nodes alone (rnngraph/schedule.py, codegen/buffers.py). Regressions, each a custom cell
whose kernels hand a value or gradient on through memory that no kernel's reads or writes list:
a layer norm fused with pointwise ops outside any loop (its reduction kernel runs as separate
launches), and a node nobody uses (its library GEMM or layer norm still runs). Each trains one
SGD step in the simulator, equal to the NumPy backend, and its memory estimate equals what the
buffers hold."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph import memory

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator tests")
V, T, S = 7, 2, 2


@rg.cell
def ln_sum_input(x, h: rg.State, *, hidden: int):
    """LN(W1 x + W2 x), hoisted out of the loop: a pointwise add, then a layer norm."""
    xin = rg.layer_norm(rg.linear(x, hidden, name="W1") + rg.linear(x, hidden, bias=False, name="W2"), name="ln_x")
    h_next = rg.tanh(xin + rg.linear(h, hidden, bias=False, name="U"))
    return h_next, {"h": h_next}


@rg.cell
def ln_then_sigmoid(x, h: rg.State, *, hidden: int):
    """sigmoid(LN(W x)), hoisted: a layer norm, then a pointwise op (its gradient through memory)."""
    a = rg.sigmoid(rg.layer_norm(rg.linear(x, hidden, name="W"), name="ln_x"))
    h_next = a * rg.tanh(rg.linear(h, hidden, name="U"))
    return h_next, {"h": h_next}


@rg.cell
def dead_linear(x, h: rg.State, *, hidden: int):
    rg.linear(x, hidden, name="P")  # computed, never used
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U"))
    return h_next, {"h": h_next}


@rg.cell
def dead_layer_norm(x, h: rg.State, *, hidden: int):
    w = rg.linear(x, hidden, name="W")
    rg.layer_norm(w, name="lnw")  # computed, never used
    h_next = rg.tanh(w + rg.linear(h, hidden, bias=False, name="U"))
    return h_next, {"h": h_next}


@pytest.mark.filterwarnings("ignore")  # (the unused nodes warn)
@pytest.mark.parametrize("cell", [ln_sum_input, ln_then_sigmoid, dead_linear, dead_layer_norm],
                         ids=lambda c: c.__name__)
def test_values_and_gradients_handed_on_through_memory_have_buffers(cell):
    net = rg.stacked(cell, 1, 4, vocab=V, embed=3)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    steps = {dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.SGD(lr=0.1), seed=1)
             for dev in ("cpu", "cuda")}
    losses = {dev: [float(step.train(x, y)) for _ in range(2)] for dev, step in steps.items()}
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-5)
    assert losses["cpu"][1] != losses["cpu"][0]  # the first step's gradients reached the parameters
    buf, s = steps["cuda"]._cuda.buf, steps["cuda"].schedule
    held = sum(a.nbytes for a in buf.V.values()) + buf.grad_arena.nbytes
    assert memory.estimate(s, "cuda").gpu.activations == held


@rg.cell
def normed_parameter(x, h: rg.State, *, hidden: int):
    b = rg.layer_norm(rg.param("vb", hidden), name="lnb")  # a layer norm of a parameter vector itself
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U") + b)
    return h_next, {"h": h_next}


@rg.cell
def projected_parameter(x, h: rg.State, *, hidden: int):
    q = rg.linear(rg.param("q", 3), hidden, name="Q")  # a product of a parameter vector (a learned query)
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, bias=False, name="U") * q)
    return h_next, {"h": h_next}


@pytest.mark.parametrize("cell", [normed_parameter, projected_parameter], ids=lambda c: c.__name__)
def test_a_parameter_vector_read_whole_trains_like_the_numpy_backend(cell):
    """Regression: the CUDA backend never filled a param() node's value buffer, so a layer norm
    of the parameter itself read garbage (a NaN loss; later refused with a KeyError naming the
    node). rg.layer_norm and rg.linear now read an rg.param through an identity node
    (rnngraph/trace/functions.py), whose kernel writes the broadcast vector: two SGD steps equal
    the NumPy backend's, and the parameter's gradient reaches it."""
    net = rg.stacked(cell, 1, 4, vocab=V, embed=3)
    assert any(n.op == "identity" and n.args[0].node.endswith((".vb", ".q")) for n in net.graph.nodes)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    steps = {dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.SGD(lr=0.1), seed=1)
             for dev in ("cpu", "cuda")}
    losses = {dev: [float(step.train(x, y)) for _ in range(2)] for dev, step in steps.items()}
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-5)
    name = next(p for p in steps["cpu"].parameters if p.endswith((".vb", ".q")))
    start = rg.compile(net, window=T, streams=S, device="cpu", seed=1).parameters[name]
    moved = {dev: step.parameters[name] for dev, step in steps.items()}
    assert not np.allclose(moved["cpu"], start)  # its gradient reached the parameter
    np.testing.assert_allclose(moved["cuda"], moved["cpu"], rtol=1e-5, atol=1e-6)
