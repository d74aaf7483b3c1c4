"""``rnngraph complete``: choose each sentence-completion question's candidate under a checkpoint.

Reads the questions (and, if given, the answers) in the MSR Sentence Completion Challenge's
format (:mod:`rnngraph.completion.msr`), scores the five candidate sentences of each question
by their total log-probability (:mod:`rnngraph.completion.scorer`), and prints one line per
question, then the accuracy (with answers) and how many of the scored tokens were outside the
checkpoint's vocabulary.
"""
from __future__ import annotations

import argparse

from ..completion import LETTERS, complete, encode_sentences, read_answers, read_questions
from ..lm import LMConfig, build_network, load_checkpoint, unit
from .arguments import (CLIError, checkpoint_cell_arg_options, checkpoint_cell_args, chunk_choice, directory,
                        positive_int)
from .checkpoint_commands import CELL_OVERRIDE, CHUNK_OVERRIDE
from .step_setup import _apply, _check_memory, _checkpoint_config, _chunked, _compile, _device, _footprint, _model


def _complete_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="DIR", type=directory, required=True)
    p.add_argument("--questions", metavar="FILE", required=True,
                   help="questions in the MSR Sentence Completion Challenge's format: '1a) ... [word] ...' lines, "
                        "five a-e per question, or '1) ... _____ ...' followed by 'a) word' .. 'e) word' (one file may mix "
                        "the two, question by question), or the CSV table testing_data.csv "
                        "(id,question,a),b),c),d),e))")
    p.add_argument("--answers", metavar="FILE",
                   help="the right letters: '1c) ...' lines (the challenge's answers file), '1) [c] word', '1 c' "
                        "or the CSV table test_answer.csv (id,answer); with them the accuracy is printed")
    p.add_argument("--cell", metavar="FILE.py[:FUNCTION]", help=CELL_OVERRIDE)
    checkpoint_cell_arg_options(p)
    p.add_argument("--streams", metavar="S", type=positive_int, default=40,
                   help="candidate sentences scored side by side (default 40)")
    p.add_argument("--window", metavar="T", type=positive_int, default=32,
                   help="timesteps per forward call (default 32; longer sentences take several)")
    p.add_argument("--chunk", metavar="N|auto|none", type=chunk_choice, help=CHUNK_OVERRIDE)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="cpu", help="(default cpu)")


def _check_answers(answers: dict, questions, args) -> None:
    """CLIError naming the files when the answers do not cover exactly the questions."""
    numbers = {q.number: q.line for q in questions}
    missing = [n for n in numbers if n not in answers]
    extra = [n for n in answers if n not in numbers]
    if missing:
        raise CLIError(f"{args.answers}: no answer to question {missing[0]} ({args.questions}, line "
                       f"{numbers[missing[0]]}){f' and {len(missing) - 1} more' if len(missing) > 1 else ''}")
    if extra:
        raise CLIError(f"{args.answers}: an answer to question {extra[0]}, which {args.questions} does not have"
                       f"{f' ({len(extra) - 1} more such)' if len(extra) > 1 else ''}")


def run_complete(args) -> int:
    """Print ``N) letter word  (log p nats[; right|wrong, answer x])`` per question, then the
    accuracy (with --answers) and the count of tokens outside the vocabulary."""
    questions = read_questions(args.questions)
    answers = read_answers(args.answers, questions) if args.answers else None
    if answers is not None:
        _check_answers(answers, questions, args)
    ck = load_checkpoint(args.checkpoint)
    cfg = _checkpoint_config(ck, args.cell, cell_args=checkpoint_cell_args(args))
    cfg = _chunked(cfg, args.chunk, len(ck.vocab))  # the loss is all it reads
    sentences = [s for q in questions for s in q.sentences]
    # a candidate is never empty (the reader sees to it), so no sentence lacks tokens
    longest = max(x.size for x in encode_sentences(ck.vocab, sentences))
    T, S = min(args.window, longest), min(args.streams, len(sentences))
    device = _device(args.device, cfg.dtype, f"and {args.checkpoint} is a {cfg.dtype} checkpoint: use --device cpu")
    net = build_network(cfg, len(ck.vocab), dropout=0.0)  # scoring never drops
    _check_memory(_footprint(net, T, S, cfg.dtype, device, False),
                  f"scoring with {args.checkpoint} ({_model(cfg)}) with --window {T} --streams {S}",
                  "lower --window or --streams")
    step = _compile(net, LMConfig(**{**cfg.to_json(), "window": T, "streams": S}), device)
    _apply(ck, step, args.cell)
    done = complete(step, ck.vocab, questions)
    right = 0
    for q, c in zip(questions, done):
        verdict = ""
        if answers is not None:
            good = answers[q.number] == c.choice
            right += good
            verdict = "; right" if good else f"; wrong, answer {LETTERS[answers[q.number]]}"
        tie = f"; a tie of {c.tied}, the first taken" if c.tied > 1 else ""
        print(f"{q.number}) {LETTERS[c.choice]} {q.candidates[c.choice]}  ({c.log_prob[c.choice]:.3f} nats{tie}{verdict})")
    ties = sum(c.tied > 1 for c in done)
    if answers is not None:
        print(f"accuracy {right}/{len(questions)} = {right / len(questions):.1%} (chance 20.0%)"
              + (f"; {ties} tied, each counted by its first tied candidate" if ties else ""))
    elif ties:
        print(f"{ties} question(s) tied: the first of the tied candidates was taken")
    tokens, unknown = sum(int(c.tokens.sum()) for c in done), sum(int(c.unknown.sum()) for c in done)
    what = unit(cfg.level)
    print(f"outside the vocabulary: {unknown:,} of the {tokens:,} {what}s scored ({unknown / tokens:.1%}), "
          f"scored as <unk>")
    return 0
