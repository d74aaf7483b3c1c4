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
