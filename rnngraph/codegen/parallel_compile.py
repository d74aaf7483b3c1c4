"""Compile a program's persistent loop kernels side by side, in worker processes, into the disk cache.

Each persistent loop kernel takes 3 to 14 s of numba and NVVM time on the H200 (a 2 x 512 LM has
four: 30 of its 35 s cold start, bench/results/h200-20261202-startup-and-step-kernel-cache.json),
and numba compiles under a process-wide lock, so threads cannot overlap them. Before a program
first compiles its loop kernels (codegen/program_loops.py), :func:`precompile` starts one fresh
interpreter per kernel that the disk cache (codegen/kernel_cache.py) does not hold yet
(``python -m rnngraph.codegen.parallel_compile``, at most ``workers`` at a time): each imports the
generated module from its file, compiles the kernel for the argument types the program will
launch it with, and leaves the result in the cache, from which the program then loads it.

Plain subprocesses rather than ``multiprocessing``: a spawned multiprocessing worker imports the
user's ``__main__``, which would rerun a script without a ``__main__`` guard. A worker that fails
(no GPU in it, a killed process, a compile error) costs nothing but its time: the program compiles
that kernel itself, as it would have, and a real error surfaces there.
"""
from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["MIN_KERNELS", "history", "precompile"]

#: Fewer kernels to compile than this: the program compiles them itself. Measured on the H200
#: (bench/results/h200-20261202-startup-and-step-*.json): a 1 x 512 LM's two loop kernels (3.0 and
#: 4.0 s) gave a cold first call of 11.9 s compiled in turn, 12.7 and 17.6 s by two workers (each
#: worker first imports numba and makes a CUDA context); the 2 x 512 LM's four (5 to 10 s each)
#: went from 34-35 s to 14-18 s.
MIN_KERNELS = 3

log = logging.getLogger("rnngraph.compile")

#: One entry per :func:`precompile` of this process that started workers: {"kernels": how many it
#: compiled, "workers": at most that many at once, "seconds": wall time from the first start to the
#: last exit, "failed": workers that failed}. The startup benchmark records it (bench/startup.py).
history: list[dict] = []


def precompile(jobs: list[tuple[object, tuple]], workers: int | None = None) -> list[str]:
    """Compile each (kernel, argument types) of ``jobs`` that the disk cache lacks, in parallel
    worker processes (``workers``: at most that many at once; None: the machine's cores). The
    kernels must be :func:`kernel_cache.cached` dispatchers of generated modules (codegen/module.py).
    Returns one line per failed worker (logged as warnings); nothing when fewer than
    :data:`MIN_KERNELS` need compiling (then the workers' start-up costs more than it saves)."""
    todo = [(k, types) for k, types in jobs if not _in_cache(k, types)]
    if len(todo) < MIN_KERNELS:
        return []
    workers = max(1, min(len(todo), workers or os.cpu_count() or 1))
    root = str(Path(__file__).resolve().parents[2])  # the rnngraph the parent runs
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started, running, errors = time.perf_counter(), [], []
    pending = list(todo)
    while pending or running:
        while pending and len(running) < workers:
            kernel, types = pending.pop(0)
            payload = pickle.dumps((kernel.py_func.__code__.co_filename, kernel.py_func.__name__, types))
            proc = subprocess.Popen([sys.executable, "-m", "rnngraph.codegen.parallel_compile"], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            proc.stdin.write(payload)
            proc.stdin.close()
            running.append((kernel.py_func.__name__, proc))
        name, proc = running.pop(0)
        err = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            errors.append(f"{name}: worker exited {proc.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}")
            log.warning("rnngraph: compiling %s in a worker failed (%s); compiling it here", name, errors[-1])
    seconds = time.perf_counter() - started
    history.append({"kernels": len(todo), "workers": workers, "seconds": round(seconds, 3), "failed": len(errors)})
    log.info("rnngraph: %d loop kernels compiled by %d workers in %.1f s", len(todo), workers, seconds)
    return errors


def _in_cache(kernel, types) -> bool:
    """Whether ``kernel``'s disk cache holds an entry for ``types`` (its index only; not loaded)."""
    cache = getattr(kernel, "_cache", None)
    if not hasattr(cache, "has_entry"):
        return True  # no checked disk cache (the simulator): nothing to gain from a worker
    return cache.has_entry(types, kernel.targetctx)


def _work() -> int:
    """A worker: (source file, kernel name, argument types) pickled on stdin -> the kernel compiled
    into the disk cache."""
    path, name, types = pickle.loads(sys.stdin.buffer.read())
    from . import module
    kernel = getattr(module.load(Path(path).read_text()), name)
    kernel.compile(types)
    return 0


if __name__ == "__main__":
    sys.exit(_work())
