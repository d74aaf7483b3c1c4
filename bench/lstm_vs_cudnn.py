"""rnngraph's generated training step against cuDNN (torch.nn.LSTM), measured in one run.

Protocol (PyTorch's fastrnns): CUDA events, 10 warm-up and 100 timed iterations, the median;
random inputs (T, S, I) and a random output gradient; forward and forward+backward timed
separately. rnngraph's forward+backward is the generated schedule's forward and backward steps
(weight gradients included, optimizer excluded); cuDNN's is ``y = lstm(x); y.backward(dy)``.
Configurations: hidden 512, I = 512, T = 100, S in {1, 64}; cells lstm, peephole_lstm,
layernorm_lstm (the custom cells are compared with cuDNN's plain LSTM: "custom cells at cuDNN
speed"). Writes one JSON object (device, versions, date, records) to --out.

Usage (GPU machine): python bench/lstm_vs_cudnn.py --out bench/results/h200-YYYYMMDD.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics

import numpy as np


def _median_ms(fn, stream_sync, warmup: int, iters: int, event_cls) -> float:
    for _ in range(warmup):
        fn()
    stream_sync()
    times = []
    for _ in range(iters):
        a, b = event_cls(), event_cls()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def bench_cudnn(T, S, H, I, layers, tf32: bool, warmup: int, iters: int) -> dict:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    lstm = torch.nn.LSTM(I, H, layers).cuda()
    x = torch.randn(T, S, I, device="cuda", requires_grad=True)
    dy = torch.randn(T, S, H, device="cuda")
    ev = lambda: torch.cuda.Event(enable_timing=True)

    def fwd():
        with torch.no_grad():
            lstm(x)

    def fwdbwd():
        y, _ = lstm(x)
        y.backward(dy)

    return {"fwd_ms": _median_ms(fwd, torch.cuda.synchronize, warmup, iters, ev),
            "fwdbwd_ms": _median_ms(fwdbwd, torch.cuda.synchronize, warmup, iters, ev)}


def bench_rnngraph(cell, T, S, H, I, layers, warmup: int, iters: int, plan=None) -> dict:
    from numba import cuda

    import rnngraph as rg
    from rnngraph.codegen import library
    from rnngraph.codegen.program import CudaProgram
    from rnngraph.passes import schedule

    net = rg.stacked(rg.cells.STANDARD[cell], layers, H, input_size=I)
    s = schedule(net.graph, T, S, "float32", plan)
    prog = CudaProgram(s)
    b, g = prog.buf, net.graph
    rng = np.random.default_rng(0)
    for name, p in rg.init_params(g, 0, "float32").items():
        b.P[name].copy_to_device(p)
    b.refresh_transposed(prog.stream)
    b.V["x"].copy_to_device(rng.normal(size=(T, S, I)).astype(np.float32))
    for st in g.states:
        library.fill(b.V[st.node][:st.depth], 0.0, stream=prog.stream)
    out = g.outputs[0]
    dy = cuda.to_device(rng.normal(size=(T * S, H)).astype(np.float32))

    def fwd():
        prog.run_forward()

    def fwdbwd():
        prog.run_forward()
        library.fill(b.grad_arena, 0.0, stream=prog.stream)
        library.fill(b.param_grad_arena, 0.0, stream=prog.stream)
        b.window(out, grad=True).copy_to_device(dy, stream=prog.stream)
        prog.run_backward()

    class Event:
        def __init__(self):
            self.e = cuda.event(timing=True)

        def record(self):
            self.e.record(prog.stream)

        def synchronize(self):
            self.e.synchronize()

        def elapsed_time(self, other):
            return cuda.event_elapsed_time(self.e, other.e)

    sync = prog.stream.synchronize
    loops = [st for st in s.forward if hasattr(st, "levels")]
    out = {"fwd_ms": _median_ms(fwd, sync, warmup, iters, Event),
           "fwdbwd_ms": _median_ms(fwdbwd, sync, warmup, iters, Event),
           "plan": s.plan, "loop_modes": [lp.mode for lp in loops],
           "levels_per_timestep": [lp.levels for lp in loops], "launches_per_window": s.launches}
    if prog.replay_errors:
        out["replay_errors"] = prog.replay_errors
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--cells", default="lstm,peephole_lstm,layernorm_lstm")
    ap.add_argument("--streams", default="1,64")
    ap.add_argument("--layers", default="1")
    ap.add_argument("--plans", default="", help="extra lstm runs with these plans (e.g. naive,wavefront)")
    args = ap.parse_args()
    import numba
    import torch
    T, H, I = 100, 512, 512
    records = []
    for layers in map(int, args.layers.split(",")):
        for S in map(int, args.streams.split(",")):
            for tf32 in (False, True):
                r = bench_cudnn(T, S, H, I, layers, tf32, args.warmup, args.iters)
                records.append({"cell": "lstm", "layers": layers, "T": T, "S": S, "H": H, "I": I, "dtype": "float32",
                                "impl": "cudnn-tf32" if tf32 else "cudnn-fp32", **r})
                print(records[-1], flush=True)
                _write(args.out, records)
            runs = [(cell, None) for cell in args.cells.split(",")] + [("lstm", p) for p in args.plans.split(",") if p]
            for cell, plan in runs:
                try:
                    r = bench_rnngraph(cell, T, S, H, I, layers, args.warmup, args.iters, plan)
                except Exception as e:  # report and go on: one failing config must not lose the rest
                    r = {"fwd_ms": None, "fwdbwd_ms": None, "error": f"{type(e).__name__}: {e}"[:500]}
                impl = "rnngraph-naive" if plan == "naive" else "rnngraph" if plan is None else f"rnngraph-{plan}"
                records.append({"cell": cell, "layers": layers, "T": T, "S": S, "H": H, "I": I, "dtype": "float32",
                                "impl": impl, **r})
                print(records[-1], flush=True)
                _write(args.out, records)
    _write(args.out, records)


def _write(path: str, records: list) -> None:
    """Write the results so far (so a run cut short keeps what it measured)."""
    import numba
    import torch
    result = {"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
              "versions": {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                           "numba": numba.__version__, "numpy": np.__version__},
              "protocol": "CUDA events, median of the timed iterations after 10 warm-up; fwdbwd excludes the optimizer",
              "records": records}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
