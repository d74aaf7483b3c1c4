"""Reading sentence-completion questions and answers in the MSR Sentence Completion Challenge's format.

The challenge (Zweig and Burges, 2011: 1,040 sentences from Sherlock Holmes novels, one word
blanked in each, five candidates a-e) was published as text files in two forms. This reader
takes both, in one file too: each question is in the form of its first line.

**Machine form** (``Holmes.machine_format.questions.txt``): one line per candidate, the whole
sentence with the candidate in square brackets, the five lines of a question in a row, letters
a-e in order::

    1a) I have seen it on him , and could [write] to it .
    1b) I have seen it on him , and could [migrate] to it .
    ...
    1e) I have seen it on him , and could [contribute] to it .

**Blank form** (what ``Holmes.human_format.questions.txt`` is assumed to look like; the reader
was written without the file at hand): the sentence once with a blank (two or more
underscores), then one line per candidate::

    1) I have seen it on him , and could _____ to it .
        a) write
        b) migrate
        ...

**Answers**: one line per question, either a machine-form line (``1d) ... [swear] ...``, as in
``Holmes.machine_format.answers.txt``) or the number and the letter (``1) [d] swear``,
``1) d``, ``1 d``); a word given with the letter must be the question's candidate of that
letter (checked when the questions are given: :func:`read_answers`).

**CSV tables** (the copy on Kaggle, ``testing_data.csv`` and ``test_answer.csv``): a file whose
first line is the header ``id,question,a),b),c),d),e)`` or ``id,answer`` (rnngraph/completion/msr_csv.py).

Numbers need not start at 1 or be consecutive, but each question appears once. Errors
(:class:`QuestionsError`) name the file and the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import msr_csv

LETTERS = "abcde"
#: ``12c) sentence``: a machine-form candidate line.
_MACHINE = re.compile(r"\s*(\d+)\s*([A-Za-z])\)\s*(.*)$")
#: ``12) sentence``: a blank-form question line (and the start of a number-first answer line).
_NUMBERED = re.compile(r"\s*(\d+)\s*\)\s*(.*)$")
#: ``  c) word``: a blank-form candidate line.
_CANDIDATE = re.compile(r"\s*([A-Za-z])\)\s*(.*)$")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_BLANK = re.compile(r"_{2,}")
#: An answer given by number and letter: ``12) [c] word``, ``12) c``, ``12 c``.
_ANSWER = re.compile(r"\s*(\d+)\s*\)?\s*\[?\s*([A-Za-z])\s*(?:\]|\)|\s|$)")


class QuestionsError(ValueError):
    """A questions or answers file that does not follow the format; the message names the file
    and the line (``FILE, line N: ...``)."""


@dataclass(frozen=True)
class Question:
    """One question: its ``number``, the five ``candidates`` (words, letters a-e in order), the
    five ``sentences`` (each the whole sentence with that candidate in place, no brackets), and
    the ``line`` (1-based) of the file where it starts."""

    number: int
    candidates: tuple[str, ...]
    sentences: tuple[str, ...]
    line: int


def _text(path) -> str:
    """A UTF-8 file's text. OSError: it cannot be read; QuestionsError: it is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise QuestionsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _lines(path, text: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of the non-blank lines of ``text``. QuestionsError when there is none."""
    lines = [(k, line.rstrip("\r\n")) for k, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise QuestionsError(f"{path}: empty: no questions")
    return lines


def read_questions(path) -> list[Question]:
    """The questions of a file in the machine or the blank form, or both (each question in the
    form of its first line), or a CSV table (see the module docstring), in file order.

    Raises:
        OSError: the file cannot be read.
        QuestionsError (a ValueError), naming the file and line: not UTF-8; empty; a line of
            neither form; a machine-form line without exactly one ``[candidate]``; a blank-form
            question without exactly one blank (``___``); a question whose candidates are not
            five, lettered a-e in order; an empty candidate; a question number seen before; a
            CSV row without seven fields or a numeric id; a CSV header without rows or of other
            columns, or the answers table's header (``id,answer``).
    """
    text = _text(path)
    lines = _lines(path, text)
    names = msr_csv.header(lines[0][1])
    if names is not None:
        msr_csv.check_header(path, lines[0][0], lines[0][1], names, msr_csv.QUESTION_COLUMNS, QuestionsError)
        groups = [_question(path, k, number, list(LETTERS), words,
                            [_BLANK.sub(lambda _, w=w: w, sentence, count=1).strip() for w in words])
                  for k, fields in msr_csv.rows(path, text, msr_csv.QUESTION_COLUMNS, QuestionsError)
                  for number, sentence, words in [msr_csv.question_parts(path, k, fields, QuestionsError)]]
        return _unique(path, groups)
    groups = []
    for form, run in _runs(path, lines):
        groups += _machine_groups(path, run) if form == "machine" else _blank_groups(path, run)
    return _unique(path, groups)


def _unique(path, groups: list[Question]) -> list[Question]:
    """``groups``, after checking no question number comes twice (QuestionsError naming both lines)."""
    seen: dict[int, int] = {}
    for q in groups:
        if q.number in seen:
            raise QuestionsError(f"{path}, line {q.line}: question {q.number} again (first at line {seen[q.number]})")
        seen[q.number] = q.line
    return groups


def _runs(path, lines) -> list[tuple[str, list]]:
    """The lines cut into runs of one form, ``("machine" | "blank", lines)``, in file order: a
    machine-form line goes to a machine run, a numbered line ``1) ...`` starts a blank-form
    question, and any other line (a candidate ``a) word``, or a line of neither form, which the
    run's reader reports) belongs to the run before it. QuestionsError for a first line of neither form."""
    runs: list[tuple[str, list]] = []
    for k, line in lines:
        form = "machine" if _MACHINE.match(line) else "blank" if _NUMBERED.match(line) else None
        if form is None and not runs:
            raise QuestionsError(f"{path}, line {k}: expected a question, '1a) ... [word] ...' (machine form) or "
                                 f"'1) ... _____ ...' (blank form), got {_show(line)}")
        if runs and form in (None, runs[-1][0]):
            runs[-1][1].append((k, line))
        else:
            runs.append((form, [(k, line)]))
    return runs


def _machine_groups(path, lines) -> list[Question]:
    """Machine-form lines -> questions: consecutive lines of one number make a question."""
    questions, rows = [], []  # rows: (line, number, letter, sentence, word) of the current question

    def close():
        if rows:
            questions.append(_question(path, rows[0][0], rows[0][1], [r[2] for r in rows],
                                       [r[4] for r in rows], [r[3] for r in rows]))
            rows.clear()

    for k, line in lines:
        m = _MACHINE.match(line)
        if not m:
            raise QuestionsError(f"{path}, line {k}: expected '1a) ... [word] ...' (as the lines before) or a "
                                 f"question '1) ... _____ ...', got {_show(line)}")
        number, letter, sentence = int(m.group(1)), m.group(2).lower(), m.group(3)
        words = _BRACKET.findall(sentence)
        if len(words) != 1:
            raise QuestionsError(f"{path}, line {k}: expected the candidate in one pair of brackets, "
                                 f"'[word]', found {len(words)}: {_show(line)}")
        if rows and number != rows[0][1]:
            close()
        rows.append((k, number, letter, _BRACKET.sub(lambda mm: mm.group(1), sentence).strip(), words[0].strip()))
    close()
    return questions


def _blank_groups(path, lines) -> list[Question]:
    """Blank-form lines -> questions: a numbered line with a blank, then its candidate lines."""
    questions, head, letters, words = [], None, [], []  # head: (line, number, sentence)

    def close():
        if head is not None:
            k, number, sentence = head
            questions.append(_question(path, k, number, letters, words,
                                       [_BLANK.sub(lambda _: w, sentence, count=1).strip() for w in words]))

    for k, line in lines:
        cand = _CANDIDATE.match(line)
        numbered = _NUMBERED.match(line)
        if numbered:
            close()
            sentence = numbered.group(2)
            if len(_BLANK.findall(sentence)) != 1:
                raise QuestionsError(f"{path}, line {k}: expected one blank ('_____') in question "
                                     f"{numbered.group(1)}, found {len(_BLANK.findall(sentence))}")
            head, letters, words = (k, int(numbered.group(1)), sentence), [], []
        elif cand and head is not None:
            letters.append(cand.group(1).lower())
            words.append(cand.group(2).strip())
        else:
            raise QuestionsError(f"{path}, line {k}: expected '1) ... _____ ...' or a candidate 'a) word', "
                                 f"got {_show(line)}")
    close()
    return questions


def _question(path, line: int, number: int, letters: list, words: list, sentences: list) -> Question:
    """A Question, after checking there are five candidates lettered a-e, none empty."""
    if len(letters) != len(LETTERS):
        raise QuestionsError(f"{path}, line {line}: question {number} has {len(letters)} candidate(s), expected 5 (a-e)")
    if "".join(letters) != LETTERS:
        raise QuestionsError(f"{path}, line {line}: question {number}'s candidates are lettered "
                             f"{', '.join(letters)}; expected a, b, c, d, e in order")
    if not all(words):
        raise QuestionsError(f"{path}, line {line}: question {number}: candidate "
                             f"{LETTERS[[bool(w) for w in words].index(False)]} is empty")
    return Question(number, tuple(words), tuple(sentences), line)


def read_answers(path, questions=None) -> dict[int, int]:
    """Question number -> the right candidate's index (0 for a ... 4 for e), from an answers file
    (see the module docstring). With ``questions`` (:func:`read_questions`' list), an answer line
    that also gives the word (``1d) ... [swear] ...``, ``1) [d] swear``) must name that
    question's candidate of its letter (compared without case): an answers file of another
    question set with the same numbering is an error, not a silent grading.

    Raises:
        OSError: the file cannot be read.
        QuestionsError (a ValueError), naming the file and line: not UTF-8; empty; a line that
            gives no number and letter; a letter outside a-e; a question answered twice; a CSV
            row without two fields or a numeric id; a CSV header without rows or of other
            columns, or the questions table's header (``id,question,...``); with ``questions``, a
            word that is not the candidate of its letter.
    """
    candidates = {q.number: q.candidates for q in questions} if questions is not None else {}
    answers, where = {}, {}
    text = _text(path)
    lines = _lines(path, text)
    names = msr_csv.header(lines[0][1])
    if names is not None:  # "1,c": as the line "1 c"
        msr_csv.check_header(path, lines[0][0], lines[0][1], names, msr_csv.ANSWER_COLUMNS, QuestionsError)
        lines = [(k, f"{fields[0]} {fields[1].rstrip(')')}")
                 for k, fields in msr_csv.rows(path, text, msr_csv.ANSWER_COLUMNS, QuestionsError)]
    for k, line in lines:
        m = _MACHINE.match(line) or _ANSWER.match(line)
        if not m:
            raise QuestionsError(f"{path}, line {k}: expected a question number and a letter "
                                 f"('1c) ...', '1) [c] word' or '1 c'), got {_show(line)}")
        number, letter = int(m.group(1)), m.group(2).lower()
        if letter not in LETTERS:
            raise QuestionsError(f"{path}, line {k}: answer {letter!r} to question {number}: expected a letter a-e")
        if number in answers:
            raise QuestionsError(f"{path}, line {k}: question {number} answered again (first at line {where[number]})")
        answers[number], where[number] = LETTERS.index(letter), k
        word = _answer_word(line, m)
        if word is not None and number in candidates and not _names(word, candidates[number][answers[number]]):
            raise QuestionsError(f"{path}, line {k}: answer {letter}) {word!r} to question {number}, whose "
                                 f"candidate {letter}) is {candidates[number][answers[number]]!r} (answers of "
                                 f"another question set?)")
    return answers


def _names(given: str, candidate: str) -> bool:
    """Whether an answer's ``given`` text names ``candidate``: equal, or starting with it as a whole
    word, without case, spacing or punctuation around it (``'swear.'``, ``- swear``, ``swear  # ok``)."""
    def norm(text: str) -> str:
        return " ".join(text.lower().split()).strip(".,;:!?'\"-\u2013\u2014 ")
    g, c = norm(given), norm(candidate)
    return g == c or g.startswith(c + " ")


def _answer_word(line: str, m: re.Match) -> str | None:
    """The word an answer line gives besides its letter: a machine-form line's bracketed word, or
    what follows ``N) [c]``; None where there is none (``1 c``, a CSV row)."""
    if m.re is _MACHINE:
        words = _BRACKET.findall(m.group(3))
        return words[0].strip() if len(words) == 1 else None
    rest = line[m.end():].strip()
    return rest or None


def _show(line: str, width: int = 60) -> str:
    line = line.strip()
    return repr(line if len(line) <= width else line[:width] + "...")
