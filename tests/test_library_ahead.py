"""codegen/library_ahead.py: every library kernel it lists has one argument type per parameter,
and compiles to PTX for sm_90 with those types outside the simulator (numba's NVVM on the CPU;
skipped where it cannot run): an entry left behind by a change of a kernel's parameters or of
their use fails here. A launch whose argument types changed (the entry then compiles what the
step no longer launches) shows on the GPU only: tests/test_gpu_kernel_cache.py."""
import inspect

import pytest
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


@pytest.mark.slow  # NVVM: left out of the fast tier, as the other PTX checks
def test_each_listed_kernel_compiles_for_its_types(tmp_path):
    out = run_outside_simulator(_SCRIPT, cache_dir=tmp_path)
    assert len(out) == len(library_ahead.KERNELS) and all(out.values()), out
