"""Compile a program's persistent loop kernels side by side, in worker processes, into the disk cache.

Each persistent loop kernel takes 3 to 14 s of numba and NVVM time on the H200 (a 2 x 512 LM has
four: 30 of its 35 s cold start, bench/results/h200-20261202-startup-and-step-kernel-cache.json),
and numba compiles under a process-wide lock, so threads cannot overlap them. Before a program
first compiles its loop kernels (codegen/program_loops.py), :func:`precompile` starts one fresh
interpreter per kernel that the disk cache (codegen/kernel_cache.py) does not hold yet
(``python -m rnngraph.codegen.parallel_compile``, at most ``workers`` at a time): each imports
numba, then the generated module from its file, compiles the kernel for the argument types the
program will launch it with, leaves the result in the cache, from which the program then loads
it, and ends without numba's teardown.

Where a cold start's worker time goes (bench/results/h200-20261204-startup-and-step-workers.json,
2 x 512 LM at S = 64, four workers): 0.8 to 1.0 s from the spawn to its first line (the
interpreter, rnngraph's import), 0.4 s importing numba, 0.4 s making a CUDA context, 5.7 to 6.5 s
compiling the kernel into the cache, then 0.9 to 1.2 s of an orderly exit the parent waited for,
now skipped. Starting the workers before the code is generated, each importing numba while the
program does, saved about 0.3 s in one run (their numba import slowed to 0.45 to 0.6 s beside
the program's; -workers-ahead.json) and was not kept.

Plain subprocesses rather than ``multiprocessing``: a spawned multiprocessing worker imports the
user's ``__main__``, which would rerun a script without a ``__main__`` guard. A worker that fails
(no GPU in it, a killed process, a compile error) costs nothing but its time: the program compiles
that kernel itself, as it would have, and a real error surfaces there.
"""
from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import library_ahead

__all__ = ["MIN_KERNELS", "history", "precompile"]

#: Fewer kernels to compile than this: the program compiles them itself. Measured on the H200
#: (bench/results/h200-20261202-startup-and-step-*.json): a 1 x 512 LM's two loop kernels (3.0 and
#: 4.0 s) gave a cold first call of 11.9 s compiled in turn, 12.7 and 17.6 s by two workers (each
#: worker first imports numba and makes a CUDA context); the 2 x 512 LM's four (5 to 10 s each)
#: went from 34-35 s to 14-18 s.
MIN_KERNELS = 3

log = logging.getLogger("rnngraph.compile")

#: The library kernels a cold training step lacks are shared by at most this many workers, where
#: the machine has cores for them beside the loop kernels' workers: their one worker took 2.0 to
#: 2.7 s compiling the 13 of them on the H200 while a loop kernel's took 3.3 to 6.1 s
#: (bench/results/h200-20261204-startup-and-step-library-ahead.json), and the loop kernels now
#: compile in a quarter of that time (bench/results/cpu-20261205-loop-kernel-compile-tuple-accumulators.txt).
LIBRARY_WORKERS = 2

#: One entry per :func:`precompile` of this process that started workers: {"kernels": how many
#: loop kernels it compiled, "library": how many library kernels more workers compiled beside
#: them (codegen/library_ahead.py), "library_workers": how many workers shared those (at most
#: :data:`LIBRARY_WORKERS`), "workers": at most that many at once, "seconds": wall time
#: from the first start to the last report, "failed": workers that failed, "phases": one
#: {"kernel" (its name; "library" for the library kernels' worker, "library 1/2" and "library 2/2"
#: where two share them), then seconds: "start" (from
#: the spawn to the worker's first line: the interpreter and rnngraph's import), "numba"
#: (importing numba-cuda), "context" (the CUDA context), "load" (the generated module, or the
#: library's), "compile" (the kernel or kernels, into the disk cache), "exit" (to the parent's
#: seeing it end)} per worker that reported}. The startup benchmark records it (bench/startup.py).
history: list[dict] = []


def precompile(jobs: list[tuple[object, tuple]], workers: int | None = None, library: bool = True) -> list[str]:
    """Compile each (kernel, argument types) of ``jobs`` that the disk cache lacks, in parallel
    worker processes (``workers``: at most that many at once; None: the machine's cores). The
    kernels must be :func:`kernel_cache.cached` dispatchers of generated modules (codegen/module.py).
    With ``library`` (a training program's), where the cache lacks some of the library kernels a
    training step launches (codegen/library_ahead.py), more workers compile those, the first to
    start: up to :data:`LIBRARY_WORKERS` of them, each given every other one of the kernels, where
    ``workers`` leaves room beside the loop kernels' workers, else one. Returns one line per failed
    worker (logged as warnings); nothing when fewer than :data:`MIN_KERNELS` jobs (the loop
    kernels and the library's) are to do (then the workers' start-up costs more than it saves).
    Every worker is waited for: nothing of the program compiles beside them."""
    todo = [(k, types) for k, types in jobs if not _in_cache(k, types)]
    library = [i for i, (k, types) in enumerate(library_ahead.kernels()) if not _in_cache(k, types)] if library else []
    if len(todo) + bool(library) < MIN_KERNELS:
        return []
    cores = workers or os.cpu_count() or 1
    shares = max(1, min(LIBRARY_WORKERS, len(library), cores - len(todo))) if library else 0
    workers = max(1, min(len(todo) + shares, cores))
    started, running, errors, phases = time.perf_counter(), [], [], []
    pending = [(None, "library" if shares == 1 else f"library {j + 1}/{shares}", library[j::shares])
               for j in range(shares)]
    pending += [(k.py_func.__code__.co_filename, k.py_func.__name__, types) for k, types in todo]
    while pending or running:
        while pending and len(running) < workers:
            running.append(_start(*pending.pop(0)))
        name, proc, stderr = running.pop(0)
        report = _report(proc.stdout.read().decode(errors="replace"))  # ends when the worker closes it
        proc.stdout.close()
        if report is None:
            proc.wait()
            stderr.seek(0)
            err = stderr.read().decode(errors="replace").strip()
            errors.append(f"{name}: worker exited {proc.returncode}: {err.splitlines()[-1] if err else ''}")
            log.warning("rnngraph: compiling %s in a worker failed (%s); compiling it here", name, errors[-1])
        else:  # its kernels are in the cache: its process's teardown is not waited for
            threading.Thread(target=proc.wait, daemon=True).start()
            ended = report.pop("ended")
            phases.append({"kernel": name, **report, "exit": round(time.time() - ended, 3)})
            log.info("rnngraph: %s compiled in a worker: %s", name,
                     ", ".join(f"{k} {v:.2f} s" for k, v in phases[-1].items() if k != "kernel"))
        stderr.close()
    seconds = time.perf_counter() - started
    history.append({"kernels": len(todo), "library": len(library), "library_workers": shares, "workers": workers,
                    "seconds": round(seconds, 3),
                    "failed": len(errors), "phases": phases})
    log.info("rnngraph: %d loop kernels compiled by %d workers in %.1f s", len(todo), workers, seconds)
    return errors


def _start(path: str | None, name: str, types: tuple | None = None) -> tuple:
    """A worker process (``python -m rnngraph.codegen.parallel_compile`` with this rnngraph on its
    path) given its job: kernel ``name`` of the generated module at ``path`` for ``types``, or (path
    None) the library kernels of codegen/library_ahead.py at the indices ``types`` of its
    ``kernels()``. Returns (name, the process, its stderr:
    a temporary file, not a pipe, so that the parent may read stdout alone to its end)."""
    root = str(Path(__file__).resolve().parents[2])  # the rnngraph the parent runs
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "rnngraph.codegen.parallel_compile"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    proc.stdin.write(pickle.dumps((path, name, types, time.time())))  # the worker's "start" phase counts from here
    proc.stdin.close()
    return name, proc, stderr


def _report(out: str) -> dict | None:
    """A worker's phases from its stdout (its last line, JSON), or None if it wrote none (it failed)."""
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None
    return report if isinstance(report, dict) and "ended" in report else None


def _in_cache(kernel, types) -> bool:
    """Whether ``kernel``'s disk cache holds an entry for ``types`` (its index only; not loaded)."""
    cache = getattr(kernel, "_cache", None)
    if not hasattr(cache, "has_entry"):
        return True  # no checked disk cache (the simulator): nothing to gain from a worker
    return cache.has_entry(types, kernel.targetctx)


def _work() -> int:
    """A worker: (source file, kernel name, argument types, the parent's time.time() at the spawn)
    or (None, its name, indices of library_ahead's kernels, that time) pickled on stdin -> the
    kernel or kernels compiled into the disk cache; the seconds of each phase (:data:`history`'s
    "phases") printed as one JSON line."""
    first, clock = time.time(), time.perf_counter()
    marks = []

    def mark(phase: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        marks.append((phase, now - clock))
        clock = now
    from numba import cuda

    from . import module
    mark("numba")
    path, name, types, spawned = pickle.loads(sys.stdin.buffer.read())
    marks.insert(0, ("start", first - spawned))
    try:
        cuda.current_context()
        mark("context")
        if path is None:  # this worker's share of the library kernels, those the cache lacks
            listed = library_ahead.kernels()
            todo = [listed[i] for i in types if i < len(listed) and not _in_cache(*listed[i])]
        else:
            todo = [(getattr(module.load(Path(path).read_text()), name), types)]
        mark("load")
        for kernel, types in todo:
            kernel.compile(types)
        mark("compile")
    except Exception as e:  # the parent logs the last line of stderr
        print(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}", file=sys.stderr)
        return 1
    print(json.dumps({**{k: round(v, 3) for k, v in marks}, "ended": time.time()}), flush=True)
    # the kernel is in the disk cache: the parent's read ends here, and the process without its
    # orderly exit (numba's and the CUDA context's teardown), which kept the parent waiting 0.9 to
    # 1.2 s more (bench/results/h200-20261204-startup-and-step-workers.json)
    os.close(1)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_work())
