"""Sentence completion: read questions of five candidates, score each candidate sentence by its
total log-probability under a language model checkpoint, choose the best (``rnngraph complete``).

The package's modules: ``msr.py`` (the MSR Sentence Completion Challenge's file format:
:func:`read_questions`, :func:`read_answers`), ``scorer.py`` (:func:`score_sentences`,
:func:`complete`), ``ngram.py`` (:class:`KneserNey`, the n-gram baseline) and ``make_test.py``
(:func:`make_questions`, :func:`write_test`: a test of the challenge's shape from held-out text).
"""
from .msr import LETTERS, Question, QuestionsError, read_answers, read_questions
from .make_test import make_questions, split_sentences, write_test
from .ngram import KneserNey
from .scorer import Completion, SentenceScores, complete, encode_sentences, score_sentences

__all__ = ["LETTERS", "Question", "QuestionsError", "read_answers", "read_questions", "Completion",
           "SentenceScores", "complete", "encode_sentences", "score_sentences", "KneserNey", "make_questions",
           "split_sentences", "write_test"]
