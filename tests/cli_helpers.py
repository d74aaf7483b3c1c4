"""What the command-line tests share: tiny training flags, an in-process run, the one-line error check."""
from rnngraph import cli

#: Flags of a tiny CPU training run (hidden 8, embed 4, window 8 x 4 streams).
TINY = ["--hidden", "8", "--embed", "4", "--window", "8", "--streams", "4", "--lr", "0.01",
        "--device", "cpu", "--no-progress", "--eval-streams", "4"]

#: A cell file of the user's: a minimal gated unit, function ``mgu``.
MGU = ("import rnngraph as rg\n\n"
       "@rg.cell\n"
       "def mgu(x, h: rg.State, *, hidden: int):\n"
       "    f = rg.sigmoid(rg.linear(x, hidden, name='Wf') + rg.linear(h, hidden, bias=False, name='Uf'))\n"
       "    n = rg.tanh(rg.linear(x, hidden, name='Wh') + rg.linear(f * h, hidden, bias=False, name='Uh'))\n"
       "    h_next = (1 - f) * h + f * n\n"
       "    return h_next, {'h': h_next}\n")


def run(capsys, *argv):
    """main(argv) -> (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def train(capsys, text_file, ckpt, *extra, steps=6):
    """``rnngraph train`` of TINY on ``text_file`` into checkpoint ``ckpt``, validating every 3 steps."""
    return run(capsys, "train", "--corpus", text_file, *TINY, "--steps", steps, "--eval-every", 3,
               "--checkpoint", ckpt, *extra)


def assert_one_line_error(code, err, *needles, exit_code=None):
    """A failed run whose stderr is one ``rnngraph: error: ...`` line holding every needle."""
    assert code != 0 and (exit_code is None or code == exit_code), (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rnngraph: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
