"""`rnngraph schedule`: the dump in each format, and clear errors."""
import json

import pytest

import rnngraph as rg
from rnngraph.cellfile import resolve_cell
from rnngraph.cli import main
from rnngraph.passes import schedule


def test_text_is_the_schedule_dump(capsys):
    assert main(["schedule", "lstm", "--layers", "2", "--hidden", "16", "--window", "7", "--streams", "3"]) == 0
    want = str(schedule(rg.stacked(rg.cells.lstm, 2, 16).graph, 7, 3))
    assert capsys.readouterr().out == want


def test_json_and_dot(capsys):
    assert main(["schedule", "gru", "--hidden", "8", "--window", "5", "--vocab", "11", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["window"] == 5 and data["plan"] in ("wavefront", "scc-sequential")
    assert any(k["kind"] == "loss" for st in data["forward"] for k in st["kernels"])
    assert main(["schedule", "lstm", "--layers", "2", "--hidden", "8", "--format", "dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph") and dot.count("subgraph cluster_") == 2 and 'label="t-1"' in dot


def test_gantt_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "g.png"
    assert main(["schedule", "lstm", "--layers", "3", "--hidden", "8", "--format", "gantt", "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_custom_cell_file_and_errors(tmp_path, capsys):
    cell = tmp_path / "cells.py"
    cell.write_text("import rnngraph as rg\n\n@rg.cell\ndef mine(x, h: rg.State, *, hidden):\n"
                    "    h_next = rg.tanh(rg.linear(x, hidden) + rg.linear(h, hidden))\n"
                    "    return h_next, {'h': h_next}\n")
    assert main(["schedule", f"{cell}:mine", "--hidden", "4", "--window", "3"]) == 0
    assert "layer0.h_next" in capsys.readouterr().out
    assert main(["schedule", "nope"]) == 1
    assert "unknown cell" in capsys.readouterr().err
    assert main(["schedule", "lstm", "--format", "gantt"]) == 1
    assert "--out" in capsys.readouterr().err
    assert main(["schedule", "lstm", "--window", "0"]) == 2


def test_a_cell_file_returning_its_state_as_output(tmp_path, capsys):
    """A cell returning its state argument as its output (h at t-1) schedules: its output is a
    copy node, ``layer0.y`` (it failed: output 'layer0.__state__' is not a node)."""
    cell = tmp_path / "cells.py"
    cell.write_text("import rnngraph as rg\n\n@rg.cell\ndef mine(x, h: rg.State, *, hidden):\n"
                    "    h_next = rg.tanh(rg.linear(x, hidden) + rg.linear(h, hidden))\n"
                    "    return h, {'h': h_next}\n")
    assert main(["schedule", f"{cell}:mine", "--hidden", "4", "--window", "3"]) == 0
    assert "layer0.y" in capsys.readouterr().out
    graph = rg.Sequential(resolve_cell(f"{cell}:mine")(hidden=4), input_size=2).graph
    assert graph.outputs == ("layer0.y",) and graph.by_name["layer0.y"].args[0].delay == 1


def test_cell_as_a_flag_as_train_takes_it(capsys):
    """``--cell CELL`` (train's spelling) gives the same dump as the positional CELL; both or
    neither is a one-line error saying so (neither: test_no_cell_and_a_missing_out_folder_are_named)."""
    assert main(["schedule", "gru", "--hidden", "8", "--window", "5"]) == 0
    positional = capsys.readouterr().out
    assert main(["schedule", "--cell", "gru", "--hidden", "8", "--window", "5"]) == 0
    assert capsys.readouterr().out == positional and "schedule gru" in positional
    assert main(["schedule", "lstm", "--cell", "gru"]) == 1
    assert "give the cell once: rnngraph schedule CELL or rnngraph schedule --cell CELL (got 'lstm' and --cell 'gru')" \
        in capsys.readouterr().err
    assert main(["schedule", "--cell", "nope"]) == 1
    assert "--cell nope: unknown cell" in capsys.readouterr().err


def test_bad_loop_tuning_variable_is_one_line_for_any_cell(monkeypatch, capsys):
    """Regression: `RNNGRAPH_LOOP=rows=99 rnngraph schedule lstm` printed the
    schedule and exited 0; only graphs with a layer norm parsed the variable."""
    monkeypatch.setenv("RNNGRAPH_LOOP", "rows=99")
    assert main(["schedule", "lstm"]) == 1
    err = capsys.readouterr().err
    assert "RNNGRAPH_LOOP='rows=99': rows must be in [1, 16], got 99" in err and "Traceback" not in err


def test_text_names_the_loop_code_shape_rnngraph_loop_changed(monkeypatch, capsys):
    """The loop kernels' code shape is not part of the schedule, so the text dump ends with the
    knobs RNNGRAPH_LOOP set away from LoopTuning.defaults for S (nothing when none)."""
    args = ["schedule", "lstm", "--hidden", "8", "--streams", "16", "--window", "2"]
    assert main(args) == 0 and "loop code shape" not in capsys.readouterr().out
    monkeypatch.setenv("RNNGRAPH_LOOP", "dsmem_kib=0,pipeline=1,unroll=8")  # unroll=8 is S=16's default
    assert main(args) == 0
    assert capsys.readouterr().out.endswith(
        "loop code shape (RNNGRAPH_LOOP; not the defaults for S=16): dsmem_kib=0, pipeline=1\n")
    assert main(args + ["--format", "json"]) == 0  # the JSON dump carries the same knobs
    assert json.loads(capsys.readouterr().out)["loop_code_shape_changed"] == {"dsmem_kib": 0, "pipeline": 1}
    assert rg.LoopTuning.defaults(1).changed(1) == {} and rg.LoopTuning().changed(1)["dsmem_kib"] == 176


def test_an_unused_state_is_one_note_line(tmp_path, capsys):
    """A cell file whose state is never read: one ``rnngraph: note:`` line naming the state, not
    Python's warning lines pointing into rnngraph's source (schedule traced the graph twice)."""
    cell = tmp_path / "cells.py"
    cell.write_text("import rnngraph as rg\n\n@rg.cell\ndef unused(x, h: rg.State, c: rg.State, *, hidden):\n"
                    "    h_next = rg.tanh(rg.linear(x, hidden) + rg.linear(h, hidden))\n"
                    "    return h_next, {'h': h_next, 'c': h_next * 2}\n")
    assert main(["schedule", f"{cell}:unused", "--hidden", "4", "--window", "2"]) == 0
    err = capsys.readouterr().err
    assert err.count("rnngraph: note: state 'layer0.c'") == 1 and "never read" in err
    assert "Warning" not in err and "network.py" not in err


def test_unknown_cell_and_gantt_file_type_are_named(tmp_path, capsys):
    """A cell name in the wrong case gets a suggestion; a gantt --out of a type matplotlib cannot
    write names the flag (matplotlib's own message named no flag)."""
    assert main(["schedule", "LSTM"]) == 1
    assert "unknown cell (did you mean lstm?)" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    assert main(["schedule", "lstm", "--hidden", "8", "--format", "gantt", "--out", str(tmp_path / "g.txt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rnngraph: error: --out {tmp_path / 'g.txt'}: ") and "'txt'" in err


def test_no_cell_and_a_missing_out_folder_are_named(capsys, tmp_path):
    """Before: no cell at all said "give the cell once", and --out in a missing folder said
    "no such file" of the file to be written."""
    assert main(["schedule", "--hidden", "8"]) == 1
    assert capsys.readouterr().err == ("rnngraph: error: no cell given: rnngraph schedule CELL (a standard cell's "
                                       "name or file.py:function)\n")
    out = tmp_path / "nodir" / "s.json"
    assert main(["schedule", "lstm", "--hidden", "8", "--format", "json", "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"rnngraph: error: --out {out}: no folder {out.parent}\n"
