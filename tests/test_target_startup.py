"""codegen/target_startup.py: numba-cuda's CUDA array math imported without SciPy's linear algebra
(0.3 s of a warm first call on the H200), outside the simulator. A stand-in ``scipy`` package on
the path records whether ``scipy.linalg`` was imported, so the check holds where SciPy is absent
(CI) as where it is installed (the H200 image)."""
from conftest import run_outside_simulator

_SCRIPT = r"""
import json, os, sys, tempfile
root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "scipy", "linalg"))
open(os.path.join(root, "scipy", "__init__.py"), "w").write("__version__ = '1.14.1'\n")
open(os.path.join(root, "scipy", "linalg", "__init__.py"), "w").write("import builtins\nbuiltins.SCIPY_LINALG = True\n")
open(os.path.join(root, "scipy", "linalg", "cython_blas.py"), "w").write("")
sys.path.insert(0, root)
import builtins
if FIRST == "rnngraph":
    import rnngraph.codegen.device  # applies the fix
from numba.cuda.np import arraymath, linalg
print(json.dumps({"have_blas": arraymath._HAVE_BLAS, "scipy_linalg": getattr(builtins, "SCIPY_LINALG", False),
                  "ensure_blas_restored": linalg.ensure_blas.__module__ == "numba.cuda.np.linalg"}))
import shutil
shutil.rmtree(root)
"""


def _run(first: str) -> dict:
    """The script's report with ``first`` ("rnngraph": through rnngraph's kernel helpers; "numba":
    numba-cuda alone) imported first."""
    return run_outside_simulator(f"FIRST = {first!r}\n" + _SCRIPT, timeout=300)


def test_array_math_loads_without_scipy_linalg():
    """Imported through rnngraph's kernel helpers, numba-cuda's array math never imports
    scipy.linalg and takes the no-BLAS path; numba's ensure_blas is its own again afterwards. Without
    them (the control), the same stand-in SciPy is imported and BLAS reported available."""
    assert _run("rnngraph") == {"have_blas": False, "scipy_linalg": False, "ensure_blas_restored": True}
    assert _run("numba") == {"have_blas": True, "scipy_linalg": True, "ensure_blas_restored": True}
