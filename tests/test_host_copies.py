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


class _FakeDriver:
    """The few ``cuda.bindings.driver`` calls Staging makes, recorded (no GPU needed)."""

    class CUevent_flags:  # noqa: N801 (the driver's name)
        CU_EVENT_DISABLE_TIMING = 2

    def __init__(self):
        self.calls = []

    def CUstream(self, handle):  # noqa: N802
        return ("stream", handle)

    def cuEventCreate(self, flags):  # noqa: N802
        return 0, object()

    def cuEventSynchronize(self, event):  # noqa: N802
        return 0

    def cuEventRecord(self, event, stream):  # noqa: N802
        self.calls.append(("record", stream))
        return 0

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):  # noqa: N802
        self.calls.append(("htod", dst, nbytes, stream))
        return 0

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):  # noqa: N802
        self.calls.append(("dtoh", src, nbytes, stream))
        return 0


class _FakeDeviceArray:
    def __init__(self, address, shape, dtype):
        self.shape, self.dtype, self.address = shape, np.dtype(dtype), address
        self.size, self.nbytes = int(np.prod(shape)), int(np.prod(shape)) * np.dtype(dtype).itemsize

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.address, False), "shape": self.shape, "typestr": self.dtype.str, "version": 3}


def test_driver_copies_go_to_each_device_array_with_the_stream_looked_up_once(monkeypatch):
    """The driver path (on a GPU): the device address is kept per key while the array is the
    same object, and looked up again for another array of the same shape under that key."""
    from rnngraph.codegen import host_copies

    fake = _FakeDriver()

    class Stream:
        handle = 7
    monkeypatch.setattr(host_copies, "in_simulator", lambda: False)
    monkeypatch.setattr(host_copies, "_driver", lambda: fake)
    monkeypatch.setattr(host_copies.cuda, "pinned_array", lambda shape, dtype: np.empty(shape, dtype), raising=False)
    stage = host_copies.Staging(Stream())
    a, b = _FakeDeviceArray(1000, (2, 3), np.float32), _FakeDeviceArray(5000, (2, 3), np.float32)
    stage.to_device("x", a, np.ones(6))
    stage.to_device("x", a, np.zeros(6))
    stage.to_device("x", b, np.ones(6))  # another array of the same shape: its own address
    stage.to_host("out", b)
    copies = [c for c in fake.calls if c[0] != "record"]
    assert copies == [("htod", 1000, 24, ("stream", 7)), ("htod", 1000, 24, ("stream", 7)),
                      ("htod", 5000, 24, ("stream", 7)), ("dtoh", 5000, 24, ("stream", 7))]
    assert [c for c in fake.calls if c[0] == "record"] == [("record", ("stream", 7))] * 4
