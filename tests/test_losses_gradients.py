"""Central-difference gradient checks (float64) of networks ending in each loss head: every
parameter, initial state and float input, through rg.Reference's BPTT."""
import numpy as np
import pytest

import rnngraph as rg
from gradcheck import check_graph

T, S, I, H, C = 3, 2, 3, 4, 5


def _net(head, cell=rg.cells.lstm):
    return rg.Sequential(cell(hidden=H), head, input_size=I)


@pytest.mark.parametrize("head", [rg.MSE(), rg.MSE(2)], ids=["mse", "mse_projected"])
@pytest.mark.parametrize("cell", [rg.cells.lstm, rg.cells.gru], ids=["lstm", "gru"])
def test_mse_head_gradients(head, cell):
    check_graph(_net(head, cell).graph, T=T, S=S)


def test_sequence_classifier_gradients():
    head = rg.SequenceClassifier(C)
    y = head.feed(np.array([3, 0]), T, S)
    assert (y[:-1] == -1).all() and list(y[-1]) == [3, 0]
    check_graph(_net(head).graph, T=T, S=S, given={"y": y})


@pytest.mark.parametrize("ignore", [-100, 2])
def test_ignore_index_gradients(ignore):
    y = np.array([[1, ignore], [ignore, 4], [0, 3]])
    check_graph(_net(rg.SoftmaxCrossEntropy(C, ignore_index=ignore)).graph, T=T, S=S, given={"y": y})


def test_ignored_targets_leave_the_mean():
    """The loss is the mean over the targets not ignored (PyTorch's CrossEntropyLoss(ignore_index))."""
    g_ignore = _net(rg.SoftmaxCrossEntropy(C, ignore_index=-100)).graph
    g_plain = _net(rg.SoftmaxCrossEntropy(C)).graph
    params = rg.init_params(g_plain, seed=3)
    x = np.random.default_rng(0).normal(size=(T, S, I))
    y = np.array([[1, -100], [-100, 4], [0, 3]])
    kept = y != -100
    per_column = rg.Reference(g_plain).forward(params, {"x": x, "y": np.where(kept, y, 0)}).values["head.loss"]
    loss = rg.Reference(g_ignore).forward(params, {"x": x, "y": y}).loss
    assert loss == pytest.approx(per_column[kept].mean(), abs=1e-12)
