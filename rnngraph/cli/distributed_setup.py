"""``rnngraph train --distributed``: the process group from torchrun's environment, and what a
training run does differently as one of several processes (rnngraph/distributed.py trains).

Only here is the environment read (torchrun's ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``); below, the rank and world travel as a :class:`Processes` value.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import numpy as np

from .arguments import CLIError

DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Processes:
    """This process's place in data-parallel training: ``rank`` of ``world``, training the
    global streams ``[lo, hi)`` (rnngraph.shards.stream_range); ``timeout_s`` the process group's."""

    rank: int
    world: int
    lo: int
    hi: int
    timeout_s: float


def join(args, streams: int, environ=os.environ) -> Processes:
    """Initialise the gloo process group from torchrun's variables in ``environ`` and return this
    process's :class:`Processes` for ``streams`` global streams. CLIError naming --distributed when
    the variables are missing (not under torchrun) or the device is cuda, naming --streams when
    there are fewer streams than processes."""
    from ..shards import stream_range

    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in environ]
    if missing:
        raise CLIError(f"--distributed runs under torchrun (torchrun --nproc-per-node N -m rnngraph train "
                       f"--distributed ...): {', '.join(missing)} not set")
    if args.device == "cuda":
        raise CLIError("--distributed trains on the CPU (gloo) for now: use --device cpu (the GPU path through "
                       "NCCL is not built yet)")
    rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
    if streams < world:
        raise CLIError(f"--streams {streams}: fewer streams than the {world} processes (each trains at least one)")
    import torch.distributed as dist

    timeout = DEFAULT_TIMEOUT_S if args.distributed_timeout is None else args.distributed_timeout
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    return Processes(rank, world, *stream_range(streams, rank, world), timeout)


def leave() -> None:
    """Destroy the process group, where there is one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def any_process(flag: bool) -> bool:
    """Whether ``flag`` is set on any process (all must call it): one all-reduce (MAX).
    PeerFailure when another process fails."""
    import torch
    import torch.distributed as dist

    from ..distributed import collective

    t = torch.tensor([int(flag)])
    collective("the agreement on --time-limit", lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX))
    return bool(t.item())


def sharded(step, data, ck, procs: Processes):
    """The step made one of the processes (rank 0's parameters everywhere, the gradients
    all-reduced), given its part of the checkpoint's global states ``ck.state`` when resuming,
    and the data narrowed to its streams. Returns (step, data)."""
    from ..distributed import distributed, set_global_state
    from ..shards import ShardedBatches

    step = distributed(step)
    if ck is not None:
        set_global_state(step, {k: np.asarray(v) for k, v in ck.state.items()})
    return step, ShardedBatches(data, procs.lo, procs.hi)
