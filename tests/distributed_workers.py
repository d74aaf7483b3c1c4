"""What tests/test_distributed.py runs in each of its processes (``torch.multiprocessing.spawn``
imports this module by name): a gloo process group on 127.0.0.1, a task, its results saved to
``<out>/<task>-<rank>.npz``."""
import datetime
import gc
import os
import socket

import numpy as np
import torch
import torch.distributed as dist

import rnngraph as rg
from rnngraph.shards import stream_range

T, S, V, H = 4, 6, 7, 5  # window, global streams, vocabulary, hidden
TIMEOUT_S = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def network() -> rg.Sequential:
    """A tiny LM with dropout (its masks are cut from the global batch's) and clipping."""
    return rg.Sequential(rg.Embedding(V, 3), rg.cells.lstm(hidden=H), rg.Dropout(0.3), rg.SoftmaxCrossEntropy(V, ignore_index=-100))


def compiled(streams: int, device: str = "cpu") -> rg.TrainingStep:
    """float64 on the CPU; float32 on CUDA (numba's simulator without a GPU)."""
    return rg.compile(network(), T, streams, device=device, dtype="float64" if device == "cpu" else "float32",
                      optimizer=rg.Adam(lr=0.05), clip_norm=0.5, seed=3)


def windows(n: int, start: int = 0) -> list:
    """n global windows (inputs, targets), each (T, S) ids, the same in every process; the
    targets of stream 0 of the second window are ignored (-100), so the column counts differ."""
    rng = np.random.default_rng(7)
    out = []
    for k in range(start + n):
        x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
        if k == 1:
            y[:, 0] = -100
        out.append((x, y))
    return out[start:]


def single(steps: int, device: str = "cpu") -> tuple[rg.TrainingStep, list]:
    """One process trained on the global windows: (step, losses)."""
    step = compiled(S, device)
    return step, [float(step.train(x, y)) for x, y in windows(steps)]


def gathered_parameters_equal(step) -> bool:
    """Whether every process holds exactly rank 0's parameters."""
    mine = {k: np.array(v) for k, v in step.parameters.items()}
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, mine)
    return all(np.array_equal(p[k], parts[0][k]) for p in parts for k in mine)


def run(rank: int, world: int, port: int, task: str, out: str) -> None:
    """Process ``rank`` of ``world``: join the group, run ``task``, save what it returns."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        result = globals()[f"task_{task}"](rank, world, out)
        np.savez(os.path.join(out, f"{task}-{rank}.npz"), **result)
    finally:
        if task in ("killed", "stalled"):  # the group has lost a process: its teardown is not what is tested
            os._exit(0)
        gc.collect()  # a DistributedDataParallel's reducer (in reference cycles) goes before its group
        dist.destroy_process_group()


def _train(rank, world, steps, start=0, checkpoint=None, device="cpu"):
    lo, hi = stream_range(S, rank, world)
    step = rg.distributed(compiled(hi - lo, device))
    if checkpoint is not None:
        ck = np.load(checkpoint)
        step.set_parameters({k[6:]: ck[k] for k in ck.files if k.startswith("param/")})
        step.optimizer.load_state_dict({k[6:]: ck[k] for k in ck.files if k.startswith("optim/")})
        rg.set_global_state(step, {k[6:]: ck[k] for k in ck.files if k.startswith("state/")})
    losses, agree = [], True
    for x, y in windows(steps, start):
        losses.append(float(step.train(x[:, lo:hi], y[:, lo:hi])))
        agree = agree and gathered_parameters_equal(step)
    return step, losses, agree


def _saved(step, losses, agree, states):
    return {"losses": np.array(losses), "agree": np.array(agree),
            **{f"param/{k}": v for k, v in step.parameters.items()},
            **{f"optim/{k}": np.asarray(v) for k, v in step.optimizer.state_dict().items()},
            **{f"state/{k}": v for k, v in states.items()}}


def task_train(rank, world, out):
    """3 steps; rank 0 also writes the checkpoint (parameters, optimizer, global states)."""
    step, losses, agree = _train(rank, world, 3)
    states = rg.global_state(step)
    result = _saved(step, losses, agree, states)
    if rank == 0:
        np.savez(os.path.join(out, f"checkpoint-{world}.npz"), **result)
    return result


def task_train_cuda(rank, world, out):
    """3 steps of the CUDA backend (all-reduced on the device: in the simulator, through host copies)."""
    step, losses, agree = _train(rank, world, 3, device="cuda")
    return _saved(step, losses, agree, rg.global_state(step))


def task_resume(rank, world, out):
    """2 steps more from the 2-process checkpoint (windows 3 and 4)."""
    step, losses, agree = _train(rank, world, 2, start=3, checkpoint=os.path.join(out, "checkpoint-2.npz"))
    return _saved(step, losses, agree, rg.global_state(step))


def _second_step_after_a_failure(rank, world, dies: bool):
    """Rank 1 fails after one step: it dies (``dies``), or stops answering while alive with its
    connections open; the others' second step must fail with PeerFailure, at once or after the
    group's timeout. Returns rank 0's error and how long the failing call took."""
    import time

    lo, hi = stream_range(S, rank, world)
    step = rg.distributed(compiled(hi - lo))
    data = windows(2)
    step.train(data[0][0][:, lo:hi], data[0][1][:, lo:hi])
    if rank == 1:
        if not dies:
            time.sleep(TIMEOUT_S + 4)
        os._exit(3 if dies else 0)
    t0 = time.perf_counter()
    try:
        step.train(data[1][0][:, lo:hi], data[1][1][:, lo:hi])
    except rg.PeerFailure as e:
        return {"error": np.array(str(e)), "seconds": np.array(time.perf_counter() - t0)}
    return {"error": np.array(""), "seconds": np.array(time.perf_counter() - t0)}


def task_killed(rank, world, out):
    """Rank 1 dies after one step."""
    return _second_step_after_a_failure(rank, world, dies=True)


def task_stalled(rank, world, out):
    """Rank 1 stops answering after one step."""
    return _second_step_after_a_failure(rank, world, dies=False)


def task_ddp(rank, world, out):
    """rnngraph.torch.RNN inside DistributedDataParallel: 3 SGD steps on this process's batch columns."""
    from rnngraph.torch import RNN

    torch.manual_seed(0)
    model = RNN("lstm", hidden=H, input_size=3).double()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    lo, hi = stream_range(S, rank, world)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(T, S, 3, dtype=torch.float64, generator=gen)
        target = torch.randn(T, S, H, dtype=torch.float64, generator=gen)
        y, _ = ddp(x[:, lo:hi])
        loss = ((y - target[:, lo:hi]) ** 2).mean()  # DDP averages the gradients: a mean over equal shards
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def task_nonfinite(rank, world, out, device="cpu"):
    """A NaN in one process's inputs: every process skips that step (nonfinite="skip")."""
    net = rg.Sequential(rg.cells.lstm(hidden=H), rg.MSE(2), input_size=3)
    lo, hi = stream_range(S, rank, world)
    step = rg.distributed(rg.compile(net, T, hi - lo, device=device, dtype="float64" if device == "cpu" else "float32",
                                     nonfinite="skip", seed=1))
    rng = np.random.default_rng(2)
    losses = []
    for k in range(3):
        x, y = rng.normal(size=(T, S, 3)), rng.normal(size=(T, S, 2))
        if k == 1:
            x[0, S - 1, 0] = np.nan  # the last process's streams only
        losses.append(float(step.train(x[:, lo:hi], y[:, lo:hi])))
    return {"losses": np.array(losses), "skipped": np.array(step.skipped_steps),
            "steps": np.array(step.optimizer.steps), "agree": np.array(gathered_parameters_equal(step))}


def task_nonfinite_cuda(rank, world, out):
    """task_nonfinite on the CUDA backend (the finite check reads the all-reduced gradients)."""
    return task_nonfinite(rank, world, out, device="cuda")
