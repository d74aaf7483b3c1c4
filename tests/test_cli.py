"""The command line: train / sample / eval on a small text file, bad input, resume, Ctrl-C.

Everything runs in-process through ``rnngraph.cli.main`` on tiny shapes, except one
subprocess run of ``python -m rnngraph`` that shows no traceback reaches the user.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cli_helpers import MGU, TINY, assert_one_line_error, run, train
from conftest import WORDS, assert_same_checkpoint_arrays
import rnngraph as rg
from rnngraph import cli
from rnngraph.lm import load_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, text_file):
    """A checkpoint of 6 steps of a tiny LSTM (shared by the read-only tests)."""
    ckpt = tmp_path_factory.mktemp("ckpt") / "run"
    code = cli.main(["train", "--corpus", str(text_file), *TINY, "--steps", "6", "--eval-every", "3",
                     "--checkpoint", str(ckpt)])
    assert code == 0
    return ckpt


# ---- working runs ---------------------------------------------------------------------------
def test_train_writes_a_loadable_checkpoint(trained):
    ck = load_checkpoint(trained)
    assert ck.step == 6 and ck.data_index == 6
    assert ck.config.cell == "lstm" and ck.config.hidden == 8 and ck.config.streams == 4
    assert set(ck.params) == {"embed.weight", "layer0.W.weight", "layer0.W.bias", "layer0.U.weight",
                              "layer0.U.bias", "head.W.weight", "head.W.bias"}
    assert ck.optim["steps"] == 6 and any(k.startswith("m/") for k in ck.optim)
    assert ck.state["layer0.h"].shape == (1, 4, 8)
    assert not [f for f in os.listdir(trained) if f.endswith(".tmp")]


def test_train_prints_validation_bits_per_char(capsys, tmp_path, text_file):
    code, out, err = train(capsys, text_file, tmp_path / "ck")
    assert code == 0, err
    valid = [line for line in out.splitlines() if line.startswith("step")]
    assert len(valid) == 2 and all("valid bits/char" in line for line in valid)
    assert "validating on" not in out  # a short validation text: nothing to wait for


def test_train_says_when_a_long_validation_starts(capsys, tmp_path, text_file, monkeypatch):
    """Regression: a 30-step CPU run over Austen printed nothing for the 85 s its validation
    took; from LONG_VALIDATION tokens it says what it validates on before it starts."""
    from rnngraph.cli import train as train_module
    monkeypatch.setattr(train_module, "LONG_VALIDATION", 10)
    code, out, err = train(capsys, text_file, tmp_path / "ck")
    assert code == 0, err
    lines = out.splitlines()
    said = [k for k, line in enumerate(lines) if line.startswith("validating on ")]
    assert len(said) == 2 and all(lines[k + 1].startswith("step") for k in said)
    assert "chars (--eval-tokens N validates on fewer) ..." in lines[said[0]]


def test_sample_prints_prime_and_length_characters(capsys, trained):
    code, out, err = run(capsys, "sample", "--checkpoint", trained, "--prime", "she was", "--length", 37,
                         "--temperature", 0.8, "--seed", 3)
    assert code == 0, err
    assert out.endswith("\n") and out.startswith("she was")
    assert len(out[:-1]) == len("she was") + 37
    again = run(capsys, "sample", "--checkpoint", trained, "--prime", "she was", "--length", 37,
                "--temperature", 0.8, "--seed", 3)[1]
    assert again == out  # seeded


def test_sample_at_a_tiny_temperature_is_greedy(capsys, trained):
    """Regression: --temperature 1e-320 made the scaled logits inf (inf - inf: NaN) and failed with
    NumPy's 'Probabilities contain NaN'; it is the argmax, whatever the seed."""
    outs = []
    for tau, seed in ((1e-320, 0), (1e-320, 5), (5e-324, 1), (1e-6, 2)):
        code, out, err = run(capsys, "sample", "--checkpoint", trained, "--prime", "she", "--length", 20,
                             "--temperature", tau, "--seed", seed)
        assert code == 0 and err == "", err
        outs.append(out)
    assert len(set(outs)) == 1 and len(outs[0]) == len("she") + 20 + 1


def test_sample_names_the_prime_characters_outside_the_vocabulary(capsys, trained):
    code, out, err = run(capsys, "sample", "--checkpoint", trained, "--prime", "she Zq", "--length", 3)
    assert code == 0 and out.startswith("she Zq") and len(out) == len("she Zq") + 3 + 1, (out, err)
    V = len(load_checkpoint(trained).vocab)
    assert err.strip() == (f"rnngraph: note: --prime: 2 of its 6 chars are not in the checkpoint's vocabulary ({V} chars) and "
                           f"are fed to the network as <unk>: 'Z', 'q'")
    code, out, err = run(capsys, "sample", "--checkpoint", trained, "--prime", "sheZ", "--length", 1)
    assert code == 0 and err.strip() == (f"rnngraph: note: --prime: 1 of its 4 chars is not in the checkpoint's vocabulary "
                                         f"({V} chars) and is fed to the network as <unk>: 'Z'")


def test_eval_prints_bits_per_char(capsys, trained):
    code, out, err = run(capsys, "eval", "--checkpoint", trained, "--split", "test")
    assert code == 0, err
    assert out.startswith("test ") and "bits/char" in out
    bits = float(out.split()[1])
    assert 0.5 < bits < 8


def test_word_level_and_custom_cell_file(capsys, tmp_path, text_file):
    cell_file = tmp_path / "mycells.py"
    cell_file.write_text(MGU)
    ckpt = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ckpt, "--cell", f"{cell_file}:mgu", "--level", "word",
                           "--streams", 2, "--window", 4, steps=4)
    assert code == 0, err
    assert "valid perplexity" in out
    assert load_checkpoint(ckpt).config.cell == f"{cell_file.resolve()}:mgu"
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, "--prime", "she was", "--length", 5)
    assert code == 0, err
    assert out.startswith("she was ")  # then 5 words (newlines are tokens, so not a word count)
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--split", "valid")
    assert code == 0 and "perplexity" in out, err


def test_time_limit_stops_early_with_a_checkpoint(capsys, tmp_path, text_file):
    code, out, err = train(capsys, text_file, tmp_path / "ck", "--time-limit", 0.3, steps=1_000_000)
    assert code == 0, err
    assert "stopped at step" in out and "--time-limit 0.3 s reached" in out
    ck = load_checkpoint(tmp_path / "ck")
    assert 0 < ck.step < 1_000_000 and f"step {ck.step:>6,}" in out  # validated at the stop


# ---- resume -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [7, 13])  # 13: the data wraps to a new epoch (13 windows) at the resume
def test_resume_n_then_2n_equals_2n_straight(capsys, tmp_path, text_file, n):
    extra = ("--window", 16, "--streams", 16)  # 4,4xx tokens / 16 streams / 16 -> 17 windows an epoch
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert train(capsys, text_file, straight, *extra, steps=2 * n)[0] == 0
    assert train(capsys, text_file, resumed, *extra, steps=n)[0] == 0
    assert load_checkpoint(resumed).step == n
    code, out, err = train(capsys, text_file, resumed, *extra, "--resume", steps=2 * n)
    assert code == 0, err
    assert f"resumed {resumed} at step {n}" in out
    a, b = load_checkpoint(straight), load_checkpoint(resumed)
    assert a.step == b.step == 2 * n and a.data_index == b.data_index
    assert_same_checkpoint_arrays(a, b)


def test_the_header_says_clip_off_for_clip_0(capsys, tmp_path, text_file):
    """Regression: --clip 0 (clipping off) printed 'clip None' in the training header."""
    code, out, err = train(capsys, text_file, tmp_path / "ck", "--clip", 0, steps=1)
    assert code == 0, err
    assert ", clip off, " in out and "None" not in out
    code, out, err = train(capsys, text_file, tmp_path / "ck2", steps=1)
    assert code == 0 and ", clip 1.0, " in out, err


def test_resume_takes_the_model_flags_from_the_checkpoint(capsys, tmp_path, text_file):
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, "--hidden", 6, steps=3)[0] == 0
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 5, "--no-progress")
    assert code == 0, err
    assert load_checkpoint(ckpt).step == 5 and load_checkpoint(ckpt).config.hidden == 6


# ---- Ctrl-C and atomic checkpoints ----------------------------------------------------------------
def _interrupt_on_call(monkeypatch, cls, method, k):
    """Make the k-th call of cls.method raise KeyboardInterrupt (as Ctrl-C would)."""
    original, calls = getattr(cls, method), {"n": 0}

    def wrapper(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == k:
            raise KeyboardInterrupt
        return original(self, *a, **kw)

    monkeypatch.setattr(cls, method, wrapper)


def test_ctrl_c_inside_a_training_step_keeps_the_last_checkpoint(capsys, monkeypatch, tmp_path, text_file):
    ckpt = tmp_path / "ck"
    _interrupt_on_call(monkeypatch, rg.TrainingStep, "train", 8)  # steps 1-7 done, then Ctrl-C in 8
    code, out, err = train(capsys, text_file, ckpt, steps=20)
    assert code == 130
    assert err.strip().splitlines() == [f"rnngraph: interrupted at step 7; {ckpt} holds step 6 "
                                        f"(to go on: rnngraph train --checkpoint {ckpt} --resume)"]
    ck = load_checkpoint(ckpt)  # the step-6 checkpoint, intact (step 8 may have half-updated params)
    assert ck.step == 6 and ck.data_index == 6
    assert not [f for f in os.listdir(ckpt) if f.endswith(".tmp")]
    monkeypatch.undo()
    code, out, err = train(capsys, text_file, ckpt, "--resume", steps=9)
    assert code == 0, err
    assert load_checkpoint(ckpt).step == 9


def test_the_ctrl_c_hint_names_the_steps_its_checkpoint_does_not_keep(capsys, monkeypatch, tmp_path, text_file):
    """Regression: a run resumed with a new --steps and interrupted before it saved leaves the old
    total on disk; a plain --resume would stop there, so the hint names --steps."""
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, steps=4)[0] == 0
    _interrupt_on_call(monkeypatch, rg.TrainingStep, "train", 1)  # Ctrl-C inside the resumed run's first step
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 30, "--no-progress")
    monkeypatch.undo()
    assert code == 130
    assert err.strip().splitlines() == [f"rnngraph: interrupted at step 4; {ckpt} holds step 4 "
                                        f"(to go on: rnngraph train --checkpoint {ckpt} --resume --steps 30)"]
    assert load_checkpoint(ckpt).config.steps == 4


def test_a_resumed_run_without_steps_trains_to_the_total_it_was_asked_for(capsys, monkeypatch, tmp_path, text_file):
    """The checkpoint keeps --steps (config ``steps``): resuming a constant-lr run interrupted at step
    4 of 9 goes on to 9 (it went on to 1,000 before), and one resumed with --steps 11 keeps 11."""
    ckpt = tmp_path / "ck"
    _interrupt_on_call(monkeypatch, rg.TrainingStep, "train", 5)  # steps 1-4 done, Ctrl-C in 5
    assert train(capsys, text_file, ckpt, steps=9)[0] == 130
    monkeypatch.undo()
    assert load_checkpoint(ckpt).config.steps == 9
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--no-progress")
    assert code == 0, err
    assert re.search(rf"resumed {re.escape(str(ckpt))} at step \d of 9\n", out), out
    assert load_checkpoint(ckpt).step == 9
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 11, "--no-progress")
    assert code == 0 and load_checkpoint(ckpt).step == 11 and load_checkpoint(ckpt).config.steps == 11
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--no-progress")
    assert code == 0 and "nothing to do: the checkpoint is at step 11 and the run's total, kept in the checkpoint, " \
        "is 11 (a larger --steps goes on)" in out, (out, err)


def train_with_sigint(handler, capsys, text_file, ckpt, steps):
    """:func:`train` with ``handler`` as the process's SIGINT handler (restored after); returns
    (code, out, err, the handler the CLI left)."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        code, out, err = train(capsys, text_file, ckpt, steps=steps)
        return code, out, err, signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_a_step_finishes_it_and_saves(capsys, monkeypatch, tmp_path, text_file):
    """A real SIGINT inside a training step is deferred to the end of the step, then saved."""
    original, calls = rg.TrainingStep.train, {"n": 0}

    def train_and_press_ctrl_c(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *a, **kw)

    monkeypatch.setattr(rg.TrainingStep, "train", train_and_press_ctrl_c)
    # The CLI defers Ctrl-C only where SIGINT has Python's default handler; a process started with
    # SIGINT ignored (a background job of a shell without job control, e.g. `bash .ci/run &`) has
    # SIG_IGN instead. Regression: this test failed there with exit code 0.
    code, out, err, restored = train_with_sigint(signal.default_int_handler, capsys, text_file, tmp_path / "ck", 20)
    assert code == 130, (code, calls, err[-500:])
    assert err.strip().splitlines() == [f"rnngraph: interrupted at step 5; {tmp_path / 'ck'} holds step 5 (to go "
                                        f"on: rnngraph train --checkpoint {tmp_path / 'ck'} --resume)"]
    assert load_checkpoint(tmp_path / "ck").step == 5
    assert restored is signal.default_int_handler  # the CLI put the handler back


def test_ignored_sigint_stays_ignored(capsys, monkeypatch, tmp_path, text_file):
    """Where SIGINT is ignored (nohup, a background job), the CLI leaves it so: a SIGINT during a
    step changes nothing and the handler is still SIG_IGN afterwards (regression: a clean-clone run
    started as a background job inherited SIG_IGN, and the test above, which assumed Python's
    default handler, failed with exit code 0)."""
    original = rg.TrainingStep.train

    def train_and_send_sigint(self, *a, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        return original(self, *a, **kw)

    monkeypatch.setattr(rg.TrainingStep, "train", train_and_send_sigint)
    code, out, err, after = train_with_sigint(signal.SIG_IGN, capsys, text_file, tmp_path / "ck", 4)
    assert code == 0, err
    assert after is signal.SIG_IGN
    assert load_checkpoint(tmp_path / "ck").step == 4


def test_ctrl_c_between_steps_writes_a_final_checkpoint(capsys, monkeypatch, tmp_path, text_file):
    from rnngraph import lm
    ckpt = tmp_path / "ck"
    _interrupt_on_call(monkeypatch, lm.Evaluator, "__call__", 2)  # Ctrl-C in the validation at step 6
    code, out, err = train(capsys, text_file, ckpt, steps=20)
    assert code == 130
    assert err.strip().splitlines() == [f"rnngraph: interrupted at step 6; {ckpt} holds step 6 "
                                        f"(to go on: rnngraph train --checkpoint {ckpt} --resume)"]
    assert load_checkpoint(ckpt).step == 6


def test_ctrl_c_while_writing_a_checkpoint_leaves_the_previous_one(capsys, monkeypatch, tmp_path, text_file):
    ckpt = tmp_path / "ck"
    real_savez, calls = np.savez, {"n": 0}

    def half_written_savez(f, **arrays):
        calls["n"] += 1
        if calls["n"] == 2:  # the step-6 checkpoint: write part of it, then Ctrl-C
            f.write(b"PK\x03\x04 half an archive")
            raise KeyboardInterrupt
        real_savez(f, **arrays)

    monkeypatch.setattr(np, "savez", half_written_savez)
    code, out, err = train(capsys, text_file, ckpt, steps=20)
    assert code == 130
    assert "rnngraph: interrupted" in err and len(err.strip().splitlines()) == 1
    ck = load_checkpoint(ckpt)
    assert ck.step in (3, 6)  # step 3, or step 6 written again by the interrupt handler
    assert not [f for f in os.listdir(ckpt) if f.endswith(".tmp")]


def test_a_save_removes_the_temporary_files_a_killed_save_left(capsys, tmp_path, text_file):
    """Regression: a SIGKILL while params.npz was written left its temporary file (megabytes), and
    no later save removed it. A save now removes those older than itself, of the writer's own
    temporary names only."""
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, steps=1)[0] == 0
    hour_ago, hour_ahead = time.time() - 3600, time.time() + 3600
    stale = [".params.npz.k2x_9abc.tmp", ".config.json.abcdefgh.tmp"]
    kept = [".params.npz.keep", "notes.tmp", ".params.npz.short.tmp", ".params.npz.abcdefgh.tmp.bak",
            "params.npz.abcdefgh.tmp", ".params.npz.zz_being_.tmp"]  # the last: a writer still at work
    for name in stale + kept:
        (ckpt / name).write_bytes(b"\0" * 1000)
        os.utime(ckpt / name, (hour_ago, hour_ago))
    os.utime(ckpt / kept[-1], (hour_ahead, hour_ahead))
    (ckpt / ".params.npz.directry.tmp").mkdir()  # the writer's name, but not a file it wrote
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 2, "--no-progress")
    assert code == 0, err
    assert sorted(os.listdir(ckpt)) == sorted(kept + [".params.npz.directry.tmp", "config.json", "params.npz"])
    assert load_checkpoint(ckpt).step == 2


# ---- bad input: one line on stderr, non-zero exit ----------------------------------------------------
def test_missing_corpus_file(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--corpus", tmp_path / "nope.txt", *TINY)
    assert_one_line_error(code, err, "nope.txt", "no such file")


def test_empty_corpus_file(capsys, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    code, _, err = run(capsys, "train", "--corpus", path, *TINY)
    assert_one_line_error(code, err, "empty.txt", "empty")


def test_non_utf8_corpus_file(capsys, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\u00e9 au lait ".encode("latin-1") * 10)
    code, _, err = run(capsys, "train", "--corpus", path, *TINY)
    assert_one_line_error(code, err, "latin1.txt", "UTF-8")


def test_corpus_shorter_than_one_window(capsys, tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("a short text of a few words, not enough for one window\n", encoding="utf-8")
    code, _, err = run(capsys, "train", "--corpus", path, *TINY, "--window", 64)
    assert_one_line_error(code, err, "short.txt", "--window 64", "--streams 4")


@pytest.mark.parametrize("flag", ["--streams", "--window", "--hidden", "--layers"])
def test_zero_sizes_are_rejected(capsys, text_file, flag):
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, flag, 0)
    assert_one_line_error(code, err, flag, "positive integer", exit_code=2)


def test_a_negative_seed_is_a_flag_error(capsys, text_file, trained):
    """Regression: --seed -1 reached NumPy: `expected non-negative integer`, exit 1."""
    for argv in (("train", "--corpus", text_file, *TINY), ("sample", "--checkpoint", trained)):
        code, _, err = run(capsys, *argv, "--seed", -1)
        assert_one_line_error(code, err, "argument --seed: must be an integer >= 0, got '-1'", exit_code=2)


def test_an_empty_checkpoint_path_is_a_flag_error(capsys, tmp_path, text_file, monkeypatch):
    """Regression: train --checkpoint "" trained and saved nothing, without a word; eval, sample and
    complete read "" as the current directory."""
    monkeypatch.chdir(tmp_path)
    for argv in (("train", "--corpus", text_file, *TINY, "--steps", 1), ("eval",), ("sample",),
                 ("complete", "--questions", tmp_path / "q.txt")):
        code, out, err = run(capsys, *argv, "--checkpoint", "")
        assert_one_line_error(code, err, "argument --checkpoint: must be a directory path, got ''", exit_code=2)
        assert out == ""
    assert not os.listdir(tmp_path)


def test_unknown_cell_name(capsys, text_file):
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", "lstmm")
    assert_one_line_error(code, err, "lstmm", "unknown cell", "lstm")


def test_checkpoint_every_needs_a_checkpoint(capsys, text_file):
    """Regression: --checkpoint-every without --checkpoint was ignored silently."""
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--checkpoint-every", 2)
    assert_one_line_error(code, err, "--checkpoint-every", "--checkpoint DIR")


def test_text_is_the_corpus_option_and_zero_steps_says_so(capsys, tmp_path, text_file):
    """--text FILE (an alias) is --corpus FILE; with --steps 0 and no checkpoint the
    message does not speak of a checkpoint, and no empty --checkpoint directory is left (eval and
    --resume rejected it as an incomplete checkpoint)."""
    code, out, _ = run(capsys, "train", "--text", text_file, *TINY, "--steps", 0, "--checkpoint", tmp_path / "ck")
    assert code == 0 and "nothing trained yet" in out and "checkpoint" not in out.split("nothing to do")[1]
    assert not (tmp_path / "ck").exists()
    code, out, _ = run(capsys, "train", "--text", text_file, *TINY, "--steps", 2, "--eval-every", 2)
    assert code == 0 and text_file.name in out


def test_eval_on_another_text_notes_unknown_characters(capsys, tmp_path, trained):
    """Regression: eval on a corpus with characters the checkpoint never saw
    scored them as <unk> without a word."""
    other = tmp_path / "other.txt"
    other.write_text("ZQXJ 0123456789 ZQXJ\n" * 400, encoding="utf-8")
    code, out, err = run(capsys, "eval", "--checkpoint", trained, "--corpus", other, "--split", "valid")
    assert code == 0 and "bits/char" in out
    share = float(re.search(r"rnngraph: note: ([\d.]+)% of the valid split", err).group(1))
    assert share > 50  # nothing of it is in the tiny word corpus's vocabulary but the space and newline


def test_a_moved_corpus_file_says_to_give_corpus(capsys, tmp_path, text_file):
    """Regression: when the corpus file a checkpoint records had moved, eval and train --resume said
    only '<path>: no such file', and train --resume refused --corpus naming its new place."""
    old, new = tmp_path / "a.txt", tmp_path / "b.txt"
    old.write_bytes(text_file.read_bytes())
    ckpt = tmp_path / "ck"
    assert train(capsys, old, ckpt, steps=1)[0] == 0
    old.rename(new)
    code, _, err = run(capsys, "eval", "--checkpoint", ckpt)
    assert_one_line_error(code, err, f"{old}: no such file (the checkpoint's corpus; give --corpus FILE)",
                          exit_code=1)
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 2, "--no-progress")
    assert_one_line_error(code, err, f"{old}: no such file (the checkpoint's corpus; give --corpus FILE where it "
                                     f"is now)", exit_code=1)
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--corpus", new)
    assert code == 0 and "bits/char" in out, err
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 2, "--no-progress",
                         "--corpus", new)
    assert code == 0 and f"resumed {ckpt} at step 1" in out, err
    assert load_checkpoint(ckpt).config.corpus == str(new)  # its new place, recorded
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 3, "--no-progress",
                       "--corpus", text_file)  # the recorded file is there: another is refused as before
    assert_one_line_error(code, err, f"trained with --corpus {new}, not {text_file}: drop --corpus", exit_code=1)


def test_unknown_flag_is_one_line(capsys):
    code, _, err = run(capsys, "train", "--hiden", 8)
    assert_one_line_error(code, err, "--hiden", exit_code=2)
    code, _, err = run(capsys, "sample", "--checkpoint", "ck", "--lenght", 5)  # the command's help, not the top's
    assert_one_line_error(code, err, "unrecognized arguments: --lenght 5 (see `rnngraph sample --help`)", exit_code=2)
    code, _, err = run(capsys, "train", "--step", 5)  # a prefix of --steps: not taken for it
    assert_one_line_error(code, err, "unrecognized arguments: --step 5 (see `rnngraph train --help`)", exit_code=2)
    code, _, err = run(capsys, "--verbose")
    assert_one_line_error(code, err, "unrecognized arguments: --verbose (see `rnngraph --help`)", exit_code=2)


def test_resume_into_another_cell_or_shape(capsys, tmp_path, text_file, trained):
    for flag, value in (("--cell", "gru"), ("--hidden", 16), ("--layers", 2), ("--window", 4)):
        code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--checkpoint", trained,
                           "--resume", flag, value)
        assert_one_line_error(code, err, str(trained), flag)
    assert load_checkpoint(trained).step == 6  # untouched


def test_resume_with_another_optimizer_says_what_to_do(capsys, trained):
    """Regression: the --optimizer mismatch lacked the hint the other mismatches give."""
    code, _, err = run(capsys, "train", "--checkpoint", trained, "--resume", "--optimizer", "sgd", "--no-progress")
    assert_one_line_error(code, err, f"{trained}: the checkpoint was trained with --optimizer adam, not sgd: drop "
                                     f"--optimizer to resume it, or train into a new --checkpoint directory")


def test_checkpoint_with_params_of_another_shape(capsys, tmp_path, text_file, trained):
    other = tmp_path / "other"
    assert train(capsys, text_file, other, "--hidden", 5, steps=3)[0] == 0
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "config.json").write_bytes((trained / "config.json").read_bytes())
    (mixed / "params.npz").write_bytes((other / "params.npz").read_bytes())
    for argv in (("eval", "--checkpoint", mixed), ("sample", "--checkpoint", mixed),
                 ("train", "--checkpoint", mixed, "--resume", "--no-progress", "--steps", 9)):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, str(mixed), "layer0")


def test_existing_checkpoint_needs_resume(capsys, text_file, trained):
    code, _, err = train(capsys, text_file, trained)
    assert_one_line_error(code, err, str(trained), "--resume")


def test_resume_without_a_checkpoint(capsys, tmp_path, text_file):
    code, _, err = train(capsys, text_file, tmp_path / "none", "--resume")
    assert_one_line_error(code, err, "none", "no such checkpoint")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "config"])
def test_truncated_or_corrupt_checkpoint(capsys, tmp_path, trained, damage):
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    for name in ("config.json", "params.npz"):
        (ckpt / name).write_bytes((trained / name).read_bytes())
    if damage == "truncate":
        data = (ckpt / "params.npz").read_bytes()
        (ckpt / "params.npz").write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        data = bytearray((ckpt / "params.npz").read_bytes())
        data[200:260] = b"\x00" * 60  # inside the first array's data: the CRC check fails
        (ckpt / "params.npz").write_bytes(bytes(data))
    else:
        (ckpt / "config.json").write_text('{"format": 1, "cell": "lstm", ', encoding="utf-8")
    bad = "config.json" if damage == "config" else "params.npz"
    for argv in (("eval", "--checkpoint", ckpt), ("sample", "--checkpoint", ckpt),
                 ("train", "--checkpoint", ckpt, "--resume", "--no-progress")):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, bad, "corrupt")


def _copy_checkpoint(source, target):
    """A copy of checkpoint directory ``source`` at ``target`` (its two files)."""
    target.mkdir()
    for name in ("config.json", "params.npz"):
        (target / name).write_bytes((source / name).read_bytes())
    return target


@pytest.mark.parametrize("damage, said", [
    ("directory", "params.npz: is a directory, not a file: "),  # was 'missing'
    ("text", "params.npz: not an .npz archive (not a zip file)"),  # was NumPy's allow_pickle advice
    ("npy", "params.npz: not an .npz archive (a single .npy array)"),  # was "truncated or corrupt (TypeError: ...)"
    ("empty", "params.npz: empty (0 bytes), not an .npz archive"),  # was NumPy's 'No data left in file'
])
def test_a_params_npz_that_is_not_an_archive_says_what_it_is(capsys, tmp_path, trained, damage, said):
    ckpt = _copy_checkpoint(trained, tmp_path / "ck")
    params = ckpt / "params.npz"
    params.unlink()
    if damage == "directory":
        params.mkdir()
    elif damage == "text":
        params.write_text("hello world\n", encoding="utf-8")
    elif damage == "npy":
        with open(params, "wb") as f:
            np.save(f, np.zeros(3))
    else:
        params.write_bytes(b"")
    for argv in (("eval", "--checkpoint", ckpt), ("sample", "--checkpoint", ckpt),
                 ("train", "--checkpoint", ckpt, "--resume", "--no-progress")):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, f"{ckpt / 'params.npz'}: {said.partition(': ')[2]}", exit_code=1)
        assert "pickle" not in err and "missing" not in err


def _tamper(ckpt, key, value):
    """Set one element of array ``key`` of ``ckpt``'s params.npz to ``value``."""
    with np.load(ckpt / "params.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[key].reshape(-1)[1] = value
    np.savez(ckpt / "params.npz", **arrays)


def test_a_parameter_that_is_not_finite_is_refused_on_load(capsys, tmp_path, trained):
    """Regression: a NaN parameter made sample fail with NumPy's 'Probabilities contain NaN' and
    eval print 'test nan bits/char' with exit 0."""
    ckpt = _copy_checkpoint(trained, tmp_path / "ck")
    _tamper(ckpt, "param/layer0.U.weight", np.nan)
    questions = tmp_path / "q.txt"
    questions.write_text("".join(f"1{c}) the [{w}] sat\n" for c, w in zip("abcde", WORDS)), encoding="utf-8")
    for argv in (("eval", "--checkpoint", ckpt), ("sample", "--checkpoint", ckpt),
                 ("complete", "--checkpoint", ckpt, "--questions", questions),
                 ("train", "--checkpoint", ckpt, "--resume", "--no-progress")):
        code, out, err = run(capsys, *argv)
        assert_one_line_error(code, err, f"{ckpt / 'params.npz'}: parameter 'layer0.U.weight' holds 1 of its 256 "
                                         f"values that are not finite (NaN or inf)", exit_code=1)
        assert out == ""
    # the optimizer slots and states only a resumed run reads: eval runs, train --resume refuses
    ckpt = _copy_checkpoint(trained, tmp_path / "ck2")
    _tamper(ckpt, "state/layer0.h", np.inf)
    assert run(capsys, "eval", "--checkpoint", ckpt)[0] == 0
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--no-progress")
    assert_one_line_error(code, err, "params.npz: recurrent state 'layer0.h' holds 1 of its 32 values that are not "
                                     "finite", exit_code=1)


@pytest.mark.parametrize("field, value, said", [
    ("window", 0, "window must be a positive integer, got 0"),  # was a ZeroDivisionError traceback in eval
    ("streams", -1, "streams must be a positive integer, got -1"),  # these four were accepted silently
    ("dropout", 1.5, "dropout must be a number in [0, 1), got 1.5"),
    ("level", "byte", 'level must be "char" or "word", got "byte"'),  # JSON's spelling, not Python's
    ("steps", True, "steps must be null or an integer >= 0, got true"),  # was 'got True'
    ("clip", "1", 'clip must be null (no clipping) or a positive number, got "1"'),
    ("precision", True, 'precision must be one of "fp32", "tf32", "bf16", got true'),
    ("optimizer", "adam", "optimizer must be an object with a name and an lr"),
    ("optimizer", {"name": "adam", "lr": -1}, 'optimizer {"name": "adam", "lr": -1}: Adam: lr must be a positive '
                                              "number, got -1"),
    ("corpus_sha256", "abc", 'corpus_sha256 must be null or a SHA-256 digest in hex, got "abc"'),
])
def test_a_config_field_out_of_range_is_one_line_naming_the_file_and_field(capsys, tmp_path, trained, field, value,
                                                                           said):
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    config = json.loads((trained / "config.json").read_text(encoding="utf-8"))
    (ckpt / "config.json").write_text(json.dumps({**config, field: value}), encoding="utf-8")
    (ckpt / "params.npz").write_bytes((trained / "params.npz").read_bytes())
    for argv in (("eval", "--checkpoint", ckpt), ("sample", "--checkpoint", ckpt),
                 ("train", "--checkpoint", ckpt, "--resume", "--no-progress")):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, f"{ckpt / 'config.json'}: unreadable or corrupt config ({said}")


def test_a_newer_checkpoint_format_says_so(capsys, tmp_path, trained):
    """A config.json of a later format is named as written by a newer rnngraph (it was called
    "unreadable or corrupt")."""
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    config = json.loads((trained / "config.json").read_text(encoding="utf-8"))
    (ckpt / "config.json").write_text(json.dumps({**config, "format": 99}), encoding="utf-8")
    (ckpt / "params.npz").write_bytes((trained / "params.npz").read_bytes())
    code, _, err = run(capsys, "eval", "--checkpoint", ckpt)
    assert_one_line_error(code, err, f"{ckpt / 'config.json'}: checkpoint format 99, written by a newer rnngraph")


CELL_FILES = {
    # the tracing API cannot build a zero-delay cycle; these are the ways a user would try to
    "zero_delay_state.py": ("import rnngraph as rg\n\n@rg.cell\n"
                            "def loop(x, h: rg.State(delay=0), *, hidden):\n"
                            "    return h, {'h': h}\n", "delay >= 1"),
    "zero_delay_read.py": ("import rnngraph as rg\n\n@rg.cell\n"
                           "def loop(x, h: rg.State, *, hidden):\n"
                           "    h_next = rg.tanh(rg.linear(x, hidden) + h.delayed(0))\n"
                           "    return h_next, {'h': h_next}\n", "delay must be >= 1"),
    "cycle.py": ("import rnngraph as rg\n\n@rg.cell\n"
                 "def loop(x, h: rg.State, *, hidden):\n"
                 "    raise rg.CycleError('cycle a -> b -> a has total delay 0')\n", "total delay 0"),
    "shapes.py": ("import rnngraph as rg\n\n@rg.cell\n"
                  "def loop(x, h: rg.State, *, hidden):\n"
                  "    h_next = rg.tanh(rg.linear(x, hidden + 1) + h)\n"
                  "    return h_next, {'h': h_next}\n", "op add"),
    "syntax.py": ("import rnngraph as rg\n\ndef loop(x:\n", "syntax error"),
    "not_a_cell.py": ("def loop(x, h, *, hidden):\n    return x\n", "not an @rg.cell"),
    "raises.py": ("import rnngraph as rg\nraise RuntimeError('boom')\n", "RuntimeError"),
}


@pytest.mark.parametrize("name", sorted(CELL_FILES))
def test_bad_custom_cell_file(capsys, tmp_path, text_file, name):
    source, needle = CELL_FILES[name]
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", f"{path}:loop")
    assert_one_line_error(code, err, name, needle)


def test_custom_cell_file_missing_or_without_the_function(capsys, tmp_path, text_file):
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", f"{tmp_path}/gone.py:cell")
    assert_one_line_error(code, err, "gone.py", "no such file")
    path = tmp_path / "cells.py"
    path.write_text("import rnngraph as rg\n", encoding="utf-8")
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", f"{path}:nope")
    assert_one_line_error(code, err, "cells.py", "no function 'nope'")


def test_a_cell_file_without_its_function_lists_the_cells_there(capsys, tmp_path, text_file):
    """Regression: ``--cell file.py`` said only to name the function, not which ones the file has
    (as the error for a function it lacks does), and for a file that is not there the same."""
    path = tmp_path / "cells.py"
    path.write_text(MGU, encoding="utf-8")
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", path)
    assert_one_line_error(code, err, f"--cell {path}: name the cell function too, as {path}:FUNCTION (@rg.cell "
                                     f"functions there: mgu)", exit_code=1)
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--cell", tmp_path / "gone.py")
    assert_one_line_error(code, err, f"{tmp_path / 'gone.py'}: no such file (from --cell ", exit_code=1)


def test_bad_sample_and_eval_arguments(capsys, trained, tmp_path):
    code, _, err = run(capsys, "sample", "--checkpoint", trained, "--temperature", 0)
    assert_one_line_error(code, err, "--temperature", exit_code=2)
    code, _, err = run(capsys, "eval", "--checkpoint", tmp_path / "missing")
    assert_one_line_error(code, err, "missing", "no such checkpoint")


# ---- the real entry point ------------------------------------------------------------------------
def test_python_m_rnngraph_without_traceback(tmp_path, text_file):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])}
    env.pop("RNNGRAPH_DEBUG", None)
    ok = subprocess.run([sys.executable, "-m", "rnngraph", "train", "--corpus", str(text_file), *TINY,
                         "--steps", "3", "--eval-every", "0", "--checkpoint", str(tmp_path / "ck")],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "valid bits/char" in ok.stdout and "Traceback" not in ok.stderr
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not text")
    res = subprocess.run([sys.executable, "-m", "rnngraph", "train", "--corpus", str(bad), *TINY],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [res.stderr.strip()] and "bad.txt" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("signum, status, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
                         ids=["ctrl-c", "sigterm"])
def test_a_signal_on_python_m_rnngraph_finishes_the_step_and_saves(tmp_path, text_file, signum, status, word):
    """A real Ctrl-C (SIGINT) or SIGTERM (`kill`, `timeout`, a job scheduler) on a running
    `python -m rnngraph train`: exit 128 + the signal, one line, and the checkpoint it names loads
    (regression for SIGTERM: the process died at once, exit -15, with the last periodic checkpoint only)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])}
    ckpt = tmp_path / "ck"

    def default_signals():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-m", "rnngraph", "train", "--corpus", str(text_file), *TINY,
                             "--steps", "1000000", "--eval-every", "2", "--checkpoint", str(ckpt)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_signals)
    try:
        for line in proc.stdout:  # wait until training runs
            if line.startswith("step"):
                break
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status, err
    assert "Traceback" not in err
    m = re.fullmatch(rf"rnngraph: {word} at step ([\d,]+); {re.escape(str(ckpt))} holds step ([\d,]+) "
                     rf"\(to go on: rnngraph train --checkpoint {re.escape(str(ckpt))} --resume\)",
                     err.strip())
    assert m, err
    assert m.group(1) == m.group(2)  # the step under way was finished and saved
    assert load_checkpoint(ckpt).step == int(m.group(2).replace(",", ""))
    assert not [f for f in os.listdir(ckpt) if f.endswith(".tmp")]


#: ``python -c`` of `rnngraph train` (argv) whose setup sends the process a signal (argv[1]) as it compiles the
#: step, before any training step.
_SIGNAL_IN_SETUP = """
import os, signal, sys, time
import rnngraph.cli.train as train
from rnngraph import cli

def compile_then_stop(*args, **kwargs):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(60)

train._compile = compile_then_stop
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("signum, code, word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_signal_while_train_sets_up_is_one_line(tmp_path, text_file, signum, code, word):
    """Ctrl-C and SIGTERM before the first step: one line alike, ``rnngraph: interrupted`` (130) or
    ``rnngraph: terminated`` (143); no checkpoint directory is left (regression: SIGTERM there killed
    the process at once, exit -15, without a line)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])}
    ckpt = tmp_path / "ck"

    def default_signals():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    res = subprocess.run([sys.executable, "-c", _SIGNAL_IN_SETUP, signum, "train", "--corpus", str(text_file),
                          *TINY, "--steps", "3", "--checkpoint", str(ckpt)],
                         capture_output=True, text=True, env=env, timeout=120, preexec_fn=default_signals)
    assert (res.returncode, res.stderr) == (code, f"rnngraph: {word}\n")
    assert res.stdout == "" and not ckpt.exists()


def test_a_closed_pipe_ends_the_command_quietly(monkeypatch, capsys):
    """`rnngraph ... | head`: when the reader of stdout goes away, writing raises BrokenPipeError;
    the command ends with 141 (128 + SIGPIPE, a shell's status for it) and nothing on stderr,
    not an "error: [Errno 32] Broken pipe" line (before: exit 1 with that line)."""
    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["schedule", "lstm"]) == 141
    assert capsys.readouterr().err == ""


def test_errors_speak_in_flags_and_name_a_file_given_as_checkpoint(capsys, tmp_path, text_file, monkeypatch):
    import rnngraph.devices as devices
    monkeypatch.setattr(devices, "cuda_available", lambda simulator_ok=False: False)
    flags = [f if f != "cpu" else "cuda" for f in TINY]  # --device cuda
    code, _, err = run(capsys, "train", "--corpus", text_file, *flags, "--steps", "1", "--checkpoint", tmp_path / "ck")
    assert code == 1 and "--device cuda but numba finds no CUDA GPU" in err and "use --device cpu" in err
    code, _, err = run(capsys, "sample", "--checkpoint", text_file)
    assert code == 1 and f"{text_file} is a file: a checkpoint is the directory" in err


def test_an_error_in_a_cell_file_is_one_line_with_its_line(capsys, tmp_path, text_file):
    cell = tmp_path / "npcell.py"
    cell.write_text("import numpy as np\nimport rnngraph as rg\n\n@rg.cell\n"
                    "def npcell(x, h: rg.State, *, hidden: int):\n"
                    "    z = rg.linear(x, hidden, name='W') + rg.linear(h, hidden, name='U')\n"
                    "    h_next = np.tanh(z)\n"
                    "    return h_next, {'h': h_next}\n")
    code, _, err = train(capsys, text_file, tmp_path / "ck", "--cell", f"{cell}:npcell", steps=1)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"NumPy's tanh was applied to a traced Value (in cell 'npcell', {cell}:7)" in err


# ---- help and README ---------------------------------------------------------------------------
def test_bench_help_says_what_it_times_with_and_without_a_gpu(capsys):
    """Regression: `bench --help` said "LSTM H=512 T=100 S=1, 64" only, while on the CPU it times a
    small char-LM step of the NumPy backend."""
    from rnngraph.bench import QUICK_CPU, QUICK_GPU
    code, out, _ = run(capsys, "bench", "--help")
    text = " ".join(out.split())
    gpu, cpu = QUICK_GPU[0][0], QUICK_CPU[0][0]
    assert code == 0
    assert f"on a GPU against cuDNN (LSTM H={gpu.H} T={gpu.T} S=1 and 64)" in text
    assert f"the NumPy backend alone (a char-LM step, LSTM H={cpu.H} T={cpu.T} S={cpu.S})" in text


def test_readme_lists_every_command():
    """Regression: the README's Quickstart listed train, sample, eval, schedule, bench: not complete."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    listed = re.search(r"the command line is `\.venv/bin/rnngraph`\s*\(([^)]*)\)", readme).group(1)
    assert re.findall(r"`(\w+)`", listed) == [c.name for c in cli.COMMANDS]
    for c in cli.COMMANDS:  # and each has an example in 'The command line'
        assert f"\nrnngraph {c.name} " in readme, c.name


def test_resume_on_a_text_of_another_vocabulary_keeps_the_checkpoints(capsys, tmp_path, text_file):
    """train --resume on an edited word-level text (the vocabulary, ordered by frequency, differs
    after almost any edit) or on another text goes on with the checkpoint's vocabulary, its tokens
    outside it fed as <unk>, and says so with their share (a regression: it refused with 'its
    vocabulary differs' and no way forward)."""
    corpus, ckpt = tmp_path / "w.txt", tmp_path / "ck"
    text = text_file.read_text(encoding="utf-8")
    corpus.write_text(text, encoding="utf-8")
    assert train(capsys, corpus, ckpt, "--level", "word", steps=2)[0] == 0
    kept = load_checkpoint(ckpt).vocab
    corpus.write_text("".join(line + " zebra quux\n" for line in text.splitlines()), encoding="utf-8")  # new words
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 3, "--no-progress")
    assert code == 0 and f"resumed {ckpt} at step 2" in out, err
    share = re.search(r"rnngraph: note: the vocabulary of \S+ differs from the checkpoint's: training goes on "
                      rf"with the checkpoint's {len(kept):,} words, and ([\d.]+)% of the training split's words "
                      r"are fed as <unk>", err)
    assert share and float(share.group(1)) > 1, err
    after = load_checkpoint(ckpt)
    assert after.step == 3 and after.vocab == kept
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt)  # the same file, now the checkpoint's text:
    assert code == 0 and re.search(r"rnngraph: note: [\d.]+% of the test split's words are not in the "
                                   r"checkpoint's vocabulary", err), err  # its <unk>s are still said


def test_an_edited_corpus_is_noted_by_eval_and_resume(capsys, tmp_path, text_file):
    """A checkpoint keeps its text's SHA-256 (config corpus_sha256): eval and train --resume on the
    same file say nothing; after the file was edited (the splits move, silently before) they say
    so in a note, and the resumed run's checkpoint keeps the new text's."""
    from rnngraph.data import Corpus
    corpus, ckpt = tmp_path / "c.txt", tmp_path / "ck"
    text = text_file.read_text(encoding="utf-8")
    corpus.write_text(text, encoding="utf-8")
    assert train(capsys, corpus, ckpt)[0] == 0
    assert load_checkpoint(ckpt).config.corpus_sha256 == Corpus.from_file(corpus).fingerprint()
    code, _, err = run(capsys, "eval", "--checkpoint", ckpt)
    assert code == 0 and "has changed" not in err
    corpus.write_text(text + " ".join(WORDS[:12]) + "\n", encoding="utf-8")  # the same vocabulary
    code, _, err = run(capsys, "eval", "--checkpoint", ckpt)
    assert code == 0 and f"rnngraph: note: {corpus} has changed since {ckpt} was written" in err
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 8, "--no-progress")
    assert code == 0 and f"rnngraph: note: {corpus} has changed since {ckpt}" in err
    assert load_checkpoint(ckpt).config.corpus_sha256 == Corpus.from_file(corpus).fingerprint()
    assert "has changed" not in run(capsys, "eval", "--checkpoint", ckpt)[2]
