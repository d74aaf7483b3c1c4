"""GPU tier (pytest -m gpu): compiled kernels persist across processes (rnngraph/codegen/kernel_cache.py).

Four fresh processes train one window of the same tiny char LM with the same caches
(``RNNGRAPH_CACHE`` for the generated modules, ``NUMBA_CACHE_DIR`` for every cache entry): the
first compiles (its persistent loop kernels and the library kernels in worker processes, then
loaded from the cache they fill), the second loads every kernel and compiles none, the third
runs after every cache entry was truncated, the fourth after every index names another numba
version; all four compute the same loss."""
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = r'''
import json
import numpy as np
import rnngraph as rg
from rnngraph.codegen.kernel_cache import compile_stats
from rnngraph.codegen.library_ahead import kernels
from rnngraph.codegen.parallel_compile import history
net = rg.stacked(rg.cells.lstm, 2, 32, vocab=11, embed=8)
# scc-sequential: a loop kernel per layer and direction, four (enough for compile workers: MIN_KERNELS)
step = rg.compile(net, window=5, streams=3, device="cuda", optimizer=rg.Adam(lr=1e-2), clip_norm=1.0, seed=0,
                  plan="scc-sequential")
rng = np.random.default_rng(0)
x, y = rng.integers(0, 11, (5, 3)), rng.integers(0, 11, (5, 3))
loss = float(step.train(x, y))
print(json.dumps({"loss": loss, "hits": sum(r.hits for r in compile_stats()),
                  "misses": sum(r.misses for r in compile_stats()),
                  "missed": sorted(r.name for r in compile_stats() if r.misses),
                  "loops": [(r.hits, r.misses) for r in compile_stats() if r.name.startswith("loop")],
                  "library": [(r.hits, r.misses) for r in compile_stats()
                              if r.name in {k.py_func.__name__ for k, _ in kernels()}],
                  "workers": history}))
'''


def _run(tmp_path: Path) -> dict:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "RNNGRAPH_CACHE": str(tmp_path / "rg"), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_every_kernel_and_survives_a_broken_cache(tmp_path):
    first = _run(tmp_path)
    # the persistent loop kernels and the library kernels (codegen/library_ahead.py) were compiled
    # by worker processes (codegen/parallel_compile.py) into the cache, and loaded from it here
    assert len(first["loops"]) == 4 and all(hits >= 1 and misses == 0 for hits, misses in first["loops"])
    assert len(first["library"]) >= 8 and all(hits >= 1 and misses == 0 for hits, misses in first["library"])
    [workers] = first["workers"]  # each worker reported its phases
    assert workers["kernels"] == 4 and workers["library"] == 13 and workers["failed"] == 0
    # one worker per loop kernel, and the library kernels shared by library_workers of them
    shares = workers["library_workers"]
    assert shares in (1, 2)
    assert sorted(p["kernel"][:4] for p in workers["phases"]) == ["libr"] * shares + ["loop"] * 4
    for p in workers["phases"]:
        assert list(p) == ["kernel", "start", "numba", "context", "load", "compile", "exit"]
    second = _run(tmp_path)
    assert second["workers"] == []
    assert second["misses"] == 0, second["missed"]
    assert second["hits"] == first["misses"] + first["hits"]
    entries = list(tmp_path.rglob("*.nbc"))
    assert entries
    for path in entries:  # truncated mid-write
        path.write_bytes(path.read_bytes()[:100])
    third = _run(tmp_path)  # the index still lists the loop and library kernels: no workers, compiled here
    assert third["misses"] == first["misses"] + len(first["loops"]) + len(first["library"])
    for path in tmp_path.rglob("*.nbi"):  # written by another numba
        with open(path, "r+b") as f:
            pickle.load(f)
            rest = f.read()
        with open(path, "wb") as f:
            pickle.dump("0.0.0", f, protocol=-1)
            f.write(rest)
    fourth = _run(tmp_path)
    assert fourth["misses"] == first["misses"]
    assert first["loss"] == second["loss"] == third["loss"] == fourth["loss"]
