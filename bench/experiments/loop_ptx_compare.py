"""Compile time and PTX of every persistent loop kernel of a list of models, from the rnngraph at
``--repo`` (a checkout: run it once on the code before a change and once after, and compare the
lines), on a CPU with ``cuda.compile_ptx`` for sm_90 (no GPU needed; not part of the package).

Each model (``CELL:LAYERS:HIDDEN:S[:PRECISION]``: a stacked char LM, Embedding 96 -> 64, window
20, the default schedule and tuning for S and the precision, default fp32) gives one JSON line
per loop kernel: its compile seconds (the least of ``--repeat`` compiles), the PTX's line count
and a hash of the PTX in a canonical form (equal hashes: the same code for the GPU). The kernel
compiles with its own ``@cuda.jit`` options (fastmath, launch bounds). ``--loop "key=value,..."``
overrides the loop tuning as RNNGRAPH_LOOP does (e.g. ``fast=1``).

Canonical form: the generated module's name taken out, numba's per-process ids in mangled names
(``B<n>v<n>``, which count the compiles done before in the process) and shared-array names
numbered in order of appearance, and the declarations before the kernel's entry sorted (their
order follows Python's hash seed).

    python bench/experiments/loop_ptx_compare.py --repo /path/to/checkout lstm:1:512:64 gru:2:256:8

Equal hashes are the same code; a differing one may not be: one kernel (``lstm:2:64:64`` with
``--loop rows=16,cols=2``, its backward) gave three hashes from the same source in three
processes, its PTX differing only in the order of its parameter loads and in register numbers, so
run a differing kernel again before calling it a change.

Results: bench/results/cpu-20261204-loop-kernel-compile-selp.txt,
bench/results/cpu-20261204-loop-kernel-compile-mad-rows.txt,
bench/results/cpu-20261205-loop-kernel-compile-tuple-accumulators.txt.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time


def canonical(ptx: str) -> str:
    """``ptx`` in the canonical form of the module docstring."""
    ptx = re.sub(r"rnngraph_generated_[0-9a-f]+", "X", ptx)
    ptx = re.sub(r"B\d+v\d+", "Bv", ptx)
    seen: dict = {}
    ptx = re.sub(r"_cudapy_smem_\d+", lambda m: seen.setdefault(m.group(0), f"_cudapy_smem_#{len(seen)}"), ptx)
    at = ptx.index(".visible .entry")
    lines = [line for line in ptx[:at].split("\n") if not line.strip().startswith("//")]
    first = [line for line in lines if line.startswith((".version", ".target", ".address_size"))]
    rest = "\n".join(line for line in lines if line not in first)
    return "\n".join(first + sorted(" ".join(d.split()) for d in rest.split(";") if d.strip())) + "\n" + ptx[at:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="the rnngraph checkout to import")
    ap.add_argument("--loop", default="", help="loop tuning overrides, RNNGRAPH_LOOP's syntax")
    ap.add_argument("--repeat", type=int, default=1, help="compiles a kernel; the least time is reported")
    ap.add_argument("models", nargs="+", metavar="CELL:LAYERS:HIDDEN:S[:PRECISION]")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.repo)

    import numba.cuda.dispatcher
    import numpy as np
    from numba import cuda, typeof

    class _H200:  # device functions compile for the current device's cc: there is none here
        compute_capability = (9, 0)
    numba.cuda.dispatcher.get_current_device = _H200

    import rnngraph as rg
    from rnngraph.codegen import module
    from rnngraph.codegen.loop import LoopEmitter
    from rnngraph.codegen.pointwise import PRELUDE, Names
    from rnngraph.loop_env import parse, resolve
    from rnngraph.passes import schedule
    from rnngraph.passes.recurrence import recurrent_width
    from rnngraph.schedule import Loop, loop_precision

    for model in args.models:
        cell, layers, hidden, S, *rest = model.split(":")
        layers, hidden, S, precision = int(layers), int(hidden), int(S), (rest or ["fp32"])[0]
        g = rg.stacked(getattr(rg.cells, cell), layers, hidden, vocab=96, embed=64).graph
        options, tuning = resolve(S, overrides=parse(args.loop), recurrent_width=recurrent_width(g),
                                 precision=precision)
        s = schedule(g, 20, S, "float32", None, options, precision)
        kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
        params = {Names(g).param(p.name): p for p in g.params}
        for loop in [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]:
            emitter = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, streams=S, nblocks=132,
                                  tuning=tuning, precision=loop_precision(s))
            src, names = emitter.source()
            kern = module.load(PRELUDE + "\n\n" + src).k
            arrays = [np.zeros((2, 2, 2), np.float32) if a[0] in "VGNM" else np.zeros(2, np.int32) if a[0] == "O" else
                      np.zeros(params["P" + a[1:]].shape[::-1 if a[0] == "T" else 1], np.float32) for a in names]
            extra = (([np.zeros(1, np.uint32)] if emitter.barrier else [])
                     + [np.zeros((2, 2, 2), np.uint64) for _ in emitter.flag_buffers])
            sig = tuple(typeof(v) for v in [4, S] + extra + arrays)
            jit = {k: v for k, v in kern.targetoptions.items() if k in ("fastmath", "launch_bounds")}
            seconds = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0), **jit)
                seconds.append(time.perf_counter() - t0)
            print(json.dumps({"model": model, "loop": loop.name, "compile_s": round(min(seconds), 2),
                              "ptx_lines": ptx.count("\n"),
                              "ptx_hash": hashlib.sha1(canonical(ptx).encode()).hexdigest()[:12]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
