"""The CUDA training step updates and clips every parameter with one launch each, over arenas
laid out as the parameter gradients' (codegen/step.py), and that equals the NumPy backend's
per-parameter rg.optim updates (simulator)."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.codegen import library

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                reason="simulator test (the GPU tier runs the training steps of tests/test_gpu.py)")


OPTIMIZERS = {"adamw": lambda: rg.AdamW(lr=0.05, weight_decay=0.1), "sgd": lambda: rg.SGD(lr=0.5, momentum=0.9)}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_one_launch_updates_and_clips_every_parameter_as_the_numpy_backend(kind, monkeypatch):
    V, T, S, H = 5, 2, 2, 3
    net = rg.stacked(rg.cells.lstm, 2, H, vocab=V, embed=3)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, seed=2, clip_norm=0.05,  # noqa: E731
                                optimizer=OPTIMIZERS[kind]())
    cpu, gpu = mk("cpu"), mk("cuda")
    calls = {"adam_update": 0, "sgd_update": 0, "scale_by_clip": 0}
    for name in calls:
        def counted(*a, _f=getattr(library, name), _n=name, **k):
            calls[_n] += 1
            return _f(*a, **k)
        monkeypatch.setattr(library, name, counted)
    rng = np.random.default_rng(5)
    for _ in range(2):
        x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    update = "adam_update" if kind == "adamw" else "sgd_update"
    assert calls[update] == 2 and calls["scale_by_clip"] == 2  # one each a step, for all 11 parameters
    assert cpu.last_grad_norm > 0.05  # the clip did scale
    pc, pg = cpu.parameters, gpu.parameters
    assert len(pc) == 11  # embedding, 2 x 4 LSTM, the head's weight and bias
    for name in pc:
        np.testing.assert_allclose(pg[name], pc[name], rtol=1e-5, atol=1e-6, err_msg=name)
