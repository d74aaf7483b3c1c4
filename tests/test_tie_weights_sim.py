"""Tied input and output embeddings on the CUDA backend (numba's simulator without a GPU): one
training step of a tiny tied word LM, dense and chunked head, leaves the parameters, the loss
and the gradient norm of the NumPy backend's step (float32). SGD shows the table moved by the
summed gradient of its two readers, AdamW that the one parameter is updated once."""
import numpy as np
import pytest

import rnngraph as rg
from backends import assert_steps_close

T, S, V, E = 3, 2, 7, 4


@pytest.mark.parametrize("chunk, optimizer", [(None, lambda: rg.SGD(lr=0.5)), (3, lambda: rg.AdamW(lr=0.01))],
                         ids=["dense-sgd", "chunked-adamw"])
def test_training_step_matches_numpy_backend(chunk, optimizer):
    net = rg.Sequential(rg.Embedding(V, E), rg.cells.lstm(hidden=E), rg.SoftmaxCrossEntropy(V, chunk=chunk,
                                                                                            tie_weights=True))
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=optimizer(), clip_norm=10.0, seed=1)
                for d in ("cpu", "cuda"))
    assert list(gpu.parameters) == list(cpu.parameters) and "head.W.weight" not in gpu.parameters
    before = np.array(cpu.parameters["embed.weight"])
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, size=(T, S)), rng.integers(0, V, size=(T, S))
    assert float(gpu.train(x, y)) == pytest.approx(cpu.train(x, y), abs=1e-5)
    assert gpu.last_grad_norm == pytest.approx(cpu.last_grad_norm, rel=1e-5)
    assert np.abs(cpu.parameters["embed.weight"] - before).max() > 1e-3
    assert_steps_close(gpu, cpu, atol=1e-6)
