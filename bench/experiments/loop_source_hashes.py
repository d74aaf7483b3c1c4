"""Hash the generated persistent-loop kernel source and the schedule dump of every standard cell
under every RNNGRAPH_LOOP setting the tests use, to show that a refactoring changes no generated
code (not part of the package; CPU only, no GPU).

Cases: every cell of ``rg.cells.STANDARD`` x S in {1, 2, 16, 64} x 1 and 4 layers (4 layers: the
cost model's plan and the forced wavefront) x hidden 16 and 512 x each setting of ``SETTINGS``
(the defaults, then the tests' presets and knob settings). For each case:

- ``loops``: the source of every persistent loop kernel (``codegen/loop.py``'s ``LoopEmitter``,
  the GPU form: cooperative, 132 blocks, the kernel names ``CudaProgram`` gives them), forward
  and backward;
- ``dump``: ``str(schedule)``; ``dump_core``: the same without its ``options`` line (the line
  naming the schedule options that differ from the defaults; a dump without it is unchanged).

Then (``--program``) the whole simulator program (``step.kernels`` of ``rg.compile(..., device=
"cuda")`` under ``NUMBA_ENABLE_CUDASIM=1``: pointwise and loop kernels together, for every
standard cell, S in {1, 64}, one layer, hidden 16) under a few settings, given through the
RNNGRAPH_LOOP variable: the path from the API boundary down to the code generator.

The run sets PYTHONHASHSEED=0 (it starts itself again with it): the program's phase kernels are
named with Python's ``hash`` of their ops (codegen/program.py), which differs between processes
otherwise.

How a setting reaches the code: where ``rnngraph.loop_env`` exists (options as values), the
setting is parsed by it into a ``ScheduleOptions`` and a ``LoopTuning`` passed to ``schedule``
and ``LoopEmitter`` with RNNGRAPH_LOOP unset; in the code before it, through RNNGRAPH_LOOP,
read by the passes and by ``codegen.tuning.loop_tuning``.

Made for the change that turned the options into values: its result,
bench/results/cpu-20261202-options-as-values-source-identity.json; then for the loop kernels'
plan-then-emit split (codegen/loop_plan.py; ``LoopEmitter`` is its plan+emit wrapper):
bench/results/cpu-20261202-loop-plan-source-identity.json; then for layer norm through the op
registry's row-reduction kind (codegen/row_reductions.py):
bench/results/cpu-20261202-row-registry-source-identity.json.

Usage:
  python bench/experiments/loop_source_hashes.py --out hashes.json [--program]
  python bench/experiments/loop_source_hashes.py --compare before.json after.json --out result.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

# this checkout's rnngraph, not an installed one (a `pip install -e` of another checkout would
# otherwise be hashed: a comparison of two checkouts then compared one tree with itself)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

CELLS_S = (1, 2, 16, 64)
LAYERS = (1, 4)
HIDDEN = (16, 512)
WINDOW = 4
NBLOCKS = 132  # the H200's multiprocessors: one block each

# RNNGRAPH_LOOP settings: "" (the defaults for each S), then those of the tests (the file that uses
# each) and each knob off its default at least once
SETTINGS = [
    "",
    # tests/test_loop_tuning.py (VARIANTS, the environment override test)
    "unroll=3,rows=1,smem_kib=0,ksplit=1", "unroll=3,rows=3,smem_kib=44,ksplit=1",
    "unroll=1,smem_kib=1,rows=2,ksplit=1", "unroll=1,rows=2,cols=1,ksplit=1", "unroll=2,rows=2,ksplit=4",
    "unroll=3,rows=2,ksplit=1,prefetch=1", "unroll=2,rows=2,ksplit=4,prefetch=1", "threads=256,unroll=2",
    "smem_kib=1", "barrier=2", "threads=256,bounds=1,carveout=25", "bounds=0", "rows=8,cols=8",
    # tests/test_flag_exchange.py, tests/test_grid_syncs.py, tests/test_loop_ptx.py
    "flags=0", "flags=1", "unroll=2,flags=1", "unroll=2,flags=0", "barrier=1,flags=0", "barrier=2,flags=0",
    "barrier=3,flags=0", "barrier=0", "barrier=1", "barrier=3", "rows=4,cols=8,unroll=4,bounds=0",
    # tests/test_loop_layer_norm.py, tests/test_loop_profile.py, tests/test_golden_schedules.py
    "ln=0", "ln=1", "ln=1,threads=256", "ln=1,lngrad=0", "ln=1,lngrad=1", "ln=1,lnsum=0,lngrad=0",
    "ln=1,lnsum=0,lngrad=1", "ln=1,lnsum=1,lngrad=0", "ln=1,lnsum=1,lngrad=1", "ln=1,lnsum=2,lngrad=0",
    "ln=1,lnsum=2,lngrad=1", "ln=1,lnsum=1,smem_kib=2", "ln=1,lnsum=2", "bounds=1,fast=1",
    # tests/test_loop_prefetch.py
    "threads=256,rows=2", "threads=256,rows=2,prefetch=1", "threads=256,rows=2,ksplit=8",
    # tests/test_gpu.py
    "ksplit=1", "rows=4", "xreduce=1,threads=512", "ksplit=2,threads=1024,bounds=0", "ln=1,lnsum=0",
    # every other knob off its default
    "fast=1", "xreduce=0", "carveout=0", "lngrad=0", "lnsum=1", "prefetch=0", "prefetch=1", "cols=2",
    "unroll=16", "threads=1024",
]
PROGRAM_SETTINGS = ["", "ln=0", "flags=0", "flags=1", "lngrad=0", "lnsum=1", "unroll=3,rows=2,ksplit=1,prefetch=1"]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def without_options_line(dump: str) -> str:
    return "".join(line for line in dump.splitlines(keepends=True) if not line.startswith("  options"))


def values_api() -> bool:
    """Whether this checkout passes options as values (rnngraph.loop_env exists)."""
    try:
        import rnngraph.loop_env  # noqa: F401
        return True
    except ImportError:
        return False


def build(graph, streams: int, plan, setting: str):
    """(schedule, tuning) of ``graph`` under ``setting`` (see the module docstring)."""
    from rnngraph.passes import schedule
    if values_api():
        from rnngraph import loop_env
        os.environ.pop("RNNGRAPH_LOOP", None)  # nothing below the boundary may need it
        options, tuning = loop_env.resolve(streams, overrides=loop_env.parse(setting))
        return schedule(graph, WINDOW, streams, "float32", plan, options=options), tuning
    from rnngraph.codegen.tuning import loop_tuning
    os.environ["RNNGRAPH_LOOP"] = setting
    return schedule(graph, WINDOW, streams, "float32", plan), loop_tuning(streams)


def loop_sources(graph, sched, streams: int, tuning) -> str:
    """The persistent loop kernels' source, as CudaProgram generates them for a GPU."""
    from rnngraph.codegen.loop import LoopEmitter, persistent_supported
    from rnngraph.schedule import Loop
    kernel_of = {m: k.ops for k in sched.kernels("forward") for m in k.ops}
    out = []
    for k, loop in enumerate(sched.forward + sched.backward):
        if isinstance(loop, Loop) and loop.mode == "persistent" and persistent_supported(loop):
            name = f"{loop.name.split(' ')[0]}_{'bwd' if loop.reverse else 'fwd'}_{k}"
            src, args = LoopEmitter(graph, loop, name, coop=True, recompute=kernel_of, streams=streams,
                                    nblocks=NBLOCKS, tuning=tuning).source()
            out.append(src + "\n# args: " + ", ".join(args))
    return "\n\n".join(out)


def emitter_cases() -> dict:
    import rnngraph as rg
    cases = {}
    for cell, factory in rg.cells.STANDARD.items():
        for layers in LAYERS:
            for hidden in HIDDEN:
                graph = rg.stacked(factory, layers, hidden, input_size=hidden).graph
                for streams in CELLS_S:
                    for plan in ((None,) if layers == 1 else (None, "wavefront")):
                        for setting in SETTINGS:
                            sched, tuning = build(graph, streams, plan, setting)
                            dump = str(sched)
                            key = f"{cell} L={layers} H={hidden} S={streams} plan={plan or 'cost'} [{setting}]"
                            cases[key] = {"loops": digest(loop_sources(graph, sched, streams, tuning)),
                                          "dump": digest(dump), "dump_core": digest(without_options_line(dump))}
    return cases


def program_cases() -> dict:
    """The simulator programs of rg.compile (RNNGRAPH_LOOP parsed by the API in either checkout)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        raise SystemExit("--program needs NUMBA_ENABLE_CUDASIM=1 (set it before Python starts)")
    import rnngraph as rg
    cases = {}
    for cell, factory in rg.cells.STANDARD.items():
        net = rg.stacked(factory, 1, 16, vocab=5, embed=3)
        for streams in (1, 64):
            for setting in PROGRAM_SETTINGS:
                os.environ["RNNGRAPH_LOOP"] = setting
                step = rg.compile(net, window=3, streams=streams, device="cuda", seed=0)
                cases[f"program {cell} L=1 H=16 S={streams} [{setting}]"] = {"program": digest(step.kernels)}
    os.environ.pop("RNNGRAPH_LOOP", None)
    return cases


def compare(before: dict, after: dict) -> dict:
    """Which cases differ, and how: only in the dump's options line (counted by setting), or
    otherwise (listed with the fields that differ)."""
    b, a = before["cases"], after["cases"]
    missing, added = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    identical, options_line_only, other = [], [], []
    for key in sorted(set(b) & set(a)):
        x, y = b[key], a[key]
        if x == y:
            identical.append(key)
        elif all(x[f] == y[f] for f in x if f != "dump") and x["dump"] == x.get("dump_core"):
            options_line_only.append(key)  # the loop sources and the rest of the dump are the same
        else:
            other.append({"case": key, "fields": sorted(f for f in x if x[f] != y.get(f))})
    by_setting: dict[str, int] = {}
    for key in options_line_only:
        setting = key.rsplit("[", 1)[1].rstrip("]")
        by_setting[setting] = by_setting.get(setting, 0) + 1
    return {"before": {k: before[k] for k in ("commit", "api", "seconds")},
            "after": {k: after[k] for k in ("commit", "api", "seconds")},
            "cases": len(b), "identical": len(identical),
            "dump_differs_only_by_its_options_line": len(options_line_only),
            "options_line_cases_by_setting": dict(sorted(by_setting.items())), "other_differences": other,
            "missing_after": missing, "added_after": added}


def package_commit() -> str:
    """The commit of the checkout the imported rnngraph comes from (+changes when its rnngraph/
    differs from it), or "unknown" outside a git checkout."""
    import rnngraph
    root = os.path.dirname(os.path.dirname(os.path.abspath(rnngraph.__file__)))
    git = lambda *args: subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)  # noqa: E731
    head = git("rev-parse", "HEAD")
    if head.returncode:
        return "unknown"
    return head.stdout.strip() + ("+changes" if git("status", "--porcelain", "rnngraph").stdout.strip() else "")


def main(argv=None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # stable kernel names (see the module docstring)
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--program", action="store_true", help="also the simulator programs (NUMBA_ENABLE_CUDASIM=1)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two hash files")
    a = ap.parse_args(argv)
    if a.compare:
        with open(a.compare[0]) as f0, open(a.compare[1]) as f1:
            result = compare(json.load(f0), json.load(f1))
    else:
        os.environ.setdefault("RNNGRAPH_CACHE", tempfile.mkdtemp(prefix="rnngraph-hashes-"))
        t0 = time.perf_counter()
        cases = emitter_cases()
        if a.program:
            cases.update(program_cases())
        result = {"commit": package_commit(),
                  "api": "values" if values_api() else "environment",
                  "seconds": round(time.perf_counter() - t0, 1), "settings": SETTINGS,
                  "program_settings": PROGRAM_SETTINGS if a.program else [], "cases": cases}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    if a.compare:
        print(json.dumps(result, indent=1))
    else:
        print(f"{len(result['cases'])} cases in {result['seconds']} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
