"""Regression tests for the API misuses a fresh-user review found (each once gave silent
garbage or a bare traceback)."""
from pathlib import Path

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.cli import main

V = 10


def _lm_step(**kw):
    net = rg.Sequential(rg.Embedding(V, 4), rg.cells.lstm(hidden=4), rg.SoftmaxCrossEntropy(V))
    return rg.compile(net, window=3, streams=2, device="cpu", **kw)


def test_train_without_targets_is_an_error():
    step = _lm_step()
    with pytest.raises(ValueError, match="train needs targets"):
        step.train(np.zeros((3, 2), int), None)


@pytest.mark.parametrize("bad", [-1, V])
@pytest.mark.parametrize("which", ["inputs", "targets"])
def test_token_ids_out_of_range_name_the_input(bad, which):
    step = _lm_step()
    ids = np.zeros((3, 2), int)
    bad_ids = ids.copy()
    bad_ids[1, 1] = bad
    x, y = (bad_ids, ids) if which == "inputs" else (ids, bad_ids)
    name = "x" if which == "inputs" else "y"
    with pytest.raises(rg.ShapeError, match=rf"^{which} \(input '{name}'\): token id {bad} is outside \[0, {V}\)"):
        step.train(x, y)


def test_reference_validates_a_parsed_graph():
    text = str(rg.Sequential(rg.cells.elman(hidden=3), input_size=2).graph).replace("layer0.h_next[t-1]",
                                                                                      "layer0.h_next")
    with pytest.raises(rg.CycleError, match="total delay 0"):
        rg.Reference(rg.parse(text))


def _trace(body):
    @rg.cell
    def broken(x, h: rg.State, *, hidden):
        h_next = body(x, h, hidden)
        return h_next, {"h": h_next}
    return rg.Sequential(broken(hidden=3), input_size=3).graph


def test_numpy_operand_is_a_graph_error_naming_the_fix():
    with pytest.raises(rg.OpError, match="Value and ndarray.*rg.param") as e:
        _trace(lambda x, h, n: rg.tanh(x + np.ones(n)) + h)
    assert isinstance(e.value, rg.GraphError) and isinstance(e.value, TypeError)


def test_python_control_flow_on_a_value_explains_itself():
    def body(x, h, n):
        if x:
            return h
        return rg.tanh(x + h)
    with pytest.raises(rg.OpError, match="control flow"):
        _trace(body)


def test_concat_takes_a_list_too():
    g = _trace(lambda x, h, n: rg.tanh(rg.linear(rg.concat([x, h]), n)))
    assert any(node.op == "concat" and node.size == 6 for node in g.nodes)


@pytest.mark.parametrize("body", [lambda x, h, n: rg.tanh(x / 0 + h), lambda x, h, n: rg.tanh(x + float("nan") + h)])
def test_bad_constants_are_rejected(body):
    with pytest.raises(rg.OpError):
        _trace(body)


def test_values_do_not_outlive_their_network():
    kept = []

    @rg.cell
    def keeper(x, h: rg.State, *, hidden):
        kept.append(x)
        h_next = rg.tanh(rg.linear(x, hidden) + h)
        return h_next, {"h": h_next}

    @rg.cell
    def reuser(x, h: rg.State, *, hidden):
        h_next = rg.tanh(kept[0] + h)
        return h_next, {"h": h_next}

    rg.Sequential(keeper(hidden=3), input_size=3).graph
    with pytest.raises(rg.OpError, match="another network"):
        rg.Sequential(reuser(hidden=3), input_size=3).graph


def test_optimizer_must_be_an_optimizer():
    with pytest.raises(TypeError, match="rg.Adam, rg.AdamW or rg.SGD"):
        _lm_step(optimizer="adam")


def test_naive_plan_is_accepted_everywhere(capsys):
    step = _lm_step(plan="naive")
    assert step.schedule.plan == "naive"
    assert main(["schedule", "lstm", "--hidden", "4", "--window", "3", "--plan", "naive"]) == 0
    assert "plan=naive" in capsys.readouterr().out


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_complex_float_inputs_are_refused_not_cast(device):
    """Complex inputs to a float-input network were cast to real (NumPy's ComplexWarning only);
    checked before anything runs, on both backends (the CUDA one in the simulator or on a GPU)."""
    net = rg.Sequential(rg.cells.lstm(hidden=3), rg.MSE(1), input_size=2)
    step = rg.compile(net, window=2, streams=2, device=device)
    x = np.ones((2, 2, 2), np.complex64)
    with pytest.raises(rg.ShapeError, match=r"input 'x': expected real numbers, got complex64"):
        step.train(x, np.zeros((2, 2, 1), np.float32))


def test_a_long_parameter_mismatch_says_how_many_more():
    """A checkpoint of another cell listed four parameter names and dropped the rest silently."""
    from rnngraph.lm.checkpoint import _few
    assert _few(["a", "b", "c", "d", "e", "f"]) == "['a', 'b', 'c', 'd'] and 2 more"
    assert _few(["a"]) == "['a']"


@pytest.mark.parametrize("kw,name,got", [(dict(optimizer=rg.SGD(lr=0.1)), "optimizer", "SGD"),
                                         (dict(clip_norm=1.0), "clip_norm", "1.0")])
def test_an_evaluation_only_step_refuses_training_arguments(kw, name, got):
    """rg.compile(..., backward=False) ignored an optimizer= or clip_norm= silently."""
    with pytest.raises(ValueError, match=rf"rg.compile\(\.\.\., backward=False\): an evaluation-only step never "
                                         rf"trains, so it takes no {name} \(got {got}\); leave {name} out"):
        _lm_step(backward=False, **kw)
    assert _lm_step(backward=False).optimizer.steps == 0  # without them (rnngraph.lm.Evaluator's call): fine


def test_an_evaluation_only_schedule_shows_only_what_it_compiles():
    """The schedule of rg.compile(..., backward=False) listed the backward it never compiles, and
    counted it in the totals."""
    from rnngraph.schedule_export import to_json
    full, ev = _lm_step(), _lm_step(backward=False)
    forward, _ = str(full.schedule).split("\nbackward\n")
    text = str(ev.schedule)
    assert text.startswith(forward + "\nbackward  none (forward only)\nwork ")
    # gather, input GEMM, one persistent loop, head GEMM, loss: 5 launches (training: 13)
    assert text.endswith("launches/window 5\n") and "launches/window 13\n" in str(full.schedule)
    assert 0 < ev.schedule.work < full.schedule.work / 2 and ev.schedule.critical_path < full.schedule.critical_path
    assert ev.schedule.backward == () and to_json(ev.schedule)["backward"] == []
    x = np.ones((4, 3), np.int64)
    ev.forward(x, x)  # another (T, S), compiled on use: forward only too
    assert (ev.schedule.window, ev.schedule.streams, ev.schedule.backward) == (4, 3, ())
    ev.forward(x, x, lengths=[4, 2, 1])  # the variable-length graph's plan
    assert ev.schedule.graph is ev.net.masked_graph and ev.schedule.backward == ()


def test_dtype_takes_the_numpy_type_and_names_a_bad_one():
    """``dtype=np.float64`` (or ``np.dtype("float32")``) is the string's dtype; before, it was
    refused with "dtype <class 'numpy.float64'> is not supported (float32, float64)"."""
    net = rg.Sequential(rg.cells.elman(hidden=3), input_size=2)
    assert rg.compile_rnn(net, device="cpu", dtype=np.float64).dtype == "float64"
    assert _lm_step(dtype=np.dtype("float32")).dtype == "float32"
    for bad in (np.float16, "float16", int):
        with pytest.raises(ValueError, match=r"^dtype must be 'float32' or 'float64' \(or the NumPy type\), got "):
            rg.compile_rnn(net, device="cpu", dtype=bad)
        with pytest.raises(ValueError, match="dtype must be 'float32' or 'float64'"):
            _lm_step(dtype=bad)


def test_rnngraph_torch_without_pytorch_names_the_install():
    """Regression: `from rnngraph.torch import RNN` without PyTorch ended in a bare
    ModuleNotFoundError traceback; it now says what to install (one line, still a
    ModuleNotFoundError for code that catches it)."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import rnngraph.torch\n"
            "except ModuleNotFoundError as e:\n    print(e.name, '|', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("torch | rnngraph.torch needs PyTorch, which is not installed: "
                                 "pip install torch"), out.stdout
