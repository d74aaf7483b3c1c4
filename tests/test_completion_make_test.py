"""Making an MSR-shaped completion test from held-out text (rnngraph.completion.make_test)."""
import random

import pytest

from rnngraph.completion import read_answers, read_questions
from rnngraph.completion.make_test import make_questions, split_sentences, write_test
from rnngraph.completion.ngram import KneserNey
from rnngraph.data import tokenize_words

COMMON = "the a she he was had to of and her his in at not".split()
RARE = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(6)]  # 36 rarer words


def text(seed, n):
    """n sentences of 10-16 words: mostly common words, about one in four a rare one."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = [rng.choice(RARE) if rng.random() < 0.25 else rng.choice(COMMON) for _ in range(rng.randint(9, 15))]
        lines.append(" ".join(words).capitalize() + rng.choice([".", "!", "?"]))
    return "\n".join(lines)


TRAIN = split_sentences(text(1, 400))
HELD = split_sentences(text(2, 60))


def made(n=12, seed=0):
    return make_questions(TRAIN, HELD, n, seed=seed, band=(5, 200))


def test_split_sentences():
    assert split_sentences("She said so.\nHe did not!  Why? and") == [
        ["she", "said", "so", "."], ["he", "did", "not", "!"], ["why", "?"], ["and"]]


def test_shape_and_impostors_fit_no_worse_under_the_bigram():
    qs = made()
    assert len(qs) == 12 and [q.number for q in qs] == list(range(1, 13))
    bigram = KneserNey(TRAIN, order=2)
    counts = {w: sum(s.count(w) for s in TRAIN) for w in RARE}
    for q in qs:
        assert len(set(q.candidates)) == 5 and q.tokens[q.position] == q.candidates[q.answer]
        right = bigram.logprob(q.tokens)
        c = counts[q.candidates[q.answer]]
        for k, w in enumerate(q.candidates):
            swapped = list(q.tokens)
            swapped[q.position] = w
            assert bigram.logprob(swapped) >= right - 1e-9
            assert c / 2 <= counts[w] <= 2 * c and 5 <= counts[w] <= 200


def test_seeded():
    assert made(seed=3) == made(seed=3)
    assert made(seed=3) != made(seed=4)
    assert len({q.answer for q in made(n=30)}) == 5


def test_round_trip_through_the_msr_reader(tmp_path):
    qs = made()
    write_test(qs, tmp_path / "q.txt", tmp_path / "a.txt")
    read = read_questions(tmp_path / "q.txt")
    answers = read_answers(tmp_path / "a.txt")
    assert [r.number for r in read] == [q.number for q in qs]
    for q, r in zip(qs, read):
        assert r.candidates == q.candidates and answers[r.number] == q.answer
        for k, sentence in enumerate(r.sentences):
            want = list(q.tokens)
            want[q.position] = q.candidates[k]
            assert tokenize_words(sentence) == want


def test_fewer_when_sentences_run_out_and_bad_arguments():
    assert len(make_questions(TRAIN, HELD[:5], 100, band=(5, 200))) <= 5
    assert make_questions(TRAIN, HELD, 5, band=(10**6, 10**6)) == []
    for kwargs in ({"n": 0}, {"n": 1, "band": (0, 5)}, {"n": 1, "ratio": 0.5}):
        with pytest.raises(ValueError):
            make_questions(TRAIN, HELD, **kwargs)
    with pytest.raises(ValueError, match="empty corpus"):
        make_questions([], HELD, 1)
