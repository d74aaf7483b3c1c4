"""The command line checks the memory its steps will need before it allocates them (rnngraph.memory)."""
import numpy as np
import pytest

import rnngraph.runtime as runtime
from cli_helpers import TINY, assert_one_line_error, run, train
from rnngraph import cli
from rnngraph.cli import step_setup  # where the memory check and the device choice look these up
from rnngraph.data import Corpus
from rnngraph.lm import build_vocab
from rnngraph.memory import format_bytes

GiB = 2**30


@pytest.fixture
def no_allocation(monkeypatch):
    """Initialising a step's parameters (its first large allocation) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a step was compiled")
    monkeypatch.setattr(runtime, "init_params", refuse)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, text_file):
    ckpt = tmp_path_factory.mktemp("ck") / "run"
    assert cli.main(["train", "--corpus", str(text_file), *TINY, "--steps", "2", "--checkpoint", str(ckpt)]) == 0
    return ckpt


def test_hidden_200000_fails_at_once_in_one_line(capsys, monkeypatch, text_file, no_allocation):
    """Before: a NumPy MemoryError traceback from the parameter initialisation."""
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 23 * GiB)
    code, out, err = run(capsys, "train", "--corpus", text_file, "--hidden", 200000, "--device", "cpu",
                         "--no-progress")
    V, E, H = len(build_vocab("char", Corpus.from_file(text_file).train)), 32, 200000
    assert_one_line_error(code, err, "this machine has 23 GiB available: lower --hidden", exit_code=1)
    assert err.startswith(f"rnngraph: error: --hidden 200000 --embed 32 --layers 1 --window 64 --streams 32 with a "
                          f"vocabulary of {V} chars needs about ")
    assert err.endswith(": lower --hidden\n")  # --hidden alone: the others are small
    assert out == ""
    # by hand: embedding V x E, W 4H x E + 4H, U 4H x H + 4H, head V x H + V (E = 32, the default);
    # float32 parameters, gradients and Adam's m and v of the training step, and the
    # parameters of the validation step: 5 x 4 bytes each
    P = V * E + 4 * H * E + 4 * H + 4 * H * H + 4 * H + V * H + V
    assert f"(parameters, gradients and optimizer slots {format_bytes(20 * P)}, " in err
    assert format_bytes(20 * P) == "2.9 TiB"


def test_an_absurd_size_says_more_than_1000_pib(capsys, monkeypatch, text_file, no_allocation):
    """Regression: --hidden 99999999999999999999999 printed 'needs about 994759830064140217366544505634816
    PiB' (and two more such figures)."""
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 23 * GiB)
    code, _, err = run(capsys, "train", "--corpus", text_file, "--hidden", "9" * 23, "--device", "cpu",
                       "--no-progress")
    assert_one_line_error(code, err, " needs more than 1,000 PiB of memory (parameters, gradients and optimizer "
                                     "slots more than 1,000 PiB, activations and temporaries more than 1,000 PiB); "
                                     "this machine has 23 GiB available: lower --hidden", exit_code=1)


def test_the_gpu_check_names_its_free_memory(capsys, monkeypatch, text_file, no_allocation):
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 2**50)
    monkeypatch.setattr(step_setup, "available_device_bytes", lambda: GiB)
    monkeypatch.setattr(step_setup, "resolve_device", lambda choice: "cuda")  # as on a machine with a GPU
    code, _, err = run(capsys, "train", "--corpus", text_file, "--hidden", 20000, "--device", "cuda",
                       "--no-progress")
    assert_one_line_error(code, err, "--hidden 20000", "of GPU memory", "the GPU has 1.0 GiB free: lower --hidden")


def test_word_level_names_max_words_too(capsys, monkeypatch, text_file, no_allocation):
    """Where every size at its least would not fit either, the advice names them all."""
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 1024)
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--level", "word", "--hidden", 2000)
    assert_one_line_error(code, err, "this machine has 1.0 KiB available: lower --hidden, --embed, --layers, "
                                     "--max-words, --window or --streams")


def test_the_advice_names_the_flag_that_takes_the_memory(capsys, monkeypatch, text_file, no_allocation):
    """Regression: --embed 100000000 --hidden 8 (3.3 TiB, the embedding's) was told to lower --hidden,
    --layers, --window or --streams, none of which could make it fit, and --embed was not named."""
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 23 * GiB)
    code, _, err = run(capsys, "train", "--corpus", text_file, "--embed", 100000000, "--hidden", 8, "--steps", 1,
                       "--device", "cpu", "--no-progress")
    V = len(build_vocab("char", Corpus.from_file(text_file).train))
    assert_one_line_error(code, err, f"--hidden 8 --embed 100000000 --layers 1 --window 64 --streams 32 with a "
                                     f"vocabulary of {V} chars needs about ", " TiB of memory", exit_code=1)
    assert err.endswith("; this machine has 23 GiB available: lower --embed\n")
    # two that each take more than there is: both
    code, _, err = run(capsys, "train", "--corpus", text_file, "--embed", 100000000, "--hidden", 200000,
                       "--no-progress")
    assert err.endswith(": lower --hidden and --embed\n") or err.endswith(": lower --embed and --hidden\n"), err


def test_word_level_names_max_words_when_the_vocabulary_takes_the_memory(capsys, monkeypatch, tmp_path,
                                                                         no_allocation):
    """A vocabulary of 2,000 words at --hidden 8 --embed 4: its embedding, head and logits are the
    memory, so --max-words is what to lower."""
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 8)) for _ in range(2000)]
    path = tmp_path / "many.txt"
    path.write_text("\n".join(" ".join(words[i:i + 10]) for i in range(0, 2000, 10)) * 3 + "\n", encoding="utf-8")
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 256 * 2**10)
    code, _, err = run(capsys, "train", "--corpus", path, *TINY, "--level", "word")
    assert_one_line_error(code, err, "--hidden 8 --embed 4 --layers 1 --window 8 --streams 4 with a vocabulary of ",
                          " words needs about ", "this machine has 256 KiB available: lower --max-words", exit_code=1)
    assert err.endswith("lower --max-words\n")


def test_sample_and_eval_check_before_compiling(capsys, monkeypatch, checkpoint, no_allocation):
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 1024)
    code, out, err = run(capsys, "sample", "--checkpoint", checkpoint)
    assert_one_line_error(code, err, f"sampling from {checkpoint} (lstm x1, hidden 8, embed 4) needs about",
                          "this machine has 1.0 KiB available: sample on a machine with more memory")
    assert out == ""  # not even the prime
    code, _, err = run(capsys, "eval", "--checkpoint", checkpoint, "--streams", 3, "--window", 5)
    assert_one_line_error(code, err, f"evaluating {checkpoint} (lstm x1, hidden 8, embed 4) with --window 5 "
                                     f"--streams 3 needs about", ": lower --window or --streams")


def test_resuming_cannot_shrink_so_it_says_so(capsys, monkeypatch, tmp_path, text_file):
    ckpt = tmp_path / "ck"
    assert train(capsys, text_file, ckpt, steps=1)[0] == 0
    monkeypatch.setattr(step_setup, "available_host_bytes", lambda: 1024)
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 2, "--no-progress")
    assert_one_line_error(code, err, f"{ckpt} (--hidden 8 --embed 4 --layers 1 --window 8 --streams 4 with a "
                                     f"vocabulary of ", " chars) needs about",
                          "resume it on a machine with more memory")


def test_an_allocation_that_fails_anyway_is_one_line(capsys, monkeypatch, text_file):
    """Near the limit the estimate can pass a run that then fails in NumPy: still one line."""
    def fail(*args, **kwargs):
        raise MemoryError("Unable to allocate 596. GiB for an array with shape (800000, 200000) and data type "
                          "float64")
    monkeypatch.setattr(runtime, "init_params", fail)
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY)
    assert_one_line_error(code, err, "out of memory (Unable to allocate 596. GiB for an array with shape "
                                     "(800000, 200000) and data type float64): lower --hidden, --layers, "
                                     "--window or --streams", exit_code=1)
