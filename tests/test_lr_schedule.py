"""`rnngraph train --lr-schedule cosine --lr-final F`: the formula, the lr each step trains with, resume.

CLI runs go through ``rnngraph.cli.main`` on the tiny shapes of tests/test_cli.py.
"""
import json
import math

import numpy as np
import pytest

from conftest import assert_same_checkpoint_arrays
import rnngraph as rg
from rnngraph import cli, lm
from rnngraph.data import batches
from rnngraph.optim import cosine_lr, from_config

TINY = ["--hidden", "8", "--embed", "4", "--window", "8", "--streams", "4", "--lr", "0.01",
        "--device", "cpu", "--no-progress", "--eval-streams", "4"]


def train(capsys, text_file, ckpt, *extra, steps):
    code = cli.main(["train", "--corpus", str(text_file), *TINY, "--steps", str(steps), "--eval-every", "3",
                     "--checkpoint", str(ckpt), *map(str, extra)])
    out, err = capsys.readouterr()
    return code, out, err


def cosine(lr, final, k, n):
    """PyTorch's CosineAnnealingLR(T_max=n, eta_min=lr*final) at step k, written out here."""
    low = lr * final
    return low + (lr - low) * (1 + math.cos(math.pi * min(k, n) / n)) / 2


def spy_on_lr(monkeypatch) -> list:
    """A list that receives the optimizer's lr at each call of TrainingStep.train."""
    seen, original = [], rg.TrainingStep.train

    def spy(self, *a, **kw):
        seen.append(self.optimizer.lr)
        return original(self, *a, **kw)

    monkeypatch.setattr(rg.TrainingStep, "train", spy)
    return seen


# ---- the formula ------------------------------------------------------------------------------------
def test_cosine_lr_values():
    lr, final = 3e-3, 0.2
    assert cosine_lr(lr, final, 0.0) == pytest.approx(lr)
    assert cosine_lr(lr, final, 0.5) == pytest.approx(lr * final + (lr - lr * final) * (1 + math.cos(math.pi / 2)) / 2)
    assert cosine_lr(lr, final, 0.5) == pytest.approx((lr + lr * final) / 2)
    assert cosine_lr(lr, final, 0.25) == pytest.approx(cosine(lr, final, 1, 4))
    assert cosine_lr(lr, final, 1.0) == pytest.approx(lr * final)
    assert cosine_lr(lr, final, 1.7) == cosine_lr(lr, final, 1.0)  # clipped: stays at the end value
    assert cosine_lr(lr, final, -0.3) == cosine_lr(lr, final, 0.0)
    assert cosine_lr(lr, 0.0, 1.0) == pytest.approx(0.0, abs=1e-15) and cosine_lr(lr, 1.0, 0.4) == pytest.approx(lr)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cosine_lr(lr, 1.5, 0.3)


# ---- the lr each training step uses -------------------------------------------------------------------
def test_cli_cosine_trains_each_step_with_the_formulas_lr(capsys, monkeypatch, tmp_path, text_file):
    seen = spy_on_lr(monkeypatch)
    n, ckpt = 7, tmp_path / "ck"
    code, out, err = train(capsys, text_file, ckpt, "--lr-schedule", "cosine", "--lr-final", 0.25, steps=n)
    assert code == 0, err
    np.testing.assert_allclose(seen, [cosine(0.01, 0.25, k, n) for k in range(n)], rtol=1e-12)
    assert "cosine to 0.0025 at step 7" in out
    ck = lm.load_checkpoint(ckpt)
    want = {"name": "cosine", "lr_final": 0.25, "steps": n}
    assert ck.config.lr_schedule == want and ck.config.optimizer["lr"] == 0.01
    assert json.loads((ckpt / "config.json").read_text())["lr_schedule"] == want

    # the same n windows through rg.compile by hand, lr set from the formula: the same parameters
    monkeypatch.undo()
    cfg = ck.config
    net = lm.build_network(cfg, len(ck.vocab))
    step = rg.compile(net, window=cfg.window, streams=cfg.streams, device="cpu", dtype=cfg.dtype,
                      optimizer=from_config(cfg.optimizer), clip_norm=cfg.clip, seed=cfg.seed)
    data = batches(ck.vocab.encode(lm.load_corpus(cfg.corpus).train), cfg.window, cfg.streams)
    for k in range(n):
        x, y = next(data)
        step.optimizer.lr = cosine(0.01, 0.25, k, n)
        step.train(x, y)
    for name, value in step.parameters.items():
        np.testing.assert_allclose(ck.params[name], value, rtol=0, atol=1e-6, err_msg=name)


def test_constant_is_the_default_and_sets_the_lr_unchanged(capsys, monkeypatch, tmp_path, text_file):
    seen = spy_on_lr(monkeypatch)
    code, out, err = train(capsys, text_file, tmp_path / "ck", steps=3)
    assert code == 0, err
    assert seen == [0.01] * 3 and "cosine" not in out
    assert lm.load_checkpoint(tmp_path / "ck").config.lr_schedule == {"name": "constant"}


# ---- resume ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stop", ["ctrl-c", "time-limit"])
def test_resume_continues_the_cosine_curve(capsys, monkeypatch, tmp_path, text_file, stop):
    """K steps of a cosine run to --steps N (stopped by Ctrl-C after step 6, or by --time-limit
    after step 1), then --resume --steps N without the schedule flags = N steps straight."""
    n, cos = 10, ("--lr-schedule", "cosine", "--lr-final", 0.05)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert train(capsys, text_file, straight, *cos, steps=n)[0] == 0
    if stop == "ctrl-c":
        original, calls = lm.Evaluator.__call__, {"n": 0}

        def interrupt_second_validation(self, *a, **kw):
            calls["n"] += 1
            if calls["n"] == 2:  # the validation after step 6: Ctrl-C between steps
                raise KeyboardInterrupt
            return original(self, *a, **kw)

        monkeypatch.setattr(lm.Evaluator, "__call__", interrupt_second_validation)
        assert train(capsys, text_file, resumed, *cos, steps=n)[0] == 130
        monkeypatch.undo()
        k = 6
    else:
        code, out, err = train(capsys, text_file, resumed, *cos, "--time-limit", 1e-9, steps=n)
        assert code == 0 and "stopped at step 1:" in out, (out, err)
        k = 1
    assert lm.load_checkpoint(resumed).step == k
    code, out, err = train(capsys, text_file, resumed, "--resume", steps=n)
    assert code == 0, err
    assert f"resumed {resumed} at step {k}" in out and "cosine to 0.0005 at step 10" in out
    a, b = lm.load_checkpoint(straight), lm.load_checkpoint(resumed)
    assert a.step == b.step == n and a.config.lr_schedule == b.config.lr_schedule
    assert_same_checkpoint_arrays(a, b)


def test_old_checkpoints_are_constant_and_resume_may_change_the_schedule(capsys, tmp_path, text_file):
    ck = tmp_path / "ck"
    assert train(capsys, text_file, ck, steps=3)[0] == 0
    cfg = json.loads((ck / "config.json").read_text())
    del cfg["lr_schedule"]  # a checkpoint written before --lr-schedule existed
    (ck / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    assert lm.load_checkpoint(ck).config.lr_schedule == {"name": "constant"}
    code, _, err = train(capsys, text_file, ck, "--resume", "--lr-final", 0.5, steps=4)
    assert code == 1 and err.strip() == ("rnngraph: error: --lr-final applies to --lr-schedule cosine only "
                                         "(the lr it ends at), not constant")
    assert train(capsys, text_file, ck, "--resume", "--lr-schedule", "cosine", steps=5)[0] == 0  # like --lr
    assert lm.load_checkpoint(ck).config.lr_schedule == {"name": "cosine", "lr_final": 0.1, "steps": 5}
    assert train(capsys, text_file, ck, "--resume", "--lr-final", 0.3, steps=6)[0] == 0
    assert lm.load_checkpoint(ck).config.lr_schedule == {"name": "cosine", "lr_final": 0.3, "steps": 6}


def test_resume_without_steps_continues_the_cosine_curve(capsys, tmp_path, text_file):
    """Regression: resuming a cosine run without --steps used --steps' default
    1000, restarting the curve near the full lr. Now the checkpoint's end step is the default; a
    different --steps says that the curve moves. The validation lines show the lr in use."""
    ck = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ck, "--lr-schedule", "cosine", "--time-limit", 0.001, steps=9)
    assert code == 0, err
    k = lm.load_checkpoint(ck).step
    assert 0 < k < 9
    code = cli.main(["train", "--checkpoint", str(ck), "--resume", "--eval-every", "3", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert lm.load_checkpoint(ck).step == 9 and "cosine to 0.001 at step 9" in out and "note:" not in out + err
    last = [line for line in out.splitlines() if line.startswith("step ") and " lr " in line][-1]
    assert float(last.split(" lr ")[1]) == pytest.approx(cosine(0.01, 0.1, 8, 9), rel=5e-3)  # 3 digits; step 9 ran with k=8
    code, out, err = train(capsys, text_file, ck, "--resume", steps=12)
    assert code == 0 and "rnngraph: note: the cosine lr schedule now ends at step 12 (the checkpoint's ended at 9)" in err


# ---- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "abc"])
def test_lr_final_outside_0_1_is_one_line(capsys, tmp_path, text_file, value):
    code, _, err = train(capsys, text_file, tmp_path / "ck", "--lr-schedule", "cosine", "--lr-final", value, steps=3)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"rnngraph: error: argument --lr-final: must be a number in [0, 1], got '{value}'"), err
    assert not (tmp_path / "ck").exists()


def test_lr_final_needs_the_cosine_schedule(capsys, tmp_path, text_file):
    code, _, err = train(capsys, text_file, tmp_path / "ck", "--lr-final", 0.5, steps=3)
    assert code == 1 and err.strip().splitlines() == [
        "rnngraph: error: --lr-final applies to --lr-schedule cosine only (the lr it ends at), not constant"]
