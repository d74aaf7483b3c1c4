"""Compile time and PTX of every persistent loop kernel of a list of models, from the rnngraph at
``--repo`` (a checkout: run it once on the code before a change and once after, and compare the
lines), on a CPU with ``cuda.compile_ptx`` for sm_90 (no GPU needed; not part of the package).

Each model (``CELL:LAYERS:HIDDEN:S``: a stacked char LM, Embedding 96 -> 64, window 20, the
default schedule and tuning for S) gives one JSON line per loop kernel: its compile seconds, the
PTX's line count and a hash of the PTX with the generated module's name taken out (equal hashes:
the same code for the GPU).

    python bench/experiments/loop_ptx_compare.py --repo /path/to/checkout lstm:1:512:64 gru:2:256:8

Result: bench/results/cpu-20261204-loop-kernel-compile-selp.txt.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="the rnngraph checkout to import")
    ap.add_argument("models", nargs="+", metavar="CELL:LAYERS:HIDDEN:S")
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
    from rnngraph.loop_env import resolve
    from rnngraph.passes import schedule
    from rnngraph.schedule import Loop, loop_precision

    for model in args.models:
        cell, layers, hidden, S = model.split(":")
        layers, hidden, S = int(layers), int(hidden), int(S)
        options, tuning = resolve(S)
        g = rg.stacked(getattr(rg.cells, cell), layers, hidden, vocab=96, embed=64).graph
        s = schedule(g, 20, S, "float32", None, options)
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
            t0 = time.perf_counter()
            ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
            seconds = time.perf_counter() - t0
            same_names = re.sub(r"rnngraph_generated_[0-9a-f]+", "X", ptx)
            print(json.dumps({"model": model, "loop": loop.name, "compile_s": round(seconds, 2),
                              "ptx_lines": ptx.count("\n"),
                              "ptx_hash": hashlib.sha1(same_names.encode()).hexdigest()[:12]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
