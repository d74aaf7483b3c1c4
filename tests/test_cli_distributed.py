"""``rnngraph train --distributed`` under torchrun (gloo, CPU): the checkpoint of 2 processes is
the one process's, and it resumes on 3 processes and on 1; the flags' errors."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from cli_helpers import TINY, assert_one_line_error, run
from rnngraph.lm import load_checkpoint
from distributed_workers import free_port

ROOT = Path(__file__).resolve().parent.parent
FLAGS = [*TINY, "--dtype", "float64", "--dropout", "0.2", "--eval-every", "2"]


def torchrun(nproc: int, *argv, program=("-m", "rnngraph")) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node nproc -m rnngraph train --distributed *argv`` (or another
    ``program``) on a free port; its process group is killed should it run past 120 s (no process
    is left behind)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
           "127.0.0.1", "--master-port", str(free_port()), *map(str, program), "train", "--distributed",
           *map(str, argv)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            process_group=0)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun ran past 120 s: {err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def assert_same_checkpoint(a: Path, b: Path) -> None:
    x, y = np.load(a / "params.npz"), np.load(b / "params.npz")
    assert sorted(x.files) == sorted(y.files)
    for k in x.files:
        np.testing.assert_allclose(x[k], y[k], rtol=0, atol=1e-12, err_msg=k)


def test_two_processes_checkpoint_as_one_and_resume_on_three_and_one(capsys, tmp_path, text_file):
    for steps in (4, 6):
        code, _, err = run(capsys, "train", "--corpus", text_file, *FLAGS, "--steps", steps,
                           "--checkpoint", tmp_path / f"one-{steps}")
        assert code == 0, err
    two = torchrun(2, "--corpus", text_file, *FLAGS, "--steps", 4, "--checkpoint", tmp_path / "two")
    assert two.returncode == 0, two.stderr
    assert two.stdout.count("checkpoint: ") == 1 and "2 processes" in two.stdout, two.stdout  # rank 0 prints
    assert_same_checkpoint(tmp_path / "two", tmp_path / "one-4")
    (tmp_path / "three").mkdir()
    for name in ("config.json", "params.npz"):
        (tmp_path / "three" / name).write_bytes((tmp_path / "two" / name).read_bytes())
    three = torchrun(3, "--corpus", text_file, *TINY, "--steps", 6, "--checkpoint", tmp_path / "three", "--resume")
    assert three.returncode == 0, three.stderr
    assert_same_checkpoint(tmp_path / "three", tmp_path / "one-6")
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--steps", 6, "--checkpoint",
                       tmp_path / "two", "--resume")
    assert code == 0, err
    assert_same_checkpoint(tmp_path / "two", tmp_path / "one-6")


def test_a_note_is_said_once_not_by_every_process(capsys, tmp_path, text_file):
    """A resumed cosine run given another --steps notes the schedule's move: process 0 says it, the
    others do not (a regression: with notes on stderr, every process printed it)."""
    ck = tmp_path / "ck"
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--steps", 2, "--lr-schedule", "cosine",
                       "--checkpoint", ck)
    assert code == 0, err
    two = torchrun(2, "--corpus", text_file, *TINY, "--steps", 3, "--checkpoint", ck, "--resume")
    assert two.returncode == 0, two.stderr
    assert two.stderr.count("rnngraph: note: the cosine lr schedule now ends at step 3") == 1, two.stderr


def test_distributed_outside_torchrun_is_a_one_line_error(capsys, monkeypatch, text_file):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--distributed")
    assert_one_line_error(code, err, "--distributed runs under torchrun", "RANK")
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--distributed-timeout", "5")
    assert_one_line_error(code, err, "--distributed-timeout applies to --distributed")
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    small = ["--hidden", "8", "--embed", "4", "--window", "8"]
    code, _, err = run(capsys, "train", "--corpus", text_file, *small, "--device", "cuda", "--distributed")
    assert_one_line_error(code, err, "--distributed --device cuda: LOCAL_RANK not set")
    monkeypatch.setenv("LOCAL_RANK", "gpu0")  # was int()'s "invalid literal for int() with base 10: 'gpu0'"
    code, _, err = run(capsys, "train", "--corpus", text_file, *small, "--device", "cuda", "--distributed")
    assert_one_line_error(code, err, "--distributed --device cuda: LOCAL_RANK 'gpu0' is not a GPU number")
    monkeypatch.setenv("LOCAL_RANK", "0")  # outside the simulator, on a machine without a GPU
    import rnngraph.codegen.device as device
    from numba import cuda
    monkeypatch.setattr(device, "in_simulator", lambda: False)
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    code, _, err = run(capsys, "train", "--corpus", text_file, *small, "--device", "cuda", "--distributed")
    assert_one_line_error(code, err, "--distributed --device cuda, but numba finds no CUDA GPU on this machine: "
                                     "use --device cpu")  # was 'LOCAL_RANK 0, but ... 0 GPU(s): start at most 0'
    monkeypatch.undo()
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    code, _, err = run(capsys, "train", "--corpus", text_file, *small, "--device", "cpu", "--streams", "1", "--distributed")
    assert_one_line_error(code, err, "--streams 1: fewer streams than the 2 processes")


@pytest.mark.slow
def test_two_cuda_processes_train_as_one(capsys, tmp_path, text_file):
    """--device cuda: each process its GPU (numba's simulator without one; the all-reduce then
    through host copies): the 2-process checkpoint equals one CUDA process's, to float32's rounding."""
    flags = [*TINY, "--dropout", "0.2", "--device", "cuda", "--steps", 2, "--eval-every", 2, "--eval-tokens", 8]
    code, _, err = run(capsys, "train", "--corpus", text_file, *flags, "--checkpoint", tmp_path / "one")
    assert code == 0, err
    two = torchrun(2, "--corpus", text_file, *flags, "--checkpoint", tmp_path / "two")
    assert two.returncode == 0, two.stderr
    assert "2 processes" in two.stdout and "cuda" in two.stdout, two.stdout
    x, y = np.load(tmp_path / "one" / "params.npz"), np.load(tmp_path / "two" / "params.npz")
    for k in x.files:
        np.testing.assert_allclose(y[k], x[k], rtol=0, atol=3e-5, err_msg=k)


#: ``rnngraph`` with one process failing on its own: process RANK_THAT_FAILS's corpus cannot be read
#: (during the set-up), or its checkpoint cannot be written (after training has started).
ONE_FAILS = """\
import os, sys
import rnngraph.cli.train as train
from rnngraph import cli

if os.environ["RANK"] == os.environ["RANK_THAT_FAILS"]:
    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")
    setattr(train, os.environ["WHAT_FAILS"], fail)
sys.exit(cli.main(sys.argv[1:]))
"""


def assert_one_error_line(run, line):
    """A failed torchrun whose processes printed one line, ``line``, and no traceback of rnngraph's."""
    assert run.returncode != 0
    ours = [x for x in run.stderr.splitlines() if x.startswith("rnngraph: ")]
    assert ours == [line], run.stderr
    assert "rnngraph/cli" not in run.stderr and "rnngraph/distributed" not in run.stderr, run.stderr  # no frame of ours


def test_an_error_every_process_meets_is_one_line_from_process_0(tmp_path):
    run = torchrun(2, "--corpus", tmp_path / "missing.txt", *TINY, "--steps", 2)
    assert_one_error_line(run, f"rnngraph: error: {tmp_path / 'missing.txt'}: no such file")
    assert "local_rank: 0" in run.stderr  # torchrun's summary: process 0, the one that said it, failed first


@pytest.mark.parametrize("rank, what, line", [
    (1, "load_corpus", "rnngraph: error: process 1 of 2: [Errno 28] No space left on device"),
    (0, "save_checkpoint", "rnngraph: error: process 0 of 2: [Errno 28] No space left on device"),
], ids=["set-up", "checkpoint"])
def test_an_error_of_one_process_is_one_line_naming_it(monkeypatch, tmp_path, text_file, rank, what, line):
    script = tmp_path / "one_fails.py"
    script.write_text(ONE_FAILS, encoding="utf-8")
    monkeypatch.setenv("RANK_THAT_FAILS", str(rank))
    monkeypatch.setenv("WHAT_FAILS", what)
    run = torchrun(2, "--corpus", text_file, *TINY, "--steps", 4, "--eval-every", 2, "--checkpoint", tmp_path / "ck",
                   program=[script])
    assert_one_error_line(run, line)


def test_a_gloo_message_is_cut_to_its_first_sentence():
    from rnngraph.distributed import short_cause
    gloo = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:65160: "
            "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
            "application. Check the logs of the remote worker before reporting an error. GLHF!")
    assert short_cause(gloo) == "Read error [127.0.0.1]:65160: Connection reset by peer"
    assert short_cause("[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation "
                       "to complete\nException raised from ...") == "Timed out waiting 5000ms for recv operation to complete"
    assert short_cause("x" * 300) == "x" * 157 + "..."


def test_a_loss_that_is_not_finite_saves_the_last_good_step_of_every_process(capsys, tmp_path, text_file):
    """Regression: with --distributed a non-finite window saved nothing (one process saved its last
    good step); every process meets the same window (its loss and gradients are all-reduced), so
    process 0 writes the step before it with every process's states (all 4 streams) and says
    which step the directory holds."""
    ckpt = tmp_path / "ck"
    code, _, err = run(capsys, "train", "--corpus", text_file, *TINY, "--optimizer", "sgd", "--lr", "1e-3",
                       "--steps", 2, "--checkpoint", ckpt)
    assert code == 0, err
    bad = torchrun(2, "--corpus", text_file, *TINY, "--steps", 20, "--lr", "1e38", "--clip", "0", "--checkpoint",
                   ckpt, "--resume")
    good = load_checkpoint(ckpt).step
    assert good > 2
    assert_one_error_line(bad, f"rnngraph: error: training step {good + 1:,}: its loss or gradients are not finite "
                               f"(gradient norm {load_gradient_norm(bad.stderr)}): lower --lr or set --clip (a NaN or "
                               f"inf in the text or the cell can do it too); the parameters are those of step "
                               f"{good:,}; {ckpt} holds step {good:,}")
    ck = load_checkpoint(ckpt)
    assert ck.data_index == ck.optim["steps"] == good
    assert {np.shape(v)[1] for v in ck.state.values()} == {int(TINY[TINY.index("--streams") + 1])}  # every stream


def load_gradient_norm(stderr: str) -> str:
    """The gradient norm a not-finite error line names (nan or inf), as printed."""
    line = next(x for x in stderr.splitlines() if x.startswith("rnngraph: error: training step"))
    return line.split("(gradient norm ", 1)[1].split(")", 1)[0]
