"""Data-parallel training through ``torch.distributed``: :func:`distributed` makes a CPU
TrainingStep one of several processes that train one global batch together.

Each process compiles the step for its own streams (its part of the global S:
rnngraph/shards.py) and feeds it its columns of every window. :func:`distributed` broadcasts
rank 0's parameters, then hooks the step's training call: after each backward, one all-reduce
(SUM, in float64, over one flat buffer, zero-copy through ``torch.from_numpy``) of
``[loss * columns, columns, columns * gradient...]`` gives every process the global mean loss
and the gradient of the global mean, ``sum_r columns_r * grad_r / sum_r columns_r`` (the loss is
a mean over the counted columns). The step's own code then computes the gradient norm, clips and
updates from that same all-reduced buffer, so the parameters stay identical on every process and
a non-finite gradient anywhere is non-finite everywhere: all processes raise, or all skip
(``nonfinite="skip"``). Dropout masks are cut from the global batch's masks, so training equals
one process on the global batch, up to the order of the floating-point sums. A window whose S is
not the process's share (a call with another batch) draws its masks for its own S from the same
seed instead, as one process would: for that window the equality with one process does not hold.

A CUDA step (``device="cuda"``; one GPU a process: ``numba.cuda.select_device(local_rank)`` and
``torch.cuda.set_device(local_rank)`` before compiling; the process group ``"cpu:gloo,cuda:nccl"``
or ``"nccl"``) all-reduces on the device instead: its gradient arena (every parameter's gradient,
one flat float32 buffer) and ``[loss sum, columns]``, between the step's backward and its update
(rnngraph/codegen/step.py ``set_gradient_reducer``), in float32. With NCCL the all-reduce reads
and writes the device buffers in place (``torch.as_tensor`` over ``__cuda_array_interface__``),
ordered on the step's stream; with gloo (and in numba's simulator) through host copies. Its
dropout masks are the host's masks of the global batch, cut as above. Not yet: the all-reduce
in buckets overlapping the backward (as DistributedDataParallel does); one all-reduce follows it.

Communication is torch.distributed's (gloo on the CPU, NCCL or gloo on GPUs); a process that
dies or stops answering makes the others' next all-reduce fail with :class:`PeerFailure` once
the group's timeout (``init_process_group(timeout=...)``) has passed, or sooner when the
connection closes.
"""
from __future__ import annotations

import re

import numpy as np

from .shards import join_states, split_states, stream_range


class PeerFailure(RuntimeError):
    """A collective operation of data-parallel training failed: another process died, or did not
    answer within the process group's timeout. The parameters of this process are those of the
    last completed step (nothing was updated). ``rank`` and ``world`` name this process, ``what``
    the operation (with the step), ``cause`` the backend's message in short (:func:`short_cause`)."""

    def __init__(self, rank: int, world: int, what: str, cause: str):
        super().__init__(f"data-parallel training, process {rank} of {world}: {what} failed: another process has "
                         f"died or did not answer within the process group's timeout "
                         f"(init_process_group(timeout=...)): {cause}")
        self.rank, self.world, self.what, self.cause = rank, world, what, cause


_SOURCE_PREFIX = re.compile(r"^\[[^\]\s]+:\d+\]\s*")  # gloo's "[.../gloo/transport/tcp/pair.cc:537] "


def short_cause(text: str, width: int = 160) -> str:
    """A backend's error message in short: its first line, less gloo's ``[source.cc:line]`` prefix
    and the advice after the first sentence ("This is typically caused by ... GLHF!"), at most
    ``width`` characters."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    first = _SOURCE_PREFIX.sub("", lines[0]) if lines else ""
    first = re.split(r"(?<=[^.\s]{2})\.\s", first, maxsplit=1)[0].rstrip(".")
    return first if len(first) <= width else first[: width - 3] + "..."


def _dist():
    import torch.distributed as dist
    return dist


def collective(what: str, call, step=None):
    """Run ``call()`` (a torch.distributed collective) and return its result; PeerFailure naming
    ``what`` (and the optimizer step count of ``step``, where given) when it fails."""
    dist = _dist()
    try:
        return call()
    except (RuntimeError, dist.DistError) as e:  # DistBackendError, gloo's closed connections and timeouts
        at = f" at step {step.optimizer.steps}" if step is not None else ""
        raise PeerFailure(dist.get_rank(), dist.get_world_size(), f"{what}{at}", short_cause(str(e) or repr(e))) from e


class _GradientReducer:
    """The step's ``gradient_reducer``: (local mean loss, local gradients, local columns) ->
    (global mean loss, gradients of the global mean), by one all-reduce over ``group``."""

    def __init__(self, step, group):
        self.step, self.group = step, group

    def __call__(self, loss: float, grads: dict[str, np.ndarray], columns: int):
        import torch

        sizes = [g.size for g in grads.values()]
        buf = np.empty(2 + sum(sizes), np.float64)
        buf[0], buf[1] = (loss * columns if columns else 0.0), columns
        at = 2
        for g, n in zip(grads.values(), sizes):
            np.multiply(g.reshape(-1), columns, out=buf[at:at + n], casting="unsafe")
            at += n
        tensor = torch.from_numpy(buf)  # shares buf's memory: the result lands in buf
        collective("the all-reduce of the gradients",
                   lambda: _dist().all_reduce(tensor, op=_dist().ReduceOp.SUM, group=self.group), self.step)
        total = buf[1]
        if total:
            buf[2:] /= total
        out, at = {}, 2
        for (name, g), n in zip(grads.items(), sizes):
            out[name] = buf[at:at + n].reshape(g.shape).astype(g.dtype, copy=False)
            at += n
        return (float(buf[0] / total) if total else 0.0), out


class _DeviceGradientReducer:
    """A CUDA step's gradient reducer (CudaBackend.set_gradient_reducer): all-reduces (sum) float32
    device arrays in place over ``group``, ordered on the step's stream -- zero-copy where the
    group's backend is NCCL, else through host copies (gloo, numba's simulator)."""

    def __init__(self, step, group):
        from .codegen.device import in_simulator

        self.step, self.group = step, group
        self.nccl = not in_simulator() and "nccl" in _dist().get_backend(group)  # "nccl" or "cpu:gloo,cuda:nccl"

    def __call__(self, arrays, stream) -> None:
        import torch

        dist = _dist()
        what = "the all-reduce of the gradients"
        if self.nccl:
            from .codegen.device import stream_handle

            with torch.cuda.stream(torch.cuda.ExternalStream(stream_handle(stream))):
                for a in arrays:  # NCCL's stream waits for the step's, the step's for NCCL's
                    tensor = torch.as_tensor(a, device="cuda")
                    collective(what, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group),
                               self.step)
            return
        for a in arrays:
            host = a.copy_to_host(stream=stream)
            stream.synchronize()
            tensor = torch.from_numpy(host)  # shares host's memory: the result lands in host
            collective(what, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group), self.step)
            a.copy_to_device(host, stream=stream)


def _cuda_backends(step) -> list:
    """Every CUDA backend ``step`` has compiled (one per (T, S) used), the first one -- whose
    gradient reducer and mask shard the later ones copy -- first."""
    backends = [step._first_cuda] + [b for _, b in step._plans.values()]
    return list({id(b): b for b in backends}.values())


def distributed(step, group=None):
    """Make ``step`` (an ``rg.compile`` TrainingStep of this process's streams, on the CPU or, one
    GPU a process, CUDA) one process of data-parallel training over ``group`` (a torch.distributed process group;
    None: the default group, ``torch.distributed.init_process_group`` must have been called).
    Every process must call it, in the same order, on steps compiled from the same network and
    options. Rank 0's parameters are broadcast to the others; then every ``step.train(x, y)``
    (x, y the process's columns of the global window, (T, S_r) or (T, S_r, n), S_r this process's
    streams: :func:`rnngraph.shards.stream_range`) returns the global mean loss (float) and
    applies the global batch's update on every process. Returns ``step`` (hooked in place).

    Raises TypeError when ``step`` is not a TrainingStep, RuntimeError when no process group is initialised,
    ValueError for a CPU step and a group whose only backend is NCCL, PeerFailure when another
    process fails during the set-up or any later training call (a CUDA step's call that fails so
    leaves its parameters, optimizer slots, states and step count as they were).
    """
    from .runtime import TrainingStep
    import torch

    dist = _dist()
    if not isinstance(step, TrainingStep):
        raise TypeError(f"step: rg.distributed takes a TrainingStep (rg.compile), got {type(step).__name__}")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("rg.distributed needs torch.distributed.init_process_group(...) to have been called "
                           "(under torchrun: init_process_group('gloo'))")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"  # an NCCL-only group moves CUDA tensors only
    if device == "cuda" and not step._cuda:
        raise ValueError("group: an NCCL process group moves CUDA tensors only, and this step runs on the CPU: "
                         "init_process_group('gloo') (or 'cpu:gloo,cuda:nccl'), or compile the step for CUDA")
    counts = torch.zeros(world, dtype=torch.int64, device=device)
    counts[rank] = step.streams
    collective("the exchange of stream counts", lambda: dist.all_reduce(counts, group=group), step)
    offsets = np.concatenate([[0], np.cumsum(counts.cpu().numpy())])
    step.stream_shard = (int(offsets[rank]), int(offsets[rank + 1]), int(offsets[-1]))
    params = step.parameters
    for name in sorted(params):  # the same order on every process
        tensor = torch.from_numpy(np.ascontiguousarray(params[name])).to(device)
        src = 0 if group is None else dist.get_global_rank(group, 0)
        collective(f"the broadcast of parameter {name!r}", lambda: dist.broadcast(tensor, src, group=group), step)
        step.set_parameters({name: tensor.cpu().numpy()})
    if step._cuda:
        reducer = _DeviceGradientReducer(step, group)
        for backend in _cuda_backends(step):
            backend.mask_shard = step.stream_shard
            backend.set_gradient_reducer(reducer)
    else:
        step.gradient_reducer = _GradientReducer(step, group)
    return step


def global_state(step, group=None) -> dict[str, np.ndarray]:
    """The global states of a :func:`distributed` step: every process's (depth, S_r, n) states
    joined in rank order into name -> (depth, S, n), returned on every process (all must call it).
    PeerFailure when another process fails."""
    dist = _dist()
    parts = [None] * dist.get_world_size(group)
    local = {k: np.asarray(v) for k, v in step.state.items()}
    collective("the gathering of the states", lambda: dist.all_gather_object(parts, local, group=group), step)
    return join_states(parts)


def set_global_state(step, states: dict[str, np.ndarray], group=None) -> None:
    """Give a :func:`distributed` step its part of the global ``states`` (name -> (depth, S, n),
    e.g. a checkpoint's, written by any number of processes): the streams of
    :func:`rnngraph.shards.stream_range` for this process. ValueError when the global S is not the
    one the processes' steps together train (naming ``states``); GraphError / ShapeError as
    ``step.state = ...``."""
    dist = _dist()
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    S = {np.shape(v)[1] for v in states.values()}
    lo, hi, total = step.stream_shard
    if S != {total}:
        raise ValueError(f"states: {sorted(S)} streams, but the processes train {total} together")
    if (lo, hi) != stream_range(total, rank, world):
        raise ValueError(f"states: this process trains streams [{lo}, {hi}), not its even share "
                         f"{stream_range(total, rank, world)} of {total}: compile each step for its stream_range")
    step.state = split_states(states, world)[rank]
