#!/usr/bin/env python3
"""Where does a persistent loop kernel's time go? Knock-out timings of its generated source (GPU).

For each configuration (cell, S; H=512 or --hidden, T=100, one layer) the script builds the CudaProgram, takes
its persistent loop kernels' plans (``program.loop_plans``, codegen/loop_plan.py; re-planned only
for another --blocks) and times each kernel alone (CUDA events, median of --iters launches on the
program's stream, its arrays passed in the plan's argument order) in several *variants*: the
knock-outs and fastmath generated from the plan (``LoopKernelPlan.knockout``, ``tuning.fast``),
the others edits of the generated text:

  full          the kernel as generated
  no-grid-sync  the grid.sync() at the end of each level removed (blocks race; timing only)
  sync-only     every stage body emptied: the time loop, its grid syncs and nothing else
  no-gemm       the GEMM sections of each stage removed (pointwise code and syncs kept)
  no-pointwise  the pointwise sections removed (GEMMs and syncs kept; skipped for a loop with flagged
                values, the default at S=1 and for the backward loops up to S=8, whose GEMMs would
                poll for words no pointwise code stores: the trap kills the process's CUDA context,
                bench/results/h200-20261204-ln-flags-profile-s1-parts.log)
  no-ln-sums    the layer norms' row-sum sections removed (their reduction syncs kept)
  no-vector-loads  each GEMM's loads of the timestep's vectors (from global memory: L2) replaced
                by a copy of a weight already in a register: what the in-loop products cost
                without their L2 reads (the weights still come from shared memory)
  uint64-indices  every array subscript of the kernel and its device functions cast to uint64
                (numba then skips its wrap of negative signed indices: a sign test and an add in
                64 bits per index; codegen/loop.py does it for the GEMMs' column index alone, and the
                static SASS of the layernorm_lstm S=64 loop kernels shrank 6-9 % more with all
                indices on the CPU). Every index of the generated code is non-negative.
  constants     T, S and the grid size written as constants into the kernel (the compiler can
                then strength-reduce the index arithmetic and fix trip counts)
  lineinfo      the kernel as generated, compiled with line information (for ncu's source view)
  fastmath      every function of the module compiled with fastmath=True (approximate exp, division)
  tiles         the kernel re-planned with LoopTuning tiles=1 (and groups=1): its FFMA row loops as
                lane-owned tiles (codegen/loop_tiles.py), against ``full`` in the same process and on the
                same values
  groups1       re-planned with LoopTuning groups=1: one stream group (``full`` runs its backward
                loops in four from S = 64, its forward loops in one unless they have layer norms)
  groups2       re-planned with LoopTuning groups=2 (see groups4)
  groups4       re-planned with LoopTuning groups=4: the blocks in four stream groups (a block owns
                four times the rows, reads a quarter of the streams' vectors; codegen/loop_plan.py
                ``stream_groups``; where the loop allows it, else as generated)
  tiles-groups4 both
  lngroups4     groups=4 with lngroups=1: also loops with layer norms in four stream groups
  groupbar4     groups=4 with groupbar=1: a level's barrier among the group's blocks only (a counter
                a group, codegen/grid_barrier.py ``group_barrier``), not over the grid
  lngroupbar4   groups=4 with lngroups=1 and groupbar=1
  Each re-planned variant sets the knobs it names over the defaults for S, and the groups variants
  pin the barrier: groups2, groups4, tiles-groups4 and lngroups4 end a level with one barrier over
  the grid (``groupbar=0``, the default before 2026-12-06), groupbar4 and lngroupbar4 with a barrier
  a group (the default from S = 64 since); the groups variants put the forward loops in the same
  groups as the backward ones (``fwdgroups=0``; one group is the default for forward loops without
  layer norms from S = 64 since 2026-12-06).

--files adds hand-written variants (Python files defining ``prof_fwd`` and/or ``prof_bwd`` with the
generated kernel's parameters, and optionally ``DYNAMIC_SMEM``, the bytes of dynamic shared memory
to launch them with, recorded as ``file:STEM``; the S=1 LSTM's are made by
bench/experiments/lstm_s1_hand_variants/gen.py), --blocks another grid size. Each variant's record carries
``max_abs_diff_vs_full``: the largest difference of its arguments' values (the barrier counter's
aside) after one launch from the generated kernel's (when ``full`` is among the variants, run
first), both from the same saved values (the backward accumulates: a wrong kernel
shows; the forward overwrites values the benchmark run already left in its buffers, so a
forward variant that skips a store reads as 0.0 too).

``--hidden`` sets H = I (default 512) and ``--precision`` the products' precision (tf32 or
bf16: the once-per-window ones on tensor cores, and the loops' where S x H >= 49,152 or S >= 16
with H >= 1,024, or with RNNGRAPH_LOOP=mma=1, never with mma=0; the records carry the precision, RNNGRAPH_LOOP and
``loop_tensor_cores``). The kernels are generated with the step's RNNGRAPH_LOOP settings (read by rnngraph/bench.py's
``gpu_program``; the knobs: codegen/tuning.py), so e.g.
RNNGRAPH_LOOP=barrier=1 profiles the inline grid barrier of codegen/grid_barrier.py. (An earlier
``barrier`` variant, an atomic-counter barrier polled with atomics, took 7.4 vs 4.9 us a timestep
for the S=1 LSTM forward, backward 17.7 vs 9.4: removed.)

The record "whole" times the program's whole forward (GPU events) and the host time to enqueue it;
with --steps, records "step" time each step of the forward and backward plans alone (the
hoisted phases, the loops, the weight gradients, the parameter sums) and the zeroing of the
gradient arenas: where a training step's milliseconds go outside the loop kernels.
The program is the benchmark's (``rnngraph.bench.gpu_program``), run forward and backward once
before any timing, so the kernels read real values and nonzero gradients (a backward
timed on zero gradients, which hid the cost of the layer norms' shared-memory
gradient atomics: bench/kernel_trace.py). Results are wrong for every variant but ``full`` (the
output is not checked): only the times matter. The per-timestep time (kernel ms / T) is the figure to compare with the 1.5 us grid-sync
floor (ARCHITECTURE.md's measured cost of one cuda.cg grid sync on the H200). Writes JSON records to --out.

Usage (GPU):  python bench/loop_profile.py --out $OUT/loop_profile.json
              python bench/loop_profile.py --configs lstm:1 gru:1 --variants full sync-only
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

import numpy as np  # noqa: E402

VARIANTS = ("full", "no-grid-sync", "sync-only", "no-gemm", "no-pointwise", "no-ln-sums", "no-vector-loads",
            "uint64-indices", "constants", "fastmath", "lineinfo", "tiles", "groups1", "groups2", "groups4", "tiles-groups4",
            "lngroups4", "groupbar4", "lngroupbar4")


#: variant -> the LoopTuning knobs it re-plans the kernel with
RETUNED = {"tiles": {"tiles": 1, "groups": 1, "fwdgroups": 0}, "groups1": {"groups": 1, "fwdgroups": 0},
           "groups2": {"groups": 2, "groupbar": 0, "fwdgroups": 0}, "groups4": {"groups": 4, "groupbar": 0, "fwdgroups": 0},
           "tiles-groups4": {"tiles": 1, "groups": 4, "groupbar": 0, "fwdgroups": 0},
           "lngroups4": {"groups": 4, "lngroups": 1, "groupbar": 0},
           "groupbar4": {"groups": 4, "groupbar": 1, "fwdgroups": 0},
           "lngroupbar4": {"groups": 4, "lngroups": 1, "groupbar": 1}}

#: variant -> the constructs its kernel is generated without (LoopKernelPlan.knockout,
#: codegen/loop.py): "grid-sync" the grid syncs of the time loop (each becomes ``pass``), "gemm",
#: "pointwise" and "ln-sums" those sections of every stage body (block barriers between kernels
#: stay; row sums go with every kind), "vector-loads" the GEMMs' vector loads
KNOCKOUTS = {"no-grid-sync": {"grid-sync"}, "sync-only": {"gemm", "pointwise", "ln-sums"},
             "no-gemm": {"gemm", "ln-sums"}, "no-pointwise": {"pointwise", "ln-sums"}, "no-ln-sums": {"ln-sums"},
             "no-vector-loads": {"vector-loads"}}


def _jit_option(src: str, option: str) -> str:
    """``src`` with ``option`` added to the kernel's ``@cuda.jit`` line (with or without options)."""
    def add(m):
        opts = [o for o in (m.group(1) or "").split(", ") if o]
        return f"@cuda.jit({', '.join(opts + ([option] if option not in opts else []))})"
    return re.sub(r"^@cuda\.jit(?:\((?!device=)(.*)\))?$", add, src, flags=re.M)


def _unsigned_indices(src: str) -> str:
    """Each part of every subscript ``a[i, j + 1]`` (without nested brackets) that is not an integer
    literal wrapped as ``uint64(...)``: ``a[uint64(i), uint64(j + 1)]``."""
    def wrap(m):
        parts = [p.strip() for p in m.group(2).split(",")]
        return m.group(1) + "[" + ", ".join(p if p.isdigit() or p.startswith("uint64(") else f"uint64({p})"
                                            for p in parts) + "]"
    return re.sub(r"\b([A-Za-z_]\w*)\[([^\[\]]+)\]", wrap, src)


def variant_source(g, plan, recompute: dict, name: str, T: int, S: int, precision: str = "fp32") -> str:
    """The generated module of ``plan`` (a LoopKernelPlan of graph ``g``; ``recompute``: the
    program's ``kernel_of``) as variant ``name``: the knock-outs and fastmath generated from the
    plan, ``tiles``, ``groups1``, ``groups2``, ``groups4``, ``tiles-groups4``, ``lngroups4``,
    ``groupbar4`` and ``lngroupbar4`` re-planned with their LoopTuning knobs (``RETUNED``; the
    dynamic shared memory in the module's ``DYNAMIC_SMEM``), the other variants edits of the
    generated text."""
    from dataclasses import replace

    from rnngraph.codegen.loop import emit_loop_kernel
    if name in RETUNED:
        from rnngraph.codegen.loop_plan import plan_loop_kernel
        retuned = plan_loop_kernel(g, plan.loop, plan.name, plan.coop, recompute, S, plan.nblocks,
                                   plan.tuning.replace(**RETUNED[name]), plan.virtual_blocks, precision)
        return f"DYNAMIC_SMEM = {retuned.dynamic_smem}\n" + emit_loop_kernel(g, retuned, recompute)[0]
    if name in KNOCKOUTS:
        plan = replace(plan, knockout=frozenset(KNOCKOUTS[name]))
    elif name == "fastmath":
        plan = replace(plan, tuning=plan.tuning.replace(fast=1))
    src, _ = emit_loop_kernel(g, plan, recompute)
    if name in ("full", "fastmath") or name in KNOCKOUTS:
        return src
    if name == "uint64-indices":
        return _unsigned_indices(src)
    if name == "constants":
        src = src.replace("    nblocks = cuda.gridDim.x", f"    nblocks = {plan.nblocks}")
        return src.replace("    grid = cuda.cg.this_grid()\n",
                           f"    grid = cuda.cg.this_grid()\n    T = {T}\n    S = {S}\n", 1)
    if name == "lineinfo":  # for ncu's source view: the kernel as generated, with line numbers
        return _jit_option(src, "lineinfo=True")
    raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")


def profile(cell: str, S: int, variants, iters: int, T: int = 100, H: int = 512, steps: bool = False,
            loops=("fwd", "bwd"), files=(), blocks: int = 0, precision: str = "fp32") -> list[dict]:
    """The records of one configuration (a ``cell`` layer, hidden and input H, S streams, T steps,
    its matrix products in ``precision``): the whole forward, with ``steps`` each step's time,
    then each of its persistent ``loops`` kernels in each of ``variants`` and ``files`` (see the
    module docstring), timed as the median of ``iters`` launches on ``blocks`` blocks (0: one a
    multiprocessor). Times in ms."""
    from dataclasses import replace

    from numba import cuda

    from rnngraph.bench import Config, gpu_program
    from rnngraph.codegen import module
    from rnngraph.codegen.device import allow_dynamic_shared_memory
    from rnngraph.codegen.loop_plan import plan_loop_kernel
    from rnngraph.codegen.pointwise import PRELUDE

    prog, _, fwdbwd = gpu_program(Config(cell=cell, layers=1, T=T, S=S, H=H, I=H), precision=precision)
    g, b = prog.g, prog.buf
    # the benchmark's forward+backward once: every buffer then holds real values, the gradients
    # too (a backward timed on zero gradients runs faster: shared-memory float atomics retry only
    # when the value changes: bench/kernel_trace.py --modes)
    fwdbwd()
    nblocks = blocks or cuda.get_current_device().MULTIPROCESSOR_COUNT
    records = [_whole_forward(prog, cell, S, T, H, iters)] + (_step_times(prog, fwdbwd, cell, S, T, H, iters) if steps else [])
    for r in records:
        print(json.dumps(r), flush=True)
    for plan in list(prog.loop_plans.values()):  # the program's persistent loop kernels, forward first
        name = f"prof_{'bwd' if plan.reverse else 'fwd'}"
        if name[5:] not in loops:
            continue
        plan = (replace(plan, name=name) if nblocks == plan.nblocks else
                plan_loop_kernel(g, plan.loop, name, True, prog.kernel_of, S, nblocks, prog.device_tuning(),
                                 precision=prog.lib.loop_precision))
        # the inline grid barrier's counter and the flag words (codegen/flag_exchange.py; the kernel
        # zeroes them): before the buffers in the kernel's arguments, left out of the diffs
        zeroed = {a: cuda.to_device(np.zeros(shape, dtype))
                  for a, (shape, dtype) in plan.zeroed(lambda x: b.lookup(x).shape).items()}
        arrays = [zeroed[a] if a in zeroed else b.lookup(a) for a in plan.args[2:]]
        counters = list(zeroed.values())
        threads = max(prog.loop_threads.values())
        texts = [(v, PRELUDE + "\n\n" + variant_source(g, plan, prog.kernel_of, v, T, S, prog.lib.loop_precision))
                 for v in variants]
        texts += [(f"file:{Path(f).stem}", PRELUDE + "\n\n" + Path(f).read_text()) for f in files
                  if f"def {name}(" in Path(f).read_text()]
        saved = [a.copy_to_host() for a in arrays]  # each variant starts from these values
        reference = None
        for v, text in texts:
            if v == "no-pointwise" and plan.flag_buffers:  # the GEMMs would poll for words no one stores
                rec = {"cell": cell, "S": S, "loop": name, "variant": v,
                       "error": "skipped: the loop flags values (RNNGRAPH_LOOP=flags=0 profiles it without)"}
                print(json.dumps(rec), flush=True)
                records.append(rec)
                continue
            loaded = module.load(text)
            kern = getattr(loaded, name)
            # tensor-core weight rows in dynamic shared memory (codegen/loop_plan.py); a --files
            # variant may ask for its own bytes with a module-level DYNAMIC_SMEM
            dyn = getattr(loaded, "DYNAMIC_SMEM", plan.dynamic_smem)
            launch = lambda: kern[nblocks, threads, prog.stream, dyn](T, S, *arrays)  # noqa: E731
            try:
                allow_dynamic_shared_memory(kern.compile(tuple(kern.typeof_pyval(a) for a in [T, S, *arrays])), dyn)
                outputs = _outputs_of_one(launch, arrays, saved, prog.stream)
                reference = outputs if v == "full" else reference
                ms = statistics.median(_event_times(launch, prog.stream, iters))
                rec = {"cell": cell, "S": S, "T": T, "H": H, "loop": name, "variant": v, "ms": ms,
                       "us_per_timestep": 1000 * ms / T, "threads": threads, "blocks": nblocks}
                if reference is not None and v != "full":  # how far this variant's one launch is from the kernel's
                    rec["max_abs_diff_vs_full"] = max(float(np.max(np.abs(o - r), initial=0.0)) for o, r in
                                                      zip(outputs[len(counters):], reference[len(counters):]))
            except Exception as exc:  # a variant that does not compile must not lose the others
                rec = {"cell": cell, "S": S, "loop": name, "variant": v, "error": f"{type(exc).__name__}: {exc}"[:300]}
            print(json.dumps(rec), flush=True)
            records.append(rec)
    from rnngraph.schedule import loop_precision
    mma = loop_precision(prog.s) != "fp32"  # which loops were timed
    return [{**r, "loop_tensor_cores": mma} for r in records]


def _outputs_of_one(launch, arrays, saved, stream) -> list:
    """The kernel arguments' values (host float64 copies) after one ``launch`` from ``saved``
    (restored first, and again after: the timed launches then start from the same values)."""
    for a, h in zip(arrays, saved):
        a.copy_to_device(h, stream=stream)
    launch()
    stream.synchronize()
    out = [a.copy_to_host().astype(np.float64) for a in arrays]
    for a, h in zip(arrays, saved):
        a.copy_to_device(h, stream=stream)
    stream.synchronize()
    return out


def _step_times(prog, fwdbwd, cell: str, S: int, T: int, H: int, iters: int) -> list[dict]:
    """GPU time (CUDA events, median of ``iters``) of zeroing the gradient arenas and of each step
    of the program's forward and backward plans, run alone after one whole forward+backward
    (``fwdbwd``: real, nonzero gradients; the backward steps add into them on every repeat: only
    the times matter). Each time includes the host's launch time of the step."""
    from rnngraph.codegen import library
    b = prog.buf
    timed = lambda fn: statistics.median(_event_times(fn, prog.stream, iters))  # noqa: E731

    def zero():
        library.fill(b.zeroed_grads, 0.0, stream=prog.stream)
        library.fill(b.param_grad_arena, 0.0, stream=prog.stream)

    base = {"cell": cell, "S": S, "T": T, "H": H, "variant": "step"}
    out = [dict(base, loop="zero gradients", ms=timed(zero))]
    fwdbwd()
    for direction, steps, plan in (("forward", prog.s.forward, prog.forward_plan),
                                   ("backward", prog.s.backward, prog.backward_plan)):
        for step, launches in zip(steps, plan):
            kinds = sorted({k.kind for k in step.kernels})
            mode = getattr(step, "mode", "phase")
            out.append(dict(base, loop=f"{direction}: {step.name}", mode=mode, kinds=kinds,
                            ms=timed(lambda launches=launches: [launch() for launch in launches])))
    return out


def _whole_forward(prog, cell: str, S: int, T: int, H: int, iters: int) -> dict:
    """The whole forward (``run_forward``: hoisted GEMMs, loop kernels): GPU time between events,
    and the host time to enqueue it (the GPU idles while Python launches the first kernels)."""
    import time

    host = []

    def forward():
        t0 = time.perf_counter()
        prog.run_forward()
        host.append(1000 * (time.perf_counter() - t0))
    gpu = _event_times(forward, prog.stream, iters)
    return {"cell": cell, "S": S, "T": T, "H": H, "loop": "run_forward", "variant": "whole", "ms": statistics.median(gpu),
            "host_enqueue_ms": statistics.median(host[_WARMUP:]), "replay_errors": list(prog.replay_errors)}


_WARMUP = 3  # untimed calls before each measurement


def _event_times(fn, stream, iters: int) -> list[float]:
    """GPU ms of each of ``iters`` calls of ``fn`` (which enqueues work on ``stream``), between CUDA
    events on the idle stream, after _WARMUP calls that are not kept."""
    from numba import cuda
    times = []
    for _ in range(_WARMUP + iters):
        stream.synchronize()
        start, end = cuda.event(timing=True), cuda.event(timing=True)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(cuda.event_elapsed_time(start, end))
    return times[_WARMUP:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=["lstm:1", "lstm:64", "gru:1"], metavar="CELL:S",
                    help="standard cells and stream counts, T=100 (default: lstm:1 lstm:64 gru:1)")
    ap.add_argument("--hidden", type=int, default=512, help="H = I of every configuration (default 512)")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                    help="the matrix products' precision (rnngraph/precision.py; the loops' products on "
                         "tensor cores too where S x H >= 49,152 or S >= 16 with H >= 1,024, or with "
                         "RNNGRAPH_LOOP=mma=1; mma=0: never)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS, metavar="VARIANT",
                    help="source variants to time, see above (default: all)")
    ap.add_argument("--iters", type=int, default=20, help="timed launches per variant; the median is kept (default 20)")
    ap.add_argument("--steps", action="store_true", help="also time each step of the forward and backward plans")
    ap.add_argument("--loops", nargs="+", default=["fwd", "bwd"], choices=["fwd", "bwd"],
                    help="which persistent loop kernels to time (default: both)")
    ap.add_argument("--files", nargs="+", default=[], metavar="FILE",
                    help="hand-written variants: Python files defining prof_fwd and/or prof_bwd with the "
                         "generated kernel's parameters (PRELUDE's imports and helpers are prepended); "
                         "recorded as variant file:STEM")
    ap.add_argument("--blocks", type=int, default=0,
                    help="grid size of the timed kernels (default 0: one block a multiprocessor)")
    ap.add_argument("--out", help="JSON file for the records")
    a = ap.parse_args(argv)
    from rnngraph.cells import STANDARD
    configs = []
    for c in a.configs:
        cell, _, streams = c.partition(":")
        if cell not in STANDARD or not streams.isdigit() or int(streams) < 1:
            ap.error(f"--configs: expected CELL:S with CELL in {sorted(STANDARD)} and S >= 1, got {c!r}")
        configs.append((cell, int(streams)))
    from rnngraph.bench import gpu_available
    if not gpu_available():
        print("loop_profile.py: numba finds no CUDA GPU (the kernels are timed on the device)", file=sys.stderr)
        return 1
    records = []
    for cell, streams in configs:
        got = profile(cell, streams, a.variants, a.iters, H=a.hidden, steps=a.steps, loops=a.loops,
                      files=a.files, blocks=a.blocks, precision=a.precision)
        records += [{**r, "precision": a.precision, "RNNGRAPH_LOOP": os.environ.get("RNNGRAPH_LOOP", "")} for r in got]
        if a.out:
            Path(a.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
