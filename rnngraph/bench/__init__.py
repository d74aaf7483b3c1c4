"""Benchmarks: rnngraph's generated training step against cuDNN and PyTorch, measured in one run.

The library behind ``bench/run_all.py`` (the full grid) and ``rnngraph bench`` (a quick subset).
:func:`run` times one configuration (:class:`Config`) with one implementation and returns a
record (a dict); it never raises for a failing implementation: the record then holds ``error``
and null times, so one failure cannot lose a run. :func:`run_jobs` runs a list of them under a
time budget and writes the results JSON after every record.

Protocol (PyTorch's fastrnns): CUDA events on the stream that does the work, ``warmup`` calls
(default 10) then ``iters`` timed calls (default 100), the median in ms; random inputs (T, S, I)
and a random output gradient; the forward (``fwd_ms``, no gradients kept) and forward+backward
(``fwdbwd_ms``: weight gradients included, optimizer excluded) timed separately. A call slower
than ``max_seconds / iters`` gets fewer timed calls (at least ``min_iters``); each record says
how many it got. Without a GPU (and in numba's CUDA simulator) a wall clock replaces the events.

Implementations (``impl``):
- ``rnngraph``: the generated GPU schedule (``rnngraph.codegen.program.CudaProgram``), the cost
  model's plan; ``rnngraph-naive``: the same with ``plan="naive"`` (one kernel per op per
  timestep, nothing hoisted, merged or fused): what the passes buy;
- ``rnngraph-tf32`` / ``rnngraph-bf16``: the same in that ``precision`` (the once-per-window
  GEMMs on tensor cores), ``-mma`` with the persistent loops' products on tensor cores too
  (``ScheduleOptions.loop_tensor_cores``);
- ``cudnn-fp32`` / ``cudnn-tf32``: ``torch.nn.LSTM`` / ``nn.GRU`` with TF32 off / on (both
  ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32``);
  ``cudnn-fp16`` / ``cudnn-bf16``: the module, x and dy in float16 / bfloat16 (the record's
  ``torch_dtype``; its ``dtype`` stays the configuration's);
- ``torch-eager`` / ``torchscript`` / ``torch-compile``: the same cell as a PyTorch module looped
  over time in Python (``bench/torch_cells.py``, fastrnns' ``custom_lstms`` form), TF32 off;
- ``rnngraph-cpu``: a char-level language-model training step (``step.train``: forward, BPTT,
  clipping, Adam) on the NumPy backend; ``rnngraph`` on the same LM config (``Config.vocab``
  set) times the same call on the GPU (``step_ms``, wall clock: ``train`` returns the loss, so
  each call ends synchronised). Their ratio is the CPU/GPU speed-up Li et al. (2014) discuss.

Units: times in ms, throughput in TFLOP/s from :func:`flops_forward`.

The package's modules: ``configs.py`` (implementations, :class:`Config`, FLOPs), ``timers.py``
(the protocol and timers), ``implementations.py`` (each implementation, :func:`run`),
``results.py`` (:func:`run_jobs`, the results JSON, comparisons); this one exports their names
and holds ``rnngraph bench`` (:func:`cli_bench`).
"""
from __future__ import annotations

from .configs import (COMPILE_ESTIMATE_S, CUDNN_CELLS, CUDNN_HALF, FORCED_PLANS, GATES, IMPLS, PRECISION_IMPLS,
                      PROTOCOL, TORCH_CELLS, TORCH_MODES, Config, applicable, flops_forward, tflops)
from .implementations import gpu_available, gpu_program, run, torch_cells
from .results import _print, anchor, describe, device_name, run_jobs, speedup, versions, write_results
from .timers import NumbaEventTimer, Protocol, TorchEventTimer, WallTimer, add_protocol_arguments, measure, protocol_of

__all__ = ["COMPILE_ESTIMATE_S", "CUDNN_CELLS", "CUDNN_HALF", "FORCED_PLANS", "GATES", "IMPLS", "PRECISION_IMPLS",
           "PROTOCOL", "QUICK_CPU", "QUICK_GPU",
           "TORCH_CELLS", "TORCH_MODES", "Config", "NumbaEventTimer", "Protocol", "TorchEventTimer", "WallTimer",
           "add_protocol_arguments", "anchor", "applicable", "cli_bench", "describe", "device_name", "flops_forward", "gpu_available",
           "gpu_program", "measure", "protocol_of", "run", "run_jobs", "speedup", "tflops", "torch_cells", "versions",
           "write_results"]


QUICK_GPU = [(Config("lstm", 1, 100, S, 512, 512), impl) for S in (1, 64) for impl in ("cudnn-fp32", "rnngraph")]
QUICK_CPU = [(Config("lstm", 1, 32, 16, 128, 32, vocab=64), "rnngraph-cpu")]


def cli_bench(iters: int = 100, warmup: int = 10, out: str | None = None, device: str = "auto", log=None) -> int:
    """``rnngraph bench``: LSTM H=512 T=100 S in {1, 64}, rnngraph against cuDNN fp32; without a
    GPU, the NumPy backend's LM step on small shapes only. Prints a line per record and the
    speed-ups; writes the results JSON to ``out``. Returns 0, or 1 when a record failed."""
    log = log or _print
    gpu = gpu_available()
    if device == "cuda" and not gpu:
        raise ValueError("--device cuda: numba finds no CUDA GPU (drop --device to time the CPU backend)")
    use_gpu = gpu and device != "cpu"
    if not use_gpu:
        cfg = QUICK_CPU[0][0]
        log(f"{'no CUDA GPU found' if not gpu else '--device cpu'}: timing only the NumPy backend "
            f"(rnngraph-cpu: a char-LM training step, H={cfg.H} T={cfg.T} S={cfg.S} vocab={cfg.vocab}); "
            f"run on a GPU machine for rnngraph against cuDNN")
    jobs = QUICK_GPU if use_gpu else QUICK_CPU
    result = run_jobs(jobs, Protocol(warmup, iters), out=out, gpu=use_gpu, settings={"entry": "rnngraph bench"},
                      log=log)
    recs = result["records"]
    for r in recs:
        if r["impl"] == "rnngraph" and not r.get("error"):
            base, _ = anchor(r, recs)
            f, b = (speedup(base and base[k], r[k]) for k in ("fwd_ms", "fwdbwd_ms"))
            if f and b:
                log(f"S={r['S']}: rnngraph vs cudnn-fp32: {f:.2f}x forward, {b:.2f}x forward+backward "
                    f"(above 1 = faster)")
    if out:
        log(f"wrote {out}")
    return 1 if any(r.get("error") for r in recs) else 0
