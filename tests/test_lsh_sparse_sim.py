"""The sparse softmax kernels (rnngraph/codegen/lsh_sparse.py) against rnngraph/lsh/sparse_layer.py
(float64) within float32 tolerance: loss, probabilities, dx and the touched rows' gradients;
untouched rows get nothing; the touched-rows Adam against NumPy's Adam on those rows. Tiny
shapes in numba's simulator on machines without a GPU; the same tests in the GPU tier."""
import os

import numpy as np
import pytest
from numba import cuda

from rnngraph.codegen import lsh_sparse
from rnngraph.lsh import Ragged, sparse_softmax_xent

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

N, D, C = 3, 16, 64
TOL = dict(rtol=2e-4, atol=2e-6)


def problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)).astype(np.float32)
    w = (0.5 * rng.normal(size=(C, D))).astype(np.float32)
    b = rng.normal(size=C).astype(np.float32)
    active = Ragged.from_lists([rng.permutation(C)[:12], [3, 40, 7, 9, 60], rng.permutation(C)[:20]])
    labels = Ragged.from_lists([[int(active[0][2]), int(active[0][5])], [40], []])   # the last: no labels
    return x, w, b, active, labels


def dev(a):
    return cuda.to_device(np.ascontiguousarray(a))


def run(x, w, b, active, labels, backward=True, track=False):
    e = active.ids.size
    z, loss = dev(np.zeros(e, np.float32)), dev(np.zeros(N, np.float32))
    grads = {}
    if backward:
        grads = dict(dx=dev(np.zeros((N, D), np.float32)), gw=dev(np.zeros((C, D), np.float32)),
                     gb=dev(np.zeros(C, np.float32)))
    if track:
        grads.update(mark=dev(np.zeros(C, np.int32)), touched=dev(np.full(C, -1, np.int32)),
                     n_touched=dev(np.zeros(1, np.int32)))
    lsh_sparse.sparse_xent(dev(x), dev(w), dev(b), dev(active.ids), dev(active.offsets), dev(labels.ids),
                           dev(labels.offsets), z, loss, scale=1.0 / N, **grads)
    return z.copy_to_host(), loss.copy_to_host(), {k: v.copy_to_host() for k, v in grads.items()}


def test_forward_matches_numpy():
    x, w, b, active, labels = problem()
    want = sparse_softmax_xent(x.astype(np.float64), w, b, active, labels, backward=False)
    p, loss, _ = run(x, w, b, active, labels, backward=False)
    np.testing.assert_allclose(p, want.probs, **TOL)
    assert loss[2] == 0.0
    np.testing.assert_allclose(loss.sum() / N, want.loss, **TOL)


def test_backward_matches_numpy_on_touched_rows_only():
    x, w, b, active, labels = problem(1)
    want = sparse_softmax_xent(x.astype(np.float64), w, b, active, labels)
    dz, loss, g = run(x, w, b, active, labels, track=True)
    np.testing.assert_allclose(loss.sum() / N, want.loss, **TOL)
    np.testing.assert_allclose(g["dx"], want.dx, **TOL)
    dw, db = want.dense_grads(C)
    np.testing.assert_allclose(g["gw"], dw, **TOL)
    np.testing.assert_allclose(g["gb"], db, **TOL)
    untouched = np.setdiff1d(np.arange(C), want.rows)
    assert (g["gw"][untouched] == 0).all() and (g["gb"][untouched] == 0).all()
    n = int(g["n_touched"][0])
    assert sorted(g["touched"][:n]) == list(want.rows)                  # each touched row once
    assert (g["mark"][want.rows] == 1).all() and g["mark"].sum() == n


def test_all_neurons_active_is_the_dense_layer():
    x, w, b, _, _ = problem(2)
    active = Ragged.from_lists([np.arange(C)] * N)
    labels = Ragged.from_lists([[1], [63], [7, 8]])
    logits = x.astype(np.float64) @ w.T + b
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - logits.max(1, keepdims=True)
    _, loss, g = run(x, w, b, active, labels)
    np.testing.assert_allclose(loss, [-logp[0, 1], -logp[1, 63], -(logp[2, 7] + logp[2, 8]) / 2], **TOL)
    t = np.zeros((N, C))
    t[0, 1], t[1, 63], t[2, [7, 8]] = 1, 1, 0.5
    dz = (np.exp(logp) - t) / N
    np.testing.assert_allclose(g["dx"], dz @ w, **TOL)
    np.testing.assert_allclose(g["gw"], dz.T @ x, **TOL)


def test_touched_adam_updates_only_the_listed_rows_and_clears_them():
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=(C, D)).astype(np.float32), rng.normal(size=C).astype(np.float32)
    gw, gb = rng.normal(size=(C, D)).astype(np.float32), rng.normal(size=C).astype(np.float32)
    rows = np.array([5, 0, 63, 17], np.int32)
    mw, vw = (np.abs(rng.normal(size=(C, D))).astype(np.float32) for _ in range(2))
    mb, vb = (np.abs(rng.normal(size=C)).astype(np.float32) for _ in range(2))
    arrays = [dev(a) for a in (w, b, gw, gb, mw, vw, mb, vb)]
    touched = dev(np.r_[rows, np.full(C - 4, -1)].astype(np.int32))
    mark = np.zeros(C, np.int32)
    mark[rows] = 1
    mark_d = dev(mark)
    lsh_sparse.touched_adam(*arrays, touched, dev(np.array([4], np.int32)), mark_d, lr=0.01, step=3)
    got = [a.copy_to_host() for a in arrays]
    lr, b1, b2, eps, step = 0.01, 0.9, 0.999, 1e-8, 3
    for p, g, m, v, out, gout in ((w, gw, mw, vw, got[0], got[2]), (b, gb, mb, vb, got[1], got[3])):
        m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        upd = p - lr / (1 - b1 ** step) * m2 / (np.sqrt(v2 / (1 - b2 ** step)) + eps)
        others = np.setdiff1d(np.arange(C), rows)
        np.testing.assert_allclose(out[rows], upd[rows], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out[others], p[others])
        assert (gout[rows] == 0).all()
        np.testing.assert_array_equal(gout[others], g[others])
    assert mark_d.copy_to_host().sum() == 0
