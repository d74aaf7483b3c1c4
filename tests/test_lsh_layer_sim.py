"""The GPU LSH layer (rnngraph/codegen/lsh_layer.py) and the sparse-input layer
(codegen/sparse_input.py) against NumPy, tiny shapes: with every class active the LSH layer's
steps are the dense layer's with Adam; its argument errors; the sparse input layer's forward and
gradients; and (slow) every new kernel compiled for sm_90 with no float64 instruction. In numba's
simulator on machines without a GPU; the same tests in the GPU tier."""
import os

import numpy as np
import pytest
from numba import cuda

from conftest import run_outside_simulator
from rnngraph.codegen.lsh_layer import DeviceLSHLayer
from rnngraph.codegen.sparse_input import sparse_linear_relu, sparse_linear_relu_backward
from rnngraph.lsh import LSHConfig, Ragged

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]
N, D, C = 3, 8, 16


def dense_step(x, w, b, labels, m, v, step, lr=0.01):
    """One dense softmax + Adam step in float64; returns (loss, dx, w, b, m, v)."""
    z = x @ w.T + b
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    t = np.zeros_like(z)
    for i, ys in enumerate(labels):
        if len(ys):
            t[i, ys] = 1.0 / len(ys)
    has = t.sum(1, keepdims=True)
    loss = -(t * logp).sum(1)
    dz = (np.exp(logp) * has - t) / len(x)
    dx, gw, gb = dz @ w, dz.T @ x, dz.sum(0)
    out = []
    for k, (p, g) in enumerate(((w, gw), (b, gb))):
        m[k] = 0.9 * m[k] + 0.1 * g
        v[k] = 0.999 * v[k] + 0.001 * g * g
        out.append(p - lr / (1 - 0.9 ** step) * m[k] / (np.sqrt(v[k] / (1 - 0.999 ** step)) + 1e-8))
    return loss, dx, out[0], out[1]


@pytest.mark.parametrize("adam", ["touched", "dense"])
def test_every_class_active_is_the_dense_layer_with_adam(adam):
    rng = np.random.default_rng(0)
    cfg = LSHConfig(K=1, L=1, bin_size=4, capacity=4, min_active=C, rebuild_every=3, redraw_every=6)
    layer = DeviceLSHLayer(D, C, cfg, seed=1, lr=0.01, adam=adam, max_labels=2)
    w, b = layer.weight.copy_to_host().astype(np.float64), layer.bias.copy_to_host().astype(np.float64)
    m, v = [0 * w, 0 * b], [0 * w, 0 * b]
    for step in (1, 2):
        x = rng.normal(size=(N, D)).astype(np.float32)
        labels = [[1, 5], [], [15]]
        loss, dx = layer.train_batch(cuda.to_device(x), Ragged.from_lists(labels))
        want_loss, want_dx, w, b = dense_step(x.astype(np.float64), w, b, labels, m, v, step)
        np.testing.assert_allclose(loss.copy_to_host(), want_loss, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(dx.copy_to_host(), want_dx, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(layer.weight.copy_to_host(), w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(layer.bias.copy_to_host(), b, rtol=1e-4, atol=1e-5)
    assert layer.clock.samples == 2 * N and layer.steps == 2
    out = cuda.to_device(np.zeros((N, C), np.float32))
    np.testing.assert_allclose(layer.dense_logits(cuda.to_device(x), out).copy_to_host(), x @ w.T + b,
                               rtol=1e-4, atol=1e-5)


def test_batch_labels_fill_every_set_with_the_slice_of_device_labels():
    """LSHConfig(batch_labels=True) with labels as bench/lsh_gpu.py passes them (device ids of a
    whole split, the batch's offsets a slice that starts past 0): every set holds exactly the
    batch's 8 labels and at most its one bucket id (L = 1, buckets of 1, min_active 0). The
    scratch is sized for the batch's labels: 4 samples of 9 ids overflow an ids array sized for
    a sample's own 2 (the simulator checks the bounds)."""
    rng = np.random.default_rng(4)
    V, n = 256, 4
    layer = DeviceLSHLayer(D, V, LSHConfig(K=1, L=1, bin_size=4, capacity=1, min_active=0, batch_labels=True),
                           seed=2, max_labels=2)
    split = Ragged.from_lists([[2 * i, 2 * i + 1] for i in range(12)])   # labels 0..23 of 12 samples
    x = cuda.to_device(rng.normal(size=(n, D)).astype(np.float32))
    ids, offsets, _, _ = layer.query(x, cuda.to_device(split.ids), cuda.to_device(split.offsets[3:3 + n + 1]))
    ids, offsets = ids.copy_to_host(), offsets.copy_to_host()
    batch = set(range(6, 14))                                               # samples 3..6's labels
    for i in range(n):
        got = set(ids[offsets[i]:offsets[i + 1]].tolist())
        assert batch <= got and len(got - batch) <= 1, (i, sorted(got))


def test_layer_argument_errors():
    cfg = LSHConfig(K=1, L=1, bin_size=4, capacity=4, min_active=4)
    with pytest.raises(ValueError, match="densify"):
        DeviceLSHLayer(D, C, LSHConfig(K=1, L=1, densify=True))
    with pytest.raises(ValueError, match="adam must be one of"):
        DeviceLSHLayer(D, C, cfg, adam="lazy")
    with pytest.raises(ValueError, match=r"weight and bias must have shapes \(16, 8\)"):
        DeviceLSHLayer(D, C, cfg, weight=np.zeros((C, D + 1), np.float32))
    layer = DeviceLSHLayer(D, C, cfg, max_labels=1)
    x = cuda.to_device(np.zeros((2, D), np.float32))
    with pytest.raises(ValueError, match="labels: id 16 of sample 1 is outside"):
        layer.train_batch(x, Ragged.from_lists([[0], [16]]))
    with pytest.raises(ValueError, match="max_labels is 1"):
        layer.train_batch(x, Ragged.from_lists([[0, 1], [2]]))
    with pytest.raises(ValueError, match="labels has 1 samples, x 2"):
        layer.train_batch(x, Ragged.from_lists([[0]]))


def test_sparse_input_layer_forward_and_gradients():
    rng = np.random.default_rng(2)
    F, H = 10, 4
    rows = [[1, 7], [], [0, 3, 9]]
    ids = np.concatenate([np.array(r, np.int32) for r in rows])
    vals = rng.uniform(0.5, 1.5, size=ids.size).astype(np.float32)
    offsets = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    w, b = rng.normal(size=(F, H)).astype(np.float32), rng.normal(size=H).astype(np.float32)
    dense = np.zeros((3, F))
    for i in range(3):
        dense[i, ids[offsets[i]:offsets[i + 1]]] = vals[offsets[i]:offsets[i + 1]]
    pre = dense @ w + b
    out = cuda.to_device(np.zeros((3, H), np.float32))
    args = [cuda.to_device(a) for a in (offsets, ids, vals)]
    sparse_linear_relu(*args, cuda.to_device(w), cuda.to_device(b), out)
    h = out.copy_to_host()
    np.testing.assert_allclose(h, np.maximum(pre, 0), rtol=1e-5, atol=1e-6)
    dh = rng.normal(size=(3, H)).astype(np.float32)
    gw, gb = cuda.to_device(np.ones((F, H), np.float32)), cuda.to_device(np.zeros(H, np.float32))
    sparse_linear_relu_backward(*args, out, cuda.to_device(dh), gw, gb)
    g = dh * (pre > 0)
    np.testing.assert_allclose(gw.copy_to_host(), 1 + dense.T @ g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb.copy_to_host(), g.sum(0), rtol=1e-5, atol=1e-6)


_PTX = r"""
from rnngraph.codegen import lsh_head_kernels, lsh_kernels, lsh_sparse, sparse_input
from rnngraph.codegen.library import ptx_f64_report
kernels = lsh_kernels.KERNELS + lsh_sparse.KERNELS + sparse_input.KERNELS + lsh_head_kernels.KERNELS
print(json.dumps({"report": ptx_f64_report(kernels)}))
"""


@pytest.mark.slow
def test_every_lsh_kernel_compiles_for_sm90_without_f64():
    from conftest import PTX_PREAMBLE
    from rnngraph.codegen import lsh_head_kernels, lsh_kernels, lsh_sparse, sparse_input
    report = run_outside_simulator(PTX_PREAMBLE + _PTX)["report"]
    kernels = lsh_kernels.KERNELS + lsh_sparse.KERNELS + sparse_input.KERNELS + lsh_head_kernels.KERNELS
    assert len(report) == len(kernels) == 14
    assert {k: v for k, v in report.items() if v} == {}
