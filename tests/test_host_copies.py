"""Staging (rnngraph/codegen/host_copies.py): host arrays of any dtype cast into the device
buffer's as ``astype`` would, copies out through a reused buffer, and a size mismatch named.
In numba's simulator without a GPU (numba's copies); the GPU tier runs the driver's copies
through every training step (tests/test_gpu_step_graph.py)."""
import os

import numpy as np
import pytest

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]


def test_staged_copies_cast_round_trip_and_name_a_size_mismatch():
    from numba import cuda

    from rnngraph.codegen.host_copies import Staging
    stream = cuda.stream()
    stage = Staging(stream)
    ids = cuda.device_array((2, 3), np.int32)
    stage.to_device("ids", ids, np.arange(6, dtype=np.int64) - 2)  # int64, flat -> (2, 3) int32
    x = cuda.device_array(4, np.float32)
    stage.to_device("x", x, [0.5, 1.25, -3.0, 1e-8])
    got_ids, got_x = stage.to_host("ids out", ids), stage.to_host("x out", x)
    stream.synchronize()
    np.testing.assert_array_equal(got_ids, np.arange(6).reshape(2, 3) - 2)
    assert got_ids.dtype == np.int32
    np.testing.assert_array_equal(got_x, np.float32([0.5, 1.25, -3.0, 1e-8]))
    stage.to_device("x", x, np.zeros(4))  # the same buffer, rewritten
    stream.synchronize()
    assert not x.copy_to_host().any()
    with pytest.raises(ValueError, match="targets: 5 values for a buffer of 6"):
        stage.to_device("targets", ids, np.zeros(5))
