"""Which device a step runs on: ``cuda_available`` and ``resolve_device`` (the ``device=``
option of ``rg.compile`` and ``rg.compile_rnn``)."""
from __future__ import annotations

import os

__all__ = ["cuda_available", "resolve_device"]


def cuda_available(simulator_ok: bool = False) -> bool:
    """Whether numba finds a CUDA GPU (False when numba-cuda or the driver is missing); with
    ``simulator_ok`` numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) counts too."""
    if simulator_ok and os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover - depends on the machine
        return False


def resolve_device(device: str) -> str:
    """``"cpu"`` or ``"cuda"`` for a ``device`` option: ``"auto"`` picks CUDA when numba finds a
    GPU. ValueError for another value; RuntimeError for ``"cuda"`` without a GPU (numba's
    simulator counts)."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available(simulator_ok=True):
        raise RuntimeError("device='cuda' but numba finds no CUDA GPU (install rnngraph[cuda] on a GPU "
                           "machine, or set NUMBA_ENABLE_CUDASIM=1 for the simulator); use device='cpu'")
    return device
