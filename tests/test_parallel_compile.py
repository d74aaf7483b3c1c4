"""codegen/parallel_compile.py without a GPU: nothing starts for fewer than three kernels to compile,
and a worker that fails (here: its generated file is gone) is reported, not raised -- the program
then compiles the kernel itself. On the GPU the workers' kernels are loaded from the disk cache:
tests/test_gpu_kernel_cache.py."""
import types

from rnngraph.codegen.parallel_compile import MIN_KERNELS, history, precompile


class _Uncached:
    def has_entry(self, sig, target_context):
        return False


def _kernel(path, name):
    code = types.SimpleNamespace(co_filename=str(path))
    return types.SimpleNamespace(_cache=_Uncached(), targetctx=None,
                                 py_func=types.SimpleNamespace(__code__=code, __name__=name))


def test_failed_workers_are_reported_and_few_kernels_compile_here(tmp_path):
    missing = tmp_path / "rg_gone.py"
    names = ["loop0_fwd_1", "loop1_fwd_2", "loop1_bwd_3"]
    jobs = [(_kernel(missing, name), (k,)) for k, name in enumerate(names)]
    assert MIN_KERNELS == 3 and precompile(jobs[:2]) == []  # two kernels: no worker
    before = len(history)
    errors = precompile(jobs, workers=2)
    assert history[before:] == [{**history[-1], "kernels": 3, "workers": 2, "failed": 3}]
    assert len(history) == before + 1 and history[-1]["seconds"] > 0
    assert len(errors) == 3
    assert errors[0].startswith("loop0_fwd_1: worker exited 1") and "rg_gone.py" in errors[0]
    assert [e.split(":")[0] for e in errors] == names

