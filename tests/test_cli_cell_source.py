"""A checkpoint of a cell of the user's file stores the file's source: sample and eval work when
the file has moved or changed, ``--cell FILE`` overrides it, and older checkpoints (the path only)
still load."""
import json
import shutil
import sys

import pytest

from cli_helpers import MGU, assert_one_line_error, run, train
from rnngraph.lm import load_checkpoint

SAMPLE = ("--prime", "she ", "--length", 30, "--seed", 5)


@pytest.fixture
def run_of_cell_file(capsys, tmp_path, text_file):
    """(checkpoint, cell file, its sample): 3 steps of the mgu cell of a file in tmp_path/cells."""
    cell = tmp_path / "cells" / "mycell.py"
    cell.parent.mkdir()
    cell.write_text(MGU, encoding="utf-8")
    ckpt = tmp_path / "ck"
    code, _, err = train(capsys, text_file, ckpt, "--cell", f"{cell}:mgu", steps=3)
    assert code == 0, err
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert code == 0 and err == "", err
    assert out.startswith("she ") and len(out) == len("she ") + 30 + 1
    return ckpt, cell, out


def test_the_checkpoint_stores_the_source_and_the_path(run_of_cell_file):
    ckpt, cell, _ = run_of_cell_file
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    assert config["cell"] == f"{cell}:mgu" and config["cell_source"] == MGU
    assert load_checkpoint(ckpt).config.cell_source == MGU


def test_sample_and_eval_after_the_cell_file_moved(capsys, run_of_cell_file):
    """Before: `<path>: no such file (from --cell ...)`."""
    ckpt, cell, sampled = run_of_cell_file
    shutil.move(cell.parent, cell.parent.with_name("elsewhere"))
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert (code, out, err) == (0, sampled, "")
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--split", "valid")
    assert code == 0 and out.startswith("valid ") and "bits/char" in out, err


def test_a_changed_cell_file_is_noted_and_the_stored_source_runs(capsys, run_of_cell_file):
    ckpt, cell, sampled = run_of_cell_file
    cell.write_text("raise RuntimeError('edited after training')\n", encoding="utf-8")
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert (code, out) == (0, sampled)
    assert err == (f"rnngraph: note: {cell} has changed since {ckpt} was written; it runs the cell source stored in the "
                   f"checkpoint (--cell {cell} runs the file)\n")


def test_cell_flag_takes_precedence(capsys, tmp_path, run_of_cell_file):
    ckpt, cell, sampled = run_of_cell_file
    copy = tmp_path / "copy.py"
    shutil.copy(cell, copy)
    for spec in (copy, f"{copy}:mgu"):  # FILE.py takes the checkpoint's function name
        code, out, err = run(capsys, "sample", "--checkpoint", ckpt, "--cell", spec, *SAMPLE)
        assert (code, out, err) == (0, sampled, "")
    code, out, err = run(capsys, "eval", "--checkpoint", ckpt, "--cell", copy)
    assert code == 0 and "bits/char" in out, err
    broken = tmp_path / "broken.py"  # the stored source is fine: only the override can fail so
    broken.write_text("raise RuntimeError('not this one')\n", encoding="utf-8")
    code, _, err = run(capsys, "sample", "--checkpoint", ckpt, "--cell", broken)
    assert_one_line_error(code, err, f"{broken}:1: RuntimeError while importing: not this one")
    code, _, err = run(capsys, "eval", "--checkpoint", ckpt, "--cell", "lstm")
    assert_one_line_error(code, err, f"{ckpt}: params.npz does not fit the cell of --cell lstm (", "unexpected parameters")
    code, _, err = run(capsys, "sample", "--checkpoint", ckpt, "--cell", tmp_path / "gone.py")
    assert_one_line_error(code, err, "gone.py: no such file (from --cell")


def test_an_older_checkpoint_with_the_path_only_still_loads(capsys, tmp_path, text_file, run_of_cell_file):
    """Checkpoints written before the source was stored have no cell_source in config.json."""
    ckpt, cell, sampled = run_of_cell_file
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    del config["cell_source"]
    (ckpt / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert load_checkpoint(ckpt).config.cell_source is None
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)  # the file is where it was
    assert (code, out, err) == (0, sampled, "")
    moved = tmp_path / "moved.py"
    shutil.move(cell, moved)
    code, _, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert_one_line_error(code, err, f"{cell}: no such file: {ckpt} was written before checkpoints stored their "
                                     "cell's source", "put it back, or give sample and eval --cell FILE.py")
    code, out, err = run(capsys, "sample", "--checkpoint", ckpt, "--cell", moved, *SAMPLE)
    assert (code, out, err) == (0, sampled, "")
    shutil.move(moved, cell)  # resuming it stores the source in its next checkpoints
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 4, "--no-progress")
    assert code == 0, err
    assert load_checkpoint(ckpt).config.cell_source == MGU and load_checkpoint(ckpt).step == 4


def test_resume_trains_the_stored_source_and_refuses_an_edited_cell_file(capsys, run_of_cell_file):
    """Before: ``train --resume --cell FILE`` with FILE edited since went on with the stored source,
    silently, and the note said ``--cell FILE runs the file``, which holds for sample and eval only."""
    ckpt, cell, _ = run_of_cell_file
    cell.write_text(MGU.replace("return", "# edited\n    return", 1), encoding="utf-8")
    code, _, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 4, "--cell", f"{cell}:mgu")
    assert_one_line_error(code, err, f"{ckpt}: {cell} has changed since the checkpoint was written, and a resumed run "
                          "trains the cell source stored in it: drop --cell to resume with that source")
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 4)
    assert code == 0 and f"resumed {ckpt} at step 3" in out, err
    assert (f"rnngraph: note: {cell} has changed since {ckpt} was written; it runs the cell source stored in the "
            f"checkpoint (a new --checkpoint directory trains the file)") in err
    assert load_checkpoint(ckpt).config.cell_source == MGU


def test_resume_with_the_cell_flag_of_a_deleted_file_trains_the_stored_source(capsys, run_of_cell_file):
    """The check of an edited file reads the file only where it is still there."""
    ckpt, cell, _ = run_of_cell_file
    cell.unlink()
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 4, "--cell", f"{cell}:mgu")
    assert code == 0 and f"resumed {ckpt} at step 3" in out, err


#: MGU with its forget gate in a module beside the cell file (a name no other test imports).
GATES = ("import rnngraph as rg\n\n"
         "def forget_gate(x, h, hidden):\n"
         "    return rg.sigmoid(rg.linear(x, hidden, name='Wf') + rg.linear(h, hidden, bias=False, name='Uf'))\n")
MGU_OF_GATES = ("import rnngraph as rg\n"
                "from mgu_sibling_gates import forget_gate\n\n"
                "@rg.cell\n"
                "def mgu(x, h: rg.State, *, hidden: int):\n"
                "    f = forget_gate(x, h, hidden)\n"
                "    n = rg.tanh(rg.linear(x, hidden, name='Wh') + rg.linear(f * h, hidden, bias=False, name='Uh'))\n"
                "    h_next = (1 - f) * h + f * n\n"
                "    return h_next, {'h': h_next}\n")


def _cell_beside_its_gates(folder):
    """The cell file ``folder/mycell.py`` (function mgu) and ``folder/mgu_sibling_gates.py``."""
    folder.mkdir()
    (folder / "mgu_sibling_gates.py").write_text(GATES, encoding="utf-8")
    (folder / "mycell.py").write_text(MGU_OF_GATES, encoding="utf-8")
    return folder / "mycell.py"


def test_a_cell_file_imports_a_module_beside_it_from_another_folder(capsys, tmp_path):
    """Before: ``No module named 'mgu_sibling_gates'`` unless run from the file's folder. The folder
    is on sys.path while the file runs only, and the module it imported from there is not kept in
    sys.modules afterwards."""
    cell, path_before = _cell_beside_its_gates(tmp_path / "cells"), list(sys.path)
    code, out, err = run(capsys, "schedule", f"{cell}:mgu", "--hidden", 4, "--window", 3)
    assert code == 0 and "layer0.Uf" in out, err
    assert sys.path == path_before
    assert "mgu_sibling_gates" not in sys.modules


def test_a_checkpoint_of_a_moved_cell_file_needs_the_modules_it_imports(capsys, tmp_path, text_file):
    """Trained from another folder (it failed so before); after the cell file moves, sampling runs its
    stored source, which imports the module still in the old folder; once that is gone too, the
    error names the module and says the checkpoint stores only the cell file's own source."""
    cell, ckpt = _cell_beside_its_gates(tmp_path / "cells"), tmp_path / "ck"
    code, _, err = train(capsys, text_file, ckpt, "--cell", f"{cell}:mgu", steps=3)
    assert code == 0, err
    code, sampled, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert code == 0 and len(sampled) == len("she ") + 30 + 1, err
    shutil.move(cell, tmp_path / "mycell.py")
    assert run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE) == (0, sampled, "")
    (tmp_path / "cells" / "mgu_sibling_gates.py").unlink()
    code, _, err = run(capsys, "sample", "--checkpoint", ckpt, *SAMPLE)
    assert_one_line_error(code, err, f"{cell}:2: ModuleNotFoundError while importing: No module named "
                          "'mgu_sibling_gates' (the file is no longer there, and a checkpoint stores only the cell "
                          "file's own source, not the modules it imports: put 'mgu_sibling_gates' back beside "
                          f"{cell} or on PYTHONPATH)")


#: A helper module's gate: its weight's name tells which file it came from.
TWIN_HELPER = ("import rnngraph as rg\n\n"
               "def gate(x, hidden):\n"
               "    return rg.sigmoid(rg.linear(x, hidden, name={name!r}))\n")
TWIN_CELL = ("import rnngraph as rg\n"
             "from twin_helpers import gate\n\n"
             "@rg.cell\n"
             "def c(x, h: rg.State, *, hidden: int):\n"
             "    h_next = gate(x, hidden) * rg.tanh(rg.linear(h, hidden, name='U'))\n"
             "    return h_next, {'h': h_next}\n")


def test_each_cell_file_imports_its_own_helpers_and_their_edits(capsys, tmp_path):
    """Two folders, each with a cell file importing ``twin_helpers`` beside it. Before, the second
    cell file got the first's helpers (sys.modules kept them), and an edited helper was never read."""
    cells = {}
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "twin_helpers.py").write_text(TWIN_HELPER.format(name=f"W{folder}"), encoding="utf-8")
        (tmp_path / folder / "cell.py").write_text(TWIN_CELL, encoding="utf-8")
        cells[folder] = f"{tmp_path / folder / 'cell.py'}:c"
    for folder, other in (("a", "b"), ("b", "a")):
        code, out, err = run(capsys, "schedule", cells[folder], "--hidden", 4, "--window", 3)
        assert code == 0 and f"layer0.W{folder}" in out and f"layer0.W{other}." not in out, (out, err)
    (tmp_path / "a" / "twin_helpers.py").write_text(TWIN_HELPER.format(name="Wedited"), encoding="utf-8")
    code, out, err = run(capsys, "schedule", cells["a"], "--hidden", 4, "--window", 3)
    assert code == 0 and "layer0.Wedited" in out and "layer0.Wa." not in out, (out, err)
    assert "twin_helpers" not in sys.modules
