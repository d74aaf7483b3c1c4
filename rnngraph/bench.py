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
- ``cudnn-fp32`` / ``cudnn-tf32``: ``torch.nn.LSTM`` / ``nn.GRU`` with TF32 off / on (both
  ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32``);
- ``torch-eager`` / ``torchscript`` / ``torch-compile``: the same cell as a PyTorch module looped
  over time in Python (``bench/torch_cells.py``, fastrnns' ``custom_lstms`` form), TF32 off;
- ``rnngraph-cpu``: a char-level language-model training step (``step.train``: forward, BPTT,
  clipping, Adam) on the NumPy backend; ``rnngraph`` on the same LM config (``Config.vocab``
  set) times the same call on the GPU (``step_ms``, wall clock: ``train`` returns the loss, so
  each call ends synchronised). Their ratio is the CPU/GPU speed-up Li et al. (2014) discuss.

Units: times in ms, throughput in TFLOP/s from :func:`flops_forward`.
"""
from __future__ import annotations

import datetime
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

IMPLS = ("rnngraph", "rnngraph-naive", "rnngraph-wavefront", "rnngraph-scc-sequential", "cudnn-fp32",
         "cudnn-tf32", "torch-eager", "torchscript", "torch-compile", "torch-compile-cell", "rnngraph-cpu")
#: rnngraph implementations that force a plan (to check the cost model's choice against a measurement)
FORCED_PLANS = {"rnngraph-naive": "naive", "rnngraph-wavefront": "wavefront",
                "rnngraph-scc-sequential": "scc-sequential"}
#: Gate blocks of each standard cell's input and recurrent products (G in 2·G·H·(I+H)·S·T).
GATES = {"lstm": 4, "peephole_lstm": 4, "layernorm_lstm": 4, "gru": 3, "gru_reset_before": 3, "elman": 1}
CUDNN_CELLS = {"lstm": "LSTM", "gru": "GRU"}
TORCH_CELLS = ("lstm", "peephole_lstm", "gru", "layernorm_lstm")  # bench/torch_cells.py
#: torch-compile compiles the whole window's loop (minutes); torch-compile-cell only the cell, called
#: once per timestep by the eager loop (seconds to compile)
TORCH_MODES = {"torch-eager": "eager", "torchscript": "script", "torch-compile": "compile",
               "torch-compile-cell": "compile-cell"}
PROTOCOL = ("CUDA events, median of `iters` timed calls after `warmup` (fastrnns: 100 after 10; "
            "fewer for calls slower than max_seconds/iters, see each record); fwd without gradients; "
            "fwdbwd = forward + backward with weight gradients, optimizer excluded; step_ms (LM) = "
            "step.train: forward, BPTT, clip, Adam, wall clock")
COMPILE_ESTIMATE_S = 120.0  # torch.compile of a 100-step loop took 106 s on the H200 (ARCHITECTURE.md)


# ---------------------------------------------------------------------------------- configurations
@dataclass(frozen=True)
class Config:
    """One benchmark configuration: a stack of ``layers`` cells of hidden size H over a window of
    T timesteps and S streams with inputs of size I. With ``vocab`` it is a char-level language
    model instead: Embedding(vocab, I) -> cells -> SoftmaxCrossEntropy(vocab)."""

    cell: str = "lstm"
    layers: int = 1
    T: int = 100
    S: int = 64
    H: int = 512
    I: int = 512
    dtype: str = "float32"
    vocab: int | None = None

    @property
    def task(self) -> str:
        return "lm" if self.vocab else "layer"

    def label(self, impl: str | None = None) -> str:
        """``lstm-l1-t100-s64-h512-i512/rnngraph`` (``lm-...-v96`` for a language model): what
        ``--only REGEX`` is matched against."""
        s = f"{self.cell}-l{self.layers}-t{self.T}-s{self.S}-h{self.H}-i{self.I}"
        s = f"lm-{s}-v{self.vocab}" if self.vocab else s
        return s if impl is None else f"{s}/{impl}"

    def fields(self) -> dict:
        d = {"cell": self.cell, "layers": self.layers, "T": self.T, "S": self.S, "H": self.H, "I": self.I,
             "dtype": self.dtype, "task": self.task}
        if self.vocab:
            d["vocab"] = self.vocab
        return d


def flops_forward(cell: str, layers: int, T: int, S: int, H: int, I: int, vocab: int | None = None) -> float | None:
    """FLOPs of one forward window: 2·G·H·(I_k+H)·S·T per layer (G = 4 gate blocks for LSTMs, 3 for
    GRUs; I_k = I for layer 0, H above), plus 2·vocab·H·S·T for an LM's softmax head. Pointwise
    work is not counted. The backward costs about twice the forward. None for an unknown cell."""
    if cell not in GATES:
        return None
    g = GATES[cell]
    total = sum(2.0 * g * H * ((I if k == 0 else H) + H) * S * T for k in range(layers))
    return total + (2.0 * vocab * H * S * T if vocab else 0.0)


def tflops(flops: float | None, ms: float | None) -> float | None:
    """TFLOP/s of ``flops`` done in ``ms`` milliseconds (None when either is missing)."""
    if not flops or not ms:
        return None
    return flops / (ms * 1e9)


def applicable(cfg: Config, impl: str) -> str | None:
    """None when ``impl`` can run ``cfg``, else why not."""
    if impl not in IMPLS:
        return f"unknown implementation {impl!r} (have {', '.join(IMPLS)})"
    if cfg.task == "lm":
        return None if impl in ("rnngraph", "rnngraph-cpu") else f"{impl} does not run language models"
    if impl == "rnngraph-cpu":
        return "rnngraph-cpu times a language-model step (give Config.vocab)"
    if impl.startswith("cudnn") and cfg.cell not in CUDNN_CELLS:
        return f"cuDNN has no {cfg.cell}"
    if impl in TORCH_MODES and cfg.cell not in TORCH_CELLS:
        return f"no PyTorch form of {cfg.cell}"
    return None


# ---------------------------------------------------------------------------------- timing
@dataclass
class Protocol:
    """warmup and iters: calls before / while timing; max_seconds: the timed calls of one
    measurement stop at about this many seconds (None: never), but never below min_iters."""

    warmup: int = 10
    iters: int = 100
    max_seconds: float | None = 5.0
    min_iters: int = 5


class WallTimer:
    """A wall clock around ``fn`` with ``sync`` (a device synchronise, or nothing) on both sides."""

    def __init__(self, sync=lambda: None):
        self.sync = sync

    def time(self, fn) -> float:
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return (time.perf_counter() - t0) * 1e3


class TorchEventTimer:
    """CUDA events recorded on PyTorch's current stream."""

    def __init__(self):
        import torch
        self.torch = torch

    def sync(self):
        self.torch.cuda.synchronize()

    def time(self, fn) -> float:
        a, b = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b)


class NumbaEventTimer:
    """CUDA events recorded on a numba stream (rnngraph's program stream)."""

    def __init__(self, stream):
        self.stream = stream

    def sync(self):
        self.stream.synchronize()

    def time(self, fn) -> float:
        from numba import cuda
        a, b = cuda.event(timing=True), cuda.event(timing=True)
        a.record(self.stream)
        fn()
        b.record(self.stream)
        b.synchronize()
        return cuda.event_elapsed_time(a, b)


def measure(fn, timer, proto: Protocol) -> dict:
    """Median ms of ``fn`` under ``proto``: {"ms", "iters", "warmup"} (the counts actually run).
    Warm-up stops early once it has taken a fifth of ``max_seconds`` (after at least 2 calls)."""
    warm, spent, last = 0, 0.0, None
    for _ in range(proto.warmup):
        t0 = time.perf_counter()
        fn()
        timer.sync()
        last = time.perf_counter() - t0
        spent, warm = spent + last, warm + 1
        if proto.max_seconds and warm >= 2 and spent > 0.2 * proto.max_seconds:
            break
    n = proto.iters
    if proto.max_seconds and last:
        n = max(min(proto.min_iters, proto.iters), min(proto.iters, int(proto.max_seconds / last)))
    times = [timer.time(fn) for _ in range(n)]
    return {"ms": statistics.median(times), "iters": n, "warmup": warm}


def _timed(fwd, fwdbwd, timer, proto: Protocol) -> dict:
    f = measure(fwd, timer, proto) if fwd else None
    b = measure(fwdbwd, timer, proto) if fwdbwd else None
    return {"fwd_ms": f and f["ms"], "fwdbwd_ms": b and b["ms"],
            "iters": {"fwd": f and f["iters"], "fwdbwd": b and b["iters"]},
            "warmup": {"fwd": f and f["warmup"], "fwdbwd": b and b["warmup"]}}


# ---------------------------------------------------------------------------------- implementations
def gpu_available() -> bool:
    """Whether numba finds a real CUDA GPU (not the simulator)."""
    from .runtime import cuda_available
    return cuda_available(simulator_ok=False)


def gpu_program(cfg: Config, plan: str | None = None):
    """The compiled CudaProgram of a float-input stack for ``cfg`` (cell, layers, T, S, H, I;
    seed-0 parameters, normal inputs (T, S, I) float32, zero initial states) and two closures that
    enqueue on its stream, without synchronising: ``fwd()`` (the forward) and ``fwdbwd()`` (the
    forward, zeroed gradient arenas, a fixed normal output gradient (T*S, H), the backward with
    weight gradients). Returns (prog, fwd, fwdbwd). Building the program compiles the persistent
    loop kernels (to size their cooperative grid); the other kernels compile on the first call.
    The schedule options and the loop tuning are the defaults for ``cfg.S`` with the keys of
    RNNGRAPH_LOOP as the environment has it now (rnngraph/loop_env.py): ``rg.compile_rnn``'s."""
    from numba import cuda

    import rnngraph as rg
    from .codegen import library

    net = rg.stacked(rg.cells.STANDARD[cfg.cell], cfg.layers, cfg.H, input_size=cfg.I)
    # compiled through the public API (seed-0 parameters); the closures launch the layer's program
    # rather than calling layer.forward / layer.backward, so that what is timed is the generated
    # launches alone, without the layer's copies of x, h0, dy and the outputs and its stream events
    prog = rg.compile_rnn(net, device="cuda", dtype="float32", seed=0, plan=plan).program(cfg.T, cfg.S)
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
        library.fill(b.grad_arena, 0.0, stream=prog.stream)
        library.fill(b.param_grad_arena, 0.0, stream=prog.stream)
        dy_window.copy_to_device(dy, stream=prog.stream)
        prog.run_backward()

    return prog, fwd, fwdbwd


def _rnngraph_gpu(cfg: Config, proto: Protocol, plan: str | None) -> dict:
    """The generated forward / forward+backward of a float-input stack (weight gradients included)."""
    from .codegen.device import in_simulator
    from .loop_env import as_keys

    t0 = time.perf_counter()
    prog, fwd, fwdbwd = gpu_program(cfg, plan)
    s = prog.s
    fwd()
    fwdbwd()  # JIT-compiles every kernel (and captures the forward's CUDA graphs)
    prog.stream.synchronize()
    compile_s = time.perf_counter() - t0
    timer = WallTimer(prog.stream.synchronize) if in_simulator() else NumbaEventTimer(prog.stream)
    loops = [st for st in s.forward if hasattr(st, "levels")]
    rec = {**_timed(fwd, fwdbwd, timer, proto), "plan": s.plan, "loop_modes": [lp.mode for lp in loops],
           "levels_per_timestep": [lp.levels for lp in loops], "launches_per_window": s.launches,
           "compile_s": compile_s, "loop_tuning": as_keys(s.options, prog.tuning),
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
    train = lambda: step.train(x, y)  # returns the loss as a float: each call ends synchronised
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


def _cudnn(cfg: Config, proto: Protocol, tf32: bool, device: str) -> dict:
    """torch.nn.LSTM / nn.GRU (cuDNN on the GPU): ``y = rnn(x); y.backward(dy)``."""
    torch, x, dy, timer = _torch_setup(cfg, device)
    restore = _torch_flags(tf32)
    try:
        rnn = getattr(torch.nn, CUDNN_CELLS[cfg.cell])(cfg.I, cfg.H, cfg.layers).to(device)

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
    return rec


def torch_cells():
    """The module ``bench/torch_cells.py`` of this checkout (PyTorch forms of the standard cells)."""
    name = "rnngraph_bench_torch_cells"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent.parent / "bench" / "torch_cells.py"
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
        elif impl.startswith("cudnn"):
            out = _cudnn(cfg, proto, impl == "cudnn-tf32", torch_device)
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


# ---------------------------------------------------------------------------------- runs
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


# ---------------------------------------------------------------------------------- comparisons
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


# ---------------------------------------------------------------------------------- rnngraph bench
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
