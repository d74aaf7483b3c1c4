"""Runs and their results: the versions and device recorded, the results JSON, :func:`run_jobs`
under a time budget, and the comparisons of records (:func:`anchor`, :func:`speedup`)."""
from __future__ import annotations

import datetime
import json
import os
import platform
import time
from dataclasses import asdict

import numpy as np

from .configs import COMPILE_ESTIMATE_S, CUDNN_CELLS, PROTOCOL, Config
from .implementations import run
from .timers import Protocol


def versions() -> dict:
    """Versions of the packages that matter (None where absent)."""
    out = {"python": platform.python_version()}
    for name, module in (("torch", "torch"), ("numba", "numba"), ("numba-cuda", "numba_cuda"),
                         ("cupy", "cupy"), ("numpy", "numpy"), ("rnngraph", "rnngraph")):
        try:
            out[name] = __import__(module).__version__
        except Exception:
            out[name] = None
    out["cudnn"] = None
    if out["torch"]:
        try:
            import torch
            out["cudnn"] = torch.backends.cudnn.version() if torch.cuda.is_available() else None
        except Exception:
            pass
    return out


def device_name(gpu: bool) -> str:
    """The GPU's name, or the CPU's description."""
    if gpu:
        from numba import cuda
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    return f"cpu {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def _print(text: str) -> None:
    print(text, flush=True)


def _jsonable(v):
    """NumPy scalars as numbers, anything else unknown as its text (a results file must always be written)."""
    return v.item() if isinstance(v, np.generic) else str(v)


def write_results(path: str | None, result: dict) -> None:
    """Write ``result`` as JSON to ``path`` (a temporary file renamed over it; None: nothing)."""
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1, default=_jsonable)
        f.write("\n")
    os.replace(tmp, path)


def describe(rec: dict) -> str:
    """One line: the label, the times (ms) and TFLOP/s, or the error."""
    cfg = Config(**{k: rec[k] for k in ("cell", "layers", "T", "S", "H", "I", "dtype")}, vocab=rec.get("vocab"))
    head = f"{cfg.label(rec['impl']):<48}"
    if rec.get("error"):
        return f"{head} error: {rec['error']}"
    if rec.get("step_ms") is not None:
        return f"{head} step {rec['step_ms']:9.2f} ms  {rec['tokens_per_s']:12,.0f} tok/s"
    fmt = lambda v: "      -" if v is None else f"{v:9.3f}"
    tf = rec.get("tflops_fwdbwd")
    return (f"{head} fwd {fmt(rec['fwd_ms'])} ms  fwdbwd {fmt(rec['fwdbwd_ms'])} ms"
            + (f"  {tf:5.2f} TFLOP/s" if tf else ""))


def run_jobs(jobs, proto: Protocol, *, out: str | None = None, time_budget: float | None = None,
             compile_budget: float | None = None, gpu: bool = True, torch_device: str = "cuda",
             settings: dict | None = None, log=None) -> dict:
    """Run ``jobs`` ((Config, impl) pairs) in order; returns the results object and writes it to
    ``out`` after every record. No job starts once ``time_budget`` seconds have passed; no
    torch-compile job starts once the compiles have taken ``compile_budget`` seconds or when
    less than COMPILE_ESTIMATE_S of the time budget is left. Skipped jobs are listed in
    ``skipped`` with the reason, and ``time_budget`` says whether the budget was exceeded."""
    result = {"device": device_name(gpu), "versions": versions(), "date": datetime.date.today().isoformat(),
              "protocol": PROTOCOL, "settings": {**asdict(proto), "time_budget_s": time_budget,
                                                 "compile_budget_s": compile_budget, **(settings or {})},
              "records": [], "skipped": [],
              "time_budget": {"seconds": time_budget, "exceeded": False, "elapsed_s": 0.0}}
    log = log or _print
    start, compile_spent = time.perf_counter(), 0.0
    for cfg, impl in jobs:
        elapsed = time.perf_counter() - start
        reason = None
        if time_budget is not None and elapsed > time_budget:
            reason = f"time budget of {time_budget:g} s exceeded ({elapsed:.0f} s elapsed)"
            result["time_budget"]["exceeded"] = True
        elif impl == "torch-compile":
            if compile_budget is not None and compile_spent >= compile_budget:
                reason = f"torch.compile budget of {compile_budget:g} s spent"
            elif time_budget is not None and time_budget - elapsed < COMPILE_ESTIMATE_S:
                reason = f"under {COMPILE_ESTIMATE_S:g} s of the time budget left for torch.compile"
        if reason:
            result["skipped"].append({"label": cfg.label(impl), "reason": reason})
            log(f"{cfg.label(impl):<48} skipped: {reason}")
            continue
        rec = run(cfg, impl, proto, torch_device=torch_device)
        if impl == "torch-compile":
            compile_spent += rec.get("compile_s") or rec["wall_s"]
        result["records"].append(rec)
        result["time_budget"]["elapsed_s"] = round(time.perf_counter() - start, 1)
        log(describe(rec))
        write_results(out, result)
    result["time_budget"]["elapsed_s"] = round(time.perf_counter() - start, 1)
    write_results(out, result)
    return result


def anchor(rec: dict, records: list[dict]) -> tuple[dict | None, bool]:
    """The cudnn-fp32 record ``rec`` is compared with, from the same run: same layers, T, S, H, I
    and cell (cuDNN's plain LSTM for cells cuDNN lacks; the flag says whether the cell matched).
    For an LM record, the GPU rnngraph record of the same config. (None, False) when absent."""
    keys = ("layers", "T", "S", "H", "I", "dtype")
    same = lambda r: all(r.get(k) == rec.get(k) for k in keys) and r.get("task", "layer") == rec.get("task", "layer")
    if rec.get("task", "layer") == "lm":
        hits = [r for r in records if same(r) and r["impl"] == "rnngraph" and r.get("vocab") == rec.get("vocab")
                and r["cell"] == rec["cell"] and r.get("step_ms")]
        return (hits[0] if hits else None), True
    cell = rec["cell"] if rec["cell"] in CUDNN_CELLS else "lstm"
    hits = [r for r in records if same(r) and r["impl"] == "cudnn-fp32" and r["cell"] == cell]
    return (hits[0] if hits else None), cell == rec["cell"]


def speedup(base_ms: float | None, ms: float | None) -> float | None:
    """base_ms / ms: above 1 means faster than the base (None when either is missing)."""
    if not base_ms or not ms:
        return None
    return base_ms / ms
