"""Data-parallel training through torch.distributed (gloo, CPU): rg.distributed equals one
process on the global batch, checkpoints resume on another number of processes, rnngraph.torch.RNN
works inside DistributedDataParallel, and a process that dies makes the others fail clearly.
The processes run tests/distributed_workers.py."""
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import distributed_workers as w  # noqa: E402
import rnngraph as rg  # noqa: E402
from rnngraph.shards import ShardedBatches, join_states, split_states, stream_range  # noqa: E402
from rnngraph.data import batches  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def spawn(task: str, world: int, out) -> list[dict]:
    """Run ``task`` in ``world`` gloo processes; their saved results, by rank."""
    mp.spawn(w.run, args=(world, w.free_port(), task, str(out)), nprocs=world, join=True)
    return [dict(np.load(out / f"{task}-{r}.npz")) for r in range(world)]


def assert_same_parameters(got: dict, step, tol: float) -> None:
    for name, want in step.parameters.items():
        np.testing.assert_allclose(got[f"param/{name}"], want, rtol=0, atol=tol, err_msg=name)


# ---------------------------------------------------------------------------------- no processes
def test_stream_ranges_tile_the_streams_and_states_split_and_join():
    for S, world in [(6, 1), (6, 4), (7, 3), (3, 3)]:
        ranges = [stream_range(S, r, world) for r in range(world)]
        assert ranges[0][0] == 0 and ranges[-1][1] == S
        assert all(a[1] == b[0] and b[1] > b[0] for a, b in zip(ranges, ranges[1:]))
    states = {"h": np.arange(2 * 7 * 3.0).reshape(2, 7, 3)}
    assert np.array_equal(join_states(split_states(states, 3))["h"], states["h"])
    with pytest.raises(ValueError, match="streams: 2 global streams cannot be split over 3"):
        stream_range(2, 0, 3)


def test_sharded_batches_are_the_columns_of_the_global_windows():
    ids = np.arange(200) % 11
    whole = batches(ids, 4, 6, start=2)
    parts = [ShardedBatches(batches(ids, 4, 6, start=2), *stream_range(6, r, 4)) for r in range(4)]
    for _ in range(3):
        x, y = next(whole)
        shards = [next(p) for p in parts]
        assert np.array_equal(np.concatenate([s[0] for s in shards], axis=1), x)
        assert np.array_equal(np.concatenate([s[1] for s in shards], axis=1), y)
    assert parts[0].index == whole.index


def test_distributed_needs_a_process_group_and_a_training_step():
    step = w.compiled(2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        rg.distributed(step)
    with pytest.raises(TypeError, match="step: rg.distributed takes a TrainingStep"):
        rg.distributed(object())


@pytest.fixture
def one_process_group(tmp_path):
    """A gloo process group of this process alone."""
    import datetime

    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                                         world_size=1, timeout=datetime.timedelta(seconds=60))
    yield
    torch.distributed.destroy_process_group()


def test_a_cpu_step_with_an_nccl_only_group_is_a_value_error(one_process_group, monkeypatch):
    # it went on to an all-reduce of CPU tensors over NCCL (a PeerFailure blaming another process)
    monkeypatch.setattr(torch.distributed, "get_backend", lambda group=None: "nccl")
    with pytest.raises(ValueError, match=r"group: an NCCL process group moves CUDA tensors only.*'gloo'"):
        rg.distributed(w.compiled(2))


def test_a_failed_all_reduce_of_a_cuda_step_names_the_step_and_counts_no_step(one_process_group, monkeypatch):
    step = rg.distributed(w.compiled(2, device="cuda"))
    before = {k: np.array(v) for k, v in step.parameters.items()}

    def closed(*args, **kwargs):
        raise RuntimeError("Connection closed by peer")
    monkeypatch.setattr(torch.distributed, "all_reduce", closed)
    x, y = w.windows(1)[0]
    with pytest.raises(rg.PeerFailure, match="the all-reduce of the gradients at step 1 failed.*Connection closed"):
        step.train(x[:, :2], y[:, :2])
    assert step.optimizer.steps == 0  # it counted the failed call (1), Adam's next bias correction then wrong
    for name, want in before.items():
        np.testing.assert_array_equal(step.parameters[name], want, err_msg=name)


# ---------------------------------------------------------------------------------- processes
@pytest.mark.parametrize("world", [2, 3])
def test_three_steps_on_several_processes_equal_one_process(tmp_path, world):
    one, losses = w.single(3)
    results = spawn("train", world, tmp_path)
    for r in results:
        assert r["agree"], "the parameters differ between processes"
        assert_same_parameters(r, one, 1e-12)
        np.testing.assert_allclose(r["losses"], losses, rtol=1e-12)
    states = {k: v for k, v in one.state.items()}
    for name, v in states.items():
        np.testing.assert_allclose(results[0][f"state/{name}"], v, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_the_cuda_backend_on_two_processes_equals_one_process(tmp_path):
    """The CUDA step's device all-reduce (numba's simulator without a GPU: through host copies):
    3 steps with dropout, clipping, Adam and a window whose column counts differ between the
    processes equal one process on the global batch, to float32's rounding."""
    one, losses = w.single(3, device="cuda")
    results = spawn("train_cuda", 2, tmp_path)
    for r in results:
        assert r["agree"], "the parameters differ between processes"
        assert_same_parameters(r, one, 2e-5)
        np.testing.assert_allclose(r["losses"], losses, rtol=2e-6)
    for name, v in one.state.items():
        np.testing.assert_allclose(results[0][f"state/{name}"], v, rtol=0, atol=2e-5)


def test_a_two_process_checkpoint_resumes_on_one_and_on_three(tmp_path):
    spawn("train", 2, tmp_path)
    five, _ = w.single(5)
    # one process: the checkpoint's global states as they are
    ck = np.load(tmp_path / "checkpoint-2.npz")
    step = w.compiled(w.S)
    step.set_parameters({k[6:]: ck[k] for k in ck.files if k.startswith("param/")})
    step.optimizer.load_state_dict({k[6:]: ck[k] for k in ck.files if k.startswith("optim/")})
    step.state = {k[6:]: ck[k] for k in ck.files if k.startswith("state/")}
    for x, y in w.windows(2, start=3):
        step.train(x, y)
    assert_same_parameters({f"param/{k}": v for k, v in step.parameters.items()}, five, 1e-12)
    for r in spawn("resume", 3, tmp_path):
        assert r["agree"]
        assert_same_parameters(r, five, 1e-12)
    for name, v in five.state.items():
        np.testing.assert_allclose(r[f"state/{name}"], v, rtol=0, atol=1e-12)


def test_the_torch_module_inside_ddp_equals_one_process(tmp_path):
    from rnngraph.torch import RNN

    results = spawn("ddp", 2, tmp_path)
    torch.manual_seed(0)
    model = RNN("lstm", hidden=w.H, input_size=3).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(w.T, w.S, 3, dtype=torch.float64, generator=gen)
        target = torch.randn(w.T, w.S, w.H, dtype=torch.float64, generator=gen)
        y, _ = model(x)
        loss = ((y - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for r in results:
        for name, want in model.state_dict().items():
            np.testing.assert_allclose(r[name], want.numpy(), rtol=0, atol=1e-12, err_msg=name)


def _failed_peer(task: str, out, hung_s: float) -> dict:
    """Run ``task`` in 2 processes (rank 1 fails in its own way); rank 0's saved result."""
    ctx = mp.spawn(w.run, args=(2, w.free_port(), task, str(out)), nprocs=2, join=False)
    t0 = time.perf_counter()
    for p in ctx.processes:
        p.join(timeout=hung_s)
    assert time.perf_counter() - t0 < hung_s, "a process hung"
    assert ctx.processes[0].exitcode == 0
    return dict(np.load(out / f"{task}-0.npz"))


def test_a_killed_process_makes_the_others_fail_clearly_within_the_timeout(tmp_path):
    r = _failed_peer("killed", tmp_path, w.TIMEOUT_S + 20)
    assert "another process has died or did not answer" in str(r["error"]), str(r["error"])
    assert float(r["seconds"]) < w.TIMEOUT_S + 2


@pytest.mark.slow
def test_a_process_that_stops_answering_fails_the_others_after_the_timeout(tmp_path):
    r = _failed_peer("stalled", tmp_path, w.TIMEOUT_S + 25)
    assert "did not answer within the process group's timeout" in str(r["error"]), str(r["error"])
    assert w.TIMEOUT_S - 1 < float(r["seconds"]) < w.TIMEOUT_S + 3


@pytest.mark.parametrize("task", ["nonfinite", pytest.param("nonfinite_cuda", marks=pytest.mark.slow)])
def test_a_nan_in_one_process_makes_every_process_skip_the_step(tmp_path, task):
    for r in spawn(task, 2, tmp_path):
        assert r["agree"] and int(r["skipped"]) == 1 and int(r["steps"]) == 2
        assert np.isnan(r["losses"][1]) and np.isfinite(r["losses"][[0, 2]]).all()
