"""rg.compile_rnn: a loss-free compiled network with forward(x, h0) and backward(dy, dh_T).

The NumPy backend against rg.Reference (the executable specification) in float64, the plan
cache over (T, S), bad input, and the CUDA backend in the simulator against the NumPy backend.
"""
import os

import numpy as np
import pytest

import rnngraph as rg
from backends import assert_backward_close


def _net(cell=rg.cells.lstm, layers=2, hidden=3, input_size=2, **kw):
    return rg.Sequential(*[cell(hidden=hidden) for _ in range(layers)], input_size=input_size, **kw)


def _data(net, T, S, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, S, net.graph.by_name["x"].size))
    h0 = {s.name: rng.standard_normal((s.depth, S, net.graph.by_name[s.node].size)) for s in net.graph.states}
    return x, h0, rng


def test_forward_backward_equal_the_reference_in_float64():
    net = _net()
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64")
    x, h0, rng = _data(net, 5, 3)
    y, h_T = rnn.forward(x, h0)
    ref = rg.Reference(net.graph, "float64")
    fwd = ref.forward(rnn.parameters, {"x": x}, h0)
    out = net.graph.outputs[0]
    np.testing.assert_allclose(y, fwd.values[out], rtol=0, atol=1e-14)
    for name in h_T:
        np.testing.assert_allclose(h_T[name], fwd.final_states[name], rtol=0, atol=1e-14)
    dy = rng.standard_normal(y.shape)
    dh_T = {"layer1.c": rng.standard_normal(h_T["layer1.c"].shape)}  # a subset: the rest is zero
    dx, dh0, dparams = rnn.backward(dy, dh_T)
    g = ref.backward(fwd, {out: dy}, dh_T)
    np.testing.assert_allclose(dx, g.inputs["x"], rtol=0, atol=1e-13)
    for name in h0:
        np.testing.assert_allclose(dh0[name], g.states[name], rtol=0, atol=1e-13)
    for name in dparams:
        np.testing.assert_allclose(dparams[name], g.params[name], rtol=0, atol=1e-13)
    assert np.abs(dparams["layer0.U.weight"]).max() > 1e-3  # the gradients are not trivially zero


def test_plans_per_shape_are_cached_lru_and_backward_reads_its_own_forward():
    rnn = rg.compile_rnn(_net(), device="cpu", dtype="float64", cache_size=2)
    x1, _, rng = _data(rnn.net, 4, 2)
    x2 = rng.standard_normal((1, 5, 2))
    y1, _ = rnn.forward(x1)
    first = rnn.last
    y2, _ = rnn.forward(x2)
    second = rnn.last
    assert rnn.cached_plans == [(4, 2, True), (1, 5, True)]
    rnn.forward(rng.standard_normal((3, 1, 2)), train=False)
    assert rnn.cached_plans == [(1, 5, True), (3, 1, False)]  # (4, 2) left the cache; inference: no backward
    # the NumPy backend keeps each forward's activations with it: the older one still backpropagates
    dx1, _, _ = rnn.backward(np.ones_like(y1), pending=first)
    fresh = rg.compile_rnn(rnn.net, device="cpu", dtype="float64")
    fresh.forward(x1)
    np.testing.assert_allclose(dx1, fresh.backward(np.ones_like(y1))[0], atol=1e-14)
    a = rnn.backward(np.ones_like(y2), pending=second)  # twice for one forward (retain_graph): the same
    b = rnn.backward(np.ones_like(y2), pending=second)
    np.testing.assert_array_equal(a[0], b[0])


def test_inference_forward_keeps_nothing_and_has_no_backward():
    rnn = rg.compile_rnn(_net(), device="cpu")
    x, _, _ = _data(rnn.net, 3, 2)
    rnn.forward(x, train=False)
    assert rnn.last is None
    with pytest.raises(RuntimeError, match="forward\\(..., train=True\\) first"):
        rnn.backward(np.zeros((3, 2, 3)))


def _lstm_gates(x, h, c, hidden):
    zi, zf, zg, zo = rg.split(rg.linear(x, 4 * hidden, name="W") + rg.linear(h, 4 * hidden, name="U"), 4)
    c_next = rg.sigmoid(zf) * c + rg.sigmoid(zi) * rg.tanh(zg)
    return rg.sigmoid(zo) * rg.tanh(c_next), c_next


@rg.cell
def _lstm_returning_its_state(x, h: rg.State, c: rg.State, *, hidden: int):
    h_next, c_next = _lstm_gates(x, h, c, hidden)
    return h, {"h": h_next, "c": c_next}  # the output is the state h as read: h at t-1


@rg.cell
def _lstm_returning_a_copy(x, h: rg.State, c: rg.State, *, hidden: int):
    h_next, c_next = _lstm_gates(x, h, c, hidden)
    return h * 1.0, {"h": h_next, "c": c_next}  # the same output, as a node of its own


def test_a_cell_returning_one_of_its_states_equals_one_returning_a_copy():
    """A cell whose output is its state argument (no node: the next value read one step back)
    compiles as a layer (it failed: output 'layer0.__state__' is not a node) and computes what
    the same cell computes with an explicit copy of it, forward and backward."""
    nets = [_net(cell, layers=2) for cell in (_lstm_returning_its_state, _lstm_returning_a_copy)]
    rnns = [rg.compile_rnn(net, device="cpu", dtype="float64", seed=3) for net in nets]
    x, h0, rng = _data(nets[0], 4, 2, seed=1)
    (y, h_T), (y_copy, h_T_copy) = (rnn.forward(x, h0) for rnn in rnns)
    np.testing.assert_array_equal(y[0], h0["layer1.h"][0])  # y[t] is layer 1's h at t-1
    np.testing.assert_allclose(y, y_copy, rtol=0, atol=1e-15)
    for name in h_T:
        np.testing.assert_allclose(h_T[name], h_T_copy[name], rtol=0, atol=1e-15)
    dy, dh_T = rng.standard_normal(y.shape), {"layer1.h": rng.standard_normal(h_T["layer1.h"].shape)}
    (dx, dh0, dparams), (dx_copy, dh0_copy, dparams_copy) = (rnn.backward(dy, dh_T) for rnn in rnns)
    np.testing.assert_allclose(dx, dx_copy, rtol=0, atol=1e-14)
    for name in dh0:
        np.testing.assert_allclose(dh0[name], dh0_copy[name], rtol=0, atol=1e-14)
    for name in dparams:
        np.testing.assert_allclose(dparams[name], dparams_copy[name], rtol=0, atol=1e-14)
    assert np.abs(dparams["layer0.U.weight"]).max() > 1e-3 and np.abs(dx).max() > 1e-3


@rg.cell
def _elman_returning_its_state_beside_a_y(x, h: rg.State, *, hidden: int):
    y = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
    return h, {"h": y}


def test_the_copy_of_a_returned_state_is_named_after_y():
    """README's name of the copy node: ``layer0.y``, or ``layer0.y_1`` where the cell's own
    local ``y`` has the name."""
    graphs = [rg.Sequential(cell(hidden=3), input_size=2).graph
              for cell in (_lstm_returning_its_state, _elman_returning_its_state_beside_a_y)]
    assert [[n.name for n in g.nodes if n.op == "identity"] for g in graphs] == [["layer0.y"], ["layer0.y_1"]]
    assert [g.outputs for g in graphs] == [("layer0.y",), ("layer0.y_1",)]


def test_bad_input_is_named():
    rnn = rg.compile_rnn(_net(), device="cpu")
    x, h0, _ = _data(rnn.net, 3, 2)
    with pytest.raises(rg.ShapeError, match=r"x: expected shape \(T, S, 2\)"):
        rnn.forward(x[..., :1])
    with pytest.raises(rg.ShapeError, match="T >= 1"):
        rnn.forward(x[:0])
    with pytest.raises(rg.ShapeError, match=r"input 'x': expected real numbers, got complex128"):
        rnn.forward(x.astype(np.complex128))  # real numbers of any dtype are computed in the network's
    np.testing.assert_array_equal(rnn.forward(x.astype(np.float64))[0], rnn.forward(x.astype(np.float32))[0])
    ones = np.ones((3, 2, 2))
    np.testing.assert_array_equal(rnn.forward(ones.astype(np.int64))[0], rnn.forward(ones)[0])
    with pytest.raises(rg.GraphError, match="every state or none"):
        rnn.forward(x, {"layer0.h": h0["layer0.h"]})
    with pytest.raises(rg.GraphError, match="no state"):
        rnn.forward(x, {**h0, "layer9.h": h0["layer0.h"]})
    with pytest.raises(rg.ShapeError, match=r"h0\['layer0.c'\]: expected shape \(1, 2, 3\)"):
        rnn.forward(x, {**h0, "layer0.c": np.zeros((1, 3, 3))})
    rnn.forward(x)
    with pytest.raises(rg.ShapeError, match="dy: expected shape"):
        rnn.backward(np.zeros((3, 2, 4)))
    with pytest.raises(rg.ShapeError, match="dh_T"):
        rnn.backward(np.zeros((3, 2, 3)), {"layer1.h": np.zeros((1, 2, 4))})
    with pytest.raises(rg.GraphError, match="loss head"):
        rg.compile_rnn(rg.Sequential(rg.Embedding(5, 3), rg.cells.lstm(hidden=3), rg.SoftmaxCrossEntropy(5)))
    with pytest.raises(ValueError, match="cache_size"):
        rg.compile_rnn(_net(), device="cpu", cache_size=0)


def test_parameters_given_as_arrays_are_used_in_place_on_the_cpu():
    net = _net(layers=1)
    params = rg.init_params(net.graph, 3, "float64")
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64", parameters=params)
    x, _, _ = _data(net, 2, 1)
    before, _ = rnn.forward(x, train=False)
    params["layer0.U.bias"] += 1.0  # the caller's array is the one the RNN reads
    after, _ = rnn.forward(x, train=False)
    assert np.abs(after - before).max() > 1e-3


def test_dropout_masks_are_fed_and_ones_at_inference():
    net = rg.Sequential(rg.cells.lstm(hidden=3), rg.Dropout(0.5), rg.cells.lstm(hidden=3), input_size=2)
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64")
    x, _, _ = _data(net, 3, 2)
    plain = rg.compile_rnn(rg.Sequential(rg.cells.lstm(hidden=3), rg.cells.lstm(hidden=3), input_size=2),
                           device="cpu", dtype="float64")
    plain.set_parameters(rnn.parameters)
    np.testing.assert_allclose(rnn.forward(x, train=False)[0], plain.forward(x, train=False)[0], atol=1e-15)
    zeros = {"drop0.mask": np.zeros((3, 2, 3))}
    y0, _ = rnn.forward(x, masks=zeros)  # layer 1 sees only zeros: its output is x-independent
    y0b, _ = rnn.forward(2 * x, masks=zeros)
    np.testing.assert_allclose(y0, y0b, atol=1e-15)
    assert np.abs(rnn.forward(2 * x, train=False)[0] - rnn.forward(x, train=False)[0]).max() > 1e-3
    with pytest.raises(rg.GraphError, match="dropout masks"):
        rnn.forward(x, masks={"other": zeros["drop0.mask"]})


CELLS_SIM = [(rg.cells.lstm, 2), (rg.cells.gru, 1), (rg.cells.layernorm_lstm, 1)]


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test (the GPU tier: "
                    "tests/test_gpu_torch_layer.py)")
@pytest.mark.parametrize("cell, layers", CELLS_SIM, ids=[c.__name__ for c, _ in CELLS_SIM])
def test_cuda_backend_in_the_simulator_equals_the_numpy_backend(cell, layers):
    net = _net(cell, layers)
    cpu, gpu = rg.compile_rnn(net, device="cpu"), rg.compile_rnn(net, device="cuda")
    gpu.set_parameters(cpu.parameters)
    rng = np.random.default_rng(0)
    for T, S in ((3, 2), (1, 2)):  # two plans; the second call of each shape reuses the first's
        x = rng.standard_normal((T, S, 2)).astype(np.float32)
        h0 = {s.name: rng.standard_normal((s.depth, S, 3)).astype(np.float32) for s in net.graph.states}
        (y1, s1), (y2, s2) = cpu.forward(x, h0), gpu.forward(x, h0)
        np.testing.assert_allclose(y2, y1, atol=2e-6)
        for k in s1:
            np.testing.assert_allclose(s2[k], s1[k], atol=2e-6, err_msg=k)
        dy = rng.standard_normal(y1.shape).astype(np.float32)
        dh = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in s1.items()}
        want = cpu.backward(dy, dh)
        assert_backward_close(want, gpu.backward(dy, dh), atol=2e-5)
        assert np.abs(want[2]["layer0.U.weight"]).max() > 1e-3
    assert gpu.cached_plans == [(3, 2, True), (1, 2, True)]


def test_token_ids_through_an_embedding_are_checked():
    net = rg.Sequential(rg.Embedding(10, 3), rg.cells.lstm(hidden=4))
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64")
    ids = np.random.default_rng(0).integers(0, 10, (5, 2))
    y, _ = rnn.forward(ids)
    dx, _, dparams = rnn.backward(np.ones_like(y))
    assert dx is None and np.abs(dparams["embed.weight"]).max() > 1e-3
    with pytest.raises(rg.ShapeError, match="token id 12 is outside"):
        rnn.forward(np.full((2, 1), 12))
    with pytest.raises(rg.ShapeError, match="must be integers"):
        rnn.forward(np.full((2, 1), 1.7))


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_cuda_backend_refuses_a_backward_whose_activations_an_inference_call_overwrote():
    net = _net(layers=1)
    gpu = rg.compile_rnn(net, device="cuda")
    x, _, rng = _data(net, 2, 2)
    y, _ = gpu.forward(x.astype(np.float32))
    pending = gpu.last
    gpu.forward(rng.standard_normal((2, 2, 2)).astype(np.float32), train=False)  # same (T, S)
    with pytest.raises(RuntimeError, match="overwritten by a later forward"):
        gpu.backward(np.ones_like(y), pending=pending)
    ids_rnn = rg.compile_rnn(rg.Sequential(rg.Embedding(10, 3), rg.cells.lstm(hidden=4)), device="cuda")
    with pytest.raises(rg.ShapeError, match="token id 12 is outside"):  # checked before the GPU gathers
        ids_rnn.forward(np.full((2, 1), 12))


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_program_is_the_cached_plans_generated_program_on_the_rnns_parameters():
    """What rnngraph/bench/ times: the plan's CudaProgram, not a second one of its own."""
    gpu = rg.compile_rnn(_net(layers=1), device="cuda")
    prog = gpu.program(2, 3)
    assert prog is gpu.program(2, 3) and gpu.cached_plans == [(2, 3, True)] and prog.has_backward
    assert all(prog.buf.P[name] is arr for name, arr in gpu.parameters.items())
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        gpu.program(0, 3)
    with pytest.raises(RuntimeError, match="a CPU RNN has no generated program"):
        rg.compile_rnn(_net(layers=1), device="cpu").program(2, 3)


def test_bad_options_and_parameters_are_named():
    with pytest.raises(ValueError, match="plan must be"):
        rg.compile_rnn(_net(), device="cpu", plan="fast")
    with pytest.raises(KeyError, match="no parameter 'W'"):
        rg.compile_rnn(_net(), device="cpu", parameters={"W": np.zeros(3)})
    rnn = rg.compile_rnn(_net(), device="cpu")
    with pytest.raises(ValueError, match=r"'layer0.W.bias': expected shape \(12,\), got \(3,\)"):
        rnn.set_parameters({"layer0.W.bias": [0.0] * 3})


@pytest.mark.parametrize("head", [rg.MSE(2), rg.SoftmaxCrossEntropy(5)])
def test_a_loss_head_is_refused_by_its_name(head):
    """Before: every head was named rg.SoftmaxCrossEntropy (an rg.MSE one too)."""
    net = rg.Sequential(rg.cells.lstm(hidden=4), head, input_size=3)
    with pytest.raises(rg.GraphError, match=rf"without a loss head; drop the rg.{type(head).__name__} \(or train"):
        rg.compile_rnn(net, device="cpu")
