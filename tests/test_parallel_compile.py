"""codegen/parallel_compile.py without a GPU: nothing starts for fewer than three workers' jobs,
and a worker that fails (here: its generated file is gone) is reported, not raised -- the program
then compiles the kernel itself. The library kernels' worker (codegen/library_ahead.py) is one
more job, first to start. On the GPU the workers' kernels are loaded from the disk cache:
tests/test_gpu_kernel_cache.py."""
import types

import pytest

from rnngraph.codegen import parallel_compile
from rnngraph.codegen.parallel_compile import MIN_KERNELS, history, precompile


class _Uncached:
    def has_entry(self, sig, target_context):
        return False


def _kernel(path, name):
    code = types.SimpleNamespace(co_filename=str(path))
    return types.SimpleNamespace(_cache=_Uncached(), targetctx=None,
                                 py_func=types.SimpleNamespace(__code__=code, __name__=name))


@pytest.fixture
def library(monkeypatch):
    """The library kernels precompile sees as uncached: none unless a test adds some."""
    listed = []
    monkeypatch.setattr(parallel_compile.library_ahead, "kernels", lambda: listed)
    return listed


def test_failed_workers_are_reported_and_few_kernels_compile_here(tmp_path, library):
    missing = tmp_path / "rg_gone.py"
    names = ["loop0_fwd_1", "loop1_fwd_2", "loop1_bwd_3"]
    jobs = [(_kernel(missing, name), (k,)) for k, name in enumerate(names)]
    assert MIN_KERNELS == 3 and precompile(jobs[:2]) == []  # two kernels: no worker
    before = len(history)
    errors = precompile(jobs, workers=2)
    assert history[before:] == [{**history[-1], "kernels": 3, "library": 0, "workers": 2, "failed": 3,
                                 "phases": []}]
    assert len(errors) == 3
    assert errors[0].startswith("loop0_fwd_1: worker exited 1") and "rg_gone.py" in errors[0]
    assert [e.split(":")[0] for e in errors] == names


def test_the_library_worker_counts_as_a_job_and_starts_first(tmp_path, library):
    library += [(_kernel(tmp_path / "lib.py", "adam"), ("f32",))]
    jobs = [(_kernel(tmp_path / "rg_gone.py", f"loop{k}"), (k,)) for k in range(2)]
    before = len(history)
    assert precompile(jobs, library=False) == []  # two loop kernels, no library job: no worker
    errors = precompile(jobs, workers=8)  # two loop kernels and the library: three workers
    [entry] = history[before:]
    assert entry["kernels"] == 2 and entry["library"] == 1 and entry["workers"] == 3
    # the library worker ran first; in its process the (simulator's) library kernels are all
    # cached, so it compiled nothing and reported; the loop kernels' workers failed
    assert [p["kernel"] for p in entry["phases"]] == ["library"]
    assert [e.split(":")[0] for e in errors] == ["loop0", "loop1"] and entry["failed"] == 2


def test_two_workers_share_the_library_kernels_where_cores_allow(tmp_path, library):
    library += [(_kernel(tmp_path / "lib.py", f"lib{k}"), ("f32",)) for k in range(3)]
    jobs = [(_kernel(tmp_path / "rg_gone.py", f"loop{k}"), (k,)) for k in range(2)]
    before = len(history)
    errors = precompile(jobs, workers=4)  # two loop kernels and two library workers
    [entry] = history[before:]
    assert entry["library"] == 3 and entry["library_workers"] == 2 and entry["workers"] == 4
    assert [p["kernel"] for p in entry["phases"]] == ["library 1/2", "library 2/2"]
    assert [e.split(":")[0] for e in errors] == ["loop0", "loop1"]
    before = len(history)
    precompile(jobs, workers=3)  # no core to spare beside the loop kernels': one library worker
    assert history[-1]["library_workers"] == 1 and [p["kernel"] for p in history[-1]["phases"]] == ["library"]
