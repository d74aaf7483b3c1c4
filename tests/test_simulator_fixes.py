"""rnngraph/codegen/simulator_fixes.py: in numba's CUDA simulator, the threads of a block that
reach one ``cuda.shared.array`` call together all get the same array (numba-cuda 0.30.4 could
give each its own: a training step then read never-written shared memory)."""
import threading
import time
import types

import numpy as np
import pytest

from rnngraph.codegen import simulator_fixes
from rnngraph.codegen.device import in_simulator

pytestmark = pytest.mark.skipif(not in_simulator(), reason="numba's CUDA simulator only")


def test_threads_meeting_at_one_call_site_share_its_array(monkeypatch):
    from numba.cuda.simulator import kernelapi

    assert kernelapi.FakeCUDAShared.array is simulator_fixes._shared_array

    def slow_empty(shape, dtype):  # every thread is inside the lookup at once
        time.sleep(0.01)
        return np.empty(shape, dtype)
    monkeypatch.setattr(simulator_fixes, "np", types.SimpleNamespace(empty=slow_empty, frombuffer=np.frombuffer))
    shared, start, got = kernelapi.FakeCUDAShared(0), threading.Barrier(8), []

    def thread():
        start.wait()
        got.append(shared.array((4, 3), np.float32))
    threads = [threading.Thread(target=thread) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(a is got[0] for a in got) and got[0].shape == (4, 3)
    assert shared.array((2,), np.float32) is not got[0]  # another call site, another array
