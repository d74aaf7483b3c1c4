"""Variable-length windows in rg.compile's training step (rnngraph/step_lengths.py), NumPy
backend, float64: train(..., lengths=) against each stream trained alone over its own length,
padded steps reaching nothing, the carried state, the plans, and bad lengths."""
import numpy as np
import pytest

import rnngraph as rg
from rnngraph.errors import ShapeError

T, S, I, H, C = 4, 4, 2, 3, 3
LENGTHS = [4, 0, 2, 1]


def _net(head):
    return rg.Sequential(rg.cells.lstm(hidden=H), rg.cells.gru(hidden=H), head, input_size=I)


def _step(head, T=T, S=S):
    return rg.compile(_net(head), T, S, device="cpu", dtype="float64", optimizer=rg.SGD(lr=1.0), seed=3)


def _states(step, S, rng):
    return {k: rng.standard_normal((v.shape[0], S, v.shape[2])) for k, v in step.state.items()}


def test_sequence_classifier_equals_each_stream_trained_alone():
    """With SGD(lr=1) an update is minus the gradient: the update of a window with lengths is
    the mean of the updates of each counted stream trained alone over its own length (its label
    at its last valid step), a stream of length 0 adding nothing; the loss is the mean of theirs,
    and each stream carries the state at its length (the state it came with for length 0)."""
    rng = np.random.default_rng(0)
    x, labels = rng.standard_normal((T, S, I)), rng.integers(0, C, S)
    x[3, 2:] = np.nan  # padding: reaches nothing
    step = _step(rg.SequenceClassifier(C))
    h0 = _states(step, S, rng)
    step.state = h0
    before = {k: v.copy() for k, v in step.parameters.items()}
    loss = step.train(x, labels, lengths=LENGTHS)
    deltas, losses = [], []
    for s, L in enumerate(LENGTHS):
        if L == 0:
            for k in h0:
                np.testing.assert_array_equal(step.state[k][:, s], h0[k][:, s])
            continue
        alone = _step(rg.SequenceClassifier(C), T=L, S=1)
        alone.state = {k: v[:, s:s + 1] for k, v in h0.items()}
        losses.append(alone.train(x[:L, s:s + 1], labels[s:s + 1]))
        deltas.append({k: alone.parameters[k] - before[k] for k in before})
        for k in h0:
            np.testing.assert_allclose(step.state[k][:, s:s + 1], alone.state[k], rtol=0, atol=1e-13, err_msg=k)
    assert loss == pytest.approx(np.mean(losses), rel=0, abs=1e-13)
    for k in before:
        np.testing.assert_allclose(step.parameters[k] - before[k], np.mean([d[k] for d in deltas], axis=0),
                                   rtol=0, atol=1e-12, err_msg=k)
    assert np.abs(step.parameters["layer0.U.weight"] - before["layer0.U.weight"]).max() > 1e-4


def _train_twice(head, x, targets, lengths):
    step = _step(head)
    losses = [step.train(x, targets, lengths=lengths) for _ in range(2)]
    return losses, step.parameters, step.state


@pytest.mark.parametrize("head", [lambda: rg.SoftmaxCrossEntropy(C, ignore_index=-100),
                                  lambda: rg.SoftmaxCrossEntropy(C), rg.MSE, lambda: rg.MSE(2)],
                         ids=["xent_ignore_index", "xent", "mse", "mse_projected"])
def test_garbage_in_padded_steps_changes_nothing(head):
    """Padded targets (out-of-range ids, NaN) and padded inputs (NaN, inf) change no loss,
    parameter or state over two training calls."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((T, S, I))
    n = _net(head()).graph.by_name["y"]
    ids = n.dtype == "index"
    targets = rng.integers(0, C, (T, S)) if ids else rng.standard_normal((T, S, n.size))
    dirty_x, dirty_targets = x.copy(), targets.copy()
    for s, L in enumerate(LENGTHS):
        dirty_x[L:, s] = [np.nan, np.inf][s % 2]
        dirty_targets[L:, s] = 99 if ids else np.nan
    clean = _train_twice(head(), x, targets, LENGTHS)
    dirty = _train_twice(head(), dirty_x, dirty_targets, LENGTHS)
    assert clean[0] == dirty[0] and np.isfinite(clean[0]).all()
    for ours, theirs in zip(clean[1:], dirty[1:]):
        for k in ours:
            np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)


@pytest.mark.parametrize("head", [lambda: rg.SoftmaxCrossEntropy(C, ignore_index=-100),
                                  lambda: rg.SoftmaxCrossEntropy(C), rg.MSE, lambda: rg.MSE(2)],
                         ids=["xent_ignore_index", "xent", "mse", "mse_projected"])
def test_loss_is_the_mean_over_valid_steps(head):
    """The loss of a window with lengths is the plain graph's per-column losses summed over the
    valid steps (counted columns) divided by their number: reduction="mean" of the packed
    sequence; a valid target equal to the ignore_index is left out too; forward reports the same."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((T, S, I))
    n = _net(head()).graph.by_name["y"]
    targets = rng.integers(0, C, (T, S)) if n.dtype == "index" else rng.standard_normal((T, S, n.size))
    step = _step(head())
    plain = step.forward(x, targets, carry=False).values["head.loss"][:, :, 0]  # (T, S)
    counted = np.arange(T)[:, None] < np.array(LENGTHS)[None, :]
    if step.net.head.__class__ is rg.SoftmaxCrossEntropy and step.net.head.ignore_index is not None:
        targets[0, 0] = -100
        counted[0, 0] = False
    want = plain[counted].sum() / counted.sum()
    fwd = step.forward(x, targets, carry=False, lengths=LENGTHS)
    assert fwd.loss == pytest.approx(want, rel=1e-13)
    out = fwd.outputs[step.graph.outputs[0]]
    if isinstance(step.net.head, rg.MSE):  # the prediction is zero past each length
        assert np.all(out[~(np.arange(T)[:, None] < np.array(LENGTHS)[None, :])] == 0)
    np.testing.assert_allclose(out[:, 0], step.forward(x, carry=False).outputs[step.graph.outputs[0]][:, 0],
                               rtol=0, atol=1e-13)  # the stream of full length: as without lengths
    assert step.train(x, targets, lengths=LENGTHS) == pytest.approx(want, rel=1e-13)


def test_full_lengths_run_the_plain_plan_and_plans_share_parameters():
    rng = np.random.default_rng(3)
    x, labels = rng.standard_normal((T, S, I)), rng.integers(0, C, S)
    a, b = _step(rg.SequenceClassifier(C)), _step(rg.SequenceClassifier(C))
    assert a.train(x, labels, lengths=[T] * S) == b.train(x, labels)
    assert a.schedule.graph is a.graph
    a.train(x, labels, lengths=LENGTHS)
    assert a.schedule.graph is a.net.masked_graph
    b.train(x, labels, lengths=LENGTHS)
    assert a.train(x, labels) == b.train(x, labels)  # back on the plain plan: the same parameters and states
    for k in a.parameters:
        np.testing.assert_array_equal(a.parameters[k], b.parameters[k], err_msg=k)
    assert a.optimizer.steps == 3


def test_forward_carries_the_state_at_each_length():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((T, S, I))
    step = _step(rg.MSE())
    step.state = _states(step, S, rng)
    full, first_two = step.forward(x, carry=False), step.forward(x[:2], carry=False)
    fwd = step.forward(x, lengths=LENGTHS)
    for k, v in fwd.final_states.items():
        np.testing.assert_array_equal(step.state[k], v)
        np.testing.assert_array_equal(v[:, 1], fwd.states[k][:, 1])  # length 0: as it came in
        np.testing.assert_allclose(v[:, 2], first_two.final_states[k][:, 2], rtol=0, atol=1e-13)
        np.testing.assert_allclose(v[:, 0], full.final_states[k][:, 0], rtol=0, atol=1e-13)
    out = fwd.outputs["layer1.h_next"]
    assert list(fwd.values) == ["layer1.h_next"] and np.all(out[2:, 2] == 0) and np.all(out[1:, 3] == 0)
    np.testing.assert_allclose(out[:2, 2], full.outputs["layer1.h_next"][:2, 2], rtol=0, atol=1e-13)


def test_bad_lengths_and_targets_are_named():
    step = _step(rg.SoftmaxCrossEntropy(C))
    x, y = np.zeros((T, S, I)), np.zeros((T, S), np.int64)
    with pytest.raises(ValueError, match=r"lengths\[2\] = 5 is outside \[0, T = 4\]"):
        step.train(x, y, lengths=[1, 2, 5, 0])
    with pytest.raises(ValueError, match=r"lengths\[0\] = -1"):
        step.forward(x, lengths=[-1, 2, 3, 0])
    with pytest.raises(ShapeError, match=r"lengths: expected one length per stream, shape \(4,\)"):
        step.train(x, y, lengths=[1, 2])
    with pytest.raises(TypeError, match="lengths: expected integer lengths"):
        step.train(x, y, lengths=[1.0, 2.0, 3.0, 4.0])
    y[0, 1] = 7  # stream 1 is valid at t = 0
    with pytest.raises(ShapeError, match=r"targets\[0, 1\] = 7 is not a class id in \[0, 3\)"):
        step.train(x, y, lengths=[1, 2, 3, 4])
    step.train(x, y, lengths=[1, 0, 3, 4])  # padded there: not read
    with pytest.raises(ShapeError, match="targets: expected integer class labels"):
        _step(rg.SequenceClassifier(C)).train(x, y, lengths=[1, 2, 3, 4])
