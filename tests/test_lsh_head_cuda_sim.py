"""``rg.LSHSoftmax`` in the compiled CUDA training step (rnngraph/codegen/lsh_step.py; G-SLIDE,
Pan et al., IEEE TPDS 2022), tiny shapes in numba's simulator (the GPU tier runs the same): with
every class active its steps equal the dense ``rg.SoftmaxCrossEntropy`` CUDA step's (loss and
parameters after Adam, float32), ignored columns and lengths included; with few active classes (no padding,
buckets that do not overflow: the same active sets on both backends) the loss, the head input's
gradient and every parameter's gradient equal the NumPy backend's LSH step, and evaluation is
dense; the index is rebuilt on the clock (finite calls only) and after set_parameters."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.errors import GraphError
from rnngraph.lsh import LSHConfig

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]
T, S, I, H, V = 2, 2, 3, 4, 11
TOL = dict(rtol=1e-5, atol=2e-6)


def _step(head, device="cuda", optimizer=None, **kw):
    net = rg.Sequential(rg.cells.lstm(hidden=H), head, input_size=I)
    return rg.compile(net, window=T, streams=S, device=device, dtype="float32",
                      optimizer=optimizer or rg.Adam(lr=0.01), seed=1, **kw)


def _data(rng, ignore=None):
    x, y = rng.normal(size=(T, S, I)).astype(np.float32), rng.integers(0, V, size=(T, S))
    if ignore is not None:
        y[0, 1] = y[1, 0] = ignore
    return x, y


@pytest.mark.parametrize("ignore,lengths", [(None, None), (-100, [2, 1])])
def test_every_class_active_equals_the_dense_cuda_step(ignore, lengths):
    config = LSHConfig(K=2, L=2, bin_size=4, capacity=4, min_active=V)
    dense = _step(rg.SoftmaxCrossEntropy(V, ignore_index=ignore))
    lsh = _step(rg.LSHSoftmax(V, config, seed=5, ignore_index=ignore))
    assert lsh.device == "cuda"
    rng = np.random.default_rng(0)
    for _ in range(2):  # one step, then a second from the first's parameters and Adam moments
        x, y = _data(rng, ignore)
        assert float(lsh.train(x, y, lengths)) == pytest.approx(float(dense.train(x, y, lengths)), rel=1e-5)
        want = dense.parameters
        for name, value in lsh.parameters.items():
            np.testing.assert_allclose(value, want[name], **TOL, err_msg=name)


def _head_input_gradients(step):
    """Records the head input's gradient each training call's LSH loss adds (CPU or CUDA)."""
    seen = []
    lsh = step._lsh
    if step.device == "cpu":
        import dataclasses

        def vjp(g, y, xs, ps, at, inner=lsh.op.vjp):
            out = inner(g, y, xs, ps, at)
            seen.append(out[0][0].copy())
            return out
        lsh.op = dataclasses.replace(lsh.op, vjp=vjp)
    else:
        def backward(call, inner=lsh._backward):
            before = call.gargs[0].copy_to_host()
            inner(call)
            seen.append(call.gargs[0].copy_to_host() - before)
        lsh._backward = backward
    return seen


@pytest.mark.parametrize("batch_labels", [False, True])
def test_few_active_classes_match_the_numpy_backend(batch_labels):
    """min_active 0 and buckets of V slots: the sets are the buckets' union and the label (all the
    call's labels with batch_labels) on both backends (the same bins and tables from the same
    seed and weights); SGD(lr=1) so that a parameter's change is its gradient."""
    config = LSHConfig(K=2, L=2, bin_size=4, capacity=V, min_active=0, batch_labels=batch_labels)
    steps = [_step(rg.LSHSoftmax(V, config, seed=3, ignore_index=-1), device, rg.SGD(lr=1.0))
             for device in ("cpu", "cuda")]
    seen = [_head_input_gradients(s) for s in steps]
    rng = np.random.default_rng(2)
    x, y = _data(rng, ignore=-1)
    before = steps[0].parameters
    cpu_loss, gpu_loss = (float(s.train(x, y)) for s in steps)
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-5)
    np.testing.assert_allclose(seen[1][0], seen[0][0], **TOL)
    scratch = steps[1]._lsh._scratch[(T * S, 0)]
    sets = scratch["sizes"].copy_to_host()
    assert sets.max() < V  # few active: the sparse loss differs from the dense one
    ids, offsets = scratch["ids"].copy_to_host(), scratch["offsets"].copy_to_host()
    labels = {int(y[0, 0]), int(y[1, 1])}  # the columns not ignored
    holds = [labels <= set(ids[offsets[i]:offsets[i + 1]]) for i in range(T * S)]
    assert holds == [True] * 4 if batch_labels else not all(holds)
    np.testing.assert_array_equal(seen[1][0][[1, 2]], 0)  # the ignored columns (0, 1) and (1, 0)
    assert np.abs(seen[1][0][[0, 3]]).min(axis=1).all()
    after = [s.parameters for s in steps]
    for name in before:
        np.testing.assert_allclose(before[name] - after[1][name], before[name] - after[0][name], **TOL, err_msg=name)
    outs = [s.forward(x, y, carry=False) for s in steps]  # evaluation: dense on both
    assert outs[1].loss == pytest.approx(outs[0].loss, rel=1e-5)


def test_batch_labels_sets_hold_every_column_label_over_many_classes():
    """batch_labels with 300 classes, one bucket of one id (L = 1) and no padding: each of the
    T*S = 4 columns' sets holds the 4 columns' labels and at most its bucket id, so the scratch
    must be sized for the call's labels, not a column's one (the simulator checks the bounds)."""
    config = LSHConfig(K=1, L=1, bin_size=4, capacity=1, min_active=0, batch_labels=True)
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.LSHSoftmax(300, config, seed=2), input_size=I)
    step = rg.compile(net, window=T, streams=S, device="cuda", dtype="float32", optimizer=rg.SGD(lr=0.1), seed=1)
    x = np.random.default_rng(6).normal(size=(T, S, I)).astype(np.float32)
    y = np.array([[17, 250], [3, 122]])
    assert np.isfinite(float(step.train(x, y)))
    scratch = step._lsh._scratch[(T * S, 0)]
    ids, offsets = scratch["ids"].copy_to_host(), scratch["offsets"].copy_to_host()
    for i in range(T * S):
        got = set(ids[offsets[i]:offsets[i + 1]].tolist())
        assert {17, 250, 3, 122} <= got and len(got) <= 5, (i, sorted(got))


def test_the_index_is_rebuilt_on_the_clock():
    """rebuild_every = T*S columns: the build at the first call, then a rebuild before each call
    after a finite one; redraw_every = 2*T*S: new bins every second; a non-finite call (skipped)
    counts for nothing; set_parameters makes the index stale."""
    config = LSHConfig(K=1, L=1, bin_size=4, capacity=4, min_active=2, rebuild_every=T * S, redraw_every=2 * T * S)
    step = _step(rg.LSHSoftmax(V, config), nonfinite="skip")
    rng = np.random.default_rng(3)
    x, y = _data(rng)
    counts = []
    for bad in (False, False, True, False):
        step.train(np.full_like(x, np.nan) if bad else x, y)
        counts.append((step._lsh.index.rebuilds, step._lsh.index.redraws, step._lsh.index.clock.samples))
        step.last_grad_norm  # settle
    assert step.skipped_steps == 1
    assert counts == [(1, 0, 0), (2, 0, 4), (3, 1, 8), (3, 1, 8)]
    step.set_parameters(step.parameters)
    step.train(x, y)
    assert (step._lsh.index.rebuilds, step._lsh.index.clock.samples) == (4, 12)


def test_densified_hashing_is_refused_on_cuda_by_name():
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.LSHSoftmax(V, LSHConfig(K=1, L=1, densify=True)), input_size=I)
    with pytest.raises(GraphError, match=r"LSHSoftmax\(11, K=1, L=1, min_active=1500\): config.densify"):
        rg.compile(net, window=T, streams=S, device="cuda")


@pytest.mark.parametrize("batch_labels,advice", [(True, r"grows with \(T \* S\)\*\*2: use LSHConfig\(batch_labels=False\)"),
                                                 (False, r"use fewer columns a call \(T \* S\) or a smaller config")])
def test_active_set_scratch_out_of_gpu_memory_is_a_one_line_memory_error(monkeypatch, batch_labels, advice):
    """The GPU refusing the active sets' scratch (the driver's CUDA_ERROR_OUT_OF_MEMORY) is a
    NotEnoughMemory naming the head, the columns and the bytes, with what to change (with the
    batch's labels the scratch grows with the square of the columns), not numba's CudaAPIError;
    another driver error passes through unchanged; nothing was trained."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    from rnngraph.codegen.lsh_step import DeviceLSHHead
    from rnngraph.memory import NotEnoughMemory

    def refuse(*args):
        raise CudaAPIError("[2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
    step = _step(rg.LSHSoftmax(V, LSHConfig(K=2, L=2, bin_size=4, capacity=4, min_active=3,
                                            batch_labels=batch_labels)))
    before = step.parameters
    monkeypatch.setattr(DeviceLSHHead, "_allocate", staticmethod(refuse))
    x, y = _data(np.random.default_rng(0))
    with pytest.raises(NotEnoughMemory, match=rf"LSHSoftmax\(11, .*\): the active sets of {T * S} columns need "
                                              rf"about .* of GPU scratch, .*{advice}"):
        float(step.train(x, y))
    for name, value in step.parameters.items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)

    def other(*args):
        raise CudaAPIError("[700] CUDA_ERROR_ILLEGAL_ADDRESS")
    monkeypatch.setattr(DeviceLSHHead, "_allocate", staticmethod(other))
    with pytest.raises(CudaAPIError, match="ILLEGAL_ADDRESS"):
        float(_step(rg.LSHSoftmax(V, LSHConfig(K=2, L=2, bin_size=4, capacity=4, min_active=3))).train(x, y))
