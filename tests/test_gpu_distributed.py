"""The CUDA step's device all-reduce through NCCL (rnngraph/distributed.py), on one GPU: a process
group of one process over NCCL runs the zero-copy path (torch.as_tensor over the step's device
buffers, on its stream) and the step's two-part training call; three steps equal the same step
without data parallelism, to float32's rounding (the gradients are summed, then divided by the
column count, instead of seeded with 1/columns). Several GPUs: bench/ and the CLI's
``--distributed`` under torchrun."""
import datetime

import numpy as np
import pytest

import rnngraph as rg

pytestmark = pytest.mark.gpu


def _step():
    net = rg.Sequential(rg.Embedding(11, 8), rg.cells.lstm(hidden=16), rg.Dropout(0.2), rg.SoftmaxCrossEntropy(11))
    return rg.compile(net, 5, 4, device="cuda", optimizer=rg.Adam(lr=0.01), clip_norm=1.0, seed=2)


def test_one_nccl_process_trains_as_the_plain_step(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    monkeypatch.setenv("RNNGRAPH_MASKS", "host")  # the plain step's masks are then the host's, as the sharded ones
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        plain, shared = _step(), rg.distributed(_step())
        assert shared._cuda.gradient_reducer.nccl
        rng = np.random.default_rng(0)
        for _ in range(3):
            x, y = rng.integers(0, 11, (5, 4)), rng.integers(0, 11, (5, 4))
            assert float(shared.train(x, y)) == pytest.approx(float(plain.train(x, y)), rel=1e-5)
        for name, want in plain.parameters.items():
            np.testing.assert_allclose(shared.parameters[name], want, rtol=0, atol=1e-5, err_msg=name)
    finally:
        dist.destroy_process_group()
