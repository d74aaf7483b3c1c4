#!/usr/bin/env python3
"""Word-level LSTM language model: training throughput of rnngraph (CUDA in each precision, and the
NumPy backend) against PyTorch (nn.LSTM, cuDNN) in the same run, and peak GPU memory at a large
vocabulary.

Model (both libraries): Embedding(V, E) -> LSTM(H) x L -> Linear(H, V) -> softmax cross-entropy
(mean), Adam lr 2e-3, global-norm clip 1.0, truncated BPTT over windows of T steps and S streams.
rnngraph: ``rg.stacked(rg.cells.lstm, L, H, vocab=V, embed=E)`` compiled with ``precision=`` each
of ``--precisions``; PyTorch: bench/lm_vs_torch.py's TorchModel with TF32 off and on (cuDNN's RNNs
use TF32 by default in PyTorch). Defaults: L = 2, H = E = 1024, T = 35, S = 64, V = 13,353 (the
word types of the Austen corpus, ``rnngraph train --level word``: throughput does not depend on
which ids arrive, so the batches are seeded random ids).

Measured:
- ``gpu``: per implementation, the median step time of ``--steps`` steps after 3 warm-up steps,
  each step's loss read (``float(step.train(x, y))`` / ``loss.item()``: every step ends
  synchronised), and tokens/s = T * S / step;
- ``cpu``: rnngraph's NumPy backend on the same model (``--cpu-steps`` steps after one warm-up),
  on all cores of the machine (the BLAS NumPy links, with its default threads), and the GPU
  backend's speed-up over it (the ratio the GPU-vs-CPU comparison of the paper this project
  follows reports as 2-11x);
- ``memory``: the GPU memory one fresh process holds after compiling and two training steps at
  ``--memory-vocab`` (100,000) words, from cudaMemGetInfo (free memory after the CUDA context is
  made, less free memory at the end: arrays, cuBLAS workspace, kernels, PyTorch's cache), and
  PyTorch's own peak allocation.

  H200:  python3 bench/word_lm.py --out bench/results/h200-YYYYMMDD-word-lm-2x1024.json
  CPU check (the NumPy backend only; tests/test_bench.py):  python bench/word_lm.py --smoke
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# the smoke run times the NumPy backend only (a simulated CUDA step takes ~20 s)
SMOKE = dict(layers=1, hidden=8, embed=8, vocab=50, window=3, streams=2, steps=1, cpu_steps=1, memory_vocab=0,
             precisions=[])


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--embed", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=13_353, help="V (default: the Austen corpus' word types)")
    ap.add_argument("--window", type=int, default=35)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30, help="timed GPU steps per implementation")
    ap.add_argument("--cpu-steps", type=int, default=3, help="timed NumPy-backend steps (0: skip)")
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "tf32", "bf16"], default=["fp32", "tf32", "bf16"])
    ap.add_argument("--memory-vocab", type=int, default=100_000, help="V of the memory measurement (0: skip)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, the NumPy backend only")
    ap.add_argument("--child-memory", choices=["rnngraph", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help="JSON results file")
    a = ap.parse_args(argv)
    if a.smoke:
        for k, v in SMOKE.items():
            setattr(a, k, v)
    return a


def batch(a, seed, vocab=None):
    rng = np.random.default_rng(seed)
    v = vocab or a.vocab
    return rng.integers(0, v, (a.window, a.streams)), rng.integers(0, v, (a.window, a.streams))


def compile_rnngraph(a, device, precision="fp32", vocab=None):
    import rnngraph as rg
    net = rg.stacked(rg.cells.lstm, a.layers, a.hidden, vocab=vocab or a.vocab, embed=a.embed)
    return rg.compile(net, window=a.window, streams=a.streams, device=device, optimizer=rg.Adam(lr=2e-3),
                      clip_norm=1.0, seed=0, precision=precision)


def torch_model(a, tf32, vocab=None):
    from lm_vs_torch import TorchModel
    args = argparse.Namespace(device="cuda", tf32=tf32, seed=0, embed=a.embed, hidden=a.hidden, layers=a.layers,
                              dropout=0.0, init="native", weight_decay=0.0, lr=2e-3, clip=1.0)
    return TorchModel(args, vocab or a.vocab)


def median_step_ms(train, a, steps, warmup):
    times = []
    for i in range(warmup + steps):
        x, y = batch(a, i + 1)
        t = time.perf_counter()
        train(x, y)
        times.append(time.perf_counter() - t)
    return statistics.median(times[warmup:]) * 1e3


def record(name, ms, a, **extra):
    tokens = a.window * a.streams / ms * 1e3
    print(f"{name:<22} {ms:9.2f} ms/step  {tokens:10.0f} tokens/s", flush=True)
    return {"impl": name, "step_ms": ms, "tokens_per_s": tokens, **extra}


def child_memory(a) -> dict:
    """One fresh process: GPU memory held after compiling and two steps at ``--memory-vocab``."""
    V = a.memory_vocab
    if a.child_memory == "torch":
        import torch
        torch.cuda.init()
        free0, _ = torch.cuda.mem_get_info()
        m = torch_model(a, tf32=False, vocab=V)
        for i in range(2):
            m.train(*batch(a, i, V))
        torch.cuda.synchronize()
        free1, _ = torch.cuda.mem_get_info()
        return {"impl": "torch", "vocab": V, "held_bytes": free0 - free1,
                "torch_peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "torch_reserved_bytes": torch.cuda.memory_reserved()}
    from numba import cuda
    free0, _ = cuda.current_context().get_memory_info()
    step = compile_rnngraph(a, "cuda", vocab=V)
    for i in range(2):
        float(step.train(*batch(a, i, V)))
    cuda.synchronize()
    free1, _ = cuda.current_context().get_memory_info()
    return {"impl": "rnngraph", "vocab": V, "held_bytes": free0 - free1}


def spawn_memory(a, impl) -> dict:
    args = [sys.executable, os.path.abspath(__file__), "--child-memory", impl, "--layers", str(a.layers),
            "--hidden", str(a.hidden), "--embed", str(a.embed), "--window", str(a.window), "--streams",
            str(a.streams), "--memory-vocab", str(a.memory_vocab)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        return {"impl": impl, "error": proc.stderr[-1500:]}
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"memory at V={a.memory_vocab:,}: {impl:<9} {rec['held_bytes'] / 2**30:7.2f} GiB held", flush=True)
    return rec


def main(argv=None) -> dict:
    a = parse(argv)
    if a.child_memory:
        print(json.dumps(child_memory(a)))
        return {}
    from rnngraph.bench.results import device_name, versions, write_results
    from rnngraph.codegen.device import in_simulator
    gpu = not in_simulator()
    result = {"benchmark": "word_lm", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "device": device_name(gpu), "versions": versions(), "cpu_count": os.cpu_count(),
              "settings": {k: v for k, v in vars(a).items() if k not in ("child_memory", "out")},
              "gpu": [], "cpu": None, "memory": []}
    from rnngraph.schedule import loop_precision
    for precision in a.precisions:
        step = compile_rnngraph(a, "cuda", precision)
        ms = median_step_ms(lambda x, y: float(step.train(x, y)), a, a.steps, warmup=3)
        result["gpu"].append(record(f"rnngraph-{precision}", ms, a, precision=precision,  # the loops' kind too
                                    loop_tensor_cores=loop_precision(step.schedule) != "fp32"))
        del step
        write_results(a.out, result)
    if gpu and not a.smoke:
        for tf32 in (False, True):
            m = torch_model(a, tf32)
            ms = median_step_ms(m.train, a, a.steps, warmup=3)
            result["gpu"].append(record(f"torch-{'tf32' if tf32 else 'fp32'}", ms, a, tf32=tf32))
            del m
            write_results(a.out, result)
    by = {r["impl"]: r["tokens_per_s"] for r in result["gpu"]}
    if "torch-fp32" in by:
        best_torch = max(by["torch-fp32"], by["torch-tf32"])
        result["over_faster_torch"] = {k: v / best_torch for k, v in by.items() if k.startswith("rnngraph")}
    if a.cpu_steps:
        step = compile_rnngraph(a, "cpu")
        ms = median_step_ms(lambda x, y: float(step.train(x, y)), a, a.cpu_steps, warmup=1)
        result["cpu"] = record("rnngraph-numpy", ms, a)
        if "rnngraph-fp32" in by:
            result["gpu_over_cpu_fp32"] = by["rnngraph-fp32"] / result["cpu"]["tokens_per_s"]
        write_results(a.out, result)
    if a.memory_vocab and gpu:
        result["memory"] = [spawn_memory(a, impl) for impl in ("rnngraph", "torch")]
    write_results(a.out, result)
    return result


if __name__ == "__main__":
    main()
