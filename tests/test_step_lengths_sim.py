"""Variable-length windows in rg.compile's training step on the CUDA backend against the NumPy
backend (tiny shapes: T=3, S=2, hidden 3): two training calls with lengths (a stream of length 0
included) and a forward give the CPU backend's losses, parameters and carried states to 1e-5,
the length masks fed as the program's inputs. In numba's simulator on machines without a GPU;
in the GPU tier (``pytest -m gpu``) on the GPU."""
import os

import numpy as np
import pytest

import rnngraph as rg
from backends import assert_steps_close

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

T, S, I, H, C = 3, 2, 2, 3, 3
HEADS = {"sequence_classifier": lambda: rg.SequenceClassifier(C), "xent": lambda: rg.SoftmaxCrossEntropy(C),
         "mse_projected": lambda: rg.MSE(2)}


def _targets(kind, rng):
    if kind == "sequence_classifier":
        return rng.integers(0, C, size=S)
    if kind == "xent":
        return rng.integers(0, C, size=(T, S))
    return rng.normal(size=(T, S, 2)).astype(np.float32)


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_training_with_lengths_matches_numpy_backend(kind):
    net = rg.Sequential(rg.cells.lstm(hidden=H), HEADS[kind](), input_size=I)
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=rg.Adam(lr=1e-2), clip_norm=0.5, seed=1)
                for d in ("cpu", "cuda"))
    rng = np.random.default_rng(0)
    for lengths in ([3, 1], [0, 2]):
        x, y = rng.normal(size=(T, S, I)).astype(np.float32), _targets(kind, rng)
        assert gpu.train(x, y, lengths=lengths) == pytest.approx(cpu.train(x, y, lengths=lengths), abs=1e-5)
        assert_steps_close(gpu, cpu, atol=1e-5)
    x, y = rng.normal(size=(T, S, I)).astype(np.float32), _targets(kind, rng)
    ours, theirs = gpu.forward(x, y, lengths=[1, 3]), cpu.forward(x, y, lengths=[1, 3])
    assert ours.loss == pytest.approx(theirs.loss, abs=1e-5)
    for name in theirs.outputs:
        np.testing.assert_allclose(ours.outputs[name], theirs.outputs[name], atol=1e-5, err_msg=name)
    assert gpu.schedule.graph is net.masked_graph


def test_training_step_sets_the_loops_stream_order_and_every_value_matches_at_padded_steps():
    """rg.compile's training step with lengths sets the loops' stream order (longest first) and
    valid streams, so its GEMM items (one stream each: cols=1) skip the streams that ended, and
    still trains as the NumPy backend does; ``all_values=True`` runs every item (skip=0), so
    even the values at padded steps equal the NumPy backend's."""
    net = rg.Sequential(rg.cells.lstm(hidden=H), HEADS["xent"](), input_size=I)
    tuning = rg.LoopTuning.defaults(S).replace(cols=1)
    cpu, gpu = (rg.compile(net, window=T, streams=S, device=d, optimizer=rg.Adam(lr=1e-2), seed=1,
                           **({"tuning": tuning} if d == "cuda" else {})) for d in ("cpu", "cuda"))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(T, S, I)).astype(np.float32), _targets("xent", rng)
    assert gpu.train(x, y, lengths=[1, 3]) == pytest.approx(cpu.train(x, y, lengths=[1, 3]), abs=1e-5)
    assert_steps_close(gpu, cpu, atol=1e-5)
    assert gpu._cuda.buf.order.copy_to_host().tolist() == [1, 0]
    assert gpu._cuda.buf.valid_streams.copy_to_host().tolist() == [2, 1, 1]  # T = 3
    ours, theirs = gpu.forward(x, y, lengths=[1, 3], all_values=True), cpu.forward(x, y, lengths=[1, 3], all_values=True)
    for name in theirs.values:
        np.testing.assert_allclose(ours.values[name], theirs.values[name], atol=1e-5, err_msg=name)
