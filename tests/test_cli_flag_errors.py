"""Errors of the command line speak its flags (``--device cpu``), not the Python API's arguments
(``device='cpu'``, ``rg.compile(nonfinite=...)``), in one line without NumPy's warnings."""
import pytest

import rnngraph.devices as devices
from cli_helpers import TINY, assert_one_line_error, run, train

OVERFLOW = ("import rnngraph as rg\n\n@rg.cell\n"
            "def boom(x, h: rg.State, *, hidden: int):\n"
            "    z = rg.linear(x, hidden, name='W') + rg.linear(h, hidden, name='U')\n"
            "    h_next = rg.tanh(z) * 1e30 * 1e30\n"
            "    return h_next, {'h': h_next}\n")


# the simulated CUDA threads compute with NumPy outside the CLI's np.errstate (it is per thread)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.slow, pytest.mark.filterwarnings(
    "ignore::RuntimeWarning")])])
def test_a_loss_that_is_not_finite_names_the_flags(capsys, tmp_path, text_file, device):
    """Before: NumPy's overflow warnings, then the API's message naming rg.compile(nonfinite='skip').
    On the CUDA backend (numba's simulator without a GPU) the loss is read after the step returns
    (rnngraph/lazy_loss.py): the error names the same step."""
    cell = tmp_path / "boom.py"
    cell.write_text(OVERFLOW, encoding="utf-8")
    code, _, err = train(capsys, text_file, tmp_path / "ck", "--cell", f"{cell}:boom", "--device", device, steps=2)
    assert_one_line_error(code, err, "training step 1: its loss or gradients are not finite", "lower --lr or set "
                                     "--clip", "the parameters are those of step 0", exit_code=1)
    assert "rg." not in err and "nonfinite" not in err and "RuntimeWarning" not in err


def test_float64_on_the_gpu_names_the_flags(capsys, tmp_path, text_file):
    """Before: `the CUDA backend runs float32` (from the simulator's CUDA backend)."""
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--device", "cuda", "--dtype", "float64")
    assert_one_line_error(code, err, "--device cuda runs float32 only, not --dtype float64: use --device cpu or "
                                     "--dtype float32")
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, "--dtype", "float64", steps=1)[0] == 0
    for command in (("eval",), ("train", "--resume", "--no-progress")):
        code, _, err = run(capsys, *command, "--checkpoint", ckpt, "--device", "cuda")
        assert_one_line_error(code, err, f"--device cuda runs float32 only, and {ckpt} is a float64 checkpoint: "
                                         f"use --device cpu")


def test_auto_runs_float64_on_the_cpu_where_there_is_a_gpu(capsys, monkeypatch, tmp_path, text_file):
    monkeypatch.setattr(devices, "cuda_available", lambda simulator_ok=False: True)
    flags = [f if f != "cpu" else "auto" for f in TINY]  # --device auto
    code, out, err = run(capsys, "train", "--corpus", text_file, *flags, "--dtype", "float64", "--steps", 1)
    assert code == 0, err
    assert "cpu float64" in out.splitlines()[1]
