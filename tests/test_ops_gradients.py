"""Every op's gradient rule against central differences, directly on the registry (float64)."""
import numpy as np
import pytest

from rnngraph import ops
from gradcheck import numeric, relative_error

N = 3  # columns


def _case(name, rng):
    """(args, params, attrs) for op ``name``; float args (N, n), ids (N, 1)."""
    x = lambda n=4: rng.normal(size=(N, n))
    cases = {
        "add": ([x(), x()], [], {}), "sub": ([x(), x()], [], {}), "mul": ([x(), x()], [], {}),
        "neg": ([x()], [], {}), "identity": ([x()], [], {}),
        "add_scalar": ([x()], [], {"value": 0.7}), "mul_scalar": ([x()], [], {"value": -1.3}),
        "sigmoid": ([x()], [], {}), "tanh": ([x()], [], {}), "exp": ([x()], [], {}),
        "relu": ([x() + 0.05 * np.sign(x())], [], {}),
        "select": ([np.sign(x()), x(), x()], [], {}),  # a mask of +-1: differences never cross 0
        "slice": ([x(6)], [], {"start": 1, "stop": 4}),
        "concat": ([x(2), x(3), x(1)], [], {}),
        "param": ([], [rng.normal(size=4)], {}),
        "linear": ([x(4)], [rng.normal(size=(5, 4)), rng.normal(size=5)], {}),
        "layer_norm": ([x(5)], [rng.normal(size=5), rng.normal(size=5)], {}),
        "embedding": ([rng.integers(0, 6, size=(N, 1))], [rng.normal(size=(6, 3))], {}),
        "softmax_xent": ([x(5), rng.integers(0, 5, size=(N, 1))], [], {}),
        "chunked_softmax_xent": ([x(4), rng.integers(0, 5, size=(N, 1))],
                                 [rng.normal(size=(5, 4)), rng.normal(size=5)], {"chunk": 2}),
        "lsh_softmax_xent": ([x(4), rng.integers(0, 5, size=(N, 1))],   # as a graph op: the dense layer
                             [rng.normal(size=(5, 4)), rng.normal(size=5)], {"K": 2, "L": 3, "min_active": 2}),
        "mse": ([x(4), x(4)], [], {}),
    }
    return cases[name]


COMPUTED = sorted(n for n, op in ops.REGISTRY.items() if op.kind != "input")


def test_every_computed_op_has_a_case():
    rng = np.random.default_rng(0)
    for name in COMPUTED:
        _case(name, rng)  # KeyError here means a new op lacks a gradient test


@pytest.mark.parametrize("name", COMPUTED)
def test_op_gradient(name):
    rng = np.random.default_rng(1)
    op = ops.REGISTRY[name]
    xs, ps, attrs = _case(name, rng)
    y = np.broadcast_to(op.forward(xs, ps, attrs), (N, np.shape(op.forward(xs, ps, attrs))[-1]))
    g = rng.normal(size=y.shape)
    f = lambda: float((np.broadcast_to(op.forward(xs, ps, attrs), y.shape) * g).sum())
    gxs, gps = op.vjp(g, op.forward(xs, ps, attrs), xs, ps, attrs)
    for arrays, analytic in ((xs, gxs), (ps, gps)):
        for arr, ga in zip(arrays, analytic):
            if np.issubdtype(arr.dtype, np.integer):
                assert ga is None
                continue
            idx = np.arange(arr.size)
            assert relative_error(numeric(f, arr, idx), ga.reshape(-1)) < 1e-6


def test_sigmoid_extremes_no_overflow():
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = ops.REGISTRY["sigmoid"].forward([np.array([[-1000.0, 0.0, 1000.0]])], [], {})
    np.testing.assert_array_equal(y, [[0.0, 0.5, 1.0]])


def test_softmax_xent_large_logits_finite():
    z = np.array([[1000.0, -1000.0, 0.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = ops.REGISTRY["softmax_xent"].forward([z, np.array([[1]])], [], {})
    assert loss[0, 0] == pytest.approx(2000.0)


@pytest.mark.parametrize("ignore", [-100, 2])
def test_softmax_xent_ignore_index_gradient(ignore):
    """Columns whose target is ignore_index give 0 and no gradient; the others are unchanged."""
    rng = np.random.default_rng(2)
    op, attrs = ops.REGISTRY["softmax_xent"], {"ignore_index": ignore}
    z, ids = rng.normal(size=(4, 5)), np.array([[1], [ignore], [4], [ignore]])
    g = rng.normal(size=(4, 1))
    f = lambda: float((op.forward([z, ids], [], attrs) * g).sum())
    (gz, gids), _ = op.vjp(g, op.forward([z, ids], [], attrs), [z, ids], [], attrs)
    assert gids is None
    assert relative_error(numeric(f, z, np.arange(z.size)), gz.reshape(-1)) < 1e-6
    loss = op.forward([z, ids], [], attrs)
    assert loss[1, 0] == loss[3, 0] == 0 and not gz[[1, 3]].any()
    kept = [0, 2]
    np.testing.assert_array_equal(loss[kept], op.forward([z[kept], ids[kept]], [], {}))


def test_mse_is_the_mean_over_a_column():
    x, y = np.array([[1.0, 2.0, 4.0]]), np.array([[0.0, 2.0, 1.0]])
    assert ops.REGISTRY["mse"].forward([x, y], [], {})[0, 0] == pytest.approx((1 + 0 + 9) / 3)
