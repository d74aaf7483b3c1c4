#!/usr/bin/env python3
"""First-call time of a fresh process (cold and warm kernel cache) and steady training-step time of
language models through the public API, against torch.nn.LSTM in the same run.

For each model (``--models``; default: the four of the startup issue plus 2 x 512 at S = 8) three
fresh processes of this script run one after the other:

- ``cold``: empty caches (a new ``RNNGRAPH_CACHE`` and ``NUMBA_CACHE_DIR``): ``import rnngraph``,
  ``rg.compile(net, device="cuda", ...)``, the first ``step.train(x, y)`` -- timed apart
  (``import_s``, ``compile_s``, ``first_train_s``; ``first_call_s`` = their sum, what a user
  waits before the first loss; ``trace_s``, the cell's tracing, is part of ``compile_s``; ``import_s``
  includes the first use of ``rg.compile``, ``rg.stacked`` and ``rg.cells``, which the package
  imports lazily) -- and every kernel's compile or load time
  (rnngraph.codegen.kernel_cache.compile_stats), the worker processes' compile of the loop kernels
  (``loop_workers``: codegen/parallel_compile.py's history) and whether ``scipy.linalg`` was
  imported (``scipy_linalg_imported``: codegen/target_startup.py keeps numba-cuda's from it);
- ``warm``: the same in a new process with the caches the cold one filled; then ``--steps``
  steady training steps, each ``float(step.train(x, y))`` (the loss read, so each step ends
  synchronised, as a training loop that logs every loss does): median ``step_ms`` and tokens/s
  (T * S / step); then ``--steps`` more with the losses left unread until the last
  (``step_ms_unread``: mean, each batch made while the GPU runs the previous step);
- ``torch``: the same model in PyTorch (bench/lm_vs_torch.py's TorchModel: nn.Embedding, nn.LSTM,
  nn.Linear, cross_entropy, Adam, clip_grad_norm_, ``loss.item()`` each step) with TF32 off and
  on, median step time of ``--steps`` steps (default 300) after 5 warm-up steps;
- with ``--profile PREFIX``, one more warm process (``warm_profiled``) whose import, compile and first
  train run under cProfile, its table written to ``PREFIX-MODEL.txt``
  (bench/results/h200-20261203-startup-warm-profile-2x512-s64.txt: of a 3.1 s warm first call,
  0.93 s went to compiling 586 modules' Python source -- the benchmark machine used no bytecode
  cache -- 0.56 s to importing networkx and 0.72 s to loading 17 cached kernels);
- with ``--profile-cold PREFIX``, the same for one more cold process (``cold_profiled``, empty caches
  of its own): the main process's cold first call, the loop kernels' workers as the wait for them;
- with ``--pycache-prefix DIR`` the packages' bytecode is compiled into DIR first and read by every
  child, as after a pip install. The H200 image sets PYTHONDONTWRITEBYTECODE, which made each
  process compile every module's source: a warm first call of 6.2 s against 2.2 s with bytecode.
  The standard library's bytecode is not precompiled: the cold child compiles what it imports of
  it into DIR, the warm one reads that;
  ``--absent scipy`` runs rnngraph's children as if SciPy were not installed (numba-cuda imports
  it when it loads a kernel; rnngraph does not need it): 1.4 s
  (bench/results/h200-20261203-startup-and-step-bytecode-no-scipy.json). Each child records
  ``bytecode`` (``sys.flags.dont_write_bytecode``, ``sys.pycache_prefix``).

Random token ids (fixed seed); the char models have V = 96 and a 128-wide embedding, T = 100;
the word model V = 10,000, embedding 1024, T = 35, S = 32. Adam lr 2e-3, clip 1.0.

Usage (GPU)::

    python3 bench/startup.py --out bench/results/h200-YYYYMMDD-startup-and-step.json
    python3 bench/startup.py --models 1x512-s1 --steps 20      # one model
    python3 bench/startup.py --models 2x512-s64 --steps 20 --profile /tmp/warm   # where a warm start goes
    python3 bench/startup.py --models 2x512-s64 --pycache-prefix /tmp/pyc   # with bytecode, as installed
    python3 bench/startup.py --models 2x512-s64 --pycache-prefix /tmp/pyc --absent scipy   # without SciPy
    python3 bench/startup.py --models 2x512-s64 --precision tf32   # rnngraph's GEMMs on tensor cores too
"""
from __future__ import annotations

import argparse
import datetime
import importlib.abc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: name -> (cell, layers, hidden, vocab, embed, window, streams)
MODELS = {
    "1x512-s1": ("lstm", 1, 512, 96, 128, 100, 1),
    "2x512-s8": ("lstm", 2, 512, 96, 128, 100, 8),
    "2x512-s64": ("lstm", 2, 512, 96, 128, 100, 64),
    "peephole-2x512-s64": ("peephole_lstm", 2, 512, 96, 128, 100, 64),
    "word-2x1024-s32": ("lstm", 2, 1024, 10_000, 1024, 35, 32),
}


def _batch(model: str, seed: int):
    import numpy as np
    _, _, _, V, _, T, S = MODELS[model]
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))


class _Absent(importlib.abc.MetaPathFinder):
    """An import hook that makes the named top-level packages fail to import, as on a machine where
    they are not installed (``--absent``). ``import`` then raises ModuleNotFoundError as for a
    missing package; ``importlib.util.find_spec`` raises it too, where a missing package gives
    None (numba-cuda's check imports inside try/except)."""

    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden by --absent)", name=fullname)
        return None


def child_rnngraph(model: str, steps: int, profile: str | None = None, precision: str = "fp32") -> dict:
    """One fresh process: import, compile, first train, then ``steps`` timed steps. With ``profile``
    (a file name) the import, the compile and the first train run under cProfile -- all but the
    cell's tracing, which sets its own profile hook -- and the functions with the largest
    cumulative time are written there. ``precision`` is rg.compile's (fp32, tf32, bf16)."""
    import cProfile
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    t0 = time.perf_counter()
    import rnngraph as rg
    from rnngraph.codegen.kernel_cache import compile_stats
    rg.compile, rg.stacked, rg.cells  # noqa: B018  (the package imports its names at first use: here, as before)
    t_import = time.perf_counter()
    cell, L, H, V, E, T, S = MODELS[model]
    net = rg.stacked(getattr(rg.cells, cell), L, H, vocab=V, embed=E)
    if prof:
        prof.disable()
    t_trace = time.perf_counter()
    net.graph  # noqa: B018  (traced here, outside the profile)
    t_trace = time.perf_counter() - t_trace
    if prof:
        prof.enable()
    step = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.Adam(lr=2e-3), clip_norm=1.0, seed=0,
                      precision=precision)
    t_compile = time.perf_counter()
    x, y = _batch(model, 0)
    loss = float(step.train(x, y))
    t_first = time.perf_counter()
    if prof:
        import io
        import pstats
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(120)
        with open(profile, "w") as f:
            f.write(f"{model}: import {t_import - t0:.3f} s, trace {t_trace:.3f} s (not profiled), "
                    f"compile {t_compile - t_import - t_trace:.3f} s, first train {t_first - t_compile:.3f} s\n")
            f.write(text.getvalue())
    out = {"bytecode": {"dont_write_bytecode": sys.flags.dont_write_bytecode, "pycache_prefix": sys.pycache_prefix},
           "interpreter_s": t0 - T_START, "import_s": t_import - t0, "compile_s": t_compile - t_import,
           "trace_s": t_trace, "first_train_s": t_first - t_compile, "first_call_s": t_first - t0, "first_loss": loss,
           "kernels": [{"name": r.name, "file": os.path.basename(r.file), "hits": r.hits, "misses": r.misses,
                        "seconds": round(r.seconds, 3)} for r in compile_stats()]}
    from rnngraph.codegen import parallel_compile
    out["loop_workers"] = parallel_compile.history  # the persistent loop kernels compiled side by side
    # numba-cuda's host-BLAS check imports scipy.linalg unless codegen/target_startup.py kept it out
    out["scipy_linalg_imported"] = "scipy.linalg" in sys.modules
    out["compiled"] = sum(k["misses"] for k in out["kernels"])
    out["loaded"] = sum(k["hits"] for k in out["kernels"])
    out["kernel_seconds"] = round(sum(k["seconds"] for k in out["kernels"]), 3)
    if steps:
        times = []
        for i in range(steps):
            x, y = _batch(model, i + 1)
            t = time.perf_counter()
            float(step.train(x, y))
            times.append(time.perf_counter() - t)
        ms = statistics.median(times) * 1e3
        out |= {"steps": steps, "step_ms": ms, "tokens_per_s": T * S / ms * 1e3}
        # the losses left unread until the end (rnngraph/lazy_loss.py): each window's batch is made
        # while the GPU runs the previous step
        t = time.perf_counter()
        losses = [step.train(*_batch(model, i + 1)) for i in range(steps)]
        float(losses[-1])
        ms = (time.perf_counter() - t) / steps * 1e3
        out |= {"step_ms_unread": ms, "tokens_per_s_unread": T * S / ms * 1e3}
    return out


def child_torch(model: str, steps: int, tf32: bool) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lm_vs_torch import TorchModel
    cell, L, H, V, E, T, S = MODELS[model]
    if cell != "lstm":
        return {"skipped": f"{cell}: nn.LSTM has no such cell"}
    args = argparse.Namespace(device="cuda", tf32=tf32, seed=0, embed=E, hidden=H, layers=L, dropout=0.0,
                              init="torch", weight_decay=0.0, lr=2e-3, clip=1.0)
    m = TorchModel(args, V)
    times = []
    for i in range(steps + 5):
        x, y = _batch(model, i + 1)
        t = time.perf_counter()
        m.train(x, y)
        times.append(time.perf_counter() - t)
    ms = statistics.median(times[5:]) * 1e3
    return {"tf32": tf32, "steps": steps, "step_ms": ms, "tokens_per_s": T * S / ms * 1e3}


def _spawn(args: list[str], env: dict) -> dict:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:], "process_wall_s": wall}
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"process_wall_s": wall}


#: the packages a child process of this script imports (rnngraph's own and its dependencies')
PACKAGES = ("rnngraph", "numpy", "numba", "numba_cuda", "llvmlite", "scipy", "networkx", "cupy", "cupy_backends",
            "cuda", "fastrlock", "tqdm")


def precompile(prefix: str) -> float:
    """Compile :data:`PACKAGES`' Python source into ``prefix`` (``compileall`` with PYTHONPYCACHEPREFIX, all
    cores); returns the seconds it took."""
    import importlib.util
    dirs = []
    sys.path.insert(0, os.path.abspath(ROOT))
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.abspath(prefix)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *dirs], env=env, check=False,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    # 300: PyTorch's S = 64 step measured over more steps was shorter (H100: median 11.97 ms over
    # 20 steps in one process, 8.89 over 300 in another;
    # bench/results/h100-20261205-startup-and-step-s64-300-steps.json)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", help="results JSON")
    p.add_argument("--profile", metavar="PREFIX",
                   help="also run a third warm process under cProfile and write PREFIX-MODEL.txt (its times are "
                        "not the benchmark's)")
    p.add_argument("--profile-cold", metavar="PREFIX",
                   help="also run a cold process (empty caches of its own) under cProfile and write "
                        "PREFIX-MODEL.txt: where the main process's cold first call goes (the loop kernels' "
                        "workers show as the wait for them)")
    p.add_argument("--pycache-prefix", metavar="DIR",
                   help="give the child processes Python bytecode, as a pip install does: compile the packages they "
                        "import into DIR (PYTHONPYCACHEPREFIX) first and let them read it, even where the machine "
                        "sets PYTHONDONTWRITEBYTECODE (the H200 image does: every import then compiled its source)")
    p.add_argument("--absent", nargs="*", default=[], metavar="PACKAGE",
                   help="packages rnngraph's processes are to run without, as where they are not installed (e.g. "
                        "scipy: the H200 image has it, rnngraph does not need it, and numba-cuda imports it when it "
                        "loads a kernel if it is there)")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                   help="rnngraph's precision (rg.compile's; default fp32): tf32 or bf16 put the once-per-window "
                        "GEMMs on tensor cores, as torch's TF32-on run does for cuDNN's")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--torch-tf32", type=int, default=-1, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        if a.absent:
            sys.meta_path.insert(0, _Absent(a.absent))
        res = (child_torch(a.child, a.steps, bool(a.torch_tf32)) if a.torch_tf32 >= 0
               else child_rnngraph(a.child, a.steps, a.profile, a.precision))
        print(json.dumps(res))
        return 0
    models = a.models.split(",")
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.error(f"--models: unknown {bad}; known: {', '.join(MODELS)}")
    result = {"benchmark": "startup-and-step", "date": datetime.date.today().isoformat(),
              "command": " ".join([os.path.basename(__file__), *(argv or sys.argv[1:])]), "absent": a.absent,
              "precision": a.precision,
              "rnngraph_loop": os.environ.get("RNNGRAPH_LOOP", ""),  # the child processes inherit it
              "models": {}}
    base_env = dict(os.environ)
    if a.pycache_prefix:
        result["bytecode_compile_s"] = precompile(a.pycache_prefix)
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        base_env["PYTHONPYCACHEPREFIX"] = os.path.abspath(a.pycache_prefix)
    for m in models:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**base_env, "RNNGRAPH_CACHE": os.path.join(tmp, "rg"), "NUMBA_CACHE_DIR": os.path.join(tmp, "nb"),
                   "PYTHONPATH": os.path.abspath(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            rec = {"config": dict(zip(("cell", "layers", "hidden", "vocab", "embed", "window", "streams"), MODELS[m]))}
            child_flags = (["--absent", *a.absent] if a.absent else []) + ["--precision", a.precision]
            rec["cold"] = _spawn(["--child", m, "--steps", "0", *child_flags], env)
            rec["warm"] = _spawn(["--child", m, "--steps", str(a.steps), *child_flags], env)
            if a.profile:
                rec["warm_profiled"] = _spawn(["--child", m, "--steps", "0", "--profile", f"{a.profile}-{m}.txt",
                                               *child_flags], env)
            if a.profile_cold:
                with tempfile.TemporaryDirectory() as fresh:
                    rec["cold_profiled"] = _spawn(
                        ["--child", m, "--steps", "0", "--profile", f"{a.profile_cold}-{m}.txt", *child_flags],
                        {**env, "RNNGRAPH_CACHE": os.path.join(fresh, "rg"), "NUMBA_CACHE_DIR": os.path.join(fresh, "nb")})
            for tf32 in (0, 1):
                rec[f"torch_tf32_{'on' if tf32 else 'off'}"] = _spawn(
                    ["--child", m, "--steps", str(a.steps), "--torch-tf32", str(tf32)], env)
        best = min((rec[k].get("step_ms") or float("inf")) for k in ("torch_tf32_off", "torch_tf32_on"))
        if rec["warm"].get("step_ms") and best < float("inf"):
            rec["speedup_vs_faster_torch"] = best / rec["warm"]["step_ms"]
        result["models"][m] = rec
        print(f"{m} ({a.precision}): cold first call {rec['cold'].get('first_call_s', float('nan')):.1f} s "
              f"(process {rec['cold']['process_wall_s']:.1f} s, compiled {rec['cold'].get('compiled')}), "
              f"warm {rec['warm'].get('first_call_s', float('nan')):.1f} s (loaded {rec['warm'].get('loaded')}, "
              f"compiled {rec['warm'].get('compiled')}); step {rec['warm'].get('step_ms', float('nan')):.2f} ms, "
              f"torch {best:.2f} ms; speed-up {rec.get('speedup_vs_faster_torch', float('nan')):.2f}x", flush=True)
        if a.out:
            tmp_out = a.out + ".tmp"
            with open(tmp_out, "w") as f:
                json.dump(result, f, indent=1)
            os.replace(tmp_out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
