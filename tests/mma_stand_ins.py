"""Python stand-ins for codegen/ptx.py's tensor-core intrinsics, for running the GPU code shape of
the loop kernels (codegen/loop_mma.py) in numba's CUDA simulator, where inline PTX cannot run.

``mma_*``: a warp's 32 simulated threads (lane = threadIdx.x % 32) meet at a barrier, one of them
computes D from every lane's fragments with codegen/mma_fragments.py's NumPy reference, and each
lane takes its own four values. ``cvt_rna_tf32`` rounds to TF32 ties to even (the GPU's ``.rna``
rounds ties away from zero) and ``pack_bf16x2`` packs as the reference does. ``load_f32x4``
reads four floats and checks the 16-byte alignment the GPU's vector load needs. Only for
tests/test_loop_mma_sim.py; :func:`reset` drops the barriers between tests.
"""
from __future__ import annotations

import threading

import numpy as np

from rnngraph.codegen import mma_fragments as mf
from rnngraph.precision import round_tf32

_lock = threading.Lock()
_warps: dict = {}
#: the number of warp-wide products computed since the last :func:`reset`
CALLS = [0]
#: the number of 16-byte vector loads since the last :func:`reset`
LOADS = [0]


def reset() -> None:
    """Forget every warp's barrier and the call count."""
    with _lock:
        _warps.clear()
        CALLS[0] = LOADS[0] = 0


def _warp(key) -> dict:
    with _lock:
        if key not in _warps:
            _warps[key] = {"bar": threading.Barrier(32, timeout=600), "a": [None] * 32, "b": [None] * 32,
                           "c": [None] * 32, "d": None}
        return _warps[key]


def _mma(reference, dtype, a, b, c) -> tuple:
    thread = threading.current_thread()  # numba's simulator runs each CUDA thread as a Python thread
    key, lane = (thread.blockIdx.x, thread.threadIdx.x // 32), thread.threadIdx.x % 32
    w = _warp(key)
    w["a"][lane], w["b"][lane], w["c"][lane] = a, b, c
    if w["bar"].wait() == 0:
        w["d"] = reference(np.array(w["a"], dtype), np.array(w["b"], dtype), np.array(w["c"], np.float32))
        CALLS[0] += 1
    w["bar"].wait()
    d = w["d"][lane]
    w["bar"].wait()
    return tuple(np.float32(x) for x in d)


def mma_tf32_m16n8k8(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """codegen/ptx.py's ``mma_tf32_m16n8k8`` for one simulated lane."""
    return _mma(mf.mma_tf32_m16n8k8_reference, np.float32, (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3))


def mma_bf16_m16n8k16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """codegen/ptx.py's ``mma_bf16_m16n8k16`` for one simulated lane."""
    return _mma(mf.mma_bf16_m16n8k16_reference, np.uint32, (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3))


def cvt_rna_tf32(x):
    """``x`` rounded to TF32 (ties to even; see the module docstring)."""
    return np.float32(round_tf32(np.float32(x)))


def pack_bf16x2(lo, hi):
    """Two floats as one word of two bf16, ``lo`` in the low half."""
    return np.uint32(mf.pack_bf16x2_reference(np.float32(lo), np.float32(hi)))


def load_f32x4(a, r, s, k):
    """``a[r, s, k : k + 4]`` as a tuple, after checking that its address is a multiple of 16
    bytes (on the GPU a misaligned vector load faults)."""
    four = np.asarray(getattr(a, "_ary", a))[int(r), int(s), int(k):int(k) + 4]
    assert four.size == 4 and four.ctypes.data % 16 == 0, f"load_f32x4 at [{r}, {s}, {k}]: not 16-byte aligned"
    with _lock:
        LOADS[0] += 1
    return tuple(np.float32(x) for x in four)
