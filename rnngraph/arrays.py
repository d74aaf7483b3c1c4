"""Telling apart the arrays a call may receive, without importing their libraries."""
from __future__ import annotations


def array_kind(x) -> str:
    """Where an array lives: ``torch`` or ``cupy`` (device arrays of those libraries), ``numba``
    (a numba device array), ``cuda`` (another ``__cuda_array_interface__`` object) or ``host``
    (anything else: NumPy arrays, lists, PyTorch CPU tensors)."""
    module = type(x).__module__.split(".")[0]
    if module == "torch":  # (a tensor that requires grad raises on __cuda_array_interface__)
        return "torch" if getattr(x, "is_cuda", False) else "host"
    is_numba = bool(getattr(x, "__cuda_ndarray__", False))
    if not (is_numba or hasattr(x, "__cuda_array_interface__")):
        return "host"
    if module == "cupy":
        return module
    return "numba" if is_numba else "cuda"


def shape_of(a) -> tuple:
    """The shape of an array of any kind (a tuple of ints), or of a nested list."""
    import numpy as np
    shape = getattr(a, "shape", None)
    return tuple(int(n) for n in shape) if shape is not None else np.shape(a)
