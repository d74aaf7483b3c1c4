#!/usr/bin/env python3
"""What one grid sync costs in a persistent cooperative kernel, by barrier, grid and block size (GPU).

On the H200 (bench/results/h200-20261201-prefetch-prof-barrier*.json) a loop of grid syncs was found alone taking
2.0-2.6 us a sync inside the S=1 LSTM loop
kernels (bench/loop_profile.py's ``sync-only`` variant: 132 blocks of 256 threads; numba's
``grid.sync()``, codegen/grid_barrier.py's inline barrier and its ``red.release`` form alike),
about half of each timestep, against the 1.5 us of ARCHITECTURE.md's measured GPU facts. This times a
kernel that does nothing but ``--syncs`` barriers, for each barrier (``--barriers``: 0 numba's
``grid.sync()``, 1 ``grid_barrier``, 2 ``grid_barrier_backoff``, 3 ``grid_barrier_red``; the
``barrier`` knob of codegen/tuning.py), grid size (``--blocks``; 0: one block a multiprocessor)
and block size (``--threads``), and with ``--work`` a store by every thread before each sync
(the release fence then has writes to wait for).

Each record: barrier, blocks, threads, work, ms (median of --iters launches, CUDA events, after
3 untimed ones) and us_per_sync (ms * 1000 / syncs). Usage (GPU):
    python bench/sync_micro.py --out $OUT/sync_micro.json
    python bench/sync_micro.py --blocks 132 66 33 --threads 64 256 1024 --barriers 0 1
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

import numpy as np  # noqa: E402

from rnngraph.codegen import module  # noqa: E402
from rnngraph.codegen.loop import BARRIER_FUNCTIONS  # noqa: E402

_TEMPLATE = '''
from numba import cuda, float32
{imports}


@cuda.jit
def sync_loop(T, BAR, out):
    grid = cuda.cg.this_grid()
    tid = cuda.threadIdx.x
    nblocks = cuda.gridDim.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    grid.sync()
{start}
    for t in range(T):
        if WORK:
            out[i] = float32(t)
{sync}
'''


def kernel_source(barrier: int, work: bool) -> str:
    """A kernel ``sync_loop(T, BAR, out)`` running T grid syncs of ``barrier`` (0: numba's; else
    codegen/grid_barrier.py's function of that ``barrier`` knob, on the uint32 counter BAR), each
    after a store of every thread into ``out`` (float32, one element a thread) when ``work``."""
    if barrier == 0:
        imports, start, sync = "", "", "        grid.sync()"
    else:
        name = BARRIER_FUNCTIONS[barrier]
        imports = f"from rnngraph.codegen.grid_barrier import {name} as grid_barrier" + (
            ", barrier_phase" if barrier == 3 else "")
        start = "    bphase = barrier_phase(BAR)" if barrier == 3 else ""
        sync = ("        bphase = grid_barrier(BAR, nblocks, bphase)" if barrier == 3
                else "        grid_barrier(BAR, nblocks)")
    return _TEMPLATE.format(imports=imports, start=start, sync=sync).replace("WORK", str(bool(work)))


def time_syncs(barrier: int, blocks: int, threads: int, work: bool, syncs: int, iters: int) -> dict:
    """One record: the median time of a launch of ``syncs`` barriers (see the module docstring)."""
    from numba import cuda
    kern = module.load(kernel_source(barrier, work)).sync_loop
    bar = cuda.to_device(np.zeros(1, np.uint32))
    out = cuda.device_array(blocks * threads, np.float32)
    stream = cuda.stream()
    times = []
    for n in range(3 + iters):
        start, end = cuda.event(timing=True), cuda.event(timing=True)
        start.record(stream)
        kern[blocks, threads, stream](syncs, bar, out)
        end.record(stream)
        end.synchronize()
        if n >= 3:
            times.append(cuda.event_elapsed_time(start, end))
    ms = statistics.median(times)
    return {"barrier": barrier, "blocks": blocks, "threads": threads, "work": work, "syncs": syncs,
            "ms": ms, "us_per_sync": 1000 * ms / syncs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--barriers", nargs="+", type=int, default=[0, 1, 3], choices=[0, 1, 2, 3])
    ap.add_argument("--blocks", nargs="+", type=int, default=[0, 66, 33],
                    help="grid sizes (0: one block a multiprocessor; default 0 66 33)")
    ap.add_argument("--threads", nargs="+", type=int, default=[64, 256, 1024], help="block sizes")
    ap.add_argument("--work", nargs="+", type=int, default=[0, 1], choices=[0, 1],
                    help="1: every thread stores before each sync (default: both)")
    ap.add_argument("--syncs", type=int, default=1000, help="grid syncs a launch (default 1000)")
    ap.add_argument("--iters", type=int, default=10, help="timed launches; the median is kept")
    ap.add_argument("--out", help="JSON file for the records")
    a = ap.parse_args(argv)
    from rnngraph.bench import gpu_available
    if not gpu_available():
        print("sync_micro.py: numba finds no CUDA GPU (the barriers are timed on the device)", file=sys.stderr)
        return 1
    from numba import cuda
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    records = []
    for barrier in a.barriers:
        for blocks in a.blocks:
            for threads in a.threads:
                for work in a.work:
                    try:
                        rec = time_syncs(barrier, blocks or sms, threads, bool(work), a.syncs, a.iters)
                    except Exception as exc:  # e.g. a grid too large to be co-resident: keep the others
                        rec = {"barrier": barrier, "blocks": blocks or sms, "threads": threads, "work": bool(work),
                               "error": f"{type(exc).__name__}: {exc}"[:300]}
                    print(json.dumps(rec), flush=True)
                    records.append(rec)
                    if a.out:
                        Path(a.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
