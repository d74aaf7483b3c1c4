"""Generated CUDA code in numba's simulator (CI has no GPU) against the NumPy backend.

Tiny shapes (T=2, S=2, hidden 4, one block for cooperative kernels): one training step on the
CUDA backend (forward, BPTT, clipping, Adam) must give the CPU backend's loss, parameters and
carried states to 1e-5, for every standard cell, for persistent and per-timestep loops, and for
both plans of a 2-layer stack.
"""
import os

import numpy as np
import pytest

import rnngraph as rg

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

V, T, S, H = 5, 2, 2, 4
CASES = [(c, 1, None) for c in sorted(rg.cells.STANDARD)] + [
    ("lstm", 2, "wavefront"), ("lstm", 2, "scc-sequential"), ("gru_reset_before", 2, "wavefront"),
    ("lstm", 1, "naive")]
# the fast tier (pytest -m "not slow") trains these three: a persistent loop, one with layer norms,
# a 2-layer wavefront; the full suite every case
FAST = [("lstm", 1, None), ("layernorm_lstm", 1, None), ("lstm", 2, "wavefront")]


def _pair(cell, layers, plan, optimizer):
    net = rg.stacked(rg.cells.STANDARD[cell], layers, H, vocab=V, embed=3)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=optimizer(), clip_norm=0.5,
                                seed=1, plan=plan)
    return mk("cpu"), mk("cuda")


@pytest.mark.parametrize("cell, layers, plan", [
    pytest.param(c, n, p, id=f"{c}-{n}-{p}", marks=() if (c, n, p) in FAST else pytest.mark.slow) for c, n, p in CASES])
def test_training_step_matches_numpy_backend(cell, layers, plan):
    cpu, gpu = _pair(cell, layers, plan, lambda: rg.Adam(lr=1e-2))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    pc, pg = cpu.parameters, gpu.parameters
    for name in pc:
        np.testing.assert_allclose(pg[name], pc[name], atol=1e-5, err_msg=name)
    sc, sg = cpu.state, gpu.state
    for name in sc:
        np.testing.assert_allclose(sg[name], sc[name], atol=1e-5, err_msg=name)
    assert "def " in gpu.kernels and "cuda.jit" in gpu.kernels


@pytest.mark.slow
def test_sgd_momentum_and_forward_outputs():
    cpu, gpu = _pair("lstm", 1, None, lambda: rg.SGD(lr=0.5, momentum=0.9))
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    x = rng.integers(0, V, (T, S))
    a, b = cpu.forward(x), gpu.forward(x)
    np.testing.assert_allclose(b.values["head.logits"], a.values["head.logits"], atol=1e-5)


def test_optimizer_slots_round_trip_through_checkpoints():
    _, gpu = _pair("gru", 1, None, lambda: rg.Adam(lr=1e-2))
    rng = np.random.default_rng(2)
    gpu.train(rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S)))
    saved = gpu.optimizer.state_dict()
    assert int(saved["steps"]) == 1 and any(np.abs(v).max() > 0 for k, v in saved.items() if k.startswith("m/"))
    gpu.optimizer.load_state_dict({k: np.zeros_like(v) if k != "steps" else v for k, v in saved.items()})
    assert all(np.abs(v).max() == 0 for k, v in gpu.optimizer.state_dict().items() if k != "steps")
