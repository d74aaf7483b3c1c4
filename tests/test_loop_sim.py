"""tests/loop_sim.py's check of loop kernels launched alone can fail: a forward loop that does not
run leaves NaN in what it should store, a backward loop run twice adds its gradients twice, and
two results one bit apart are not the same."""
import os

import numpy as np
import pytest

import rnngraph as rg
from loop_sim import assert_same_results, check_loops
from rnngraph.schedule import Loop

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                reason="simulator tests (the GPU tier runs tests/test_gpu.py)")


def _gpu():
    net = rg.stacked(rg.cells.lstm, 1, 4, vocab=5, embed=3)
    return rg.compile(net, window=2, streams=2, device="cuda", seed=1)


def _loop_index(steps) -> int:
    return next(i for i, st in enumerate(steps) if isinstance(st, Loop))


def test_a_correct_step_passes_and_returns_what_the_device_computed():
    gpu = _gpu()
    result = check_loops(gpu)
    assert list(result) == ["loop0", "loop0 (backward)"]
    assert "layer0.h_next" in result["loop0"] and "d.layer0.U.weight" in result["loop0 (backward)"]
    assert np.abs(result["loop0 (backward)"]["d.layer0.W"]).max() > 0  # the gradient into the input projection
    assert_same_results(result, check_loops(gpu))


def test_a_forward_loop_that_does_not_run_fails():
    gpu = _gpu()
    prog = gpu._cuda.program
    prog.forward_plan[_loop_index(gpu.schedule.forward)] = []
    with pytest.raises(AssertionError, match=r"loop0: layer0\.\w+"):
        check_loops(gpu)


def test_a_backward_loop_run_twice_fails():
    gpu = _gpu()
    prog = gpu._cuda.program
    i = _loop_index(gpu.schedule.backward)
    prog.backward_plan[i] = prog.backward_plan[i] * 2
    with pytest.raises(AssertionError, match=r"loop0 \(backward\): d\."):
        check_loops(gpu)


def test_results_one_bit_apart_differ():
    a = {"loop0": {"h": np.array([1.0, 2.0], np.float32)}}
    b = {"loop0": {"h": np.nextafter(a["loop0"]["h"], np.float32(3))}}
    assert_same_results(a, {"loop0": {"h": a["loop0"]["h"].copy()}})
    with pytest.raises(AssertionError, match="loop0: h"):
        assert_same_results(a, b)
    with pytest.raises(AssertionError):
        assert_same_results(a, {"loop1": a["loop0"]})
