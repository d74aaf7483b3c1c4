"""Bad targets and bad head arguments give errors naming what is wrong (never a NumPy
traceback); forward and train take each head's targets."""
import numpy as np
import pytest

import rnngraph as rg

T, S, I, H, C = 3, 2, 3, 4, 5


def _step(head):
    return rg.compile(rg.Sequential(rg.cells.lstm(hidden=H), head, input_size=I), window=T, streams=S, device="cpu")


X = np.zeros((T, S, I))


@pytest.mark.parametrize("bad, what", [(np.zeros((T, S)), r"\(3, 2\)"), (np.zeros((T, S, H + 1)), r"\(3, 2, 5\)"),
                                       (np.zeros((T, S, H), int), "int64")])
def test_mse_targets_of_the_wrong_shape_or_dtype(bad, what):
    with pytest.raises(rg.ShapeError, match=rf"targets: expected floats of shape \(T, S, n\) = \(3, 2, 4\), got .*{what}"):
        _step(rg.MSE()).train(X, bad)


@pytest.mark.parametrize("bad, what", [(np.zeros((T, S), int), r"\(3, 2\)"), (np.zeros(S), "float64"),
                                       ([0, 1, 2], r"\(3,\)")])
def test_sequence_classifier_targets_of_the_wrong_shape_or_dtype(bad, what):
    with pytest.raises(rg.ShapeError, match=rf"targets: expected integer class labels of shape \(S,\) = \(2,\).*{what}"):
        _step(rg.SequenceClassifier(C)).train(X, bad)


@pytest.mark.parametrize("label", [-1, C])
def test_sequence_classifier_label_out_of_range(label):
    with pytest.raises(rg.ShapeError, match=rf"targets: label {label} is outside \[0, {C}\)"):
        _step(rg.SequenceClassifier(C)).train(X, np.array([0, label]))


def test_softmax_targets_of_the_wrong_dtype():
    with pytest.raises(rg.ShapeError, match=r"targets: expected integer class ids of shape \(T, S\) = \(3, 2\)"):
        _step(rg.SoftmaxCrossEntropy(C)).train(X, np.zeros((T, S)))


def test_target_neither_a_class_nor_the_ignore_index():
    y = np.full((T, S), -100)
    y[1, 1] = -5
    with pytest.raises(rg.ShapeError, match=r"targets \(input 'y'\): token id -5 is outside \[0, 5\) and is not the ignore_index -100"):
        _step(rg.SoftmaxCrossEntropy(C, ignore_index=-100)).train(X, y)


@pytest.mark.parametrize("ignore", [C, 7, -2 ** 31 - 1, True, 1.0, "x"])
def test_ignore_index_out_of_range_or_not_an_integer(ignore):
    with pytest.raises(rg.GraphError, match=rf"ignore_index={ignore!r}.*must be None or an integer in \[-2147483648, {C}\)"):
        rg.SoftmaxCrossEntropy(C, ignore_index=ignore)


@pytest.mark.parametrize("make, match", [(lambda: rg.MSE(0), r"rg.MSE\(0\): out_features"),
                                         (lambda: rg.MSE(2.5), r"rg.MSE\(2.5\)"),
                                         (lambda: rg.SequenceClassifier(1), "classes >= 2")])
def test_bad_head_arguments(make, match):
    with pytest.raises(rg.GraphError, match=match):
        make()


def test_heads_must_be_last():
    with pytest.raises(rg.GraphError, match="layer 0: the MSE head must be the last layer"):
        rg.Sequential(rg.MSE(), rg.cells.lstm(hidden=H), input_size=I)
    with pytest.raises(rg.GraphError, match="a Dropout cannot follow the loss head"):
        rg.Sequential(rg.cells.lstm(hidden=H), rg.SequenceClassifier(C), rg.Dropout(0.5), input_size=I)


@pytest.mark.parametrize("head, doc", [(rg.MSE(), r"floats of shape \(T, S, n\)"),
                                       (rg.SequenceClassifier(C), r"class labels of shape \(S,\)")])
def test_train_without_targets_says_what_the_head_takes(head, doc):
    with pytest.raises(ValueError, match=f"train needs targets: {doc}"):
        _step(head).train(X, None)


def test_forward_with_and_without_targets():
    rng = np.random.default_rng(0)
    step = _step(rg.SequenceClassifier(C))
    x, labels = rng.normal(size=(T, S, I)), np.array([1, 4])
    fwd = step.forward(x, carry=False)
    assert fwd.loss is None and fwd.values["head.logits"].shape == (T, S, C)
    logits = fwd.values["head.logits"][-1]
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    expected = -logp[np.arange(S), labels].mean()
    assert step.forward(x, labels, carry=False).loss == pytest.approx(expected, rel=1e-5)
    assert step.train(x, labels) == pytest.approx(expected, rel=1e-5)


def test_sequence_classifier_puts_each_label_at_its_last_timestep():
    y = rg.SequenceClassifier(C).feed(np.array([2, 3]), T, S, last=np.array([2, 0]))
    np.testing.assert_array_equal(y, [[-1, 3], [-1, -1], [2, -1]])
    with pytest.raises(rg.ShapeError, match=r"last: expected integer timesteps in \[0, 3\)"):
        rg.SequenceClassifier(C).feed(np.array([2, 3]), T, S, last=np.array([3, 0]))


def test_language_model_graph_is_unchanged():
    """Without ignore_index the softmax head's loss node has no attribute (the golden
    schedules of the language models stay as they were)."""
    net = rg.Sequential(rg.Embedding(C, 4), rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(C))
    assert "  node head.loss : float[1] = softmax_xent(head.logits, y)\n" in str(net.graph)


def test_readme_padded_classifier_example_runs_as_written():
    """Regression: README's padded-window SequenceClassifier example used x, labels and lengths
    it never defined (NameError for a reader who ran it)."""
    import os
    import re
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "rg.SequenceClassifier(9)" in b]
    assert len(blocks) == 1
    scope = {"np": np, "rg": rg}
    exec(blocks[0], scope)  # noqa: S102 -- the documentation's own code
    assert np.isfinite(float(scope["loss"])) and scope["x"].shape == (29, 30, 12)
