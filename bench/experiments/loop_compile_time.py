"""Where a persistent loop kernel's cold compile goes, on a CPU (no GPU needed; not part of the
package): each loop kernel of a stacked LSTM char LM (Embedding 96 -> 128, the default schedule
and tuning for S) generated as ``CudaProgram`` would (codegen/loop.py ``LoopEmitter``, 132
blocks) and compiled to PTX for sm_90 alone with ``cuda.compile_ptx``. Prints one JSON line a
kernel: generation and compile seconds, source and PTX lines.

``--forceinline``: the generated module's ``inline=True`` device functions (numba-IR inlining)
become ``forceinline=True`` (NVVM's alwaysinline), to see what numba's own inlining costs.
``--outline``: each GEMM's item loop (a ``while kw < ...`` / ``while item < ...`` statement of
the kernel) moved into a ``forceinline`` device function of its own, its arguments the names it
reads that the kernel assigned before it (:func:`outline_item_loops`), to see whether numba's
front end costs less on smaller functions; the PTX's instruction counts show NVVM inlined them
back. ``--profile``: cProfile of the first kernel's ``compile_ptx`` (the tracer of rnngraph's cell
functions uses ``sys.setprofile``, so only the compile is profiled), its top 25 by own time.

    python bench/experiments/loop_compile_time.py --layers 2 --hidden 512 --streams 64 [--forceinline] [--outline] [--profile]
                                                  [--loop tiles=1]

Result: bench/results/cpu-20261204-loop-kernel-compile-profile.txt.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import cProfile
import io
import json
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def outline_item_loops(text: str) -> tuple[str, int]:
    """``text`` (a generated module whose kernel is ``k``) with each GEMM item loop of ``k`` moved
    into a ``@cuda.jit(device=True, forceinline=True)`` function ``gemm_<n>`` called in its place;
    returns (the new text, how many loops moved)."""
    tree = ast.parse(text)
    module_names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for n in tree.body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            module_names |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.Assign):
            module_names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    kern = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    made: list[ast.FunctionDef] = []

    def assigned_before(line: int) -> set[str]:
        names = {a.arg for a in kern.args.args}
        for n in ast.walk(kern):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.For)) and n.lineno < line:
                targets = [n.target] if isinstance(n, (ast.AugAssign, ast.For)) else n.targets
                names |= {t.id for tg in targets for t in ast.walk(tg) if isinstance(t, ast.Name)}
        return names

    def visit(body: list) -> list:
        out = []
        for st in body:
            test = getattr(st, "test", None)
            if (isinstance(st, ast.While) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
                    and test.left.id in ("kw", "item")):
                reads = {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                free = sorted(v for v in reads & assigned_before(st.lineno)
                              if v not in module_names and not hasattr(builtins, v))
                name = f"gemm_{len(made)}"
                decorator = ast.parse("cuda.jit(device=True, forceinline=True)").body[0].value
                made.append(ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=v) for v in free],
                                                                          kwonlyargs=[], kw_defaults=[], defaults=[]),
                                            body=[st], decorator_list=[decorator], returns=None, type_params=[]))
                out.append(ast.Expr(ast.Call(func=ast.Name(name, ast.Load()),
                                             args=[ast.Name(v, ast.Load()) for v in free], keywords=[])))
                continue
            for part in ("body", "orelse"):
                if isinstance(getattr(st, part, None), list):
                    setattr(st, part, visit(getattr(st, part)))
            out.append(st)
        return out

    kern.body = visit(kern.body)
    at = tree.body.index(kern)
    tree.body[at:at] = made
    return ast.unparse(ast.fix_missing_locations(tree)), len(made)


def _instructions(ptx: str) -> dict[str, int]:
    """Counts of the PTX body's instructions: all, FMAs, calls."""
    ops = [line.split()[0] for line in (raw.strip() for raw in ptx.splitlines())
           if line and not line.startswith(("//", ".", "{", "}", "$")) and not line.endswith(":")]
    return {"instr": len(ops), "fma": sum(o.startswith("fma") for o in ops), "calls": sum(o.startswith("call") for o in ops)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--forceinline", action="store_true")
    ap.add_argument("--outline", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--loop", default="", metavar="KEYS",
                    help="RNNGRAPH_LOOP-style keys over the defaults for S, e.g. tiles=1")
    args = ap.parse_args(argv)

    import numba.cuda.dispatcher
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
    from rnngraph.schedule import Loop, loop_precision

    S = args.streams
    options, tuning = resolve(S, overrides=parse(args.loop))
    g = rg.stacked(rg.cells.lstm, args.layers, args.hidden, vocab=96, embed=128).graph
    s = schedule(g, args.window, S, "float32", None, options)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    params = {Names(g).param(p.name): p for p in g.params}
    loops = [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]
    for n, loop in enumerate(loops):
        t0 = time.perf_counter()
        emitter = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, streams=S, nblocks=132, tuning=tuning,
                              precision=loop_precision(s))
        src, names = emitter.source()
        text = PRELUDE + "\n\n" + src
        if args.forceinline:
            text = text.replace("inline=True", "forceinline=True")
        moved = 0
        if args.outline:
            text, moved = outline_item_loops(text)
        kern = module.load(text).k
        arrays = [np.zeros((2, 2, 2), np.float32) if a[0] in "VGNM" else np.zeros(2, np.int32) if a[0] == "O" else
                  np.zeros(params["P" + a[1:]].shape[::-1 if a[0] == "T" else 1], np.float32) for a in names]
        extra = ([np.zeros(1, np.uint32)] if emitter.barrier else []) + [np.zeros((2, 2, 2), np.uint64)
                                                                        for _ in emitter.flag_buffers]
        sig = tuple(typeof(v) for v in [4, S] + extra + arrays)
        t1 = time.perf_counter()
        profile = cProfile.Profile() if args.profile and n == 0 else None
        if profile:
            profile.enable()
        ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
        if profile:
            profile.disable()
        t2 = time.perf_counter()
        print(json.dumps({"loop": loop.name, "gen_s": round(t1 - t0, 2), "compile_ptx_s": round(t2 - t1, 2),
                          "src_lines": src.count("\n"), "ptx_lines": ptx.count("\n"), **_instructions(ptx),
                          "forceinline": args.forceinline, "outlined_loops": moved, "loop_keys": args.loop}),
              flush=True)
        if profile:
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
