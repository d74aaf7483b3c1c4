"""Data-parallel training throughput: tokens/s of one char LM trained by N processes (one GPU
each under torchrun, or CPU processes), at a fixed number of streams per process, through
``rg.distributed`` (rnngraph/distributed.py: the gradient arena all-reduced once a step, NCCL on
GPUs). Run once per N; each run appends its row to --out; the speed-up of N processes is its
tokens/s over the 1-process row's (issue target: >= 1.9x on 2 GPUs, >= 7x on 8).

    torchrun --nproc-per-node N bench/distributed.py --out results.json   # N = 1, 2, 4, 8
    python bench/distributed.py --device cpu --smoke --out x.json         # one process, tiny (tests)

Protocol (fastrnns'): random token ids (throughput does not depend on them), --warmup windows
untimed, then --steps windows timed with the loss read at the end (one synchronisation); each
process's wall time is the slowest process's (all-reduced MAX). Tokens = N * T * S * steps.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import numpy as np


def build_parser() -> argparse.ArgumentParser:
    """The command line: model shape, T, S per process, warm-up and timed windows, device, --out."""
    p = argparse.ArgumentParser(prog="distributed.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--embed", type=int, default=128)
    p.add_argument("--vocab", type=int, default=96, help="character vocabulary (default 96)")
    p.add_argument("--window", type=int, default=100, help="T (default 100)")
    p.add_argument("--streams", type=int, default=64, help="S per process (default 64)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--smoke", action="store_true", help="tiny shapes and steps (a check that it runs)")
    p.add_argument("--out", metavar="JSON", required=True, help="results file: this run's row is appended")
    return p


def _process_group(device: str):
    """(rank, world): torchrun's variables, or one process of its own (127.0.0.1, a free port)."""
    import socket

    import torch
    import torch.distributed as dist

    init = {"init_method": "env://"}
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            init = {"init_method": f"tcp://127.0.0.1:{s.getsockname()[1]}", "rank": 0, "world_size": 1}
    local = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "gloo"
    if device == "cuda":
        from numba import cuda

        cuda.select_device(local)
        torch.cuda.set_device(local)
        backend = "cpu:gloo,cuda:nccl"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=600), **init)
    return dist.get_rank(), dist.get_world_size()


def main(argv=None) -> dict:
    """Join the process group (torchrun's, or one of its own), train --warmup then --steps windows
    of the char LM through rg.distributed, and return this run's row (rank 0 also appends it to
    --out): tokens/s over the slowest process's seconds, ms a step, the last loss (nats)."""
    args = build_parser().parse_args(argv)
    if args.smoke:
        args.layers, args.hidden, args.embed, args.vocab, args.window, args.streams = 1, 8, 4, 11, 4, 2
        args.warmup, args.steps = 1, 2
    import torch
    import torch.distributed as dist

    import rnngraph as rg

    rank, world = _process_group(args.device)
    try:
        cells = [rg.cells.lstm(hidden=args.hidden) for _ in range(args.layers)]
        net = rg.Sequential(rg.Embedding(args.vocab, args.embed), *cells, rg.SoftmaxCrossEntropy(args.vocab))
        t0 = time.perf_counter()
        step = rg.distributed(rg.compile(net, args.window, args.streams, device=args.device,
                                         optimizer=rg.Adam(lr=2e-3), clip_norm=1.0, seed=0))
        rng = np.random.default_rng(rank)
        windows = [tuple(rng.integers(0, args.vocab, (args.window, args.streams)) for _ in range(2))
                   for _ in range(4)]
        for k in range(args.warmup):
            float(step.train(*windows[k % 4]))
        first = time.perf_counter() - t0
        dist.barrier()
        t0 = time.perf_counter()
        for k in range(args.steps):
            loss = step.train(*windows[k % 4])
        loss = float(loss)
        seconds = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        tokens = world * args.window * args.streams * args.steps
        row = {"processes": world, "device": args.device, "layers": args.layers, "hidden": args.hidden,
               "T": args.window, "S_per_process": args.streams, "steps": args.steps,
               "seconds": float(seconds), "tokens_per_s": tokens / float(seconds), "ms_per_step": 1e3 * float(seconds) / args.steps,
               "last_loss": loss, "first_calls_s": first}
        if rank == 0:
            _append(Path(args.out), row)
            print(json.dumps(row))
        return row
    finally:
        dist.destroy_process_group()


def _append(path: Path, row: dict) -> None:
    """Add ``row`` to the results file (a JSON object with "rows"), with each row's speed-up over
    the 1-process row of the same shape; written to a temporary file, then renamed."""
    data = json.loads(path.read_text()) if path.exists() else {"rows": []}
    data["rows"] = [r for r in data["rows"] if r["processes"] != row["processes"]] + [row]
    data["rows"].sort(key=lambda r: r["processes"])
    base = next((r for r in data["rows"] if r["processes"] == 1), None)
    for r in data["rows"]:
        r["speedup_vs_1"] = r["tokens_per_s"] / base["tokens_per_s"] if base else None
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


if __name__ == "__main__":
    main()
