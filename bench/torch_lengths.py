#!/usr/bin/env python3
"""Variable-length sequences: rnngraph.torch.RNN against nn.LSTM (cuDNN) on a PackedSequence,
timed in one run.

fastrnns' variable-length setting: B = 64 sequences, lengths drawn uniformly from [30, 100)
(``--min-length``, ``--max-length``; fixed seed), input and hidden 512, one LSTM layer,
forward + backward (fastrnns' protocol: warm-up calls, then the median of timed calls, CUDA
events on torch's current stream). One timed call::

    y, (h, c) = rnn(inp)                          # inp built once, outside the timed call
    loss = (y.data * g).sum() + (h * w).sum()     # fixed random g, w
    rnn.zero_grad(set_to_none=True); loss.backward()

Implementations (each a record): ``cudnn-fp32-packed`` / ``cudnn-tf32-packed`` (nn.LSTM on the
PackedSequence, cuDNN's TF32 off / on), ``rnngraph-packed`` (RNN on the same PackedSequence:
unpacked to a padded window with lengths inside the call, the output packed again),
``rnngraph-lengths`` (RNN on the batch padded to ``--max-length`` steps with ``lengths=``),
``rnngraph-padded`` (the same padded batch without lengths: every sequence runs all steps) and
``cudnn-fp32-padded`` (nn.LSTM on that padded batch, for scale). The targets read
``rnngraph-packed`` over the faster packed cuDNN (≤ 0.5) and ``rnngraph-lengths`` over
``rnngraph-padded`` (≤ 1.10: the cost of lengths).

Usage (GPU)::

    python3 bench/torch_lengths.py --out bench/results/h200-YYYYMMDD-torch-lengths-varlen-lstm.json
    python3 bench/torch_lengths.py --device cpu --hidden 16 --batch 4 --iters 3   # a smoke run
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence  # noqa: E402

from rnngraph.bench import add_protocol_arguments, device_name, measure, protocol_of, versions, write_results  # noqa: E402
from rnngraph.torch import RNN  # noqa: E402


def _tf32(on: bool) -> None:
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def step_of(rnn, inp, lengths, g, w):
    """The timed call of the module docstring; ``g`` matches the output's data."""
    def step():
        y, (h, _) = rnn(inp) if lengths is None else rnn(inp, lengths=lengths)
        data = y.data if hasattr(y, "batch_sizes") else y
        loss = (data * g[:data.numel()].view_as(data)).sum() + (h * w).sum()
        rnn.zero_grad(set_to_none=True)
        loss.backward()
    return step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--bidirectional", action="store_true", help="bidirectional layers (both implementations)")
    ap.add_argument("--plan", choices=["wavefront", "scc-sequential"],
                    help="force rnngraph's plan (default: the cost model's choice)")
    ap.add_argument("--min-length", type=int, default=30)
    ap.add_argument("--max-length", type=int, default=100, help="lengths < this; the padded window")
    add_protocol_arguments(ap)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    proto, timer, gpu = protocol_of(args)
    B, H, L, T = args.batch, args.hidden, args.layers, args.max_length
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.min_length, args.max_length, (B,), generator=gen)
    x = torch.randn(T, B, H, generator=gen).to(dev)
    x_grad = x.clone().requires_grad_()
    p = pack_padded_sequence(x, lengths, enforce_sorted=False)  # a leaf: the same input every call
    packed = PackedSequence(p.data.detach().requires_grad_(), p.batch_sizes, p.sorted_indices, p.unsorted_indices)
    g = torch.randn(T * B * H * (1 + args.bidirectional), generator=gen).to(dev)
    w = torch.randn(L * (1 + args.bidirectional), B, H, generator=gen).to(dev)
    result = {"benchmark": "torch_lengths", "device": device_name(gpu), "versions": versions(),
              "date": datetime.date.today().isoformat(), "settings": vars(args),
              "lengths": {"min": int(lengths.min()), "max": int(lengths.max()), "mean": float(lengths.float().mean()),
                          "sum": int(lengths.sum())}, "records": []}
    torch.manual_seed(0)
    ref = torch.nn.LSTM(H, H, L, bidirectional=args.bidirectional).to(dev)
    mine = RNN("lstm", H, L, input_size=H, bidirectional=args.bidirectional, plan=args.plan).to(dev)
    mine.load_torch_state_dict(ref.state_dict())
    runs = [("cudnn-fp32-packed", ref, packed, None, False), ("cudnn-tf32-packed", ref, packed, None, True),
            ("cudnn-fp32-padded", ref, x_grad, None, False), ("rnngraph-packed", mine, packed, None, False),
            ("rnngraph-lengths", mine, x_grad, lengths, False), ("rnngraph-padded", mine, x_grad, None, False)]
    ms = {}
    for name, rnn, inp, lens, tf32 in runs:
        _tf32(tf32)
        r = measure(step_of(rnn, inp, lens, g, w), timer, proto)
        ms[name] = r["ms"]
        result["records"].append({"impl": name, "ms": r["ms"], "iters": r["iters"]})
        print(f"{name:18s} {r['ms']:8.3f} ms", flush=True)
    _tf32(False)
    best = min(ms["cudnn-fp32-packed"], ms["cudnn-tf32-packed"])
    result["vs_faster_packed_cudnn"] = ms["rnngraph-packed"] / best
    result["lengths_over_padded"] = ms["rnngraph-lengths"] / ms["rnngraph-padded"]
    result["targets"] = {"vs_faster_packed_cudnn": 0.5, "lengths_over_padded": 1.10}
    result["met"] = {"vs_faster_packed_cudnn": result["vs_faster_packed_cudnn"] <= 0.5,
                     "lengths_over_padded": result["lengths_over_padded"] <= 1.10}
    first = mine.pairs[0] if args.bidirectional else mine
    result["plan"] = first.compiled(dev, x.dtype).schedule(int(lengths.max()), B).plan
    print(f"rnngraph packed: x{result['vs_faster_packed_cudnn']:.3f} of the faster packed cuDNN (target 0.5); "
          f"lengths over padded: x{result['lengths_over_padded']:.3f} (target 1.10)", flush=True)
    write_results(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
