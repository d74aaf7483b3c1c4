"""Each implementation's timed calls (rnngraph on the GPU and the CPU, cuDNN, PyTorch loops) and
:func:`run`: one configuration with one implementation, as a record that holds any error."""
from __future__ import annotations

import gc
import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from .configs import (CUDNN_CELLS, CUDNN_HALF, FORCED_PLANS, PRECISION_IMPLS, TORCH_MODES, Config, applicable,
                      flops_forward, tflops)
from .timers import NumbaEventTimer, Protocol, TorchEventTimer, WallTimer, _timed, measure


def gpu_available() -> bool:
    """Whether numba finds a real CUDA GPU (not the simulator)."""
    from ..devices import cuda_available
    return cuda_available(simulator_ok=False)


def gpu_program(cfg: Config, plan: str | None = None, precision: str = "fp32", loop_tensor_cores: bool | None = None):
    """The compiled CudaProgram of a float-input stack for ``cfg`` (cell, layers, T, S, H, I;
    seed-0 parameters, normal inputs (T, S, I) float32, zero initial states) and two closures that
    enqueue on its stream, without synchronising: ``fwd()`` (the forward) and ``fwdbwd()`` (the
    forward, zeroed gradient arenas, a fixed normal output gradient (T*S, H), the backward with
    weight gradients). Returns (prog, fwd, fwdbwd). Building the program compiles the persistent
    loop kernels (to size their cooperative grid); the other kernels compile on the first call.
    The schedule options and the loop tuning are the defaults for ``cfg.S`` with the keys of
    RNNGRAPH_LOOP as the environment has it now (rnngraph/loop_env.py): ``rg.compile_rnn``'s;
    ``precision`` its matrix products' (rnngraph/precision.py); ``loop_tensor_cores`` True / False
    puts the persistent loops' products on tensor cores or keeps them on FFMA (the defaults for
    ``cfg.S`` with ``loop_tensor_cores`` so; RNNGRAPH_LOOP's option keys then do not apply, its
    tuning keys do), None leaves it to the defaults (in tf32 / bf16 on where S x H >= 49,152 or S >= 16 with
    H >= 1,024: rnngraph/schedule_options.py ``loop_tensor_cores_by_default``)."""
    from numba import cuda

    import rnngraph as rg
    from ..codegen import library

    net = rg.stacked(rg.cells.STANDARD[cfg.cell], cfg.layers, cfg.H, input_size=cfg.I)
    # compiled through the public API (seed-0 parameters); the closures launch the layer's program
    # rather than calling layer.forward / layer.backward, so that what is timed is the generated
    # launches alone, without the layer's copies of x, h0, dy and the outputs and its stream events
    options = (None if loop_tensor_cores is None
               else rg.ScheduleOptions.defaults(cfg.S).replace(loop_tensor_cores=loop_tensor_cores))
    prog = rg.compile_rnn(net, device="cuda", dtype="float32", seed=0, plan=plan, options=options,
                          precision=precision).program(cfg.T, cfg.S)
    b, g = prog.buf, net.graph
    rng = np.random.default_rng(0)
    b.refresh_transposed(prog.stream)
    b.V["x"].copy_to_device(rng.normal(size=(cfg.T, cfg.S, cfg.I)).astype(np.float32))
    for st in g.states:
        library.fill(b.V[st.node][:st.depth], 0.0, stream=prog.stream)
    dy = cuda.to_device(rng.normal(size=(cfg.T * cfg.S, cfg.H)).astype(np.float32))
    # the output gradient's window, a view made once (as the cuDNN side's gradient tensor is): making
    # it in each call kept the S=1 LSTM's GPU idle ~0.2 ms between forward and backward (H200,
    # bench/results/h200-20261201-flags-trace-lstm1.json)
    dy_window = b.window(g.outputs[0], grad=True)

    def fwd():
        prog.run_forward()

    def fwdbwd():
        prog.run_forward()
        library.fill(b.zeroed_grads, 0.0, stream=prog.stream)
        library.fill(b.param_grad_arena, 0.0, stream=prog.stream)
        dy_window.copy_to_device(dy, stream=prog.stream)
        prog.run_backward()

    return prog, fwd, fwdbwd


def _rnngraph_gpu(cfg: Config, proto: Protocol, plan: str | None, precision: str = "fp32",
                  loop_tensor_cores: bool | None = None) -> dict:
    """The generated forward / forward+backward of a float-input stack (weight gradients included),
    in ``precision`` (see :func:`gpu_program`)."""
    from ..codegen.device import in_simulator
    from ..loop_env import as_keys

    t0 = time.perf_counter()
    prog, fwd, fwdbwd = gpu_program(cfg, plan, precision, loop_tensor_cores)
    s = prog.s
    fwd()
    fwdbwd()  # JIT-compiles every kernel (and captures the forward's CUDA graphs)
    prog.stream.synchronize()
    compile_s = time.perf_counter() - t0
    timer = WallTimer(prog.stream.synchronize) if in_simulator() else NumbaEventTimer(prog.stream)
    loops = [st for st in s.forward if hasattr(st, "levels")]
    rec = {**_timed(fwd, fwdbwd, timer, proto), "plan": s.plan, "loop_modes": [lp.mode for lp in loops],
           "levels_per_timestep": [lp.levels for lp in loops], "launches_per_window": s.launches,
           "compile_s": compile_s, "loop_tuning": as_keys(s.options, prog.tuning), "precision": precision,
           # the groups each loop kernel took (loop_tuning's ``groups`` is what was asked for)
           "loop_stream_groups": {name: plan.stream_groups for name, plan in prog.loop_plans.items()},
           "loop_threads": dict(prog.loop_threads)}
    replay_errors = getattr(prog, "replay_errors", None)  # steps whose CUDA-graph capture failed
    if replay_errors:
        rec["replay_errors"] = list(replay_errors)
    return rec


def _rnngraph_lm(cfg: Config, proto: Protocol, device: str) -> dict:
    """``step.train`` of a char-level LM (Adam, clip 1.0) on ``device``; wall clock."""
    import rnngraph as rg

    t0 = time.perf_counter()
    net = rg.stacked(rg.cells.STANDARD[cfg.cell], cfg.layers, cfg.H, vocab=cfg.vocab, embed=cfg.I)
    step = rg.compile(net, cfg.T, cfg.S, device=device, dtype=cfg.dtype, optimizer=rg.Adam(lr=1e-3),
                      clip_norm=1.0, seed=0)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, cfg.vocab, size=(cfg.T, cfg.S)) for _ in range(2))
    train = lambda: float(step.train(x, y))  # the loss read: each call ends synchronised
    train()
    compile_s = time.perf_counter() - t0
    m = measure(train, WallTimer(), proto if device != "cpu" else
                Protocol(min(proto.warmup, 2), proto.iters, proto.max_seconds, min(proto.min_iters, 3)))
    flops = flops_forward(cfg.cell, cfg.layers, cfg.T, cfg.S, cfg.H, cfg.I, cfg.vocab)
    rec = {"fwd_ms": None, "fwdbwd_ms": None, "step_ms": m["ms"], "iters": {"step": m["iters"]},
           "warmup": {"step": m["warmup"]}, "tokens_per_s": cfg.T * cfg.S / (m["ms"] * 1e-3),
           "tflops_step": tflops(flops and 3 * flops, m["ms"]), "plan": step.schedule.plan, "compile_s": compile_s}
    if device == "cpu":
        rec["cpu_threads"] = os.cpu_count()
    return rec


def _torch_flags(tf32: bool):
    """Set both TF32 switches; returns a function restoring the previous values."""
    import torch
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32

    def restore():
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
    return restore


def _torch_setup(cfg: Config, device: str):
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("PyTorch finds no CUDA device")
    torch.manual_seed(0)
    x = torch.randn(cfg.T, cfg.S, cfg.I, device=device, requires_grad=True)
    dy = torch.randn(cfg.T, cfg.S, cfg.H, device=device)
    timer = TorchEventTimer() if device == "cuda" else WallTimer()
    return torch, x, dy, timer


def _cudnn(cfg: Config, proto: Protocol, tf32: bool, device: str, dtype: str = "float32") -> dict:
    """torch.nn.LSTM / nn.GRU (cuDNN on the GPU): ``y = rnn(x); y.backward(dy)``; with ``dtype``
    "float16" / "bfloat16" the module (weights), x and dy in that dtype (what
    ``rnn.to(torch.float16)`` users run; cuDNN accumulates in fp32)."""
    torch, x, dy, timer = _torch_setup(cfg, device)
    restore = _torch_flags(tf32)
    try:
        rnn = getattr(torch.nn, CUDNN_CELLS[cfg.cell])(cfg.I, cfg.H, cfg.layers).to(device)
        if dtype != "float32":
            dt = getattr(torch, dtype)
            rnn = rnn.to(dt)
            x, dy = x.detach().to(dt).requires_grad_(), dy.to(dt)

        def fwd():
            with torch.no_grad():
                rnn(x)

        def fwdbwd():
            y, _ = rnn(x)
            y.backward(dy)

        rec = _timed(fwd, fwdbwd, timer, proto)
    finally:
        restore()
    rec["cudnn"] = torch.backends.cudnn.version() if device == "cuda" else None
    rec["tf32"] = tf32
    rec["torch_dtype"] = dtype  # not "dtype": that is the configuration's, which records are matched by
    return rec


def torch_cells():
    """The module ``bench/torch_cells.py`` of this checkout (PyTorch forms of the standard cells)."""
    name = "rnngraph_bench_torch_cells"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[2] / "bench" / "torch_cells.py"
    if not path.exists():
        raise FileNotFoundError(f"{path}: the PyTorch cells live in the repository's bench/ folder")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # TorchScript reads the source through the module
    spec.loader.exec_module(mod)
    return mod


def _torch_custom(cfg: Config, proto: Protocol, mode: str, device: str) -> dict:
    """The cell as a PyTorch module looped over time: eager, TorchScript, torch.compile of the
    whole loop, or torch.compile of the cell alone (the loop stays in Python)."""
    torch, x, dy, timer = _torch_setup(cfg, device)
    restore = _torch_flags(False)
    try:
        t0 = time.perf_counter()
        model = torch_cells().Stack(cfg.cell, cfg.layers, cfg.I, cfg.H).to(device)
        if mode == "script":
            with warnings.catch_warnings():  # torch >= 2.12 deprecates TorchScript; it is the baseline here
                warnings.simplefilter("ignore", DeprecationWarning)
                model = torch.jit.script(model)
        elif mode == "compile":
            torch._dynamo.reset()
            model = torch.compile(model, dynamic=False)
        elif mode == "compile-cell":
            torch._dynamo.reset()
            for layer in model.layers:
                layer.cell = torch.compile(layer.cell, dynamic=False)

        def fwd():
            with torch.no_grad():
                model(x)

        def fwdbwd():
            model(x).backward(dy)

        fwd()
        fwdbwd()  # torch.compile compiles both graphs here
        timer.sync()
        compile_s = time.perf_counter() - t0
        rec = _timed(fwd, fwdbwd, timer, proto)
    finally:
        restore()
    rec["compile_s"] = compile_s
    rec["tf32"] = False
    return rec


def run(cfg: Config, impl: str, proto: Protocol | None = None, *, torch_device: str = "cuda") -> dict:
    """Time ``impl`` on ``cfg``: a record with the config's fields, ``impl``, ``fwd_ms``,
    ``fwdbwd_ms`` (ms, null where not measured), ``tflops_fwd``/``tflops_fwdbwd`` (TFLOP/s),
    ``step_ms`` for language models, extras (plan, compile_s, iters, ...) and ``error`` (a
    string) when it failed. ``torch_device="cpu"`` runs the PyTorch baselines on the CPU
    (tests). Only KeyboardInterrupt escapes."""
    proto = proto or Protocol()
    rec = {**cfg.fields(), "impl": impl, "fwd_ms": None, "fwdbwd_ms": None}
    if cfg.task == "lm":
        rec["step_ms"] = None
    t0 = time.perf_counter()
    try:
        why = applicable(cfg, impl)
        if why:
            raise ValueError(why)
        if cfg.task == "lm":
            out = _rnngraph_lm(cfg, proto, "cpu" if impl == "rnngraph-cpu" else "cuda")
        elif impl == "rnngraph" or impl in FORCED_PLANS:
            out = _rnngraph_gpu(cfg, proto, FORCED_PLANS.get(impl))
        elif impl in PRECISION_IMPLS:
            out = _rnngraph_gpu(cfg, proto, None, *PRECISION_IMPLS[impl])
        elif impl.startswith("cudnn"):
            out = _cudnn(cfg, proto, impl == "cudnn-tf32", torch_device, CUDNN_HALF.get(impl, "float32"))
        else:
            out = _torch_custom(cfg, proto, TORCH_MODES[impl], torch_device)
        rec.update(out)
    except Exception as exc:  # one failing implementation must not lose the run
        rec["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        gc.collect()
    flops = flops_forward(cfg.cell, cfg.layers, cfg.T, cfg.S, cfg.H, cfg.I, cfg.vocab)
    if cfg.task == "layer":
        rec["tflops_fwd"] = tflops(flops, rec["fwd_ms"])
        rec["tflops_fwdbwd"] = tflops(flops and 3 * flops, rec["fwdbwd_ms"])
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    return rec
