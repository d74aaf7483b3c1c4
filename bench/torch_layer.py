#!/usr/bin/env python3
"""rnngraph.torch.RNN in a PyTorch training loop against nn.LSTM (cuDNN), timed in one run.

The loop, the same for every model (fastrnns' protocol: warm-up calls, then the median of timed
calls, CUDA events on torch's current stream)::

    y, _ = rnn(x)                          # x (T, B, H), h0 = zeros
    loss = F.mse_loss(head(y), target)     # head = nn.Linear(H, OUT), target (T, B, OUT)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()   # torch.optim.Adam over all

rnn is ``rnngraph.torch.RNN(cell, H, L, input_size=H)`` for each ``--cells`` entry, or
``nn.LSTM(H, H, L)`` with cuDNN's TF32 off (``cudnn-fp32``) and on (``cudnn-tf32``,
PyTorch's default for cuDNN RNNs). Every ratio divides by the faster nn.LSTM of the same B.
``--precisions fp32 tf32 bf16`` times each cell in each ``precision=`` of rnngraph.torch.RNN
(rnngraph/precision.py: the once-per-window GEMMs on tensor cores, the loops' products too where
S x H >= 49,152 or S >= 16 with H >= 1,024; each record's ``loop_tensor_cores`` says which), in the same run as both cuDNN
anchors; the targets are fp32's.

At each B in ``--overhead-batches`` it also times the module's own overhead: the bare compiled
RNN (``rnn.compiled(...)``'s forward and backward on torch tensors, no autograd) against the
module's forward plus ``y.backward(dy)`` (autograd), both without head or optimizer. The
module is timed as a training loop runs it (``zero_grad(set_to_none=True)`` before the backward, so autograd
hands the parameters the compiled gradients: ``module_ms``, the ratio the target reads) and
with gradients accumulated into existing ``.grad`` tensors (``module_accumulate_ms``: one
addition per parameter more).

Usage (GPU)::

    python3 bench/torch_layer.py --out bench/results/h200-YYYYMMDD-torch-layer-lstm.json --cells lstm
    python3 bench/torch_layer.py --cells lstm --hidden 1024 --layers 1 --batches 1 64 128 \
        --precisions fp32 tf32 bf16 --out bench/results/h200-YYYYMMDD-torch-layer-precision.json
    python3 bench/torch_layer.py --device cpu --hidden 32 --window 10 --batches 2 --iters 3   # a smoke run
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from rnngraph.bench import Protocol, add_protocol_arguments, device_name, measure, protocol_of, versions, write_results  # noqa: E402
from rnngraph.torch import RNN  # noqa: E402

TARGETS = {  # (cell, B) -> the largest ratio to the faster nn.LSTM that counts as a success
    ("lstm", 1): 0.35, ("lstm", 64): 0.9, ("peephole_lstm", 1): 0.5, ("peephole_lstm", 64): 1.2,
    ("layernorm_lstm", 1): 0.5, ("layernorm_lstm", 64): 1.2,
}


def _schedule_fields(schedule) -> dict:
    """What a record keeps of the schedule timed: its plan and whether its loops' products ran on
    tensor cores (rnngraph/schedule.py ``loop_precision``: in fp32 they never do)."""
    from rnngraph.schedule import loop_precision
    return {"plan": schedule.plan, "loop_tensor_cores": loop_precision(schedule) != "fp32"}

def _tf32(on: bool) -> None:
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def training_loop(rnn, head, x, target):
    """One step of the loop in the module docstring, as a function of nothing."""
    opt = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=1e-4)

    def step():
        y, _ = rnn(x)
        loss = F.mse_loss(head(y), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def overhead(rnn: RNN, x, proto: Protocol, timer) -> dict:
    """Bare compiled forward + backward vs the module's forward + autograd backward (ms)."""
    compiled = rnn.compiled(x.device, x.dtype)
    dy = torch.randn(x.shape[0], x.shape[1], rnn.hidden, device=x.device)

    def bare():
        compiled.forward(x, train=True)
        compiled.backward(dy, input_grads=False)  # x needs no gradient here, as in the module call

    def module():  # as a training loop: zero_grad between the forward and the backward
        y, _ = rnn(x)
        rnn.zero_grad(set_to_none=True)
        y.backward(dy)

    def module_accumulate():
        y, _ = rnn(x)
        y.backward(dy)
    b, m = measure(bare, timer, proto)["ms"], measure(module, timer, proto)["ms"]
    a = measure(module_accumulate, timer, proto)["ms"]
    return {"bare_ms": b, "module_ms": m, "overhead": m / b - 1.0, "module_accumulate_ms": a,
            "overhead_accumulate": a / b - 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", nargs="+", default=["lstm", "peephole_lstm", "layernorm_lstm"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 16, 64])
    ap.add_argument("--overhead-batches", nargs="*", type=int, default=[1])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--head", type=int, default=16, help="the linear head's outputs (OUT)")
    ap.add_argument("--plan", choices=["wavefront", "scc-sequential"],
                    help="force rnngraph's plan (default: the cost model's choice)")
    ap.add_argument("--no-anchor", action="store_true", help="skip nn.LSTM (smoke runs)")
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "tf32", "bf16"], default=["fp32"],
                    help="rnngraph's precision= values to time, each cell in each (default fp32)")
    add_protocol_arguments(ap)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    proto, timer, gpu = protocol_of(args)
    H, L, T = args.hidden, args.layers, args.window
    result = {"benchmark": "torch_layer", "device": device_name(gpu), "versions": versions(),
              "date": datetime.date.today().isoformat(), "settings": vars(args), "records": [], "overhead": []}
    torch.manual_seed(0)
    for B in args.batches:
        x = torch.randn(T, B, H, device=dev)
        target = torch.randn(T, B, args.head, device=dev)
        anchors = {}
        if not args.no_anchor:
            for name, tf32 in (("cudnn-fp32", False), ("cudnn-tf32", True)):
                _tf32(tf32)
                lstm, head = torch.nn.LSTM(H, H, L).to(dev), torch.nn.Linear(H, args.head).to(dev)
                r = measure(training_loop(lstm, head, x, target), timer, proto)
                anchors[name] = r["ms"]
                result["records"].append({"impl": name, "cell": "lstm", "B": B, "step_ms": r["ms"], "iters": r["iters"]})
                print(f"B={B:3d} {name:14s} {r['ms']:8.3f} ms", flush=True)
            _tf32(False)
        best = min(anchors.values()) if anchors else None
        for cell, precision in [(c, p) for c in args.cells for p in args.precisions]:
            rnn = RNN(cell, H, L, input_size=H, plan=args.plan, precision=precision).to(dev)
            head = torch.nn.Linear(H, args.head).to(dev)
            step = training_loop(rnn, head, x, target)
            t0 = time.perf_counter()
            step()
            if gpu:
                torch.cuda.synchronize()
            first = time.perf_counter() - t0
            r = measure(step, timer, proto)
            ratio = r["ms"] / best if best else None
            target_ratio = TARGETS.get((cell, B)) if precision == "fp32" else None
            rec = {"impl": "rnngraph", "cell": cell, "precision": precision, "B": B, "step_ms": r["ms"], "iters": r["iters"],
                   "first_call_s": first, "vs_faster_cudnn": ratio, "target": target_ratio,
                   "met": None if ratio is None or target_ratio is None else ratio <= target_ratio,
                   **_schedule_fields(rnn.compiled(dev, x.dtype).schedule(T, B))}
            result["records"].append(rec)
            print(f"B={B:3d} {cell:14s} {precision} {r['ms']:8.3f} ms  x{ratio if ratio else float('nan'):.3f} of the faster "
                  f"nn.LSTM (target {target_ratio}) first call {first:.1f} s", flush=True)
            if B in args.overhead_batches:
                o = {"cell": cell, "B": B, **overhead(rnn, x, proto, timer)}
                result["overhead"].append(o)
                print(f"       overhead: bare {o['bare_ms']:.3f} ms, module {o['module_ms']:.3f} ms "
                      f"(+{100 * o['overhead']:.1f} %), accumulating {o['module_accumulate_ms']:.3f} ms "
                      f"(+{100 * o['overhead_accumulate']:.1f} %)", flush=True)
            write_results(args.out, result)
            del rnn, head, step
    write_results(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
