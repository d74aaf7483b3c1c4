"""GPU tier (pytest -m gpu): the training step replayed as one CUDA graph (codegen/step.py) trains
as the NumPy backend does, call after call: the graph is captured at the second call and
replayed from the third, its step scalars (1/columns, Adam's step size and bias correction,
AdamW's decay, SGD's first step) read from the device array the host writes before each replay,
and the states carried in the graph (a depth-2 state at T = 1: source and destination rows
overlap)."""
import numpy as np
import pytest

import rnngraph as rg
from backends import assert_steps_close

pytestmark = pytest.mark.gpu



def _lm(cell, layers: int):
    """Embedding 7 -> 5, ``layers`` cells of 16, softmax over 7 with ignore_index -100."""
    return rg.Sequential(rg.Embedding(7, 5), *(cell(hidden=16) for _ in range(layers)),
                         rg.SoftmaxCrossEntropy(7, ignore_index=-100))


CASES = {  # name -> (network, T, optimizer, clip_norm)
    "lstm-adamw": (lambda: _lm(rg.cells.lstm, 2), 4, lambda: rg.AdamW(lr=1e-2, weight_decay=0.1), 0.5),
    "gru-sgd-momentum": (lambda: _lm(rg.cells.gru, 1), 4, lambda: rg.SGD(lr=0.1, momentum=0.9), None),
    "skip-rnn-window-1": (lambda: _lm(rg.cells.skip_rnn, 1), 1, lambda: rg.Adam(lr=1e-2), 1.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_training_step_matches_numpy_backend(case):
    make_net, T, make_opt, clip = CASES[case]
    S, net = 3, make_net()
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=make_opt(), clip_norm=clip, seed=2)
                for d in ("cpu", "cuda"))
    rng = np.random.default_rng(0)
    for call in range(6):
        x, y = rng.integers(0, 7, (T, S)), rng.integers(0, 7, (T, S))
        if call == 4:
            y[0, 1] = -100  # ignored: 1/columns changes between replays
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=2e-5), f"call {call}"
        assert_steps_close(gpu, cpu, atol=2e-5)
    graph = gpu._cuda._step_graph
    assert graph.error is None and graph.exe is not None
    assert gpu.optimizer.steps == cpu.optimizer.steps == 6
