"""codegen/library_ahead.py: every library kernel it lists, with its argument types, compiles to
PTX for sm_90 outside the simulator (numba's NVVM on the CPU; skipped where it cannot run), with
one type per kernel parameter: a table gone stale after a kernel's parameters changed fails here,
not silently in a cold start on the GPU."""
import inspect

from conftest import PTX_PREAMBLE, run_outside_simulator

from rnngraph.codegen import library_ahead

_SCRIPT = PTX_PREAMBLE + r"""
from rnngraph.codegen.library_ahead import kernels
out = {}
for kernel, types in kernels():
    ptx, _ = cuda.compile_ptx(kernel.py_func, types, cc=(9, 0))
    out[kernel.py_func.__name__] = ".entry" in ptx
print(json.dumps(out))
"""


def test_each_listed_kernel_has_one_type_a_parameter():
    for kernel, types in library_ahead.kernels():
        params = inspect.signature(kernel.py_func).parameters
        assert len(types) == len(params), (kernel.py_func.__name__, types)


def test_each_listed_kernel_compiles_for_its_types(tmp_path):
    out = run_outside_simulator(_SCRIPT, cache_dir=tmp_path)
    assert len(out) == len(library_ahead.KERNELS) and all(out.values()), out
