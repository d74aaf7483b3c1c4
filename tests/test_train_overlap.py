"""CUDA training calls enqueued behind an unsettled one (codegen/step.py CudaBackend.train's
overlap) train exactly as calls each read before the next: the step scalars (Adam's bias
correction, SGD's first step) come from the device's pick of two rows. In numba's simulator."""
import os

import numpy as np
import pytest

import rnngraph as rg

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="the CUDA simulator")


def _step(optimizer):
    net = rg.Sequential(rg.cells.gru(hidden=3), rg.MSE(1), input_size=2)
    return rg.compile(net, window=2, streams=2, device="cuda", optimizer=optimizer, seed=1)


@pytest.mark.parametrize("make", [lambda: rg.Adam(lr=1e-2), lambda: rg.SGD(lr=0.1, momentum=0.9)],
                         ids=["adam", "sgd-momentum"])
def test_unread_calls_train_as_calls_read_one_by_one(make):
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((2, 2, 2)).astype(np.float32), rng.standard_normal((2, 2, 1)).astype(np.float32))
               for _ in range(3)]
    ahead, one_by_one = _step(make()), _step(make())
    unread = [ahead.train(x, y) for x, y in batches]
    assert not unread[-1].ready and unread[0].ready  # the second call settled the first; the last runs
    read = [float(one_by_one.train(x, y)) for x, y in batches]
    assert [float(v) for v in unread] == read
    assert ahead.optimizer.steps == one_by_one.optimizer.steps == 3
    for name, value in one_by_one.parameters.items():
        np.testing.assert_array_equal(ahead.parameters[name], value, err_msg=name)
