#!/usr/bin/env python3
"""Sentence-completion accuracy of the interpolated Kneser-Ney trigram baseline, and chance.

Trains :class:`rnngraph.completion.ngram.KneserNey` (order 3, D = 0.75) on the sentences of the
training text and scores each candidate sentence of a questions file by its log-probability
(``</s>`` included), choosing the highest (the first of equals). The questions come from
``--questions``/``--answers`` (machine or blank form, as ``rnngraph complete`` reads them), or
are made with :func:`rnngraph.completion.make_test.make_questions` from the held-out novel of
Austen (Persuasion; the training text is the five other novels; needs the corpus, see
rnngraph/data/austen.py) and written to ``--out-dir`` when given. Chance is 1/5. Usage::

    python3 bench/experiments/completion_baseline.py --n 1040 --seed 0 --out-dir /tmp/austen_test
    python3 bench/experiments/completion_baseline.py --train train.txt --held-out held.txt --n 200
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rnngraph.completion import read_answers, read_questions  # noqa: E402
from rnngraph.completion.make_test import make_questions, split_sentences, write_test  # noqa: E402
from rnngraph.completion.ngram import KneserNey  # noqa: E402
from rnngraph.data import Corpus, load_text_file, tokenize_words  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", help="training text file (default: Austen's five training novels)")
    p.add_argument("--held-out", help="held-out text file to make questions from (default: Persuasion)")
    p.add_argument("--questions", help="a questions file to score instead of making one")
    p.add_argument("--answers", help="its answers file (with --questions)")
    p.add_argument("--n", type=int, default=1040, help="questions to make (default 1040)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", help="write the made questions.txt and answers.txt here")
    p.add_argument("--out", help="write the result as JSON here")
    a = p.parse_args(argv)
    if a.train:
        train_text = load_text_file(a.train)
        held_text = load_text_file(a.held_out) if a.held_out else None
    else:
        corpus = Corpus.austen()
        train_text, held_text = corpus.train, corpus.valid + corpus.test
    train = split_sentences(train_text)
    start = time.perf_counter()
    model = KneserNey(train, order=3)
    print(f"trained KN trigram on {len(train)} sentences, {sum(map(len, train))} tokens, "
          f"|V| = {len(model.vocab)} in {time.perf_counter() - start:.1f} s")
    if a.questions:
        questions = read_questions(a.questions)
        answers = read_answers(a.answers)
        items = [([tokenize_words(s) for s in q.sentences], answers[q.number]) for q in questions]
    else:
        made = make_questions(train, split_sentences(held_text), a.n, seed=a.seed)
        print(f"made {len(made)} questions (asked for {a.n}, seed {a.seed})")
        if not made:
            print("no question could be made from the held-out text", file=sys.stderr)
            return 1
        if a.out_dir:
            Path(a.out_dir).mkdir(parents=True, exist_ok=True)
            write_test(made, Path(a.out_dir) / "questions.txt", Path(a.out_dir) / "answers.txt")
        items = []
        for q in made:
            five = []
            for w in q.candidates:
                tokens = list(q.tokens)
                tokens[q.position] = w
                five.append(tokens)
            items.append((five, q.answer))
    right = 0
    for five, answer in items:
        scores = [model.logprob(s) for s in five]
        right += scores.index(max(scores)) == answer
    print(f"KN trigram accuracy: {right}/{len(items)} = {right / max(len(items), 1):.3f}; chance 0.200")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"command": "python bench/experiments/completion_baseline.py " + " ".join(sys.argv[1:] if argv is None
                                                                                                else argv),
                       "model": "interpolated Kneser-Ney trigram, discount 0.75", "train_sentences": len(train),
                       "vocab": len(model.vocab), "questions": len(items), "right": right,
                       "accuracy": right / max(len(items), 1), "chance": 0.2}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
