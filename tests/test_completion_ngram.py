"""The interpolated Kneser-Ney baseline (rnngraph.completion.ngram) on a small fixed text."""
import math
import random

import pytest

from rnngraph.completion.ngram import EOS, UNK, KneserNey
from rnngraph.data import tokenize_words

TEXT = """she was not at home to her sister .
he had a letter from his father .
she had a letter from her sister .
he was not at home to his father .
the letter was from her father at home .
"""
SENTENCES = [tokenize_words(line) for line in TEXT.splitlines()]


def random_sentences(seed, n=40):
    rng = random.Random(seed)
    words = "a b c d e f g h".split()
    return [[rng.choice(words) for _ in range(rng.randint(1, 9))] for _ in range(n)]


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("min_count", [1, 2])
def test_probabilities_sum_to_one_in_every_context(order, min_count):
    model = KneserNey(SENTENCES, order=order, min_count=min_count)
    contexts = [(), ("she",), ("she", "was"), ("not", "at"), ("zebra", "was"), ("at", "zebra"),
                ("her", "father"), ("his",), ("letter", "from")]
    for ctx in contexts:
        total = math.fsum(model.prob(w, ctx) for w in model.vocab)
        assert abs(total - 1.0) < 1e-9, (ctx, total)


def test_sum_to_one_on_random_text_and_other_discount():
    model = KneserNey(random_sentences(0), discount=0.5)
    for u in model.vocab[:-1]:
        for v in model.vocab[:-1]:
            assert abs(math.fsum(model.prob(w, (u, v)) for w in model.vocab) - 1.0) < 1e-9


def test_seen_trigram_outscores_unseen():
    model = KneserNey(SENTENCES)
    assert model.prob("home", ("not", "at")) > model.prob("letter", ("not", "at"))
    assert model.prob("letter", ("had", "a")) > model.prob("home", ("had", "a"))
    assert model.logprob(tokenize_words("she was not at home to her sister .")) > \
        model.logprob(tokenize_words("she was not at letter to her sister ."))


def test_unknown_words_are_unk():
    model = KneserNey(SENTENCES)
    assert model.prob("zebra", ("at",)) == model.prob(UNK, ("at",)) > 0
    assert model.logprob(["she", "zebra"]) == model.logprob(["she", "giraffe"])
    assert model.unknown(["she", "zebra", "giraffe"]) == 2
    singles = KneserNey(SENTENCES, min_count=2)
    assert "the" not in singles.vocab and singles.vocab[-2:] == (UNK, EOS)


def test_logprob_sums_conditionals_and_end():
    model = KneserNey(SENTENCES)
    s = ["he", "had", "a"]
    want = math.log(model.prob("he")) + math.log(model.prob("had", ["he"])) + \
        math.log(model.prob("a", ["he", "had"]))
    assert model.logprob(s, end=False) == pytest.approx(want, abs=1e-12)
    assert model.logprob(s) == pytest.approx(want + math.log(model.prob(EOS, s)), abs=1e-12)


def test_deterministic():
    a, b = KneserNey(random_sentences(3)), KneserNey(list(reversed(random_sentences(3))))
    for s in random_sentences(4, 10):
        assert a.logprob(s) == pytest.approx(b.logprob(s), abs=1e-12)
        assert a.logprob(s) == KneserNey(random_sentences(3)).logprob(s)


@pytest.mark.parametrize("kwargs, match", [({"order": 4}, "order"), ({"discount": 1.0}, "discount"),
                                           ({"min_count": 0}, "min_count")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KneserNey(SENTENCES, **kwargs)


def test_empty_corpus_and_bos():
    with pytest.raises(ValueError, match="empty corpus"):
        KneserNey([[], []])
    with pytest.raises(ValueError, match="never predicted"):
        KneserNey(SENTENCES).prob("<s>")
