"""A training call whose loss or gradients are not finite changes nothing — parameters, optimizer
state and step count, carried states — and raises FloatingPointError (or, with
``nonfinite="skip"``, is counted); the next finite call trains as if the bad one never came.
On the NumPy backend and on the CUDA backend (the check and the flag the update kernels read
run on the device): in numba's simulator without a GPU, on the GPU in the GPU tier."""
import os

import numpy as np
import pytest

import rnngraph as rg

T, S, I = 3, 2, 2


def _step(device, nonfinite="raise", clip=None):
    net = rg.Sequential(rg.cells.lstm(hidden=3), rg.MSE(1), input_size=I)
    return rg.compile(net, window=T, streams=S, device=device, optimizer=rg.Adam(lr=1e-2), seed=3,
                      clip_norm=clip, nonfinite=nonfinite)


def _batch(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((T, S, I)).astype(np.float32), rng.standard_normal((T, S, 1)).astype(np.float32)


def _snapshot(step):
    return ({k: np.array(v) for k, v in step.parameters.items()}, {k: np.array(v) for k, v in step.state.items()},
            {k: np.array(v) for k, v in step.optimizer.state_dict().items()})


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


# NaN and inf flowing through NumPy (and the simulated kernels) warn, which this file expects
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
DEVICES = ["cpu", "cuda" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", [pytest.param(d, marks=pytest.mark.slow) if d == "cuda" else d for d in DEVICES])
@pytest.mark.parametrize("bad", ["nan-input", "inf-target"])
def test_a_non_finite_window_changes_nothing_and_raises(device, bad):
    step, clean = _step(device, clip=1.0), _step(device, clip=1.0)
    x, y = _batch(0)
    step.train(x, y)
    clean.train(x, y)
    before = _snapshot(step)
    xb, yb = _batch(1)
    if bad == "nan-input":
        xb[1, 0, 0] = np.nan
    else:
        yb[0, 1, 0] = np.inf
    with pytest.raises(FloatingPointError, match="not finite.*unchanged"):
        float(step.train(xb, yb))  # the CPU backend raises in train, the CUDA one when the loss is read
    _assert_same(_snapshot(step), before)
    assert step.optimizer.steps == 1
    x2, y2 = _batch(2)  # the next clean window: as if the bad one never came
    assert float(step.train(x2, y2)) == pytest.approx(float(clean.train(x2, y2)), abs=1e-6)
    _assert_same(_snapshot(step)[:2], _snapshot(clean)[:2])


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_an_unread_non_finite_loss_raises_at_the_next_use(device):
    """The CUDA backend returns before the step has run: a bad window's error surfaces when the
    step is next used (here: its parameters), and again when its loss is read; nothing changed."""
    step, clean = _step(device), _step(device)
    before = _snapshot(step)
    xb, yb = _batch(1)
    xb[0, 1, 0] = np.inf
    loss = step.train(xb, yb)
    with pytest.raises(FloatingPointError, match="after step 0: .* not finite"):
        step.parameters
    with pytest.raises(FloatingPointError, match="not finite"):
        float(loss)
    _assert_same(_snapshot(step), before)
    x2, y2 = _batch(2)
    assert float(step.train(x2, y2)) == pytest.approx(float(clean.train(x2, y2)), abs=1e-6)
    assert step.optimizer.steps == 1


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_the_next_train_copies_its_inputs_then_raises_and_changes_nothing(device):
    """A training call enqueues its inputs' copies before it settles the previous call (so that
    the GPU has them when that call ends): when the previous call was not finite it raises after
    those copies, and they change nothing -- the call after trains as if neither had come."""
    step, clean = _step(device), _step(device)
    x, y = _batch(0)
    step.train(x, y)
    clean.train(x, y)
    before = _snapshot(step)
    backend, order = step._cuda, []
    feed, settle = backend.feed, backend.settle
    backend.feed = lambda inputs: order.append("feed") or feed(inputs)
    backend.settle = lambda: order.append("settle") or settle()
    xb, yb = _batch(1)
    xb[0, 1, 0] = np.inf
    step.train(xb, yb)  # not read
    x1, y1 = _batch(3)
    with pytest.raises(FloatingPointError, match="after step 1: .* not finite"):
        step.train(x1, y1)
    # each call: feed, then settle (train settles once more, a no-op; the error's message reads
    # last_grad_norm, which settles too)
    assert order[:5] == ["feed", "settle", "settle", "feed", "settle"]
    _assert_same(_snapshot(step), before)
    assert step.optimizer.steps == 1
    x2, y2 = _batch(2)
    assert float(step.train(x2, y2)) == pytest.approx(float(clean.train(x2, y2)), abs=1e-6)
    _assert_same(_snapshot(step)[:2], _snapshot(clean)[:2])


@pytest.mark.parametrize("device", DEVICES)
def test_skip_mode_counts_and_returns_the_loss(device):
    step = _step(device, nonfinite="skip")
    x, y = _batch(0)
    x[0, 0, 0] = np.nan
    before = _snapshot(step)
    assert np.isnan(step.train(x, y))
    assert step.skipped_steps == 1
    _assert_same(_snapshot(step), before)
    with pytest.raises(ValueError, match="nonfinite must be"):
        _step("cpu", nonfinite="ignore")
