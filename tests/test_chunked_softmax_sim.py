"""The chunked softmax cross-entropy head on the CUDA backend (codegen/chunked_xent.py) against
the NumPy backend, float32 (tiny shapes: V = 11 in chunks of 4, the last 3; T=3, S=2, hidden
4): the launchers against the registry's op, and a training step's loss, parameters and
carried states. In numba's simulator on machines without a GPU; in the GPU tier (``pytest -m
gpu``) on the GPU."""
import os

import numpy as np
import pytest

import rnngraph as rg
from backends import assert_steps_close
from rnngraph import ops
from rnngraph.codegen.chunked_xent import chunked_xent_backward, chunked_xent_forward

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

T, S, I, H, V, CHUNK = 3, 2, 3, 4, 11, 4


def test_launchers_match_the_op():
    from numba import cuda
    rng = np.random.default_rng(0)
    n = 6
    h, w, b = (rng.normal(size=shape).astype(np.float32) for shape in ((n, H), (V, H), (V,)))
    ids = rng.integers(0, V, size=n)
    ids[0] = -100
    g = rng.normal(size=n).astype(np.float32)
    at = {"chunk": CHUNK, "ignore_index": -100}
    op = ops.REGISTRY["chunked_softmax_xent"]
    want = op.forward([h, ids[:, None]], [w, b], at)
    (want_gh, _), (want_gw, want_gb) = op.vjp(g[:, None], want, [h, ids[:, None]], [w, b], at)
    loss = cuda.to_device(np.full(n, np.nan, np.float32))
    chunked_xent_forward(h, w, b, ids, loss, chunk=CHUNK, ignore_index=-100)
    np.testing.assert_allclose(loss.copy_to_host(), want[:, 0], rtol=0, atol=1e-5)
    grads = [cuda.to_device(np.ones(shape, np.float32)) for shape in ((n, H), (V, H), (V,))]  # added to
    chunked_xent_backward(h, w, b, ids, loss, g, *grads, chunk=CHUNK, ignore_index=-100)
    for name, got, expect in zip(("dh", "dW", "db"), grads, (want_gh, want_gw, want_gb)):
        np.testing.assert_allclose(got.copy_to_host(), expect + 1, rtol=0, atol=1e-5, err_msg=name)


def test_bad_chunk_is_a_value_error():
    h = np.zeros((2, H), np.float32)
    with pytest.raises(ValueError, match="chunked_xent_forward: chunk must be a positive int, got 0"):
        chunked_xent_forward(h, np.zeros((V, H), np.float32), np.zeros(V, np.float32), np.zeros(2, np.int64),
                             np.zeros(2, np.float32), chunk=0)


def test_training_step_matches_numpy_backend():
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(V, ignore_index=-100, chunk=CHUNK),
                        input_size=I)
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=rg.Adam(lr=1e-2), seed=1)
                for d in ("cpu", "cuda"))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(T, S, I)).astype(np.float32), rng.integers(0, V, size=(T, S))
    y[0] = -100
    assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    assert_steps_close(gpu, cpu, atol=1e-5)
