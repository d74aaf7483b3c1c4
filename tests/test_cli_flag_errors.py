"""Errors of the command line speak its flags (``--device cpu``), not the Python API's arguments
(``device='cpu'``, ``rg.compile(nonfinite=...)``), in one line without NumPy's warnings."""
import pytest

import rnngraph as rg
import rnngraph.devices as devices
from cli_helpers import TINY, assert_one_line_error, run, train
from conftest import assert_same_checkpoint_arrays
from rnngraph.lm import load_checkpoint

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
    assert_one_line_error(code, err, "training step 1: its loss or gradients are not finite", "lower --lr (a NaN",
                          "the parameters are those of step 0; no checkpoint was written", exit_code=1)
    assert "rg." not in err and "nonfinite" not in err and "RuntimeWarning" not in err
    assert "--clip" not in err  # it is on (1.0, the default)
    assert not (tmp_path / "ck").exists()  # regression: the directory made for the run was left empty


@pytest.mark.parametrize("clip, advice", [("1", "lower --lr (a NaN"), ("0", "lower --lr or set --clip (a NaN")])
def test_a_loss_that_is_not_finite_saves_the_last_good_step(capsys, tmp_path, text_file, clip, advice):
    """Regression: the message said "the parameters are those of step 3" while the checkpoint held
    step 2 (step 3 was lost), and it advised --clip when clipping was on."""
    ckpt = tmp_path / "ck"
    code, _, err = train(capsys, text_file, ckpt, "--optimizer", "sgd", "--lr", "1e-3", steps=2)
    assert code == 0, err
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 20, "--lr", "1e38", "--clip",
                       clip, "--no-progress")
    good = load_checkpoint(ckpt).step
    assert good > 2
    assert_one_line_error(code, err, f"training step {good + 1}: its loss or gradients are not finite", advice,
                          f"the parameters are those of step {good}; {ckpt} holds step {good}", exit_code=1)
    assert load_checkpoint(ckpt).data_index == load_checkpoint(ckpt).optim["steps"] == good


EPOCH = ("--window", 16, "--streams", 16)  # 12 windows an epoch of the text


@pytest.mark.parametrize("bad, lag, flags", [(5, 0, ()), (5, 1, ()), (12, 1, EPOCH)])
def test_the_checkpoint_of_a_not_finite_stop_resumes_exactly(capsys, monkeypatch, tmp_path, text_file, bad, lag,
                                                            flags):
    """Window ``bad``'s gradients are not finite: the API changes nothing and raises, at once (the
    CPU, lag 0) or at the step's next use (the GPU, lag 1: the loop has counted the window already;
    after the epoch's last window that use is the next epoch's state reset). The checkpoint holds
    step bad - 1, the step's own count, and resumes as a straight run."""
    train_original, reset_original, calls, pending = rg.TrainingStep.train, rg.TrainingStep.reset_state, [0], []

    def train_until_bad(self, *a, **kw):
        calls[0] += 1
        if pending or (calls[0] == bad and not lag):
            raise FloatingPointError(f"training call after step {bad - 1}: not finite; unchanged")
        if calls[0] == bad:  # enqueued; its error surfaces at the step's next use
            pending.append(self)
            return Unsettled()
        return train_original(self, *a, **kw)

    def reset_settles_first(self, *a, **kw):
        if self in pending:
            raise FloatingPointError(f"training call after step {bad - 1}: not finite; unchanged")
        return reset_original(self, *a, **kw)

    monkeypatch.setattr(rg.TrainingStep, "train", train_until_bad)
    monkeypatch.setattr(rg.TrainingStep, "reset_state", reset_settles_first)
    steps = bad + 2
    code, out, err = train(capsys, text_file, tmp_path / "ck", *flags, steps=steps)
    assert_one_line_error(code, err, f"training step {bad}:", f"{tmp_path / 'ck'} holds step {bad - 1}", exit_code=1)
    assert not flags or f"{bad} windows an epoch" in out  # the bad window is the epoch's last
    ck = load_checkpoint(tmp_path / "ck")
    assert ck.step == ck.data_index == ck.optim["steps"] == bad - 1
    monkeypatch.undo()
    code, _, err = train(capsys, text_file, tmp_path / "ck", *flags, "--resume", steps=steps)
    assert code == 0, err
    assert train(capsys, text_file, tmp_path / "straight", *flags, steps=steps)[0] == 0
    assert_same_checkpoint_arrays(load_checkpoint(tmp_path / "straight"), load_checkpoint(tmp_path / "ck"))


class Unsettled:
    """A GPU window's loss whose error has not surfaced yet: reading it raises (as LazyLoss)."""

    def __float__(self):
        raise FloatingPointError("training call after step 4: not finite; unchanged")


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
