"""TrainingStep with inputs of another (T, S) than it was compiled for: each shape is compiled
on first use and shares the parameters and optimizer state; states carry while S stays and
start from zero for a new S. The CUDA backend (simulator) gives the NumPy backend's results."""
import os

import numpy as np
import pytest

import rnngraph as rg

V = 5


def _step(device="cpu", T=4, S=2):
    net = rg.stacked(rg.cells.lstm, 1, 4, vocab=V, embed=3)
    return rg.compile(net, window=T, streams=S, device=device, optimizer=rg.Adam(lr=1e-2), seed=1)


def _ids(rng, T, S):
    return rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))


def _snapshot(step):
    """Copies of the parameters and the optimizer state."""
    return ({k: v.copy() for k, v in step.parameters.items()},
            {k: np.array(v) for k, v in step.optimizer.state_dict().items()})


def _like(T, S, snapshot, state=None):
    """A step compiled for (T, S) holding ``snapshot`` (and ``state``; zeros by default)."""
    s = _step(T=T, S=S)
    s.set_parameters(snapshot[0])
    s.optimizer.load_state_dict(snapshot[1])
    if state is not None:
        s.state = state
    return s


def test_a_shorter_window_carries_the_states_and_a_new_stream_count_starts_from_zero():
    rng = np.random.default_rng(0)
    a = _step()
    b1, b2, b3 = _ids(rng, 4, 2), _ids(rng, 3, 2), _ids(rng, 4, 3)
    a.train(*b1)
    snap, carried = _snapshot(a), a.state
    loss2 = a.train(*b2)  # a last partial window: (3, 2), states carried
    assert (a.window, a.streams) == (3, 2)
    ref = _like(3, 2, snap, carried)
    assert loss2 == pytest.approx(ref.train(*b2), abs=1e-6)
    for name, value in ref.parameters.items():
        np.testing.assert_allclose(a.parameters[name], value, atol=1e-6, err_msg=name)
    snap = _snapshot(a)
    loss3 = a.train(*b3)  # (4, 3): other streams, from zero states
    assert a.state["layer0.h"].shape == (1, 3, 4)
    assert loss3 == pytest.approx(_like(4, 3, snap).train(*b3), abs=1e-6)
    assert list(a._plans) == [(4, 2), (3, 2), (4, 3)]
    snap = _snapshot(a)
    loss4 = a.train(*b2)  # back to S = 2: from the states the (3, 2) call left
    assert loss4 == pytest.approx(_like(3, 2, snap, ref.state).train(*b2), abs=1e-6)


def test_a_call_with_bad_targets_changes_nothing():
    rng = np.random.default_rng(2)
    a = _step()
    a.train(*_ids(rng, 4, 2))
    before = a.state
    x, _ = _ids(rng, 3, 1)
    with pytest.raises(rg.ShapeError, match="targets"):
        a.train(x, np.zeros((4, 2), np.int64))  # targets of the old shape for inputs of a new one
    assert (a.window, a.streams) == (4, 2)
    for name, value in before.items():
        np.testing.assert_array_equal(a.state[name], value)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_cuda_backend_switches_shapes_like_the_numpy_backend():
    rng = np.random.default_rng(1)
    cpu, gpu = _step("cpu", T=2), _step("cuda", T=2)
    for T, S in ((2, 2), (1, 2), (2, 1), (2, 2)):
        x, y = _ids(rng, T, S)
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5), (T, S)
        for name, value in cpu.state.items():
            np.testing.assert_allclose(gpu.state[name], value, atol=1e-5, err_msg=f"{name} at {(T, S)}")
    for name, value in cpu.parameters.items():
        np.testing.assert_allclose(gpu.parameters[name], value, atol=1e-5, err_msg=name)


def test_assigning_states_checks_names_and_shapes():
    a = _step()
    good = {k: np.ones_like(v) for k, v in a.state.items()}
    with pytest.raises(rg.GraphError, match=r"missing: \['layer0.c'\]"):
        a.state = {"layer0.h": good["layer0.h"]}  # c would restart from zeros unnoticed
    with pytest.raises(rg.GraphError, match=r"unknown: \['layer9.h'\]"):
        a.state = {**good, "layer9.h": good["layer0.h"]}
    with pytest.raises(rg.ShapeError, match=r"step.state\['layer0.h'\]: expected shape \(1, 2, 4\)"):
        a.state = {**good, "layer0.h": np.ones((1, 3, 4))}
    assert all(np.all(v == 0) for v in a.state.values())  # unchanged by the refused assignments
    a.state = good
    assert all(np.all(v == 1) for v in a.state.values())


def test_reference_backward_refuses_seeds_of_another_shape_or_name():
    net = rg.Sequential(rg.cells.lstm(hidden=3), input_size=2)
    ref = rg.Reference(net.graph)
    fwd = ref.forward(rg.init_params(net.graph), {"x": np.ones((4, 2, 2))})
    out = net.graph.outputs[0]
    with pytest.raises(rg.ShapeError, match=r"d_outputs\['layer0.h_next'\]: expected shape \(4, 2, 3\)"):
        ref.backward(fwd, {out: np.ones((8, 3))})  # (T*S, n) was reshaped silently before
    with pytest.raises(rg.ShapeError, match=r"d_final_states\['layer0.c'\]"):
        ref.backward(fwd, d_final_states={"layer0.c": np.ones((2, 3))})  # was broadcast before
    with pytest.raises(rg.GraphError, match=r"no state\(s\) \['c'\]"):
        ref.backward(fwd, d_final_states={"c": np.ones((1, 2, 3))})  # was ignored: zero gradients
    with pytest.raises(rg.GraphError, match=r"d_outputs: no node\(s\) \['h_next'\]"):
        ref.backward(fwd, {"h_next": np.ones((4, 2, 3))})
    with pytest.raises(TypeError, match=r"d_final_states takes a dict name -> array, got list"):
        ref.backward(fwd, d_final_states=[np.ones((1, 2, 3))])
