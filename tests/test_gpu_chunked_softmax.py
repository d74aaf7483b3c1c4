"""GPU tier (pytest -m gpu): the chunked softmax cross-entropy (codegen/chunked_xent.py) at a
large vocabulary -- V = 100,000 in chunks of 8,192 (the last 1,696), T*S = 6,400 columns, H = 32
-- against the dense softmax cross-entropy in float64 (NumPy), loss and the gradients of the
head's input, weight and bias. float32 on the GPU: held to 2e-5 relative to each quantity's largest
magnitude (float32's rounding over a 100,000-term log-sum-exp and 6,400-term weight sums)."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

N, H, V, CHUNK = 6400, 32, 100_000, 8192


def test_chunked_head_at_100k_classes_matches_float64_dense():
    from numba import cuda

    from rnngraph.codegen.chunked_xent import chunked_xent_backward, chunked_xent_forward
    rng = np.random.default_rng(0)
    h = rng.normal(size=(N, H)).astype(np.float32)
    w = (rng.normal(size=(V, H)) * 0.3).astype(np.float32)
    b = (rng.normal(size=V) * 0.1).astype(np.float32)
    ids = rng.integers(0, V, size=N)
    ids[:7] = -100
    g = np.full(N, 1.0 / N, np.float32)
    loss = cuda.to_device(np.zeros(N, np.float32))
    chunked_xent_forward(h, w, b, ids, loss, chunk=CHUNK, ignore_index=-100)
    grads = [cuda.to_device(np.zeros(shape, np.float32)) for shape in ((N, H), (V, H), (V,))]
    chunked_xent_backward(h, w, b, ids, loss, g, *grads, chunk=CHUNK, ignore_index=-100)
    got_loss = loss.copy_to_host()
    got = [a.copy_to_host() for a in grads]

    logits = h.astype(np.float64) @ w.astype(np.float64).T + b  # (N, V), float64
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    z = p.sum(axis=1, keepdims=True)
    p /= z
    keep = ids != -100
    want_loss = np.where(keep, np.log(z[:, 0]) - logits[np.arange(N), np.where(keep, ids, 0)], 0.0)
    d = p * (g[:, None] * keep[:, None])
    d[np.arange(N)[keep], ids[keep]] -= g[keep]
    want = [d @ w.astype(np.float64), d.T @ h.astype(np.float64), d.sum(axis=0)]
    np.testing.assert_allclose(got_loss, want_loss, rtol=0, atol=2e-5 * np.abs(want_loss).max())
    for name, a, e in zip(("dh", "dW", "db"), got, want):
        np.testing.assert_allclose(a, e, rtol=0, atol=2e-5 * np.abs(e).max(), err_msg=name)
