"""The loss heads on the CUDA backend against the NumPy backend (tiny shapes: T=3, S=2, hidden
4): training steps (forward, BPTT, clipping, Adam) give the CPU backend's losses, parameters and
carried states to 1e-5, and forward gives its loss. In numba's simulator on machines without a
GPU; in the GPU tier (``pytest -m gpu``) on the GPU."""
import os

import numpy as np
import pytest

import rnngraph as rg
from backends import assert_steps_close

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

T, S, I, H, C = 3, 2, 3, 4, 5


def _targets(kind, rng):
    if kind == "mse":
        return rng.normal(size=(T, S, H)).astype(np.float32)
    if kind == "mse_projected":
        return rng.normal(size=(T, S, 2)).astype(np.float32)
    if kind == "sequence_classifier":
        return rng.integers(0, C, size=S)
    ids = rng.integers(0, C, size=(T, S))
    ids[0] = -100
    return ids


HEADS = {"mse": lambda: rg.MSE(), "mse_projected": lambda: rg.MSE(2),
         "sequence_classifier": lambda: rg.SequenceClassifier(C),
         "ignore_index": lambda: rg.SoftmaxCrossEntropy(C, ignore_index=-100)}


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_training_steps_match_numpy_backend(kind):
    net = rg.Sequential(rg.cells.lstm(hidden=H), HEADS[kind](), input_size=I)
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=rg.Adam(lr=1e-2), clip_norm=0.5, seed=1)
                for d in ("cpu", "cuda"))
    rng = np.random.default_rng(0)
    for _ in range(2):
        x, y = rng.normal(size=(T, S, I)).astype(np.float32), _targets(kind, rng)
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    assert_steps_close(gpu, cpu, atol=1e-5)
    x, y = rng.normal(size=(T, S, I)).astype(np.float32), _targets(kind, rng)
    assert gpu.forward(x, y).loss == pytest.approx(cpu.forward(x, y).loss, abs=1e-5)


def test_all_ignored_targets_leave_the_parameters_unchanged():
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(C, ignore_index=-100), input_size=I)
    gpu = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.SGD(lr=1.0))
    before = gpu.parameters
    x = np.ones((T, S, I), np.float32)
    assert gpu.train(x, np.full((T, S), -100)) == 0.0
    for name, value in gpu.parameters.items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
