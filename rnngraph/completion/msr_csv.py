"""The MSR Sentence Completion Challenge as CSV tables (the copy distributed on Kaggle:
``testing_data.csv`` and ``test_answer.csv``), read by :func:`rnngraph.completion.msr.read_questions`
and :func:`~rnngraph.completion.msr.read_answers` when a file's first line is such a header.

**Questions**: a header ``id,question,a),b),c),d),e)`` (column names compared without case, the
``)`` optional), then one row per question: its number, the sentence with one blank (two or more
underscores), the five candidates::

    id,question,a),b),c),d),e)
    1,"I have it from the same source that you are both an orphan and a bachelor and are _____ alone in London.",crying,instantaneously,residing,matched,walking

**Answers**: a header ``id,answer``, then the number and the right letter (``c`` or ``c)``).
Errors (:class:`~rnngraph.completion.msr.QuestionsError`) name the file and the line.
"""
from __future__ import annotations

import csv
import io
import re

_BLANK = re.compile(r"_{2,}")
QUESTION_COLUMNS = ["id", "question", "a", "b", "c", "d", "e"]
ANSWER_COLUMNS = ["id", "answer"]


def header(line: str) -> list[str] | None:
    """The column names of a CSV header line (lower case, a trailing ``)`` dropped) when it begins
    as the questions' (``id,question``) or the answers' (``id,answer``) header, else None: the
    caller checks the rest with :func:`check_header`."""
    try:
        names = [n.strip().lower().rstrip(")") for n in next(csv.reader([line]))]
    except (csv.Error, StopIteration):
        return None
    return names if names[:2] in (QUESTION_COLUMNS[:2], ANSWER_COLUMNS[:2]) else None


def check_header(path, k: int, line: str, names: list[str], columns: list[str], error) -> None:
    """``error`` naming the file and line ``k`` when a header's ``names`` (:func:`header` of
    ``line``) are not ``columns``: the other table's header (answers given as questions, or the
    reverse; the message names the option it belongs to), or other columns (e.g. four candidates
    where the challenge has five). The message quotes the header as written and the columns as
    the challenge writes them."""
    questions = columns == QUESTION_COLUMNS
    wanted = "id,question,a),b),c),d),e)" if questions else ",".join(columns)
    if names[1] != columns[1]:
        raise error(f"{path}, line {k}: the header {line.strip()!r} is the {'answers' if questions else 'questions'} "
                    f"table's; the {'questions' if questions else 'answers'} table begins {wanted} "
                    f"({'an answers file goes to --answers' if questions else 'a questions file goes to --questions'})")
    if names != columns:
        raise error(f"{path}, line {k}: a CSV header {line.strip()!r}; the table needs the columns {wanted}"
                    + (" (five candidates, a to e)" if questions else ""))


def rows(path, text: str, columns: list[str], error) -> list[tuple[int, list[str]]]:
    """(line number, the row's fields) of the data rows under the header (the first non-blank
    row; blank lines before it are skipped): each with exactly ``columns`` fields, the id a
    number, at least one row; ``error(message)`` makes the exception to raise."""
    out = []
    reader = csv.reader(io.StringIO(text))
    for fields in reader:  # up to and including the header
        if any(f.strip() for f in fields):
            break
    for fields in reader:
        k = reader.line_num
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(columns):
            raise error(f"{path}, line {k}: {len(fields)} field(s), expected {len(columns)} ({','.join(columns)})")
        if not fields[0].strip().isdigit():
            raise error(f"{path}, line {k}: the id {fields[0]!r} is not a number")
        out.append((k, [f.strip() for f in fields]))
    if not out:
        raise error(f"{path}: no rows under the header {','.join(columns)}")
    return out


def question_parts(path, k: int, fields: list[str], error) -> tuple[int, str, list[str]]:
    """(number, sentence, five candidates) of a questions row; ``error`` as in :func:`rows`:
    a sentence without exactly one blank."""
    number, sentence, words = int(fields[0]), fields[1], fields[2:]
    blanks = len(_BLANK.findall(sentence))
    if blanks != 1:
        raise error(f"{path}, line {k}: expected one blank ('_____') in question {number}, found {blanks}")
    return number, sentence, words
