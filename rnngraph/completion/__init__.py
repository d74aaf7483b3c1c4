"""Sentence completion: read questions of five candidates, score each candidate sentence by its
total log-probability under a language model checkpoint, choose the best (``rnngraph complete``).

The package's modules: ``msr.py`` (the MSR Sentence Completion Challenge's file format:
:func:`read_questions`, :func:`read_answers`), ``scorer.py`` (:func:`score_sentences`,
:func:`complete`).
"""
from .msr import LETTERS, Question, QuestionsError, read_answers, read_questions
from .scorer import Completion, SentenceScores, complete, encode_sentences, score_sentences

__all__ = ["LETTERS", "Question", "QuestionsError", "read_answers", "read_questions", "Completion",
           "SentenceScores", "complete", "encode_sentences", "score_sentences"]
