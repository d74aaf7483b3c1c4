"""Golden schedule dumps for the standard cells and stacks (regenerate: pytest --regen-golden).

Read them as a user would: lstm_4layer_h256_s1 shows the wavefront (layer l at t-l), chosen by the
cost model where the weights streamed per timestep are small; at hidden 512 (lstm_4layer_s1)
it picks scc-sequential, as measured on the H200 (passes/cost.py); lstm_lm_s32 shows the output
layer hoisted after the loop, lstm the one merged gate GEMM per side."""
import os
import re

import pytest

import rnngraph as rg
from rnngraph.passes import schedule

HERE = os.path.join(os.path.dirname(__file__), "golden")

# name -> (cell, layers, vocab, streams[, hidden: 512])
CONFIGS = {
    "elman": ("elman", 1, None, 1),
    "lstm": ("lstm", 1, None, 1),
    "peephole_lstm": ("peephole_lstm", 1, None, 1),
    "gru": ("gru", 1, None, 1),
    "layernorm_lstm": ("layernorm_lstm", 1, None, 1),
    "skip_rnn": ("skip_rnn", 1, None, 1),
    "lstm_2layer_s1": ("lstm", 2, None, 1),
    "lstm_4layer_s1": ("lstm", 4, None, 1),
    "lstm_4layer_h256_s1": ("lstm", 4, None, 1, 256),
    "lstm_4layer_s64": ("lstm", 4, None, 64),
    "lstm_lm_s32": ("lstm", 1, 82, 32),
}


def dump(name: str) -> str:
    cell, layers, vocab, streams, hidden = (*CONFIGS[name], 512)[:5]
    net = rg.stacked(rg.cells.STANDARD[cell], layers, hidden, vocab=vocab, embed=128)
    return str(schedule(net.graph, 100, streams))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_golden_schedule(name, request):
    path = os.path.join(HERE, f"schedule_{name}.txt")
    text = dump(name)
    if request.config.getoption("--regen-golden"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"schedule of {name} changed; inspect and rerun with --regen-golden"


# name -> a network ending in one of the other loss heads (window 100, streams 8)
HEAD_NETS = {
    "lstm_mse_s8": lambda: rg.Sequential(rg.cells.lstm(hidden=64), rg.MSE(), input_size=16),
    "lstm_sequence_classifier_s8": lambda: rg.Sequential(rg.cells.lstm(hidden=64), rg.SequenceClassifier(10),
                                                         input_size=16),
}


@pytest.mark.parametrize("name", sorted(HEAD_NETS))
def test_golden_schedule_of_a_loss_head(name, request):
    """The loss runs once over the window after the loop (kind ``loss``), its gradient first."""
    path = os.path.join(HERE, f"schedule_{name}.txt")
    text = str(schedule(HEAD_NETS[name]().graph, 100, 8))
    if request.config.getoption("--regen-golden"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), f"schedule of {name} changed; inspect and rerun with --regen-golden"


def test_lstm_has_one_merged_gemm_per_side():
    s = schedule(rg.stacked(rg.cells.lstm, 1, 8).graph, 10, 1)
    gemms = [k for k in s.kernels("forward") if k.kind == "gemm"]
    assert sorted(k.rows for k in gemms) == [32, 32]  # 4H input side (hoisted) and 4H recurrent side


def test_separately_written_gate_gemms_are_merged():
    @rg.cell
    def four_gemms(x, h: rg.State, c: rg.State, *, hidden):
        i = rg.sigmoid(rg.linear(x, hidden, name="Wi") + rg.linear(h, hidden, name="Ui"))
        f = rg.sigmoid(rg.linear(x, hidden, name="Wf") + rg.linear(h, hidden, name="Uf"))
        g = rg.tanh(rg.linear(x, hidden, name="Wg") + rg.linear(h, hidden, name="Ug"))
        o = rg.sigmoid(rg.linear(x, hidden, name="Wo") + rg.linear(h, hidden, name="Uo"))
        c_next = f * c + i * g
        h_next = o * rg.tanh(c_next)
        return h_next, {"h": h_next, "c": c_next}

    s = schedule(rg.stacked(four_gemms, 1, 8).graph, 10, 1)
    gemms = [k for k in s.kernels("forward") if k.kind == "gemm"]
    assert [len(k.ops) for k in gemms] == [4, 4] and [k.rows for k in gemms] == [32, 32]
    assert "layer0.Wi.weight" in gemms[0].params and "layer0.Wo.weight" in gemms[0].params


def test_four_layer_wavefront_stages_and_lm_head_hoisted():
    s = schedule(rg.stacked(rg.cells.lstm, 4, 256).graph, 100, 1)
    loop = next(st for st in s.forward if isinstance(st, rg.schedule.Loop))
    assert s.plan == "wavefront" and [o for o, _ in loop.stages] == [0, 1, 2, 3]
    assert loop.levels == 1 and loop.ticks == 103
    lm = schedule(rg.stacked(rg.cells.lstm, 1, 512, vocab=82, embed=128).graph, 100, 32)
    assert lm.forward[-1].name == "epilogue" and "head.logits" in lm.forward[-1].kernels[0].ops


@pytest.mark.parametrize("plan", ["wavefront", "scc-sequential"])
def test_hoisted_kernels_launch_once_per_window_whatever_t(plan):
    net = rg.stacked(rg.cells.lstm, 2, 64, vocab=50)
    launches = [schedule(net.graph, T, 4, plan=plan).launches for T in (1, 10, 1000)]
    assert launches[0] == launches[1] == launches[2] > 0


def test_cost_model_follows_the_h200_measurement_of_both_plans():
    """4-layer LSTM, hidden 512, T=100 on the H200 (bench/results/h200-20261129-grid-extra.json and
    the first sweep's run): forward scc-sequential 2.24 ms vs wavefront 3.02 ms at S=1, 25.4 vs
    39.9 ms at S=64; the estimates must order the plans the same way and stay within 2x of the
    measured times."""
    net = rg.stacked(rg.cells.lstm, 4, 512)
    for S, seq_ms, wf_ms in ((1, 2.24, 3.02), (64, 25.4, 39.9)):
        s = schedule(net.graph, 100, S)
        wf_est, seq_est = (float(v) for v in re.findall(r"([\d.]+) ms", s.reason))
        assert s.plan == "scc-sequential" and seq_est < wf_est, S
        assert 0.5 < seq_est / seq_ms < 2 and 0.5 < wf_est / wf_ms < 2, (S, seq_est, wf_est)


def test_cost_model_prices_graph_mode_and_layer_norm_syncs():
    """layernorm_lstm, hidden 512, S=1, T=100 on the H200: 4.26 ms forward per timestep (graph
    mode, RNNGRAPH_LOOP="ln=0"; bench/results/h200-20261129-grid-extra.json) and 2.08 ms as one
    persistent kernel (the S=1 default; bench/results/h200-20261130-loop-sweep3.json): each estimate
    of the loop must be within 2x, and in the persistent one each of the 2 layer norms adds a grid
    sync a timestep."""
    from rnngraph.passes import PIPELINE, Plan, pipeline
    from rnngraph.passes.cost import DEFAULT
    from rnngraph.passes.pipeline import _loop_tick_us
    plan = Plan(rg.stacked(rg.cells.layernorm_lstm, 1, 512).graph, 100, 1, "float32", None)
    for p in PIPELINE[:PIPELINE.index(pipeline)]:  # the passes before the pipeline pass
        plan = p(plan)
    (members,) = plan.loops
    levels = max(plan.level_of[m] for m in members)
    no_ln = plan.replace(options=plan.options.replace(persistent_layer_norms=False))
    graph_ms = 100 * _loop_tick_us(no_ln, members, levels) / 1000
    assert 0.5 < graph_ms / 4.26 < 2, graph_ms
    persistent = _loop_tick_us(plan, members, levels)
    assert 0.5 < 100 * persistent / 1000 / 2.08 < 2, persistent
    no_norms = DEFAULT.tick_us(levels, 0, weight_bytes=4 * 512 * 2048, streams=1)  # the same tick, no LN syncs
    assert persistent - no_norms == pytest.approx(2 * DEFAULT.sync_us, rel=0.05)


def test_layer_norm_adds_levels():
    s = schedule(rg.stacked(rg.cells.layernorm_lstm, 1, 8).graph, 10, 1)
    fwd = next(st for st in s.forward if isinstance(st, rg.schedule.Loop))
    assert fwd.levels == 3  # U h ; layer norm of the gates ; layer norm of the cell


def test_naive_plan_is_one_kernel_per_op_per_timestep():
    g = rg.stacked(rg.cells.lstm, 1, 8, vocab=20).graph
    s = schedule(g, 10, 2, plan="naive")
    (loop,) = [st for st in s.forward if isinstance(st, rg.schedule.Loop)]
    computed = [n.name for n in g.nodes if n.op not in ("input", "param")]
    assert [k.ops for k in loop.kernels] == [(m,) for m in computed]
    assert loop.mode == "graph" and loop.levels == len(computed)
    assert schedule(g, 20, 2, plan="naive").launches > s.launches  # launches grow with T


def test_readme_schedule_excerpt_is_the_golden_dump():
    """Regression: README's "Reading a schedule" excerpt kept a `why:` line the dump no longer
    prints; every line of it (but the closing "...") must be a line of the golden file it names."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
    m = re.search(r"From `tests/golden/(\w+)\.txt`:\n\n```\n(.*?)```", readme, re.S)
    assert m, "README's schedule excerpt and the golden file it names"
    golden = open(os.path.join(HERE, m.group(1) + ".txt"), encoding="utf-8").read().splitlines()
    lines = [line for line in m.group(2).splitlines() if line.strip() != "..."]
    assert len(lines) > 5 and [line for line in lines if line not in golden] == []
