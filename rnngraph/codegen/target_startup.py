"""numba-cuda's CUDA target without SciPy's import: applied when rnngraph's kernel helpers
(codegen/device.py) are imported for a GPU (not the simulator), in the program and in each compile
worker (codegen/parallel_compile.py).

numba-cuda 0.30.4's ``numba.cuda.np.arraymath``, imported when the CUDA target context first loads
its registries (a process's first kernel compile or cache load), calls
``numba.cuda.np.linalg.ensure_blas`` at import to decide whether ``np.dot`` on device arrays may
call a host BLAS, which imports ``scipy.linalg``: 0.30 s of the 2.0 s warm first call of a 2 x 512
LM on the H200 (bench/results/h200-20261203-startup-warm-profile-bytecode-2x512-s64.txt), on the
cold path once in the program and once in every compile worker. No device code can call a host
BLAS, and rnngraph's kernels call no ``np.dot``. :func:`apply` imports the module with
``ensure_blas`` raising ImportError, as it does where SciPy is absent (numba's ``_HAVE_BLAS`` is
then False: ``np.dot`` of two vectors in a kernel is a loop), and puts ``ensure_blas`` back
(with SciPy on the path, the module's import took 1.165 -> 0.853 s with the package's lazy names
on the CPU, bench/results/cpu-20261205-startup-imports.txt).
"""
from __future__ import annotations

import sys

__all__ = ["apply"]


def _no_blas() -> None:
    raise ImportError("rnngraph: numba-cuda's array math imported without SciPy's BLAS (codegen/target_startup.py)")


def apply() -> None:
    """Import ``numba.cuda.np.arraymath`` without its SciPy import, once; nothing if it is imported
    already or SciPy's BLAS bindings are (then its check costs nothing)."""
    if "numba.cuda.np.arraymath" in sys.modules or "scipy.linalg.cython_blas" in sys.modules:
        return
    from numba.cuda.np import linalg

    blas = linalg.ensure_blas
    linalg.ensure_blas = _no_blas
    try:
        from numba.cuda.np import arraymath  # noqa: F401
    finally:
        linalg.ensure_blas = blas
