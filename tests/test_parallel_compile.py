"""codegen/parallel_compile.py without a GPU: nothing starts for fewer than two kernels to compile,
and a worker that fails (here: its generated file is gone) is reported, not raised -- the program
then compiles the kernel itself. On the GPU the workers' kernels are loaded from the disk cache:
tests/test_gpu_kernel_cache.py."""
import types

from rnngraph.codegen.parallel_compile import precompile


class _Uncached:
    def has_entry(self, sig, target_context):
        return False


def _kernel(path, name):
    code = types.SimpleNamespace(co_filename=str(path))
    return types.SimpleNamespace(_cache=_Uncached(), targetctx=None,
                                 py_func=types.SimpleNamespace(__code__=code, __name__=name))


def test_failed_workers_are_reported_and_single_kernels_compile_here(tmp_path):
    missing = tmp_path / "rg_gone.py"
    assert precompile([(_kernel(missing, "loop0_fwd_1"), (1,))]) == []  # one kernel: no worker
    errors = precompile([(_kernel(missing, "loop0_fwd_1"), (1,)), (_kernel(missing, "loop0_bwd_2"), (2,))],
                        workers=2)
    assert len(errors) == 2
    assert errors[0].startswith("loop0_fwd_1: worker exited 1") and "rg_gone.py" in errors[0]
    assert errors[1].startswith("loop0_bwd_2: worker exited 1")
