"""``rnngraph train --distributed``: the process group from torchrun's environment, and what a
training run does differently as one of several processes (rnngraph/distributed.py trains).

Only here is the environment read (torchrun's ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``); below, the rank and world travel as a :class:`Processes` value.

A failure is one line from one process. An error every process meets alike (a flag, the corpus, a
checkpoint, a non-finite loss) is said by process 0; an error of one process by that process,
prefixed ``process R of N:``; the others exit 1 quietly (:class:`Reported`), once that process has
exited (:func:`wait_for_reporter`). Errors of the set-up
are gathered before the processes first talk (:func:`agree`); a later error of one process is
noted in the process group's store (:func:`note_failure`), so that the others, whose next
all-reduce fails when it exits, stay quiet (:func:`peer_noted`); a process that dies without a
word (killed) leaves them to say it.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import numpy as np

from .arguments import CLIError, Reported

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
    """Initialise the process group from torchrun's variables in ``environ`` and return this
    process's :class:`Processes` for ``streams`` global streams: gloo for ``--device cpu`` (and
    ``auto``); for ``--device cuda`` GPU ``LOCAL_RANK`` made this process's device (numba's and
    torch's) and the group ``cpu:gloo,cuda:nccl`` (the gradients all-reduced by NCCL on the GPUs,
    the few host values by gloo; gloo alone in numba's simulator). CLIError naming --distributed
    when the variables are missing (not under torchrun), naming LOCAL_RANK when it is missing or
    names no GPU of this machine, naming --streams when there are fewer streams than processes."""
    from ..shards import stream_range

    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in environ]
    if missing:
        raise CLIError(f"--distributed runs under torchrun (torchrun --nproc-per-node N -m rnngraph train "
                       f"--distributed ...): {', '.join(missing)} not set")
    rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
    if streams < world:
        raise CLIError(f"--streams {streams}: fewer streams than the {world} processes (each trains at least one)")
    backend = _use_gpu(environ) if args.device == "cuda" else "gloo"
    import torch.distributed as dist

    timeout = DEFAULT_TIMEOUT_S if args.distributed_timeout is None else args.distributed_timeout
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    return Processes(rank, world, *stream_range(streams, rank, world), timeout)


def _use_gpu(environ) -> str:
    """Make GPU ``LOCAL_RANK`` this process's (numba's current device, and torch's) and return the
    process group's backend. CLIError naming LOCAL_RANK when it is unset, not a number or past the
    GPUs."""
    from numba import cuda

    from ..codegen.device import in_simulator

    if "LOCAL_RANK" not in environ:
        raise CLIError("--distributed --device cuda: LOCAL_RANK not set (torchrun sets it: one GPU a process)")
    local = environ["LOCAL_RANK"].strip()
    if not local.isdigit():
        raise CLIError(f"--distributed --device cuda: LOCAL_RANK {local!r} is not a GPU number (torchrun sets it)")
    local = int(local)
    if in_simulator():
        return "gloo"
    gpus = len(cuda.gpus) if cuda.is_available() else 0
    if gpus == 0:
        raise CLIError("--distributed --device cuda, but numba finds no CUDA GPU on this machine: use --device cpu")
    if local >= gpus:
        raise CLIError(f"--distributed --device cuda: LOCAL_RANK {local}, but this machine has {gpus} GPU(s): "
                       f"start at most {gpus} processes a node")
    cuda.select_device(local)
    import torch

    torch.cuda.set_device(local)
    return "cpu:gloo,cuda:nccl"


def first_process(environ=os.environ) -> bool:
    """Whether torchrun's ``RANK`` is 0 or unset: before the process group exists, an error every
    process meets alike is said by process 0 only."""
    return environ.get("RANK", "0") == "0"


def in_process(exc: BaseException, procs: Processes) -> BaseException:
    """``exc`` marked as this process's own (the CLI prefixes its line ``process R of N: ``)."""
    exc.process = f"process {procs.rank} of {procs.world}"
    return exc


def agree(procs: Processes, error: BaseException | None) -> None:
    """Every process tells the others whether its set-up failed (one all-gather; all must call
    it). Returns when none failed; else raises on every process: where all failed alike, process 0
    its error; else the first process that failed its error marked with its rank
    (:func:`in_process`); the others :class:`Reported`. PeerFailure when a process has died."""
    import torch.distributed as dist

    from ..distributed import collective

    said = None if error is None else f"{type(error).__name__}: {error}"
    texts = [None] * procs.world
    collective("the check that every process is set up", lambda: dist.all_gather_object(texts, said))
    failed = [r for r, t in enumerate(texts) if t is not None]
    if not failed:
        return
    alike = len(failed) == procs.world and len(set(texts)) == 1
    if procs.rank != (0 if alike else failed[0]):
        raise Reported
    raise error if alike else in_process(error, procs)


_FAILED_KEY = "rnngraph/failed"


def _store():
    from torch.distributed import distributed_c10d
    return distributed_c10d._get_default_store()  # torch has no public getter; the group's own store


def note_failure(procs: Processes) -> None:
    """Note in the process group's store that this process failed and says so itself."""
    try:
        _store().set(_FAILED_KEY, str(procs.rank))
    except Exception:  # no store to write to: the others will say that a process has died
        pass


def peer_noted() -> bool:
    """Whether another process has noted its failure (:func:`note_failure`) and said it."""
    try:
        return _store().check([_FAILED_KEY])
    except Exception:  # the store went with the process that held it
        return False


def wait_for_reporter() -> None:
    """Block until the process that says the error has exited (in a barrier it never joins, which
    fails then; at most the group's timeout): leaving first would let torchrun stop that process
    before it has said it."""
    import torch.distributed as dist

    try:
        dist.barrier()
    except Exception:  # that process has gone, as expected
        pass


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
