"""The chunked softmax cross-entropy head (``rg.SoftmaxCrossEntropy(V, chunk=c)``, op
``chunked_softmax_xent``) against the dense one on the NumPy backends, float64: the op against
linear + softmax_xent (loss and the gradients of the head's input, weight and bias) for V = 11
in chunks that do and do not divide it, ignored targets included; whole training steps (also a
timestep at a time, plan="naive"), with and without lengths; the schedule dump; the memory
estimate; bad chunks."""
import numpy as np
import pytest

import rnngraph as rg
from rnngraph import ops
from rnngraph.errors import GraphError
from rnngraph.memory import estimate

T, S, I, H, V = 3, 2, 3, 4, 11
TOL = dict(rtol=0, atol=1e-12)


def _dense(h, ids, w, b, at, g):
    """(loss, dh, dW, db) of linear then softmax_xent, the dense head's ops."""
    lin, xent = ops.REGISTRY["linear"], ops.REGISTRY["softmax_xent"]
    z = lin.forward([h], [w, b], {})
    loss = xent.forward([z, ids], [], at)
    (gz, _), _ = xent.vjp(g, loss, [z, ids], [], at)
    (gh,), (gw, gb) = lin.vjp(gz, z, [h], [w, b], {})
    return loss, gh, gw, gb


@pytest.mark.parametrize("chunk", [1, 4, 11, 16])
@pytest.mark.parametrize("ignore", [None, -100, 3])
def test_op_equals_linear_then_softmax_xent(chunk, ignore):
    rng = np.random.default_rng(0)
    n = 7
    h, w, b = rng.normal(size=(n, H)) * 3, rng.normal(size=(V, H)), rng.normal(size=V)
    ids = rng.integers(0, V, size=(n, 1))
    if ignore is not None:
        ids[[1, 4]] = ignore
    g = rng.normal(size=(n, 1))
    at = {} if ignore is None else {"ignore_index": ignore}
    op = ops.REGISTRY["chunked_softmax_xent"]
    loss = op.forward([h, ids], [w, b], {**at, "chunk": chunk})
    (gh, gids), (gw, gb) = op.vjp(g, loss, [h, ids], [w, b], {**at, "chunk": chunk})
    want = _dense(h, ids, w, b, at, g)
    assert gids is None
    for name, got, expect in zip(("loss", "dh", "dW", "db"), (loss, gh, gw, gb), want):
        np.testing.assert_allclose(got, expect, **TOL, err_msg=name)
    if ignore is not None:
        assert (loss[[1, 4]] == 0).all() and (gh[[1, 4]] == 0).all()


def _steps(chunk, ignore=None, plan=None):
    heads = [rg.SoftmaxCrossEntropy(V, ignore_index=ignore, chunk=c) for c in (None, chunk)]
    return [rg.compile(rg.Sequential(rg.cells.lstm(hidden=H), head, input_size=I), window=T, streams=S,
                       device="cpu", dtype="float64", optimizer=rg.SGD(lr=0.5), seed=1, plan=plan)
            for head in heads]


@pytest.mark.parametrize("ignore,plan", [(None, None), (-100, None), (-100, "naive")])
def test_training_steps_equal_the_dense_head(ignore, plan):
    """Whole windows (the loss once over T*S columns), and with plan="naive" a timestep at a time."""
    dense, chunked = _steps(4, ignore, plan)
    assert set(chunked.parameters) == set(dense.parameters)  # same names, same draws
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.normal(size=(T, S, I)), rng.integers(0, V, size=(T, S))
        if ignore is not None:
            y[0, 1] = y[2, 0] = ignore
        assert chunked.train(x, y) == pytest.approx(dense.train(x, y), rel=0, abs=1e-12)
    for name, value in dense.parameters.items():  # the gradients of every parameter, through SGD
        np.testing.assert_allclose(chunked.parameters[name], value, **TOL, err_msg=name)
    for name, value in dense.state.items():
        np.testing.assert_allclose(chunked.state[name], value, **TOL, err_msg=name)


def test_all_ignored_targets_give_loss_zero_and_no_update():
    _, chunked = _steps(4, -100)
    before = chunked.parameters
    assert chunked.train(np.ones((T, S, I)), np.full((T, S), -100)) == 0.0
    for name, value in chunked.parameters.items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_lengths_leave_padded_steps_out_as_the_dense_head():
    dense, chunked = _steps(4)
    rng = np.random.default_rng(2)
    x, y, lengths = rng.normal(size=(T, S, I)), rng.integers(0, V, size=(T, S)), np.array([3, 1])
    assert chunked.train(x, y, lengths=lengths) == pytest.approx(dense.train(x, y, lengths=lengths), abs=1e-12)
    for name, value in dense.parameters.items():
        np.testing.assert_allclose(chunked.parameters[name], value, **TOL, err_msg=name)


def test_output_is_the_value_the_head_follows():
    _, chunked = _steps(4)
    out = chunked.forward(np.ones((T, S, I)))
    assert list(out.outputs) == ["layer0.h_next"] and out.outputs["layer0.h_next"].shape == (T, S, H)
    assert "head.logits" not in chunked.graph.by_name


def test_schedule_dump_shows_the_chunks():
    _, chunked = _steps(4)
    lines = [line for line in str(chunked.schedule).splitlines() if "head.loss" in line]
    assert len(lines) == 2  # forward, and backward (which also writes the weight's and bias's gradients)
    assert all(line.endswith("[11 classes in 3 chunks of 4, the last 3]") for line in lines)
    assert "-> d.layer0.h_next, d.head.W.weight, d.head.W.bias" in lines[1]
    one = rg.compile(rg.Sequential(rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(V, chunk=64), input_size=I),
                     window=T, streams=S, device="cpu")
    assert "[11 classes in 1 chunk of 11]" in str(one.schedule)


@pytest.mark.parametrize("chunk", [0, -4, 2.5, "4", True])
def test_bad_chunk_names_the_head_and_the_value(chunk):
    with pytest.raises(GraphError, match=rf"rg\.SoftmaxCrossEntropy\(11, chunk={chunk!r}\): chunk must be None"):
        rg.SoftmaxCrossEntropy(V, chunk=chunk)


def test_repr_names_the_chunk():
    assert repr(rg.SoftmaxCrossEntropy(V, ignore_index=-100, chunk=4)) == \
        "SoftmaxCrossEntropy(11, ignore_index=-100, chunk=4)"


def test_memory_estimate_counts_one_chunk_not_the_logits():
    dense, chunked = _steps(4)
    cols = T * S
    assert estimate(chunked.schedule, "cuda").gpu.scratch == 4 * (cols * 4 + 3 * cols)
    assert estimate(dense.schedule, "cuda").gpu.scratch == 0
    # the dense head's logits and their gradient (66 floats, its arena place rounded up to 68:
    # the gradient arena's arrays start 16-byte aligned, codegen/buffers.py)
    logits = 4 * (cols * V + -(-cols * V // 4) * 4)
    assert estimate(dense.schedule, "cuda").gpu.activations - \
        estimate(chunked.schedule, "cuda").gpu.activations == logits
