"""Sentence completion: the MSR-format reader, the scorer on a tiny word model, ``rnngraph complete``.

The model is a word-level LSTM trained for 60 steps on two lines repeated (``she was not at home
to her sister .`` and ``he had a letter from his father .``): after them it has seen only one
word in each place, so the right candidate is certain.
"""
import re

import numpy as np
import pytest

import rnngraph as rg
from cli_helpers import assert_one_line_error, run
from rnngraph import cli
from rnngraph.completion import QuestionsError, complete, read_answers, read_questions, score_sentences
from rnngraph.lm import build_network, load_checkpoint

LINES = "she was not at home to her sister .\nhe had a letter from his father .\n"
#: Two questions in the machine form; the answers are a (home) and c (letter).
MACHINE = """\
1a) she was not at [home] to her sister .
1b) she was not at [letter] to her sister .
1c) she was not at [father] to her sister .
1d) she was not at [sister] to her sister .
1e) she was not at [she] to her sister .
2a) he had a [home] from his father .
2b) he had a [father] from his father .
2c) he had a [letter] from his father .
2d) he had a [sister] from his father .
2e) he had a [she] from his father .
"""
#: The same two questions in the blank form.
BLANK = """\
1) she was not at _____ to her sister .
    a) home
    b) letter
    c) father
    d) sister
    e) she

2) he had a _____ from his father .
    a) home
    b) father
    c) letter
    d) sister
    e) she
"""

#: The same two questions as CSV tables (the Kaggle copy's testing_data.csv, test_answer.csv); a
#: quoted sentence with a comma, and a blank line at the end.
CSV = """\
id,question,a),b),c),d),e)
1,"she was not at _____ to her sister .",home,letter,father,sister,she
2,"he had a _____ from his father, .",home,father,letter,sister,she

"""
CSV_ANSWERS = "id,answer\n1,a\n2,c)\n"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny word-level LSTM trained on LINES repeated (hidden 16, 60 steps, seeded)."""
    d = tmp_path_factory.mktemp("completion")
    corpus = d / "lines.txt"
    corpus.write_text(LINES * 60, encoding="utf-8")
    code = cli.main(["train", "--corpus", str(corpus), "--level", "word", "--hidden", "16", "--embed", "8",
                     "--window", "8", "--streams", "4", "--lr", "0.05", "--device", "cpu", "--no-progress",
                     "--eval-streams", "4", "--steps", "60", "--eval-every", "60", "--checkpoint", str(d / "ck")])
    assert code == 0
    return d / "ck"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def step_of(ck, window=4, streams=3):
    net = build_network(ck.config, len(ck.vocab), dropout=0.0)
    step = rg.compile(net, window=window, streams=streams, device="cpu", dtype=ck.config.dtype)
    step.set_parameters(ck.params)
    return step


# ---- the reader -----------------------------------------------------------------------------
@pytest.mark.parametrize("text", [MACHINE, BLANK], ids=["machine", "blank"])
def test_reader_reads_both_forms_alike(tmp_path, text):
    qs = read_questions(write(tmp_path, "q.txt", text))
    assert [q.number for q in qs] == [1, 2]
    assert qs[0].candidates == ("home", "letter", "father", "sister", "she")
    assert qs[0].sentences[0] == "she was not at home to her sister ."
    assert qs[1].sentences[2] == "he had a letter from his father ."
    assert qs[1].line == (6 if text is MACHINE else 8)


def test_reader_takes_both_forms_in_one_file(tmp_path):
    machine_1, machine_2 = MACHINE[:MACHINE.index("2a)")], MACHINE[MACHINE.index("2a)"):]
    blank_1, blank_2 = BLANK[:BLANK.index("2)")], BLANK[BLANK.index("2)"):]
    for text, second_line in ((machine_1 + blank_2, 6), (blank_1 + machine_2, 8), (machine_1 + blank_2 + "\n" +
                              machine_2.replace("2", "3"), 6)):
        qs = read_questions(write(tmp_path, "q.txt", text))
        assert [q.line for q in qs][:2] == [1, second_line]
        assert qs[0].sentences[0] == "she was not at home to her sister ."
        assert qs[1].candidates == ("home", "father", "letter", "sister", "she")
        assert qs[1].sentences[2] == "he had a letter from his father ."
    assert [q.number for q in qs] == [1, 2, 3] and qs[2].line == 13 and qs[2].sentences == qs[1].sentences


def test_reader_reads_the_csv_tables(tmp_path):
    qs = read_questions(write(tmp_path, "testing_data.csv", CSV))
    assert [(q.number, q.line) for q in qs] == [(1, 2), (2, 3)]
    assert qs[0].candidates == ("home", "letter", "father", "sister", "she")
    assert qs[0].sentences[0] == "she was not at home to her sister ."
    assert qs[1].sentences[2] == "he had a letter from his father, ."
    assert read_answers(write(tmp_path, "test_answer.csv", CSV_ANSWERS)) == {1: 0, 2: 2}


@pytest.mark.parametrize("text,needle", [
    (CSV.replace(",she\n2,", ",she,extra\n2,"), "line 2: 8 field(s), expected 7"),
    (CSV.replace("1,", "one,", 1), "line 2: the id 'one' is not a number"),
    (CSV.replace("at _____ to", "at to"), "line 2: expected one blank ('_____') in question 1, found 0"),
    (CSV.replace("\n2,", "\n1,"), "line 3: question 1 again (first at line 2)"),
    # four candidate columns: it was read as a line of neither form ('expected a question, ...')
    (CSV.replace("d),e)", "d)", 1), "line 1: a CSV header 'id,question,a),b),c),d)'; the table needs the "
                                    "columns id,question,a),b),c),d),e) (five candidates, a to e)"),
], ids=["fields", "id", "blank", "twice", "header"])
def test_csv_errors_name_file_and_line(tmp_path, text, needle):
    with pytest.raises(QuestionsError, match=re.escape(needle)):
        read_questions(write(tmp_path, "testing_data.csv", text))
    with pytest.raises(QuestionsError, match=re.escape("line 3: answer 'x' to question 2")):
        read_answers(write(tmp_path, "test_answer.csv", "id,answer\n1,a\n2,x\n"))
    with pytest.raises(QuestionsError, match=re.escape("line 1: a CSV header 'id,answer,word'; the table needs "
                                                       "the columns id,answer")):
        read_answers(write(tmp_path, "test_answer.csv", "id,answer,word\n1,a,home\n"))


def test_csv_tables_given_the_wrong_way_round_say_so(tmp_path):
    # an answers table passed as questions was read as lines of neither form ("expected a question")
    answers, questions = write(tmp_path, "test_answer.csv", CSV_ANSWERS), write(tmp_path, "testing_data.csv", CSV)
    with pytest.raises(QuestionsError, match=re.escape("line 1: the header 'id,answer' is the answers table's; "
                                                       "the questions table begins id,question,a),b),c),d),e) "
                                                       "(an answers file goes to --answers)")):
        read_questions(answers)
    with pytest.raises(QuestionsError, match=r"line 1: the header 'id,question,a\),.*' is the questions table's; "
                                             r"the answers table begins id,answer "
                                             r"\(a questions file goes to --questions\)"):
        read_answers(questions)


def test_csv_tables_after_blank_lines_and_without_rows(tmp_path):
    # the header is the first non-blank line (it was the first line, so the header was read as a row)
    qs = read_questions(write(tmp_path, "testing_data.csv", "\n\n" + CSV))
    assert [(q.number, q.line) for q in qs] == [(1, 4), (2, 5)]
    assert read_answers(write(tmp_path, "test_answer.csv", "\n" + CSV_ANSWERS)) == {1: 0, 2: 2}
    # a header and no rows is an error (it read as no questions, no answers)
    with pytest.raises(QuestionsError, match=re.escape("testing_data.csv: no rows under the header id,question,a")):
        read_questions(write(tmp_path, "testing_data.csv", CSV.splitlines()[0] + "\n\n"))
    with pytest.raises(QuestionsError, match=re.escape("test_answer.csv: no rows under the header id,answer")):
        read_answers(write(tmp_path, "test_answer.csv", "id,answer\n"))


def test_a_candidate_line_after_a_machine_form_question_names_the_line(tmp_path):
    path = write(tmp_path, "q.txt", MACHINE[:MACHINE.index("2a)")] + "    a) home\n")
    with pytest.raises(QuestionsError) as info:
        read_questions(path)
    assert str(info.value) == (f"{path}, line 6: expected '1a) ... [word] ...' (as the lines before) or a question "
                               f"'1) ... _____ ...', got 'a) home'")


@pytest.mark.parametrize("text", ["1d) he could [swear] to it .\n2b) ...[x]\n", "1) [d] swear\n2) b\n", "1 d\n2 b\n"],
                         ids=["machine", "bracketed-letter", "bare-letter"])
def test_answers_forms(tmp_path, text):
    assert read_answers(write(tmp_path, "a.txt", text)) == {1: 3, 2: 1}


def test_an_answers_word_must_be_its_letters_candidate(tmp_path):
    """Given the questions, an answer's word is checked against the candidate of its letter (a
    regression: '2) [b] door' graded b without a word of warning, as would answers of another
    question set); the letter alone, or the right word in any case, passes."""
    qs = read_questions(write(tmp_path, "q.txt", MACHINE))
    ok = "1a) she was not at [HOME] to her sister .\n2) [b] Father\n"
    assert read_answers(write(tmp_path, "a.txt", ok), qs) == {1: 0, 2: 1}
    assert read_answers(write(tmp_path, "a.txt", "1 a\n2) b\n"), qs) == {1: 0, 2: 1}
    for lenient in ("1) [a] home.\n2) b - father\n", "1) [a] 'home'\n2) [b] father  # from the key\n"):
        assert read_answers(write(tmp_path, "a.txt", lenient), qs) == {1: 0, 2: 1}  # punctuation, comments
    for text, line, said in [("1a) she was not at [home] to her sister .\n2) [b] door\n", 2, "answer b) 'door'"),
                             ("1b) she was not at [home] to her sister .\n2 b\n", 1, "answer b) 'home'")]:
        path = write(tmp_path, "a.txt", text)
        with pytest.raises(QuestionsError, match=re.escape(f"{path}, line {line}: {said} to question ")):
            read_answers(path, qs)
    assert read_answers(path) == {1: 1, 2: 1}  # without the questions: the letters alone, as before


def bad(text, old, new, count=1):
    assert old in text
    return text.replace(old, new, count)


@pytest.mark.parametrize("text, line, needle", [
    (bad(MACHINE, "[father] to", "father to"), 3, "one pair of brackets, '[word]', found 0"),
    (bad(MACHINE, "[home] to her", "[home] to [her]"), 1, "found 2"),
    (bad(MACHINE, "1e) she was not at [she] to her sister .\n", ""), 1, "question 1 has 4 candidate(s), expected 5"),
    (bad(MACHINE, "2e)", "2f)"), 6, "lettered a, b, c, d, f"),
    (bad(MACHINE, "2b) he had", "oops he had"), 7, "expected '1a) ... [word] ...'"),
    (MACHINE + MACHINE[:MACHINE.index("2a)")], 11, "question 1 again (first at line 1)"),
    (bad(BLANK, "2) he had a _____ from", "2) he had a from"), 8, "one blank ('_____') in question 2, found 0"),
    (bad(BLANK, "    e) she\n\n2)", "\n2)"), 1, "question 1 has 4 candidate(s)"),
    (bad(BLANK, "    c) letter", "    c) letter\n    f) extra"), 8, "question 2 has 6 candidate(s)"),
    (bad(BLANK, "    a) home", "    home", 2), 2, "expected '1) ... _____ ...' or a candidate 'a) word'"),
    ("just some text\n", 1, "expected a question"),
], ids=["no-bracket", "two-brackets", "four-candidates", "letter-f", "stray-line", "repeated-question",
        "no-blank", "blank-four", "blank-six", "blank-stray", "neither-form"])
def test_reader_errors_name_file_and_line(tmp_path, text, line, needle):
    path = write(tmp_path, "q.txt", text)
    with pytest.raises(QuestionsError) as info:
        read_questions(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}, line {line}: ") and needle in msg and "\n" not in msg, msg


def test_reader_empty_and_non_utf8(tmp_path):
    with pytest.raises(QuestionsError, match="empty: no questions"):
        read_questions(write(tmp_path, "q.txt", "\n  \n"))
    path = tmp_path / "latin1.txt"
    path.write_bytes("1a) caf\xe9 [x]\n".encode("latin-1"))
    with pytest.raises(QuestionsError, match="not UTF-8"):
        read_questions(path)


@pytest.mark.parametrize("text, line, needle", [
    ("1 c\nno answer here\n", 2, "expected a question number and a letter"),
    ("1 c\n2) [g] word\n", 2, "answer 'g' to question 2: expected a letter a-e"),
    ("1 c\n1 d\n", 2, "question 1 answered again (first at line 1)"),
], ids=["no-letter", "letter-g", "twice"])
def test_answers_errors_name_file_and_line(tmp_path, text, line, needle):
    path = write(tmp_path, "a.txt", text)
    with pytest.raises(QuestionsError) as info:
        read_answers(path)
    assert str(info.value).startswith(f"{path}, line {line}: ") and needle in str(info.value)


# ---- the scorer -----------------------------------------------------------------------------
def test_scores_are_sums_of_next_token_log_probabilities(checkpoint):
    """Any (window, streams) gives what one token at a time does (float32: to 1e-4 nats)."""
    ck = load_checkpoint(checkpoint)
    sentences = ["she was not", "he", "he had a letter from his father . she was not at home to her sister ."]
    start = ck.vocab.index["\n"]
    one = step_of(ck, 1, 1)
    name = one.graph.outputs[0]
    want = []
    for s in sentences:
        one.reset_state()
        total, previous = 0.0, start
        for t in ck.vocab.encode(s):
            z = one.forward(np.array([[previous]])).values[name][0, 0].astype(np.float64)
            total += z[t] - z.max() - np.log(np.exp(z - z.max()).sum())
            previous = t
        want.append(total)
    for window, streams in [(4, 2), (16, 5), (1, 1)]:
        got = score_sentences(step_of(ck, window, streams), ck.vocab, sentences)
        np.testing.assert_allclose(got.log_prob, want, rtol=0, atol=1e-4)
        assert got.tokens.tolist() == [3, 1, 17] and got.unknown.tolist() == [0, 0, 0]


def test_scorer_picks_the_only_continuation_seen(tmp_path, checkpoint):
    ck = load_checkpoint(checkpoint)
    qs = read_questions(write(tmp_path, "q.txt", MACHINE))
    done = complete(step_of(ck), ck.vocab, qs)
    assert [c.choice for c in done] == [0, 2]
    for c in done:  # by a wide margin: every impostor is at least 5 nats less likely
        assert np.sort(c.log_prob)[-2] < c.log_prob[c.choice] - 5


def test_words_outside_the_vocabulary_are_unk_and_counted(checkpoint):
    ck = load_checkpoint(checkpoint)
    got = score_sentences(step_of(ck), ck.vocab, ["she was not at zebra to her aunt .", "Zebra. zebra ."])
    assert got.tokens.tolist() == [9, 4] and got.unknown.tolist() == [2, 2]
    assert np.all(np.isfinite(got.log_prob))
    with pytest.raises(ValueError, match="sentence 1 has no tokens"):
        score_sentences(step_of(ck), ck.vocab, ["she", "  "])


@pytest.mark.parametrize("streams", [5, 40])
def test_sentences_of_the_same_tokens_score_alike_in_any_stream(tmp_path, checkpoint, streams):
    """Candidates that differ only in words outside the vocabulary are the same tokens and get the
    same score bit for bit, wherever they run (a regression: in float32 their sums differed in the
    last digits by stream, at 5 and 40 streams, so `complete` saw no tie and its pick depended on
    --streams)."""
    ck = load_checkpoint(checkpoint)
    same = [f"she was not at zq{x} to her sister ." for x in "abcd"]
    sentences = [same[0], "he", same[1], "he had a letter from his father", same[2], "x y z", same[3]]
    got = score_sentences(step_of(ck, 4, streams), ck.vocab, sentences)
    assert len(set(got.log_prob[[0, 2, 4, 6]].tolist())) == 1
    assert got.tokens.tolist() == [9, 1, 9, 7, 9, 3, 9] and got.unknown.tolist() == [1, 0, 1, 0, 1, 3, 1]
    qs = read_questions(write(tmp_path, "q.txt", "".join(f"1{x}) she was not at [zq{x}] to her sister .\n"
                                                         for x in "abcde")))
    assert complete(step_of(ck, 4, streams), ck.vocab, qs)[0].tied == 5


# ---- rnngraph complete ----------------------------------------------------------------------
def test_cli_prints_choices_accuracy_and_unknown_words(capsys, tmp_path, checkpoint):
    questions = write(tmp_path, "q.txt", MACHINE.replace("[she] to her sister", "[zebra] to her sister"))
    answers = write(tmp_path, "a.txt", "1a) she was not at [home] to her sister .\n2) [b] father\n")
    code, out, err = run(capsys, "complete", "--checkpoint", checkpoint, "--questions", questions,
                         "--answers", answers, "--streams", 3, "--window", 4)
    assert code == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"1\) a home  \(-\d+\.\d{3} nats; right\)", lines[0]), lines[0]
    assert re.fullmatch(r"2\) c letter  \(-\d+\.\d{3} nats; wrong, answer b\)", lines[1]), lines[1]
    assert lines[2] == "accuracy 1/2 = 50.0% (chance 20.0%)"
    # 5 sentences of 9 words and 5 of 8; one word (zebra) is not in the vocabulary
    assert lines[3] == "outside the vocabulary: 1 of the 85 words scored (1.2%), scored as <unk>"
    assert len(lines) == 4


def test_cli_without_answers_and_in_the_blank_form(capsys, tmp_path, checkpoint):
    code, out, err = run(capsys, "complete", "--checkpoint", checkpoint, "--questions", write(tmp_path, "q", BLANK))
    assert code == 0, err
    assert [line.split("  ")[0] for line in out.splitlines()[:2]] == ["1) a home", "2) c letter"]
    assert "accuracy" not in out and out.splitlines()[2].startswith("outside the vocabulary: 0 of the 85 words")


@pytest.mark.parametrize("questions, answers, needles", [
    (bad(MACHINE, "[letter] to", "letter to"), None, ["q.txt, line 2: ", "found 0"]),
    (MACHINE, "1 a\n", ["a.txt: no answer to question 2", "q.txt, line 6"]),
    (MACHINE, "1 a\n2 c\n3 b\n", ["a.txt: an answer to question 3, which", "does not have"]),
    (MACHINE, "1 a\n2 x\n", ["a.txt, line 2: answer 'x' to question 2"]),
    (MACHINE, "1 a\n2) [b] door\n", ["a.txt, line 2: answer b) 'door' to question 2, whose candidate b) is "
                                     "'father'"]),
], ids=["questions", "missing-answer", "extra-answer", "bad-letter", "wrong-word"])
def test_cli_bad_files_are_one_line_errors(capsys, tmp_path, checkpoint, questions, answers, needles):
    argv = ["complete", "--checkpoint", checkpoint, "--questions", write(tmp_path, "q.txt", questions)]
    if answers is not None:
        argv += ["--answers", write(tmp_path, "a.txt", answers)]
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err, *needles, exit_code=1)


def test_cli_a_missing_questions_file_says_no_such_file(capsys, tmp_path, checkpoint):
    """As train and eval say of a missing corpus (it was Python's 'No such file or directory')."""
    code, _, err = run(capsys, "complete", "--checkpoint", checkpoint, "--questions", tmp_path / "nope.txt")
    assert_one_line_error(code, err, f"{tmp_path / 'nope.txt'}: no such file", exit_code=1)


def test_cli_reports_a_tie_of_candidates_outside_the_vocabulary(capsys, tmp_path, checkpoint):
    """Candidates that differ only in words outside the vocabulary score alike: the line says
    which was taken (the first) and how many tied, and the accuracy line counts the tied
    questions (a regression: a tie of five read as a clear, right choice)."""
    tie = "".join(f"1{x}) she was not at [zq{x}] to her sister .\n" for x in "abcde")
    questions = write(tmp_path, "q.txt", tie + MACHINE.split("\n", 5)[5])
    answers = write(tmp_path, "a.txt", "1) [a] zqa\n2) [c] letter\n")
    code, out, err = run(capsys, "complete", "--checkpoint", checkpoint, "--questions", questions,
                         "--answers", answers, "--streams", 3, "--window", 4)
    assert code == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"1\) a zqa  \(-\d+\.\d{3} nats; a tie of 5, the first taken; right\)", lines[0]), lines[0]
    assert "tie" not in lines[1]
    assert lines[2] == "accuracy 2/2 = 100.0% (chance 20.0%); 1 tied, each counted by its first tied candidate"
