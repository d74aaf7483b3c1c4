"""``--cell-arg NAME=VALUE``: a cell's keyword arguments besides ``hidden`` from the command line, kept in
the checkpoint so that ``train --resume``, ``sample`` and ``eval`` make the same cell (regression: a cell
``def cell(x, h, *, hidden, alpha)`` could not be given ``alpha`` at all)."""
import json

import pytest

from cli_helpers import assert_one_line_error, run, train
from rnngraph.lm import load_checkpoint

#: A leaky cell whose ``alpha`` is required; it refuses any value but 0.25, so a cell rebuilt without the
#: stored value (or with another) fails loudly.
LEAKY = ("import rnngraph as rg\n\n"
         "@rg.cell\n"
         "def leaky(x, h: rg.State, *, hidden: int, alpha: float, act: str = 'tanh'):\n"
         "    if alpha != 0.25 or act != 'tanh':\n"
         "        raise ValueError(f'alpha={alpha!r}, act={act!r}')\n"
         "    n = rg.tanh(rg.linear(x, hidden, name='W') + rg.linear(h, hidden, bias=False, name='U'))\n"
         "    h_next = (1 - alpha) * h + alpha * n\n"
         "    return h_next, {'h': h_next}\n")


@pytest.fixture
def leaky(tmp_path):
    path = tmp_path / "cells.py"
    path.write_text(LEAKY, encoding="utf-8")
    return f"{path}:leaky"


def test_a_required_keyword_is_given_and_kept_for_resume_sample_and_eval(capsys, tmp_path, text_file, leaky):
    ckpt = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ckpt, "--cell", leaky, "--cell-arg", "alpha=0.25",
                           "--cell-arg", "act=tanh", steps=3)
    assert code == 0, err
    assert out.startswith("train cells.py:leaky(alpha=0.25, act='tanh') x1"), out
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    assert config["cell_args"] == {"alpha": 0.25, "act": "tanh"}
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 4, "--no-progress")
    assert code == 0, err
    assert load_checkpoint(ckpt).step == 4 and load_checkpoint(ckpt).config.cell_args["alpha"] == 0.25
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, "--length", 5, "--seed", 1)
    assert code == 0, err
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--split", "valid")
    assert code == 0 and "bits/char" in out, err


def test_a_resumed_run_refuses_other_cell_args(capsys, tmp_path, text_file, leaky):
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, "--cell", leaky, "--cell-arg", "alpha=0.25", steps=1)[0] == 0
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 2, "--cell-arg", "alpha=0.5")
    assert_one_line_error(code, err, "trained with --cell-arg alpha=0.25, not --cell-arg alpha=0.5",
                          "drop --cell-arg")


def test_a_missing_required_keyword_names_it_and_the_option(capsys, tmp_path, text_file, leaky):
    """Before: `cell 'leaky' needs the keyword argument(s) alpha (given: hidden)`, with no way to give it."""
    code, out, err = train(capsys, text_file, tmp_path / "ck", "--cell", leaky, steps=1)
    assert_one_line_error(code, err, "needs the keyword argument alpha", "--cell-arg alpha=VALUE", exit_code=1)


@pytest.mark.parametrize("arg, needles", [
    ("beta=1", ["--cell-arg beta=1", "no keyword argument 'beta'",
                "its keyword arguments besides hidden: alpha, act)"]),
    ("hidden=3", ["--cell-arg hidden=3", "--hidden"]),
])
def test_a_keyword_the_cell_does_not_take_names_its_keywords(capsys, tmp_path, text_file, leaky, arg, needles):
    code, out, err = train(capsys, text_file, tmp_path / "ck", "--cell", leaky, "--cell-arg", "alpha=0.25",
                           "--cell-arg", arg, steps=1)
    assert_one_line_error(code, err, *needles, exit_code=1)


@pytest.mark.parametrize("args, needles, exit_code", [
    (["alpha"], ["argument --cell-arg", "NAME=VALUE", "'alpha'"], 2),
    (["alpha={1, 2}"], ["argument --cell-arg", "a set is not a value JSON holds"], 2),
    (["alpha=1e999"], ["argument --cell-arg", "'alpha=1e999': inf is not a finite number"], 2),
    (["alpha=0.25", "alpha=0.5"], ["--cell-arg alpha given twice (0.25 and 0.5)"], 1),
])
def test_malformed_cell_args(capsys, tmp_path, text_file, leaky, args, needles, exit_code):
    extra = [a for value in args for a in ("--cell-arg", value)]
    code, out, err = train(capsys, text_file, tmp_path / "ck", "--cell", leaky, *extra, steps=1)
    assert_one_line_error(code, err, *needles, exit_code=exit_code)


def test_values_are_python_literals_else_text():
    from rnngraph.cli.arguments import cell_arg
    assert cell_arg("a=0.5") == ("a", 0.5) and cell_arg("a=3") == ("a", 3) and cell_arg("a=True") == ("a", True)
    assert cell_arg("a=tanh") == ("a", "tanh") and cell_arg("a='3'") == ("a", "3") and cell_arg("a=''") == ("a", "")
    assert cell_arg("a=(1, 2)") == ("a", [1, 2])  # as the checkpoint's JSON gives it back
    assert cell_arg("a=-1") == ("a", -1) and cell_arg("a=.5") == ("a", 0.5) and cell_arg("a=None") == ("a", None)
    assert cell_arg("a={'k': (1,)}") == ("a", {"k": [1]})


@pytest.mark.parametrize("text, needle", [
    ("a=", "'a=': the value is empty"),
    ("a= ", "the value is empty"),
    ("flag=false", "'flag=false': write False, not false"),
    ("flag=true", "write True, not true"),
    ("a=null", "write None, not null"),
    ("a=nan", "'a=nan': nan is not a finite number"),
    ("a=-inf", "-inf is not a finite number"),
    ("a=Infinity", "Infinity is not a finite number"),
    ("a=1e999", "inf is not a finite number"),
    ("a=[1.0, -1e999]", "-inf is not a finite number"),
    ("a=[1,2", "'a=[1,2': [1,2 is not a Python literal"),
    ("a=(1", "(1 is not a Python literal"),
    ("a='x", "'x is not a Python literal"),
    ("a=3x", "3x is not a Python literal"),
    ("a=-tanh", "-tanh is not a Python literal"),
    ("a=+", "+ is not a Python literal"),
    ("a={1: 2}", "dict keys must be strings (quoted: '1'), not 1"),
    ("a=1j", "a complex is not a value JSON holds"),
])
def test_values_that_are_refused(text, needle):
    """Before, each of these was text (``false`` a truthy string, a typo such as ``[1,2`` the string
    itself), an empty string, or a non-finite float written as non-standard JSON (``Infinity``)."""
    import argparse

    from rnngraph.cli.arguments import cell_arg
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        cell_arg(text)
    assert needle in str(exc.value)


def test_a_refused_value_is_a_usage_error_naming_the_option(capsys):
    code, out, err = run(capsys, "schedule", "lstm", "--hidden", 4, "--cell-arg", "flag=false")
    assert_one_line_error(code, err, "argument --cell-arg: 'flag=false': write False, not false", exit_code=2)


def test_schedule_takes_cell_args(capsys, leaky):
    code, out, err = run(capsys, "schedule", leaky, "--hidden", 8, "--cell-arg", "alpha=0.25")
    assert code == 0 and out, err
    code, out, err = run(capsys, "schedule", leaky, "--hidden", 8)
    assert_one_line_error(code, err, "--cell-arg alpha=VALUE")


def test_train_help_lists_cell_arg(capsys):
    code, out, err = run(capsys, "train", "--help")
    assert code == 0 and "--cell-arg NAME=VALUE" in out, out


#: Cells with leaky's parameters (W with a bias, U without): ``plain`` takes no keyword but hidden, ``beta`` a
#: required ``beta`` it refuses unless 0.5.
OTHERS = ("import rnngraph as rg\n\n"
          "@rg.cell\n"
          "def plain(x, h: rg.State, *, hidden: int):\n"
          "    n = rg.tanh(rg.linear(x, hidden, name='W') + rg.linear(h, hidden, bias=False, name='U'))\n"
          "    return n, {'h': n}\n\n"
          "@rg.cell\n"
          "def beta(x, h: rg.State, *, hidden: int, beta: float):\n"
          "    if beta != 0.5:\n"
          "        raise ValueError(f'beta={beta!r}')\n"
          "    n = rg.tanh(rg.linear(x, hidden, name='W') + rg.linear(h, hidden, bias=False, name='U'))\n"
          "    return n, {'h': n}\n")


def _checkpoint_commands(ckpt, tmp_path):
    """sample's, eval's and complete's argv on ``ckpt``."""
    questions = tmp_path / "q.txt"
    words = ["cat", "dog", "hat", "mat", "rat"]
    questions.write_text("".join(f"1{c}) the [{w}] sat\n" for c, w in zip("abcde", words)), encoding="utf-8")
    return [["sample", "--checkpoint", ckpt, "--length", 5], ["eval", "--checkpoint", ckpt, "--split", "valid"],
            ["complete", "--checkpoint", ckpt, "--questions", questions]]


def test_another_cell_is_given_other_cell_args_or_none(capsys, tmp_path, text_file, leaky):
    """Regression: ``sample --cell gru`` of a checkpoint trained with --cell-arg failed with `cell gru takes no
    keyword argument 'alpha'`, and sample, eval and complete had no --cell-arg to replace the stored values."""
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, "--cell", leaky, "--cell-arg", "alpha=0.25", steps=1)[0] == 0
    others = tmp_path / "others.py"
    others.write_text(OTHERS, encoding="utf-8")
    for argv in _checkpoint_commands(ckpt, tmp_path):
        code, out, err = run(capsys, *argv, "--cell", "gru")
        assert_one_line_error(code, err, f"--cell-arg alpha=0.25, stored in {ckpt}: cell gru takes no keyword "
                              "argument 'alpha' (its keyword arguments besides hidden: none)",
                              f"those {ckpt} was trained with: --cell-arg NAME=VALUE replaces them all, "
                              "--no-cell-args gives none", exit_code=1)
        code, out, err = run(capsys, *argv, "--cell", f"{others}:plain", "--no-cell-args")
        assert code == 0 and out, err
        code, out, err = run(capsys, *argv, "--cell", f"{others}:beta", "--cell-arg", "beta=0.5")
        assert code == 0 and out, err
        code, out, err = run(capsys, *argv, "--cell", f"{others}:beta")
        assert_one_line_error(code, err,
                              "takes no keyword argument 'alpha' (its keyword arguments besides hidden: beta)",
                              "--cell-arg NAME=VALUE replaces them all", exit_code=1)
        code, out, err = run(capsys, *argv, "--cell-arg", "alpha=0.5")  # the stored cell, another value
        assert_one_line_error(code, err, "alpha=0.5", exit_code=1)


@pytest.mark.parametrize("command", ["sample", "eval", "complete"])
def test_checkpoint_commands_help_lists_cell_arg(capsys, command):
    code, out, err = run(capsys, command, "--help")
    words = " ".join(out.split())
    assert code == 0 and "--cell-arg NAME=VALUE" in out and "--no-cell-args" in out, out
    assert "replace the checkpoint's stored --cell-arg values wholesale" in words, out
