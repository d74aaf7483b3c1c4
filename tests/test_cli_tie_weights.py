"""``rnngraph train --tie-weights``: a word LM whose output layer is its embedding table, stored in
the checkpoint (one table, ``tie_weights`` in config.json) and used by eval, sample, complete and
a resumed run; --embed defaults to --hidden with it, and a different --embed is a one-line error."""
import pytest

from cli_helpers import TINY, assert_one_line_error, run, train
from rnngraph import cli, lm
from rnngraph.lm import load_checkpoint

#: Word-level flags of the tiny runs (4 timesteps x 2 streams); TINY's --embed 4 is overridden.
WORD = ["--level", "word", "--window", 4, "--streams", 2, "--tie-weights", "--embed", 8]


@pytest.fixture(scope="module")
def tied(tmp_path_factory, text_file):
    """A word-level checkpoint of 2 steps trained with --tie-weights."""
    ckpt = tmp_path_factory.mktemp("tied") / "ck"
    assert cli.main(["train", "--corpus", str(text_file), *TINY, *map(str, WORD), "--steps", "2",
                     "--checkpoint", str(ckpt)]) == 0
    return ckpt


def test_the_checkpoint_holds_one_table(tied):
    ck = load_checkpoint(tied)
    assert ck.config.tie_weights and ck.config.embed == ck.config.hidden == 8
    assert "embed.weight" in ck.params and "head.W.weight" not in ck.params and "head.W.bias" in ck.params


def test_eval_sample_and_complete_load_it(capsys, tmp_path, tied):
    code, out, err = run(capsys, "eval", "--checkpoint", tied, "--device", "cpu", "--streams", 2)
    assert code == 0 and "perplexity" in out, err
    code, out, err = run(capsys, "sample", "--checkpoint", tied, "--length", 5, "--seed", 1)
    assert code == 0, err
    ck = load_checkpoint(tied)
    dense = lm.build_network(ck.config, len(ck.vocab), dropout=0.0, dense=True)
    assert out == lm.sample(dense, ck.params, ck.vocab, "", 5, seed=1) + "\n"
    questions = tmp_path / "q.txt"
    questions.write_text("".join(f"1{letter}) she was not [{word}] to her\n"
                                 for letter, word in zip("abcde", ["a", "the", "and", "his", "you"])), encoding="utf-8")
    code, out, err = run(capsys, "complete", "--checkpoint", tied, "--questions", questions)
    assert code == 0 and out.startswith("1) "), err


def test_a_resumed_run_stays_tied(capsys, tmp_path, text_file):
    ck = tmp_path / "ck"
    assert train(capsys, text_file, ck, *WORD, steps=1)[0] == 0
    code, _, err = train(capsys, text_file, ck, *WORD[:-3], "--embed", 8, "--resume", steps=2)  # no --tie-weights
    assert code == 0, err
    assert load_checkpoint(ck).config.tie_weights and load_checkpoint(ck).step == 2


def test_an_untied_run_resumed_with_tie_weights_is_a_one_line_error(capsys, tmp_path, text_file):
    ck = tmp_path / "ck"
    assert train(capsys, text_file, ck, *WORD[:-3], "--embed", 8, steps=1)[0] == 0  # untied
    code, _, err = train(capsys, text_file, ck, *WORD, "--resume", steps=2)
    assert_one_line_error(code, err, "the checkpoint was trained without --tie-weights: drop --tie-weights",
                          exit_code=1)


def test_embed_defaults_to_hidden(capsys, tmp_path, text_file):
    code, out, err = run(capsys, "train", "--corpus", text_file, "--level", "word", "--window", 4, "--streams", 2,
                         "--hidden", 6, "--tie-weights", "--steps", 1, "--device", "cpu", "--no-progress",
                         "--eval-streams", 2, "--checkpoint", tmp_path / "ck")
    assert code == 0, err
    assert "hidden 6, embed 6 (tied to the output layer) on " in out, out
    assert load_checkpoint(tmp_path / "ck").config.embed == 6


def test_another_embed_size_is_a_one_line_error(capsys, tmp_path, text_file):
    code, _, err = train(capsys, text_file, tmp_path / "ck", "--level", "word", "--tie-weights", "--embed", 4)
    assert_one_line_error(code, err, "--tie-weights", "--embed (4) must equal --hidden (8)", exit_code=1)
