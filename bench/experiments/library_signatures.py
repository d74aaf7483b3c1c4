"""The argument types every library kernel (optimizer, clipping, losses, embedding, GEMM helpers;
not the generated ones) was compiled for after one training step of each of four char and word
LMs on the GPU (not part of the package): whether a library kernel's signatures depend on the
model, i.e. whether they could be compiled ahead of the first step, beside the loop kernels'
workers.

    python3 bench/experiments/library_signatures.py > FILE

Result: bench/results/h200-20261204-library-kernel-signatures.json (each kernel one signature,
the same for all four models).
"""
from __future__ import annotations

import gc
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

MODELS = {"2x512-s64": ("lstm", 2, 512, 96, 128, 100, 64), "1x512-s1": ("lstm", 1, 512, 96, 128, 100, 1),
          "word": ("lstm", 2, 256, 1000, 256, 35, 32), "gru-s8": ("gru", 1, 128, 50, 32, 20, 8)}


def main() -> int:
    import rnngraph as rg
    from numba.cuda.dispatcher import CUDADispatcher
    for cell, layers, hidden, vocab, embed, window, streams in MODELS.values():
        net = rg.stacked(getattr(rg.cells, cell), layers, hidden, vocab=vocab, embed=embed)
        step = rg.compile(net, window=window, streams=streams, device="cuda", optimizer=rg.Adam(lr=2e-3),
                          clip_norm=1.0, seed=0)
        rng = np.random.default_rng(0)
        float(step.train(rng.integers(0, vocab, (window, streams)), rng.integers(0, vocab, (window, streams))))
    out = {}
    for obj in gc.get_objects():
        if isinstance(obj, CUDADispatcher) and not obj.py_func.__module__.startswith("rnngraph_generated"):
            sigs = [str(s) for s in obj.overloads]
            if sigs:
                out[f"{obj.py_func.__module__}.{obj.py_func.__name__}"] = sigs
    print(json.dumps({"models": MODELS, "signatures": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
