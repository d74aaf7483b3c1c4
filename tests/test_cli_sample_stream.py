"""`rnngraph sample` prints each token as it is drawn (flushed), not all the text at the end."""
import sys

import pytest

from cli_helpers import TINY
from rnngraph import cli, lm
from rnngraph.lm import build_network, load_checkpoint
from rnngraph.runtime import TrainingStep


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, text_file):
    ckpt = tmp_path_factory.mktemp("ck") / "run"
    assert cli.main(["train", "--corpus", str(text_file), *TINY, "--steps", "2", "--checkpoint", str(ckpt)]) == 0
    return ckpt


class Terminal:
    """A stdout that records what had been written at each flush, and how many forward calls the
    sampler had made by then."""

    def __init__(self, calls):
        self.calls, self.text, self.flushes = calls, "", []

    def write(self, text):
        self.text += text

    def flush(self):
        self.flushes.append((self.text, self.calls[0]))


def test_each_character_is_flushed_as_it_is_drawn(monkeypatch, checkpoint):
    calls = [0]
    forward = TrainingStep.forward

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(TrainingStep, "forward", counted)
    terminal = Terminal(calls)
    monkeypatch.setattr(sys, "stdout", terminal)
    assert cli.main(["sample", "--checkpoint", str(checkpoint), "--prime", "she", "--length", "20",
                     "--seed", "2"]) == 0
    # 3 prime characters, then a forward call after each drawn character but the last
    assert calls[0] == 3 + 19
    shown = [(text, n) for text, n in terminal.flushes if text]
    assert [len(text) for text, _ in shown[:20]] == list(range(4, 24))  # the prime and one more character each
    assert [n for _, n in shown[:20]] == list(range(3, 23))  # flushed before the next forward call
    ck = load_checkpoint(checkpoint)  # the same text as sampling all at once
    net = build_network(ck.config, len(ck.vocab), dropout=0.0)
    assert terminal.text == "she" + lm.sample(net, ck.params, ck.vocab, "she", 20, seed=2) + "\n"
