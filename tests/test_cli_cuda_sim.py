"""`rnngraph train --device cuda` end to end in numba's CUDA simulator (CI has no GPU): the
CUDA backend's checkpoints (optimizer slots pulled from the device) resume exactly, and the
trained parameters match the CPU backend's."""
import os

import numpy as np
import pytest

from rnngraph import cli
from rnngraph.lm import load_checkpoint

pytestmark = [pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                 reason="simulator test (the GPU runs the real thing)"),
              pytest.mark.slow]  # five command-line runs, three CUDA training runs in the simulator

TEXT = "it is a truth universally acknowledged that a single man in possession of a good fortune\n" * 3
TINY = ["--hidden", "4", "--embed", "3", "--window", "4", "--streams", "2", "--lr", "0.01", "--no-progress",
        "--eval-every", "1000", "--eval-tokens", "20", "--eval-streams", "2"]


def _train(tmp_path, ckpt, device, steps, *extra):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    code = cli.main(["train", "--corpus", str(text), *TINY, "--device", device, "--steps", str(steps),
                     "--checkpoint", str(ckpt), *extra])
    assert code == 0


def test_cuda_training_resumes_exactly_and_matches_cpu(tmp_path):
    """2 steps straight == 1 step, checkpoint, --resume for the second (its Adam slots, nonzero
    after one step, pulled from the device and pushed back) == 2 steps on the CPU backend."""
    straight, resumed, cpu = tmp_path / "straight", tmp_path / "resumed", tmp_path / "cpu"
    _train(tmp_path, straight, "cuda", 2)
    _train(tmp_path, resumed, "cuda", 1)
    assert any(np.abs(v).max() > 0 for k, v in load_checkpoint(resumed).optim.items() if k.startswith("m/"))
    _train(tmp_path, resumed, "cuda", 2, "--resume")
    _train(tmp_path, cpu, "cpu", 2)
    a, b, c = (load_checkpoint(p) for p in (straight, resumed, cpu))
    assert a.step == b.step == c.step == 2
    for part in ("params", "optim", "state"):
        x, y, z = getattr(a, part), getattr(b, part), getattr(c, part)
        assert set(x) == set(y) == set(z)
        for k in x:
            np.testing.assert_allclose(y[k], x[k], rtol=0, atol=1e-6, err_msg=f"resume: {part} {k}")
            np.testing.assert_allclose(z[k], x[k], rtol=0, atol=1e-5, err_msg=f"cpu vs cuda: {part} {k}")
