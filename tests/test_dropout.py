"""Dropout (rg.Dropout, rg.stacked(dropout=p), rnngraph train --dropout): Zaremba et al. 2014's
placement on the non-recurrent connections, PyTorch's inverted dropout.

The graph (mask inputs and muls; p = 0 adds nothing; the IR text round trip), the errors, the
masks (statistics, determinism, which training call draws which), training against a hand
computation through rg.Reference with the same masks, evaluation without dropout, the CUDA
backend in the simulator against the CPU backend, and exact resumption through the CLI.
"""
import json
import math
import os

import numpy as np
import pytest

import rnngraph as rg
from gradcheck import check_graph
from rnngraph import cli, lm
from rnngraph.executor import ScheduleExecutor
from rnngraph.network import draw_mask, mask_inputs, mask_seed
from rnngraph.passes import schedule

V, E, H = 7, 3, 4


def lm_net(p, layers=2, cell=rg.cells.lstm):
    return rg.stacked(cell, layers, H, vocab=V, embed=E, dropout=p)


# ---- the graph -------------------------------------------------------------------------------
def test_p0_adds_nothing():
    plain = lm_net(0.0)
    without = rg.Sequential(rg.Embedding(V, E), rg.cells.lstm(hidden=H), rg.cells.lstm(hidden=H),
                            rg.SoftmaxCrossEntropy(V))
    assert str(plain.graph) == str(without.graph)
    explicit = rg.Sequential(rg.Embedding(V, E), rg.Dropout(0.0), rg.cells.lstm(hidden=H), rg.Dropout(0),
                             rg.cells.lstm(hidden=H), rg.Dropout(0.0), rg.SoftmaxCrossEntropy(V))
    assert str(explicit.graph) == str(plain.graph)
    assert mask_inputs(plain.graph) == {}
    # a p = 0 layer takes no name either: the next real one is still drop0
    mixed = rg.Sequential(rg.Embedding(V, E), rg.Dropout(0.0), rg.cells.lstm(hidden=H), rg.Dropout(0.25),
                          rg.SoftmaxCrossEntropy(V))
    assert mask_inputs(mixed.graph) == {"drop0.mask": 0.25}


def test_stacked_places_dropout_like_zaremba():
    g = lm_net(0.5).graph
    assert mask_inputs(g) == {"drop0.mask": 0.5, "drop1.mask": 0.5, "drop2.mask": 0.5}
    want = {"drop0": ("embed.e", E, "layer0.W"), "drop1": ("layer0.h_next", H, "layer1.W"),
            "drop2": ("layer1.h_next", H, "head.logits")}
    for d, (src, width, consumer) in want.items():
        mask, out = g.node(f"{d}.mask"), g.node(f"{d}.out")
        assert (mask.op, mask.dtype, mask.size, mask.attr) == ("input", "float", width, {"dropout": 0.5})
        assert out.op == "mul" and [r.node for r in out.args] == [src, f"{d}.mask"]
        assert all(r.delay == 0 for r in out.args)
        assert [c.name for c, _ in g.consumers()[f"{d}.out"]] == [consumer]
    # the recurrent connections stay undropped: U reads h_next itself
    assert [r.node for r in g.node("layer1.U").args] == ["layer1.h_next"]
    # no parameters added: the same initialisation as without dropout
    assert rg.init_params(g, 3).keys() == rg.init_params(lm_net(0.0).graph, 3).keys()
    for k, v in rg.init_params(g, 3).items():
        np.testing.assert_array_equal(v, rg.init_params(lm_net(0.0).graph, 3)[k])


def test_float_input_stack_drops_between_cells_only():
    g = rg.stacked(rg.cells.gru, 3, H, input_size=5, dropout=0.2).graph
    assert mask_inputs(g) == {"drop0.mask": 0.2, "drop1.mask": 0.2}
    assert [r.node for r in g.node("layer1.W").args] == ["drop0.out"]
    assert [r.node for r in g.node("layer0.W").args] == ["x"]  # the network input is not dropped
    assert mask_inputs(rg.stacked(rg.cells.gru, 1, H, input_size=5, dropout=0.2).graph) == {}


def test_ir_text_round_trip_keeps_the_probability():
    g = lm_net(0.3).graph
    text = str(g)
    assert "node drop1.mask : float[4] = input() {dropout=0.3}" in text
    back = rg.parse(text)
    assert back == g and str(back) == text
    assert mask_inputs(rg.passes.validate(back)) == {"drop0.mask": 0.3, "drop1.mask": 0.3, "drop2.mask": 0.3}


@pytest.mark.parametrize("layers, index, words", [
    ((rg.Dropout(0.1), rg.cells.lstm(hidden=H)), 0, "first layer"),
    ((rg.Embedding(V, E), rg.cells.lstm(hidden=H), rg.SoftmaxCrossEntropy(V), rg.Dropout(0.1)), 3, "follow"),
])
def test_misplaced_dropout(layers, index, words):
    with pytest.raises(rg.GraphError, match=f"layer {index}: .*{words}"):
        rg.Sequential(*layers, input_size=3)


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5, float("nan"), "0.5", True, None])
def test_bad_probability(p):
    with pytest.raises(rg.GraphError, match=r"rg.Dropout.*\[0, 1\)"):
        rg.Dropout(p)
    with pytest.raises(rg.GraphError, match=r"rg.stacked\(dropout=.*\[0, 1\)"):  # names stacked's argument
        rg.stacked(rg.cells.lstm, 2, H, vocab=V, dropout=p)


def test_schedules_with_dropout_verify_and_run_like_the_reference(monkeypatch):
    """Both plans put the muls where they belong (the between-layers one inside the wavefront
    body) and, with RNNGRAPH_DEBUG's verifier on, run like naive time-stepping (float64)."""
    monkeypatch.setenv("RNNGRAPH_DEBUG", "1")
    g = lm_net(0.4).graph
    T, S = 3, 2
    rng = np.random.default_rng(5)
    params = rg.init_params(g, 1)
    feed = {"x": rng.integers(0, V, (T, S)), "y": rng.integers(0, V, (T, S))}
    feed.update({m: draw_mask(p, (T, S, g.node(m).size), mask_seed(0, 0, k), "float64")
                 for k, (m, p) in enumerate(mask_inputs(g).items())})
    states = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()}
    ref = rg.Reference(g)
    want = ref.forward(params, feed, states)
    want_g = ref.backward(want)
    for plan in ("wavefront", "scc-sequential"):
        s = schedule(g, T, S, "float64", plan)
        body = [k for st in s.forward if hasattr(st, "levels") for k in st.kernels]
        assert any("drop1.out" in k.ops for k in body) == (plan == "wavefront")
        ex = ScheduleExecutor(s, "float64")
        got = ex.forward(params, feed, states)
        assert got.loss == pytest.approx(want.loss, rel=1e-12)
        got_g = ex.backward(got)
        for k in want_g.params:
            np.testing.assert_allclose(got_g.params[k], want_g.params[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_wavefront_runs_the_between_layers_dropout_in_the_producers_stage():
    """Regression: the mask multiply between two layers sat in the consumer's stage
    and cost the wavefront a second level per timestep; it is attached to the producing layer
    now (passes/pipeline.py attached_to_loops), so the forward keeps one level."""
    for p, levels in ((0.0, 1), (0.3, 1)):
        s = schedule(rg.stacked(rg.cells.lstm, 2, 16, vocab=V, embed=8, dropout=p).graph, 10, 1, plan="wavefront")
        (loop,) = [st for st in s.forward if hasattr(st, "levels")]
        assert loop.levels == levels, p
        if p:
            stage_of = {m: k.stage for k in loop.kernels for m in k.ops}
            assert stage_of["drop1.out"] == stage_of["layer0.h_next"] == 0 and stage_of["layer1.W"] == 1


@pytest.mark.parametrize("plan", ["wavefront", "scc-sequential"])
def test_backward_computes_no_mask_gradient(plan):
    """Regression: every float input got a gradient, so the backward stored
    an unused d.mask per dropout layer; masks are not differentiable (Graph.differentiable)."""
    g = rg.stacked(rg.cells.lstm, 2, 16, vocab=V, embed=8, dropout=0.3).graph
    s = schedule(g, 10, 2, plan=plan)
    writes = {w for k in s.kernels("backward") for w in k.writes}
    assert not any(w.endswith(".mask") for w in writes), sorted(writes)
    assert {"d.layer0.h_next", "d.embed.e"} <= {w.split("[")[0] for w in writes}  # what they multiply still is
    assert not any(g.differentiable(m) for m in mask_inputs(g)) and g.differentiable("drop1.out")


def test_gradient_check_through_the_masks():
    """Central differences of the loss through mul(value, mask) (masks as given inputs)."""
    assert check_graph(lm_net(0.5, layers=1).graph, T=3, S=2, seed=4) < 1e-6


# ---- the masks -------------------------------------------------------------------------------
@pytest.mark.parametrize("p, dtype", [(0.3, "float32"), (0.65, "float64"), (0.05, "float32")])
def test_mask_statistics(p, dtype):
    n_shape = (40, 25, 100)  # 100,000 elements
    m = draw_mask(p, n_shape, mask_seed(7, 3, 1), dtype)
    assert m.shape == n_shape and m.dtype == np.dtype(dtype)
    n = m.size
    zeros = float((m == 0).mean())
    sigma = math.sqrt(p * (1 - p) / n)  # binomial standard deviation of the fraction
    assert abs(zeros - p) < 5 * sigma, (zeros, p, sigma)
    kept = m[m != 0]
    assert np.all(kept == np.dtype(dtype).type(1.0 / (1.0 - p)))
    # inverted dropout keeps the mean: E[m] = 1 (within 5 sigma of its estimate)
    assert abs(m.astype(np.float64).mean() - 1.0) < 5 * math.sqrt(p / (1 - p) / n)


def test_masks_depend_on_seed_step_and_position_only():
    shape = (4, 3, 50)
    a = draw_mask(0.5, shape, mask_seed(1, 2, 0))
    np.testing.assert_array_equal(a, draw_mask(0.5, shape, mask_seed(1, 2, 0)))
    for other in (mask_seed(2, 2, 0), mask_seed(1, 3, 0), mask_seed(1, 2, 1)):
        assert not np.array_equal(a, draw_mask(0.5, shape, other))
    # the zero pattern does not depend on the dtype
    np.testing.assert_array_equal(a == 0, draw_mask(0.5, shape, mask_seed(1, 2, 0), "float64") == 0)


def test_training_step_masks_fresh_per_call_and_ones_for_forward():
    T, S = 4, 3
    step = rg.compile(lm_net(0.5), window=T, streams=S, device="cpu", seed=11)
    assert step.dropout == {"drop0.mask": 0.5, "drop1.mask": 0.5, "drop2.mask": 0.5}
    first = step.dropout_masks(train=True)
    assert {k: v.shape for k, v in first.items()} == {"drop0.mask": (T, S, E), "drop1.mask": (T, S, H),
                                                      "drop2.mask": (T, S, H)}
    assert all(v.dtype == np.float32 for v in first.values())
    for k, (name, m) in enumerate(first.items()):
        np.testing.assert_array_equal(m, draw_mask(0.5, m.shape, mask_seed(11, 0, k)))
    rng = np.random.default_rng(0)
    step.train(rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S)))
    second = step.dropout_masks(train=True)  # the next call's: optimizer.steps is now 1
    assert step.optimizer.steps == 1
    assert not any(np.array_equal(first[k], second[k]) for k in first)
    np.testing.assert_array_equal(second["drop1.mask"], draw_mask(0.5, (T, S, H), mask_seed(11, 1, 1)))
    ones = step.dropout_masks(train=False)
    assert all(np.all(v == 1) and v.dtype == np.float32 for v in ones.values())


# ---- training and evaluation on the CPU backend --------------------------------------------------
def test_train_equals_reference_with_the_same_masks():
    """One SGD step with dropout: loss and updated parameters equal a hand computation through
    rg.Reference fed the masks the step draws (float64)."""
    T, S, lr = 3, 2, 0.5
    net = lm_net(0.4)
    step = rg.compile(net, window=T, streams=S, device="cpu", dtype="float64", optimizer=rg.SGD(lr=lr), seed=2)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    p0 = {k: v.copy() for k, v in step.parameters.items()}
    masks = step.dropout_masks(train=True)
    assert all(set(np.unique(m)) == {0.0, 1 / 0.6} for m in masks.values())
    loss = step.train(x, y)
    ref = rg.Reference(net.graph, "float64")
    fwd = ref.forward(p0, {"x": x, "y": y, **masks})
    assert loss == pytest.approx(fwd.loss, rel=1e-12)
    # the masks really multiply what they drop
    np.testing.assert_array_equal(fwd.values["drop1.out"], fwd.values["layer0.h_next"] * masks["drop1.mask"])
    grads = ref.backward(fwd).params
    for k, v in step.parameters.items():
        np.testing.assert_allclose(v, p0[k] - lr * grads[k], rtol=0, atol=1e-12, err_msg=k)
    # and differs from the loss without dropout (ones): the masks were used
    no_drop = ref.forward(p0, {"x": x, "y": y, **{m: np.ones_like(a) for m, a in masks.items()}})
    assert abs(no_drop.loss - loss) > 1e-6
    for s in fwd.final_states:
        np.testing.assert_allclose(step.state[s], fwd.final_states[s], rtol=0, atol=1e-12)


def test_forward_is_deterministic_and_ignores_p():
    T, S = 5, 2
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    outs = []
    for p in (0.0, 0.3, 0.8):
        step = rg.compile(lm_net(p), window=T, streams=S, device="cpu", seed=4)
        a = step.forward(x, y, carry=False)
        b = step.forward(x, y, carry=False)
        assert a.loss == b.loss
        np.testing.assert_array_equal(a.values["head.logits"], b.values["head.logits"])
        outs.append((a.loss, a.values["head.logits"]))
    for loss, logits in outs[1:]:
        assert loss == outs[0][0]  # a mul by exactly 1.0 changes nothing
        np.testing.assert_array_equal(logits, outs[0][1])


# ---- the CUDA backend in the simulator ------------------------------------------------------------
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_masks_variable_is_checked(monkeypatch):
    """Regression: RNNGRAPH_MASKS=foo was silently ignored."""
    from rnngraph.codegen.step import masks_on_host
    net = rg.stacked(rg.cells.lstm, 1, H, vocab=V, embed=E, dropout=0.5)
    for value, host in (("host", True), (" Device ", False), ("", False)):
        monkeypatch.setenv("RNNGRAPH_MASKS", value)
        assert masks_on_host() is host
    monkeypatch.setenv("RNNGRAPH_MASKS", "foo")
    with pytest.raises(ValueError, match="RNNGRAPH_MASKS='foo': expected 'host' or 'device'"):
        rg.compile(net, window=2, streams=1, device="cuda")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
@pytest.mark.parametrize("plan", ["wavefront", "scc-sequential"])
def test_cuda_simulator_matches_cpu_with_dropout(plan):
    T, S = 2, 2
    net = rg.stacked(rg.cells.lstm, 2, H, vocab=V, embed=E, dropout=0.5)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.Adam(lr=1e-2),  # noqa: E731
                                clip_norm=0.5, seed=3, plan=plan)
    cpu, gpu = mk("cpu"), mk("cuda")
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    masks = cpu.dropout_masks(train=True)
    assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    for name, m in masks.items():  # the simulator fed the CPU backend's masks
        np.testing.assert_array_equal(gpu._cuda.buf.V[name].copy_to_host(), m, err_msg=name)
    pc, pg = cpu.parameters, gpu.parameters
    for name in pc:
        np.testing.assert_allclose(pg[name], pc[name], atol=1e-5, err_msg=name)
    for name, s in cpu.state.items():
        np.testing.assert_allclose(gpu.state[name], s, atol=1e-5, err_msg=name)
    a, b = cpu.forward(x, y), gpu.forward(x, y)  # evaluation: masks of ones on both
    assert b.loss == pytest.approx(a.loss, abs=1e-5)
    assert np.all(gpu._cuda.buf.V["drop2.mask"].copy_to_host() == 1)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="simulator test")
def test_cuda_simulator_checkpoint_resume_with_dropout(tmp_path):
    """2 steps straight == 1 step, checkpoint, a fresh step loads it, 1 more step (the masks
    follow the optimizer's step count, which the checkpoint restores)."""
    from rnngraph.data import CharVocab

    T, S = 2, 2
    vocab = CharVocab.build("abcdef")
    cfg = lm.LMConfig(layers=1, hidden=H, embed=E, window=T, streams=S, dropout=0.5, corpus="x")
    net = lm.build_network(cfg, len(vocab))
    # SGD without momentum: the step count is the optimizer's only state, so only the masks read it
    mk = lambda: rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.SGD(lr=0.5), seed=3)  # noqa: E731
    rng = np.random.default_rng(4)
    data = [(rng.integers(0, len(vocab), (T, S)), rng.integers(0, len(vocab), (T, S))) for _ in range(2)]
    straight = mk()
    for x, y in data:
        straight.train(x, y)
    first = mk()
    first.train(*data[0])
    lm.save_checkpoint(tmp_path, cfg, vocab, first, steps_done=1, data_index=1)
    resumed = mk()
    lm.load_checkpoint(tmp_path).apply(resumed)
    assert resumed.optimizer.steps == 1
    resumed.train(*data[1])
    for k, v in straight.parameters.items():
        np.testing.assert_array_equal(resumed.parameters[k], v, err_msg=k)
    # without the restored step count the second step would draw step 0's masks again: not equal
    again = mk()
    lm.load_checkpoint(tmp_path).apply(again, optimizer=False)
    assert again.optimizer.steps == 0
    again.train(*data[1])
    assert any(not np.array_equal(again.parameters[k], v) for k, v in straight.parameters.items())


# ---- the command line --------------------------------------------------------------------------
TINY = ["--hidden", "8", "--embed", "4", "--window", "8", "--streams", "4", "--lr", "0.01", "--layers", "2",
        "--device", "cpu", "--no-progress", "--eval-streams", "4", "--eval-every", "3"]


def train(text_file, ckpt, steps, *extra):
    return cli.main(["train", "--corpus", str(text_file), *TINY, "--steps", str(steps), "--checkpoint", str(ckpt),
                     *extra])


def test_cli_resume_with_dropout_is_exact(tmp_path, text_file, capsys):
    straight, resumed, plain = tmp_path / "straight", tmp_path / "resumed", tmp_path / "plain"
    assert train(text_file, straight, 10, "--dropout", "0.3") == 0
    assert train(text_file, resumed, 5, "--dropout", "0.3") == 0
    assert train(text_file, resumed, 10, "--resume") == 0  # takes --dropout from the checkpoint
    assert train(text_file, plain, 10) == 0
    out = capsys.readouterr().out
    assert "dropout 0.3" in out
    a, b, c = (lm.load_checkpoint(p) for p in (straight, resumed, plain))
    assert a.config.dropout == b.config.dropout == 0.3 and c.config.dropout == 0.0
    assert json.loads((straight / "config.json").read_text())["dropout"] == 0.3
    for part in ("params", "optim", "state"):
        for k, v in getattr(a, part).items():
            np.testing.assert_array_equal(getattr(b, part)[k], v, err_msg=f"{part} {k}")
    assert max(np.abs(a.params[k] - c.params[k]).max() for k in a.params) > 1e-3  # dropout was on


def test_cli_resume_may_change_dropout_and_old_checkpoints_load_as_zero(tmp_path, text_file, capsys):
    ck = tmp_path / "ck"
    assert train(text_file, ck, 3) == 0
    cfg = json.loads((ck / "config.json").read_text())
    del cfg["dropout"]  # a checkpoint written before --dropout existed
    (ck / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    assert lm.load_checkpoint(ck).config.dropout == 0.0
    assert train(text_file, ck, 6, "--resume", "--dropout", "0.2") == 0  # like --lr: a resumed run may change it
    assert lm.load_checkpoint(ck).config.dropout == 0.2
    # sample and eval run the graph without dropout
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", str(ck), "--device", "cpu", "--corpus", str(text_file)]) == 0
    first = capsys.readouterr().out
    assert cli.main(["eval", "--checkpoint", str(ck), "--device", "cpu", "--corpus", str(text_file)]) == 0
    assert capsys.readouterr().out == first


@pytest.mark.parametrize("value", ["1", "-0.1", "1.5", "abc", "nan"])
def test_cli_bad_dropout(capsys, text_file, tmp_path, value):
    code = cli.main(["train", "--corpus", str(text_file), "--dropout", value, "--checkpoint", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("rnngraph: error: argument --dropout: must be a number in [0, 1)"), err


def test_lm_network_is_rg_stacked():
    cfg = lm.LMConfig(layers=2, hidden=H, embed=E, dropout=0.25)
    assert str(lm.build_network(cfg, V).graph) == str(lm_net(0.25).graph)
    assert str(lm.build_network(cfg, V, dropout=0.0).graph) == str(lm_net(0.0).graph)


def test_schedule_command_takes_dropout(capsys):
    assert cli.main(["schedule", "lstm", "--layers", "2", "--hidden", "8", "--window", "4", "--vocab", "10",
                     "--dropout", "0.5", "--plan", "scc-sequential"]) == 0
    out = capsys.readouterr().out
    assert "pointwise  drop1.out  <- layer0.h_next, drop1.mask" in out
