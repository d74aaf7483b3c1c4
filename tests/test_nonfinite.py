"""A training call whose loss or gradients are not finite changes nothing — parameters, optimizer
state and step count, carried states — and raises FloatingPointError (or, with
``nonfinite="skip"``, is counted); the next finite call trains as if the bad one never came.
On the NumPy backend and on the CUDA backend (the check and the flag the update kernels read
run on the device): in numba's simulator without a GPU, on the GPU in the GPU tier."""
import os
import warnings

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
def test_a_call_behind_an_unread_non_finite_one_changes_nothing_and_the_next_train_raises(device):
    """A training call enqueues its inputs' copies, then settles the call before the previous one
    and is enqueued behind the previous one (CudaBackend.train's overlap). Behind a non-finite
    call in raise mode the device withholds it; the next train feeds, then raises the bad call's
    error; the call between changed nothing and its loss raises NotApplied; the call after
    trains as if neither had come."""
    step, clean = _step(device), _step(device)
    x, y = _batch(0)
    step.train(x, y)
    clean.train(x, y)
    before = _snapshot(step)
    backend, order = step._cuda, []
    feed, settle = backend.feed, backend.settle
    backend.feed = lambda inputs: order.append("feed") or feed(inputs)
    backend.settle = lambda keep_last=False: order.append(("settle", keep_last)) or settle(keep_last)
    xb, yb = _batch(1)
    xb[0, 1, 0] = np.inf
    step.train(xb, yb)  # not read
    behind = step.train(*_batch(3))  # enqueued behind it, its outcome unseen
    with pytest.raises(FloatingPointError, match="after step 1: .* not finite"):
        step.train(*_batch(4))
    with pytest.raises(rg.NotApplied, match="not applied"):
        float(behind)
    # each call: feed, then settle (train settles once more, a no-op)
    assert order[:5] == ["feed", ("settle", True), ("settle", True), "feed", ("settle", True)]
    _assert_same(_snapshot(step), before)
    assert step.optimizer.steps == 1
    x2, y2 = _batch(2)
    assert float(step.train(x2, y2)) == pytest.approx(float(clean.train(x2, y2)), abs=1e-6)
    _assert_same(_snapshot(step)[:2], _snapshot(clean)[:2])


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_skip_mode_a_call_behind_a_skipped_one_takes_its_step_number(device):
    """Adam's bias correction reads the step count: a call enqueued behind one that turns out
    not finite is step 1, not 2 (the device picks the row of step scalars by that call's flag),
    and trains exactly as the same window alone."""
    step, clean = _step(device, nonfinite="skip"), _step(device, nonfinite="skip")
    xb, yb = _batch(1)
    xb[0, 0, 0] = np.nan
    bad = step.train(xb, yb)  # not read
    x1, y1 = _batch(3)
    good = step.train(x1, y1)
    assert float(good) == pytest.approx(float(clean.train(x1, y1)), abs=1e-6)
    assert np.isnan(bad) and step.skipped_steps == 1 and step.optimizer.steps == 1
    _assert_same(_snapshot(step), _snapshot(clean))


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


@pytest.mark.parametrize("nonfinite", ["raise", "skip"])
@pytest.mark.parametrize("bad", ["nan-target", "inf-target", "nan-input", "inf-input"])
def test_a_non_finite_window_on_the_numpy_backend_warns_nothing(bad, nonfinite):
    """Regression: an inf target or input printed NumPy's RuntimeWarnings (invalid value encountered in
    matmul, multiply) before the clean FloatingPointError. Only the error now (or, skipping, the count)."""
    step = _step("cpu", nonfinite=nonfinite)
    x, y = _batch(1)
    (x if bad.endswith("input") else y)[1, 0, 0] = np.nan if bad.startswith("nan") else np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test (the module's filter ignores them)
        if nonfinite == "raise":
            with pytest.raises(FloatingPointError, match="not finite"):
                step.train(x, y)
        else:
            assert not np.isfinite(step.train(x, y)) or not np.isfinite(step.last_grad_norm)
            assert step.skipped_steps == 1


CARRIED = r"the states it started from, carried from the previous call, are not finite.*step\.reset_state\(\)"


@pytest.mark.parametrize("device", [pytest.param(d, marks=pytest.mark.slow) if d == "cuda" else d for d in DEVICES])
def test_a_non_finite_state_carried_by_forward_is_named_by_the_next_train(device):
    """Regression: forward(carry=True) on a NaN input left NaN states, and the next training call's error
    blamed "the inputs, targets or parameters" of its clean window. It names the carried states and
    step.reset_state() now; after the reset the window trains."""
    step = _step(device)
    x, y = _batch(1)
    xb = x.copy()
    xb[0, 1, 0] = np.nan
    step.forward(xb, carry=False)  # not carried: nothing to name
    assert np.isfinite(float(step.train(x, y)))
    step.forward(xb)
    before = _snapshot(step)
    with pytest.raises(FloatingPointError, match=CARRIED):
        float(step.train(x, y))
    _assert_same(_snapshot(step), before)
    step.reset_state()
    assert np.isfinite(float(step.train(x, y)))
    with pytest.raises(FloatingPointError, match="a NaN or inf in the inputs") as raised:  # the window's own NaN
        float(step.train(xb, y))
    assert "carried" not in str(raised.value)


def test_an_assigned_non_finite_state_is_named_until_its_stream_is_reset():
    step = _step("cpu")
    x, y = _batch(1)
    state = {k: np.array(v) for k, v in step.state.items()}
    state["layer0.c"][0, 1, 0] = np.inf
    step.state = state
    with pytest.raises(FloatingPointError, match=CARRIED):
        step.train(x, y)
    step.reset_state([1])  # the stream holding the inf
    assert np.isfinite(step.train(x, y))
