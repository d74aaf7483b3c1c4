"""The sparse softmax cross-entropy layer (rnngraph/lsh/sparse_layer.py) against a plain dense
NumPy layer: equal with every neuron active (values and gradients, 1e-12 in float64), equal to
the dense layer with the inactive logits masked out otherwise; the dense layer checked by finite
differences; multi-label targets and unlabelled samples; errors."""
import numpy as np
import pytest

from rnngraph.lsh import Ragged, active_logits, sparse_softmax_xent

N, D, V = 5, 7, 11
LABELS = [[3], [0, 4, 9], [], [10, 2], [6]]


def dense_layer(x, w, b, labels, mask=None):
    """Dense softmax cross-entropy, target 1/|Y| on each label; ``mask`` (N, V) bool leaves
    the logits outside it out of the softmax. Returns loss, dx, dW, db."""
    z = x @ w.T + b
    if mask is not None:
        z = np.where(mask, z, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    t = np.zeros_like(z)
    for i, y in enumerate(labels):
        t[i, np.unique(y).astype(int)] = 1.0 / len(set(y)) if y else 0.0
    loss = -np.sum(t * np.where(t > 0, log_p, 0.0)) / len(x)
    dz = (np.exp(log_p) * t.sum(axis=1, keepdims=True) - t) / len(x)
    return loss, dz @ w, dz.T @ x, dz.sum(axis=0)


def data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, D)), rng.standard_normal((V, D)), rng.standard_normal(V)


def test_the_dense_reference_has_the_gradients_of_its_loss():
    x, w, b = data()
    loss, dx, dw, db = dense_layer(x, w, b, LABELS)
    eps = 1e-6
    for arg, grad, index in ((0, dx, (1, 2)), (1, dw, (4, 3)), (2, db, (9,)), (1, dw, (5, 0))):
        plus, minus = [a.copy() for a in (x, w, b)], [a.copy() for a in (x, w, b)]
        plus[arg][index] += eps
        minus[arg][index] -= eps
        numeric = (dense_layer(*plus, LABELS)[0] - dense_layer(*minus, LABELS)[0]) / (2 * eps)
        assert abs(numeric - grad[index]) < 1e-8


def test_all_neurons_active_equals_the_dense_layer():
    x, w, b = data()
    active = Ragged.from_lists([np.arange(V)] * N)
    out = sparse_softmax_xent(x, w, b, active, Ragged.from_lists(LABELS))
    loss, dx, dw, db = dense_layer(x, w, b, LABELS)
    sparse_dw, sparse_db = out.dense_grads(V)
    assert abs(out.loss - loss) < 1e-12
    np.testing.assert_allclose(out.dx, dx, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sparse_dw, dw, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sparse_db, db, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.probs.reshape(N, V).sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(out.rows, np.arange(V))


def test_a_subset_active_equals_the_masked_dense_layer_and_touches_only_its_rows():
    x, w, b = data(1)
    lists = [[3, 1, 8], [0, 4, 9], [2], [10, 2, 7], [6, 0]]   # 5 is in none
    out = sparse_softmax_xent(x, w, b, Ragged.from_lists(lists), Ragged.from_lists(LABELS))
    mask = np.zeros((N, V), bool)
    for i, a in enumerate(lists):
        mask[i, a] = True
    loss, dx, dw, db = dense_layer(x, w, b, LABELS, mask)
    assert abs(out.loss - loss) < 1e-12
    np.testing.assert_allclose(out.dx, dx, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.dense_grads(V)[0], dw, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.dense_grads(V)[1], db, rtol=0, atol=1e-12)
    assert out.rows.tolist() == sorted(set(sum(lists, []))) and out.dweight.shape == (10, D)
    z = active_logits(x, w, b, Ragged.from_lists(lists))
    assert abs(z[0] - (w[3] @ x[0] + b[3])) < 1e-12


def test_unlabelled_samples_add_nothing_and_float32_stays_float32():
    x, w, b = data(2)
    active = Ragged.from_lists([np.arange(V)] * N)
    out = sparse_softmax_xent(x, w, b, active, Ragged.from_lists([[]] * N))
    assert out.loss == 0.0 and not out.dx.any() and not out.dweight.any()
    out32 = sparse_softmax_xent(*(a.astype(np.float32) for a in (x, w, b)), active, Ragged.from_lists(LABELS))
    assert out32.dx.dtype == out32.dweight.dtype == out32.dbias.dtype == np.float32
    assert abs(out32.loss - dense_layer(x, w, b, LABELS)[0]) < 1e-5
    huge = sparse_softmax_xent(x, w * 1e3, b, active, Ragged.from_lists(LABELS), backward=False)
    assert np.isfinite(huge.loss) and huge.dx is None


def test_errors_name_the_argument_and_the_sample():
    x, w, b = data()
    active = Ragged.from_lists([[3], [0, 4], [1], [10, 2], [6]])
    with pytest.raises(ValueError, match="labels: label 9 of sample 1 is not in its active set"):
        sparse_softmax_xent(x, w, b, active, Ragged.from_lists(LABELS))
    with pytest.raises(ValueError, match=r"active: id 11 of sample 0 is outside \[0, 11\)"):
        sparse_softmax_xent(x, w, b, Ragged.from_lists([[11]] * N), Ragged.from_lists([[]] * N))
    with pytest.raises(ValueError, match=r"x \(5, 7\), weight \(11, 6\) and bias \(11,\) do not fit"):
        sparse_softmax_xent(x, w[:, :6], b, active, Ragged.from_lists(LABELS))
    with pytest.raises(ValueError, match="active has 2 samples, x 5"):
        sparse_softmax_xent(x, w, b, Ragged.from_lists([[1], [2]]), Ragged.from_lists(LABELS))
    with pytest.raises(ValueError, match="x must be a 2-D float array"):
        sparse_softmax_xent(x.astype(int), w, b, active, Ragged.from_lists(LABELS))


def test_add_rows_at_sums_as_ufunc_add_at():
    """add_rows_at (a stable sort and np.add.reduceat, which replaced np.add.at's slow per-element
    loop in the LSH backward) gives np.add.at's sums to rounding (reduceat's order within a row may
    differ): repeated, unsorted and missing indices, float32 and float64; an empty index changes
    nothing."""
    from rnngraph.lsh.sparse_layer import add_rows_at
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        index = rng.integers(0, 7, 200)
        index[index == 4] = 5                         # row 4 gets nothing
        values = rng.normal(size=(200, 3)).astype(dtype)
        want = np.zeros((7, 3), dtype)
        np.add.at(want, index, values)
        got = add_rows_at(np.zeros((7, 3), dtype), index, values)
        np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-12 if dtype ==
                                   np.float64 else 1e-5)
        assert got.dtype == dtype and not got[4].any()
    out = np.ones((2, 3))
    assert add_rows_at(out, np.zeros(0, np.int64), np.zeros((0, 3))) is out and (out == 1).all()
