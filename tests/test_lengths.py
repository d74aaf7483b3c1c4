"""Variable-length sequences (rnngraph/lengths.py): CompiledRNN.forward(..., lengths=) against
each stream run alone over its own length (float64), the masked graph's loop kernels in the
simulator, and bad lengths."""
import os
from types import SimpleNamespace
import warnings

import numpy as np
import pytest

import rnngraph as rg
from loop_sim import check_loops
from backends import assert_backward_close, assert_lengths_run_close


def _net(cells=(rg.cells.lstm, rg.cells.gru), hidden=3, input_size=2):
    return rg.Sequential(*[c(hidden=hidden) for c in cells], input_size=input_size)


def _h0(net, S, rng):
    return {s.name: rng.standard_normal((s.depth, S, net.graph.by_name[s.node].size)) for s in net.graph.states}


def test_each_stream_equals_itself_run_alone_over_its_length():
    """Outputs, final states and every gradient (seeded through y and h_T) of a window with
    lengths [5, 0, 3, 1] equal those of each stream run alone for its length; past its length
    a stream outputs zeros and gets no input gradient, and a stream of length 0 returns h0 as
    h_T and dh_T as dh0."""
    net = _net()
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64")
    rng = np.random.default_rng(0)
    T, lengths = 5, [5, 0, 3, 1]
    S = len(lengths)
    x, h0 = rng.standard_normal((T, S, 2)), _h0(net, S, rng)
    y, h_T = rnn.forward(x, h0, lengths=lengths)
    dy = rng.standard_normal(y.shape)
    dh_T = {k: rng.standard_normal(v.shape) for k, v in h_T.items()}
    dx, dh0, dp = rnn.backward(dy, dh_T)
    dp_sum = {k: np.zeros_like(v) for k, v in dp.items()}
    for s, L in enumerate(lengths):
        col = slice(s, s + 1)
        assert np.all(y[L:, s] == 0) and np.all(dx[L:, s] == 0)
        if L == 0:
            for k in h_T:
                np.testing.assert_array_equal(h_T[k][:, s], h0[k][:, s])
                np.testing.assert_array_equal(dh0[k][:, s], dh_T[k][:, s])
            continue
        y1, h1 = rnn.forward(x[:L, col], {k: v[:, col] for k, v in h0.items()})
        dx1, dh1, dp1 = rnn.backward(dy[:L, col], {k: v[:, col] for k, v in dh_T.items()})
        np.testing.assert_allclose(y[:L, col], y1, rtol=0, atol=1e-13)
        np.testing.assert_allclose(dx[:L, col], dx1, rtol=0, atol=1e-13)
        for k in h_T:
            np.testing.assert_allclose(h_T[k][:, col], h1[k], rtol=0, atol=1e-13, err_msg=k)
            np.testing.assert_allclose(dh0[k][:, col], dh1[k], rtol=0, atol=1e-13, err_msg=k)
        for k in dp1:
            dp_sum[k] += dp1[k]
    for k in dp:
        np.testing.assert_allclose(dp[k], dp_sum[k], rtol=0, atol=1e-12, err_msg=k)
    assert np.abs(dp["layer1.U.weight"]).max() > 1e-3


def test_full_lengths_equal_no_lengths_and_plans_are_kept_apart():
    net = _net((rg.cells.lstm,))
    rnn = rg.compile_rnn(net, device="cpu", dtype="float64")
    x = np.random.default_rng(1).standard_normal((4, 2, 2))
    y, h_T = rnn.forward(x, lengths=np.array([4, 4]))
    y0, h0_T = rnn.forward(x)
    np.testing.assert_array_equal(y, y0)
    assert rnn.cached_plans == [(4, 2, True)]  # no step padded: the plain graph's plan
    y1, _ = rnn.forward(x, lengths=[4, 3])
    np.testing.assert_array_equal(y1[:, 0], y0[:, 0])
    assert rnn.cached_plans == [(4, 2, True), (4, 2, True, "lengths")]


def test_garbage_in_padded_steps_reaches_nothing():
    """NaN and inf in the padded steps of x change no output, state or gradient (select, not a
    multiplication by the mask)."""
    rnn = rg.compile_rnn(_net(), device="cpu", dtype="float64")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 2, 2))
    bad = x.copy()
    bad[2:, 0], bad[:, 1] = np.nan, np.inf
    lengths = [2, 0]
    y, h = rnn.forward(x, lengths=lengths)
    with warnings.catch_warnings():  # NumPy warns of the padded steps' NaN arithmetic
        warnings.simplefilter("ignore", RuntimeWarning)
        yb, hb = rnn.forward(bad, lengths=lengths)
    np.testing.assert_array_equal(yb, y)
    for k in h:
        np.testing.assert_array_equal(hb[k], h[k])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dx, _, dp = rnn.backward(np.ones_like(y))
    assert np.isfinite(dx).all() and all(np.isfinite(v).all() for v in dp.values())


@pytest.mark.parametrize("lengths, error, match", [
    ([4, 5], ValueError, r"lengths\[1\] = 5 is outside \[0, T = 4\]"),
    ([-1, 2], ValueError, r"lengths\[0\] = -1"),
    ([4], rg.ShapeError, r"shape \(2,\)"),
    ([[4, 4]], rg.ShapeError, r"one length per stream"),
    ([1.0, 2.0], TypeError, "integer lengths"),
])
def test_bad_lengths_are_named(lengths, error, match):
    rnn = rg.compile_rnn(_net((rg.cells.lstm,)), device="cpu")
    with pytest.raises(error, match=match):
        rnn.forward(np.zeros((4, 2, 2), np.float32), lengths=lengths)


def test_a_state_read_two_steps_back_cannot_take_lengths():
    rnn = rg.compile_rnn(rg.Sequential(rg.cells.skip_rnn(hidden=3), input_size=2), device="cpu")
    with pytest.raises(rg.GraphError, match="read 2 steps back"):
        rnn.forward(np.zeros((3, 1, 2), np.float32), lengths=[2])


def test_masked_graph_holds_each_state_and_masks_each_output():
    g = _net().masked_graph
    sel = {n.name: [r.node for r in n.args] for n in g.nodes if n.op == "select"}
    assert sel["layer0.c_held"] == ["lengths.mask3", "layer0.c_next", "layer0.c_held"]
    # the output is masked from the held state, so h_next has one reader and the loop stores h_held alone
    assert sel["layer1.y_masked"] == ["lengths.mask3", "layer1.h_held", "lengths.mask3"]
    assert [n.name for n in g.nodes if "layer1.h_next" in [r.node for r in n.args]] == ["layer1.h_held"]
    assert [s.node for s in g.states] == ["layer0.h_held", "layer0.c_held", "layer1.h_held"]
    assert [n.name for n in g.inputs] == ["x", "lengths.mask3"] and not g.differentiable("lengths.mask3")
    assert g.outputs == ("layer1.y_masked",) and {p.name for p in g.params} == {p.name for p in _net().graph.params}


SIM = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test (the GPU tier: "
                         "tests/test_gpu_torch_layer.py)")


@SIM
@pytest.mark.parametrize("plan", ["scc-sequential", "wavefront"])
def test_cuda_backend_with_lengths_equals_the_numpy_backend(plan):
    """The masked graph's generated program (persistent loops of both plans) against the NumPy
    backend: outputs, final states and all gradients, with h0 and dh_T seeds."""
    net = _net((rg.cells.lstm, rg.cells.lstm), hidden=2)
    cpu = rg.compile_rnn(net, device="cpu")
    gpu = rg.compile_rnn(net, device="cuda", plan=plan, parameters=cpu.parameters)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)
    h0 = {k: v.astype(np.float32) for k, v in _h0(net, 2, rng).items()}
    (y1, h1), (y2, h2) = cpu.forward(x, h0, lengths=[1, 3]), gpu.forward(x, h0, lengths=[1, 3])
    np.testing.assert_allclose(y2, y1, atol=2e-6)
    for k in h1:
        np.testing.assert_allclose(h2[k], h1[k], atol=2e-6, err_msg=k)
    dy = rng.standard_normal(y1.shape).astype(np.float32)
    dh = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in h1.items()}
    assert_backward_close(cpu.backward(dy, dh), gpu.backward(dy, dh), atol=2e-5)
    assert gpu.cached_plans == [(3, 2, True, "lengths")]


@SIM
@pytest.mark.parametrize("plan, S", [("scc-sequential", 1), ("wavefront", 2)])
def test_masked_loop_kernels_alone_equal_the_numpy_backend(plan, S):
    """The masked graph's loop kernels, launched alone against the NumPy backend
    (tests/loop_sim.py) with random masks: select's m > 0 taken both ways at every element, in
    any order over time (not only the prefix a length gives)."""
    net = _net((rg.cells.lstm, rg.cells.lstm), hidden=2)
    cpu = rg.compile_rnn(net, device="cpu")
    gpu = rg.compile_rnn(net, device="cuda", plan=plan, parameters=cpu.parameters)
    dp = gpu._plan(2, S, backward=True, masked=True)
    dp.buf.refresh_transposed(dp.stream)  # what a forward call does first: the backward loops read them
    step = SimpleNamespace(schedule=dp.schedule, _cuda=SimpleNamespace(program=dp.program), parameters=cpu.parameters)
    result = check_loops(step)
    assert any(name.startswith("d.layer0") for name in result[next(k for k in result if "backward" in k)])


@SIM
@pytest.mark.parametrize("cells, plan, cols, lengths, skip", [
    ((rg.cells.lstm,), "scc-sequential", 1, [1, 3, 2], 1),
    ((rg.cells.lstm,), "scc-sequential", 1, [1, 3, 2], 0),
    ((rg.cells.lstm, rg.cells.lstm), "wavefront", 2, [2, 5, 0, 3, 1], 1),
    ((rg.cells.gru, rg.cells.layernorm_lstm), "scc-sequential", 2, [4, 1, 5, 2, 0], 1),
])
def test_loop_gemm_items_skip_the_steps_where_all_their_streams_are_padded(cells, plan, cols, lengths, skip):
    """LoopTuning ``skip``: the items (``cols`` streams each) take the streams longest first
    (lengths.stream_order) and skip a step where all their streams are padded: an in-loop
    product's buffer holds zeros there (skip=1: zeroed before the loop, not written), or the
    product plus bias (skip=0); outputs, final states and all gradients equal the NumPy
    backend's either way (one and two layers, both plans, GRU and layer norm too)."""
    T, S = max(lengths), len(lengths)
    net = _net(cells, hidden=2)
    cpu = rg.compile_rnn(net, device="cpu")
    tuning = rg.LoopTuning.defaults(S).replace(cols=cols, skip=skip)
    gpu = rg.compile_rnn(net, device="cuda", plan=plan, parameters=cpu.parameters, tuning=tuning)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, S, 2)).astype(np.float32)
    h0 = {k: v.astype(np.float32) for k, v in _h0(net, S, rng).items()}
    assert_lengths_run_close(cpu, gpu, x, h0, lengths, rng)
    dp = gpu._plan(T, S, backward=True, masked=True)
    order = np.argsort(-np.asarray(lengths), kind="stable")
    assert dp.buf.order.copy_to_host().tolist() == order.tolist()
    assert dp.buf.valid_streams.copy_to_host().tolist() == [sum(n > t for n in lengths) for t in range(T)]
    gemms = [k.ops[0] for loop in dp.schedule.forward if getattr(loop, "mode", "") == "persistent"
             for k in loop.kernels if k.kind == "gemm"]
    assert gemms
    # (t, s) where the item holding stream s has no stream within its length
    skipped = [(t, s) for t in range(T) for p, s in enumerate(order)
               if all(lengths[q] <= t for q in order[p // cols * cols:(p // cols + 1) * cols])]
    assert skipped
    for node in gemms:
        stored = dp.buf.V[node].copy_to_host()[dp.buf.names.depth(node):]  # (T, S, size)
        at_skipped = np.array([stored[t, s] for t, s in skipped])
        if skip:
            np.testing.assert_array_equal(at_skipped, 0.0, err_msg=node)
        else:
            assert np.abs(at_skipped).min() > 0, node
