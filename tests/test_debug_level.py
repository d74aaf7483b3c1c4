"""RNNGRAPH_DEBUG is parsed in one place (rnngraph/debug.py): levels and words, and a bad value is
one line from the command line naming the variable (it was a ValueError traceback from the pass
pipeline for RNNGRAPH_DEBUG=yes)."""
import pytest

from rnngraph import cli
from rnngraph.debug import debug_level


@pytest.mark.parametrize("value, level", [("", 0), ("0", 0), ("false", 0), ("No", 0), ("1", 1), ("yes", 1),
                                          ("TRUE", 1), ("2", 2)])
def test_levels_and_words(monkeypatch, value, level):
    monkeypatch.setenv("RNNGRAPH_DEBUG", value)
    assert debug_level() == level


def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("RNNGRAPH_DEBUG", "abc")
    with pytest.raises(ValueError, match="RNNGRAPH_DEBUG='abc'"):
        debug_level()
    assert cli.main(["schedule", "lstm", "--hidden", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rnngraph: error: RNNGRAPH_DEBUG='abc'")


def test_level_2_prints_each_compiles_passes_once_on_stderr(monkeypatch, capsys):
    import rnngraph as rg
    from rnngraph.passes import schedule
    monkeypatch.setenv("RNNGRAPH_DEBUG", "2")
    assert cli.main(["schedule", "lstm", "--hidden", "4", "--window", "3", "--streams", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("schedule lstm") and "after recurrence" not in out  # stdout is the schedule alone
    lines = err.splitlines()
    assert lines[0] == "rnngraph: passes of lstm window=3 streams=2 float32"
    assert [line.split()[1] for line in lines[1:7]] == ["recurrence", "hoist", "merge_gemms", "fuse", "levels", "pipeline"]
    graph = rg.Sequential(rg.cells.lstm(hidden=4), input_size=3).graph
    schedule(graph, 3, 2)
    first = capsys.readouterr().err.splitlines()
    schedule(graph, 3, 2)  # the same compile again: its heading only
    assert capsys.readouterr().err.splitlines() == [first[0] + ": as above"] and len(first) == 7


def test_a_kernels_repeated_compile_lines_are_counted_not_repeated(monkeypatch, capsys):
    import logging
    log = logging.getLogger("rnngraph.compile")
    monkeypatch.setattr(log, "handlers", [])
    kernels = cli._log_compiles()
    for name, seconds in (("adam_update", 0.5), ("loop_k1", 2.0), ("adam_update", 0.25), ("adam_update", 0.25)):
        log.info("rnngraph: %s %s in %.2f s", "loaded", name, seconds)
    log.warning("rnngraph: could not cache %s in %s (%s: %s)", "loop_k1", "/x", "OSError", "full")
    assert capsys.readouterr().err.splitlines() == ["rnngraph: loaded adam_update in 0.50 s",
                                                    "rnngraph: loaded loop_k1 in 2.00 s",
                                                    "rnngraph: could not cache loop_k1 in /x (OSError: full)"]
    assert kernels.summary() == "rnngraph: and 2 more compiles or loads of the kernels above (0.50 s)"
