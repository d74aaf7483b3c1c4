"""The ``rg.LSHSoftmax`` head on the NumPy backend (G-SLIDE, Pan et al., IEEE TPDS 2022): with
every class active its training steps equal the dense ``rg.SoftmaxCrossEntropy`` head's (float64,
1e-12: loss and, through SGD with lr 1, every parameter's gradient), whole windows, a timestep at
a time (plan="naive"), with lengths and with ignore_index; with few active classes only the
touched rows move and evaluation is dense; the schedule dump; bad arguments; the CUDA backend
takes the head."""
import dataclasses

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.errors import GraphError
from rnngraph.lsh import LSHConfig
from rnngraph.memory import estimate

T, S, I, H, V = 3, 2, 3, 4, 11
TOL = dict(rtol=0, atol=1e-12)
ALL_ACTIVE = LSHConfig(K=2, L=3, bin_size=4, capacity=4, min_active=V)
FEW_ACTIVE = LSHConfig(K=2, L=2, bin_size=4, capacity=2, min_active=3)


def _step(head, plan=None, lr=1.0):
    return rg.compile(rg.Sequential(rg.cells.lstm(hidden=H), head, input_size=I), window=T, streams=S,
                      device="cpu", dtype="float64", optimizer=rg.SGD(lr=lr), seed=1, plan=plan)


@pytest.mark.parametrize("plan,lengths", [(None, None), ("naive", None), (None, [3, 1])])
def test_every_class_active_equals_the_dense_head(plan, lengths):
    dense, lsh = _step(rg.SoftmaxCrossEntropy(V), plan), _step(rg.LSHSoftmax(V, ALL_ACTIVE, seed=5), plan)
    assert set(lsh.parameters) == set(dense.parameters)  # same names, shapes and draws
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.normal(size=(T, S, I)), rng.integers(0, V, size=(T, S))
        before = {k: v.copy() for k, v in dense.parameters.items()}
        assert lsh.train(x, y, lengths) == pytest.approx(dense.train(x, y, lengths), rel=0, abs=1e-12)
        for name, value in dense.parameters.items():  # SGD(lr=1): the step is the gradient
            np.testing.assert_allclose(before[name] - lsh.parameters[name], before[name] - value, **TOL,
                                       err_msg=name)


@pytest.mark.parametrize("ignore", [-100, 0])  # a negative marker, a class id
def test_ignore_index_equals_the_dense_head_and_the_clock_skips_ignored_columns(ignore):
    dense = _step(rg.SoftmaxCrossEntropy(V, ignore_index=ignore))
    lsh = _step(rg.LSHSoftmax(V, ALL_ACTIVE, seed=5, ignore_index=ignore))
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(T, S, I)), rng.integers(1, V, size=(T, S))
    y[0, 0] = y[2, 1] = ignore
    before = {k: v.copy() for k, v in dense.parameters.items()}
    loss = lsh.train(x, y)
    assert loss == pytest.approx(dense.train(x, y), rel=0, abs=1e-12)
    # by hand: the dense head's mean over the 4 counted columns of the step before the update
    fresh = _step(rg.LSHSoftmax(V, ALL_ACTIVE))  # the parameters of `before`: same names and draws
    logits = rg.LSHSoftmax.dense_logits(fresh.forward(x).outputs["layer0.h_next"], before)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    counted = y != ignore
    want = -np.mean(np.take_along_axis(log_p, np.where(counted, y, 1)[..., None], -1)[..., 0][counted])
    assert loss == pytest.approx(want, rel=1e-12)
    for name, value in dense.parameters.items():
        np.testing.assert_allclose(before[name] - lsh.parameters[name], before[name] - value, **TOL, err_msg=name)
    assert lsh._lsh.index.clock.samples == T * S - 2  # the index's rebuild clock counts the 4 columns
    x2 = rng.normal(size=(T, S, I))
    after = {k: v.copy() for k, v in lsh.parameters.items()}
    assert lsh.train(x2, np.full((T, S), ignore)) == 0.0  # every target ignored: loss 0, gradient 0
    for name, value in lsh.parameters.items():
        np.testing.assert_array_equal(value, after[name], err_msg=name)
    assert lsh._lsh.index.clock.samples == T * S - 2


def test_few_active_classes_touch_few_rows_and_evaluation_is_dense():
    dense, lsh = _step(rg.SoftmaxCrossEntropy(V), lr=0.1), _step(rg.LSHSoftmax(V, FEW_ACTIVE, seed=5), lr=0.1)
    x, y = np.random.default_rng(2).normal(size=(T, S, I)), np.zeros((T, S), np.int64)
    y[:, 1] = 1
    w = lsh.parameters["head.W.weight"].copy()
    sparse_loss = lsh.train(x, y)
    moved = np.flatnonzero(np.any(lsh.parameters["head.W.weight"] != w, axis=1))
    assert {0, 1} <= set(moved) and len(moved) < V  # the labels' rows and a few others
    assert sparse_loss < dense.forward(x, y, carry=False).loss  # a softmax over fewer classes
    dense.set_parameters(lsh.parameters)
    lsh.reset_state()
    want = dense.forward(x, y, carry=False)
    got = lsh.forward(x, y, carry=False)  # evaluation: the dense softmax over all V classes
    assert got.loss == pytest.approx(want.loss, rel=0, abs=1e-12)
    np.testing.assert_allclose(rg.LSHSoftmax.dense_logits(got.outputs["layer0.h_next"], lsh.parameters),
                               want.outputs["head.logits"], **TOL)
    with pytest.raises(ValueError, match=r"takes the head's input array, one of the outputs \('layer0.h_next'"):
        rg.LSHSoftmax.dense_logits(got.outputs, lsh.parameters)   # the dict, not its array


def test_schedule_dump_and_memory_show_the_lsh_head():
    step = _step(rg.LSHSoftmax(V, FEW_ACTIVE))
    text = str(step.schedule)
    noted = [line for line in text.splitlines() if line.endswith("[LSH: K=2 L=2 tables, min active 3 of 11 classes]")]
    assert len(noted) == 2 and all(" loss       head.loss  <- " in line for line in noted)  # forward, backward
    assert estimate(step.schedule).host.scratch >= 3 * 8 * T * S * V  # the dense evaluation's logits
    head = rg.LSHSoftmax(V, dataclasses.replace(FEW_ACTIVE, batch_labels=True))
    assert repr(head) == "LSHSoftmax(11, K=2, L=2, min_active=3, batch_labels=True)"
    assert "[LSH: K=2 L=2 tables, min active 3 of 11 classes + the batch's labels]" in str(_step(head).schedule)
    # regression: min_active 1500 over 11 classes read "min active 1500 of 11 classes"; the padding
    # is capped at the classes, so every class is active
    dense = rg.LSHSoftmax(V, dataclasses.replace(FEW_ACTIVE, min_active=1500))
    assert "[LSH: K=2 L=2 tables, all 11 classes active (min_active 1500)]" in str(_step(dense).schedule)


@pytest.mark.parametrize("make,match", [
    (lambda: rg.LSHSoftmax(1), r"rg.LSHSoftmax\(1\): needs an integer number of classes >= 2"),
    (lambda: rg.LSHSoftmax(0), r"rg.LSHSoftmax\(0\)"),
    (lambda: rg.LSHSoftmax(200, config={"K": 11}), r"rg.LSHSoftmax\(200, config=.*33-bit bucket id"),
    (lambda: rg.LSHSoftmax(200, config={"L": 0}), r"rg.LSHSoftmax\(200, .*LSHConfig.L"),
    (lambda: rg.LSHSoftmax(200, config=(6, 50)), r"rg.LSHSoftmax\(200, .*must be an rnngraph.lsh.LSHConfig"),
    (lambda: rg.LSHSoftmax(200, seed=-1), r"rg.LSHSoftmax\(200, seed=-1\)"),
    (lambda: rg.LSHSoftmax(200, ignore_index=200), r"rg.LSHSoftmax\(200, ignore_index=200\): ignore_index must be "
                                                   r"None or an integer in \[-2147483648, 200\)"),
    (lambda: rg.LSHSoftmax(200, ignore_index=True), r"rg.LSHSoftmax\(200, ignore_index=True\)"),
    (lambda: rg.LSHSoftmax(200, ignore_index=-2**31 - 1), r"rg.LSHSoftmax\(200, ignore_index=-2147483649\)"),
])
def test_bad_arguments_name_the_head(make, match):
    with pytest.raises(GraphError, match=match):
        make()


def test_tables_far_larger_than_the_problem_warn():
    """The default config (G-SLIDE's: 6.8 GB of bucket tables) on 10 classes warns with the size
    and what to change; at Amazon-670K's class count (50 slots a class) and with a small config it
    does not (the tables are not allocated here: the warning comes from the config's arithmetic)."""
    import warnings
    with pytest.warns(UserWarning, match=r"rg.LSHSoftmax\(10\): its bucket tables take 6.8 GB \(K = 6, L = 50: "
                                         r"262,144 buckets of 128 a table\) for 10 classes.*a smaller K, fewer tables L"):
        rg.LSHSoftmax(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rg.LSHSoftmax(670_091)
        rg.LSHSoftmax(10, FEW_ACTIVE)


def test_cuda_backend_takes_the_head_at_compile(monkeypatch):
    """The head trains on CUDA too (tests/test_lsh_head_cuda_sim.py): "cuda" compiles it (the
    simulator counts as CUDA), and "auto" picks CUDA where there is a GPU, as for any head."""
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.LSHSoftmax(V, FEW_ACTIVE, ignore_index=-1), input_size=I)
    assert rg.compile(net, window=T, streams=S, device="cuda").device == "cuda"
    import rnngraph.devices as devices
    monkeypatch.setattr(devices, "cuda_available", lambda simulator_ok=False: True)
    assert rg.compile(net, window=T, streams=S, device="auto").device == "cuda"
