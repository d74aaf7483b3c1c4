"""The benchmark suite without a GPU: the FLOP formula, the timing loop, error records, the time
budget, the report (tables, ratios, markers, plot), ``rnngraph bench`` and ``bench/run_all.py``
on the CPU, the generated-step timing in numba's simulator, and the PyTorch cells against the
NumPy reference. Every GPU path is replaced by its CPU form or the simulator; tiny shapes."""
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

import rnngraph as rg
from rnngraph import bench as B
from rnngraph.bench import implementations
from rnngraph import cli

ROOT = Path(__file__).resolve().parent.parent


def load(name: str):
    """A script of bench/ as a module."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


report = load("report")


# ---------------------------------------------------------------------------------- formulas and timing
def test_flops_formula():
    assert B.flops_forward("lstm", 1, 100, 64, 512, 512) == 2 * 4 * 512 * (512 + 512) * 64 * 100
    assert B.flops_forward("gru", 1, 10, 2, 8, 4) == 2 * 3 * 8 * (4 + 8) * 2 * 10
    # layer 0 reads I, the others H; an LM adds its softmax head
    assert B.flops_forward("lstm", 2, 10, 2, 8, 4) == 2 * 4 * 8 * (12 + 16) * 2 * 10
    assert B.flops_forward("lstm", 1, 10, 2, 8, 4, vocab=5) == 2 * 4 * 8 * 12 * 20 + 2 * 5 * 8 * 20
    assert B.flops_forward("skip_rnn", 1, 1, 1, 1, 1) is None
    assert B.tflops(2e12, 1000.0) == pytest.approx(2.0)  # 2e12 FLOP in 1 s
    assert B.tflops(None, 1.0) is None and B.tflops(1.0, None) is None


def test_measure_counts_and_cap():
    calls = []
    m = B.measure(lambda: calls.append(1), B.WallTimer(), B.Protocol(warmup=3, iters=7, max_seconds=None))
    assert (m["warmup"], m["iters"], len(calls)) == (3, 7, 10) and m["ms"] >= 0
    # a call of ~20 ms under a 0.05 s cap: warm-up stops after 2 calls, timing after min_iters
    m = B.measure(lambda: time.sleep(0.02), B.WallTimer(), B.Protocol(warmup=10, iters=100, max_seconds=0.05,
                                                                        min_iters=3))
    assert (m["warmup"], m["iters"]) == (2, 3) and m["ms"] >= 15


def test_labels_and_applicability():
    cfg = B.Config("lstm", 1, 100, 64, 512, 512)
    assert cfg.label("rnngraph") == "lstm-l1-t100-s64-h512-i512/rnngraph"
    assert B.Config(vocab=96, I=128).label() == "lm-lstm-l1-t100-s64-h512-i128-v96"
    assert B.applicable(cfg, "cudnn-fp32") is None
    assert "cuDNN" in B.applicable(B.Config("peephole_lstm"), "cudnn-tf32")
    assert B.applicable(B.Config(vocab=8), "torch-eager")
    assert B.applicable(cfg, "rnngraph-cpu")
    for impl in ("rnngraph-tf32", "rnngraph-bf16-mma", "cudnn-fp16", "cudnn-bf16"):
        assert B.applicable(cfg, impl) is None
    assert "cuDNN" in B.applicable(B.Config("layernorm_lstm"), "cudnn-bf16")
    assert "language models" in B.applicable(B.Config(vocab=8), "rnngraph-bf16")


# ---------------------------------------------------------------------------------- error records
def test_failures_become_records(monkeypatch):
    rec = B.run(B.Config("lstm", 1, 2, 1, 2, 2), "no-such-impl")
    assert rec["error"].startswith("ValueError") and rec["fwd_ms"] is None and rec["fwdbwd_ms"] is None
    assert {"cell", "layers", "T", "S", "H", "I", "dtype", "impl", "tflops_fwd"} <= rec.keys()

    def boom(*a, **k):
        raise RuntimeError("cuDNN exploded")
    monkeypatch.setattr(implementations, "_cudnn", boom)  # what run() calls
    jobs = [(B.Config("lstm", 1, 2, 1, 2, 2), "cudnn-fp32"), (B.Config("lstm", 1, 4, 2, 8, 4, vocab=6), "rnngraph-cpu")]
    lines = []
    res = B.run_jobs(jobs, B.Protocol(1, 2), gpu=False, log=lines.append)
    first, second = res["records"]
    assert first["error"] == "RuntimeError: cuDNN exploded" and first["fwdbwd_ms"] is None
    assert second.get("error") is None and second["step_ms"] > 0  # the run went on
    assert "error: RuntimeError" in lines[0] and "step" in lines[1]


def test_time_and_compile_budgets(tmp_path):
    cfg = B.Config("lstm", 1, 2, 1, 2, 2)
    out = tmp_path / "r.json"
    res = B.run_jobs([(cfg, "torch-compile"), (cfg, "rnngraph-naive")], B.Protocol(0, 1), out=str(out), time_budget=0,
                     gpu=False, log=lambda s: None)
    assert res["records"] == [] and res["time_budget"]["exceeded"]
    assert [s["label"] for s in res["skipped"]] == [cfg.label("torch-compile"), cfg.label("rnngraph-naive")]
    assert json.loads(out.read_text())["time_budget"]["exceeded"]
    res = B.run_jobs([(cfg, "torch-compile")], B.Protocol(0, 1), compile_budget=0, gpu=False, log=lambda s: None)
    assert "torch.compile budget" in res["skipped"][0]["reason"]


# ---------------------------------------------------------------------------------- report
def _rec(cell, S, impl, fwd, fwdbwd, **kw):
    return {"cell": cell, "layers": 1, "T": 100, "S": S, "H": 512, "I": 512, "dtype": "float32", "task": "layer",
            "impl": impl, "fwd_ms": fwd, "fwdbwd_ms": fwdbwd, **kw}


SYNTHETIC = {
    "device": "Test GPU", "date": "2026-01-02", "versions": {"torch": "9.9", "numpy": "2.4.6"},
    "protocol": "CUDA events, median", "skipped": [{"label": "gru-l1-t100-s1-h512-i512/torch-compile",
                                                    "reason": "time budget of 1 s exceeded"}],
    "time_budget": {"seconds": 1, "exceeded": True},
    "records": [
        _rec("lstm", 1, "cudnn-fp32", 1.0, 4.0), _rec("lstm", 1, "rnngraph", 0.5, 2.0),
        _rec("lstm", 64, "cudnn-fp32", 2.0, 6.0), _rec("lstm", 64, "rnngraph", 4.0, 12.0),
        _rec("lstm", 64, "cudnn-tf32", 2.0, 3.0), _rec("lstm", 64, "torch-eager", None, None, error="Boom: bad"),
        _rec("peephole_lstm", 64, "rnngraph", 1.0, 24.0),
        _rec("lstm", 1, "rnngraph-naive", 50.0, 100.0),
        {**_rec("lstm", 64, "rnngraph-cpu", None, None, step_ms=800.0), "task": "lm", "vocab": 96, "I": 128},
        {**_rec("lstm", 64, "rnngraph", None, None, step_ms=20.0), "task": "lm", "vocab": 96, "I": 128},
    ]}


def test_report_ratios_and_sections():
    fb = report.layer_table(SYNTHETIC["records"], "fwdbwd_ms")
    lines = fb.splitlines()
    assert lines[0] == "| configuration | cudnn-fp32 | cudnn-tf32 | rnngraph | rnngraph-naive | torch-eager |"
    row = {l.split(" | ")[0].lstrip("| "): l for l in lines[2:]}
    assert "| 4 | " in row["lstm T=100 S=1 H=512"] and "2 (2.00×)" in row["lstm T=100 S=1 H=512"]
    assert "12.0 (0.50×)" in row["lstm T=100 S=64 H=512"] and "3 (2.00×)" in row["lstm T=100 S=64 H=512"]
    assert "error" in row["lstm T=100 S=64 H=512"]
    assert "24.0 (0.25×†)" in row["peephole_lstm T=100 S=64 H=512"]  # against cuDNN's plain LSTM
    assert "0.5 (2.00×)" in report.layer_table(SYNTHETIC["records"], "fwd_ms")
    lm = report.lm_table(SYNTHETIC["records"])
    assert "| 800.0 | 20.0 | 40× |" in lm
    md = report.markdown(SYNTHETIC, source="r.json", plot="r.png")
    assert "faster than cuDNN fp32 in 1 of 2 configurations" in md
    assert "against rnngraph-naive (what the passes buy): rnngraph is 50× as fast (lstm T=100 S=1 H=512)." in md
    assert "error, lstm T=100 S=64 H=512 / torch-eager: `Boom: bad`" in md
    assert "skipped, gru-l1-t100-s1-h512-i512/torch-compile" in md and "![" in md


def test_report_replaces_markers_and_writes_png(tmp_path):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(SYNTHETIC))
    md = tmp_path / "README.md"
    md.write_text("# Bench\nintro\n<!-- results -->\nOLD TABLE\n<!-- /results -->\ntail\n")
    png = tmp_path / "plot.png"
    assert report.main([str(results), "--md", str(md), "--plot", str(png)]) == 0
    text = md.read_text()
    assert "OLD TABLE" not in text and text.startswith("# Bench\nintro\n<!-- results -->\n") and text.endswith(
        "<!-- /results -->\ntail\n")
    assert "](plot.png)" in text and "2 (2.00×)" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.main([str(results), "--md", str(md)]) == 0  # idempotent: one section
    assert md.read_text().count("<!-- results -->") == 1
    assert report.replace_section("no markers", "S") == "no markers\n\n<!-- results -->\nS\n<!-- /results -->\n"


def test_report_on_committed_results(tmp_path):
    md, png = tmp_path / "R.md", tmp_path / "p.png"
    path = ROOT / "bench/results/h200-20261129.json"
    assert report.main([str(path), "--md", str(md), "--plot", str(png)]) == 0
    rec = next(r for r in json.loads(path.read_text())["records"] if r["impl"] == "cudnn-fp32" and r["S"] == 1
               and r["H"] == 512 and r["T"] == 100 and r["layers"] == 1 and r.get("cell") == "lstm")
    assert f"| lstm T=100 S=1 H=512 | {rec['fwdbwd_ms']:.3g} |" in md.read_text() and png.stat().st_size > 10_000


# ---------------------------------------------------------------------------------- entry points on the CPU
def test_cli_bench_on_cpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(B, "gpu_available", lambda: False)
    out = tmp_path / "b.json"
    assert cli.main(["bench", "--iters", "2", "--warmup", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "no CUDA GPU found" in text and "rnngraph-cpu" in text
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["impl"] == "rnngraph-cpu" and rec["step_ms"] > 0 and rec["iters"] == {"step": 2}
    assert cli.main(["bench", "--device", "cuda"]) == 1
    assert "numba finds no CUDA GPU" in capsys.readouterr().err


def test_run_all_without_gpu(tmp_path, capsys, monkeypatch):
    run_all = load("run_all")
    monkeypatch.setattr(run_all, "gpu_available", lambda: False)
    assert run_all.main(["--out", str(tmp_path / "x.json")]) == 2  # the full grid needs a GPU
    assert "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    out = tmp_path / "q.json"
    assert run_all.main(["--quick", "--iters", "2", "--warmup", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert {"device", "versions", "date", "protocol", "records"} <= res.keys()
    assert [r["impl"] for r in res["records"]] == ["rnngraph-cpu"] and res["records"][0]["step_ms"] > 0
    assert res["versions"]["numpy"] == np.__version__


def test_run_all_precision_grid_runs_the_targets_configurations_first(capsys):
    """--grid precision: the tensor-core issue's benchmark, every job runnable, the targets'
    configurations first, each LSTM configuration with all four cuDNN dtypes and all five
    rnngraph precisions."""
    run_all = load("run_all")
    jobs = run_all.precision_grid()
    labels = [c.label(i) for c, i in jobs]
    assert len(labels) == len(set(labels)) == 16 * 9 + 2 * 4 * 5 == 184
    assert all(B.applicable(c, i) is None for c, i in jobs)
    order = list(dict.fromkeys(c for c, _ in jobs))
    assert [c.label() for c in order[:4]] == ["lstm-l1-t100-s64-h1024-i1024", "lstm-l1-t100-s128-h1024-i1024",
                                              "lstm-l1-t100-s64-h512-i512", "lstm-l1-t100-s1-h512-i512"]
    impls = {c: {i for d, i in jobs if d == c} for c in order}
    assert impls[B.Config("lstm", 4, 100, 16, 1024, 1024)] == set(B.IMPLS) & {
        "cudnn-fp32", "cudnn-tf32", "cudnn-fp16", "cudnn-bf16", "rnngraph", "rnngraph-tf32", "rnngraph-bf16",
        "rnngraph-tf32-mma", "rnngraph-bf16-mma"}
    assert impls[B.Config("layernorm_lstm", 1, 100, 128, 1024, 1024)] == set(B.PRECISION_IMPLS) | {"rnngraph"}
    assert run_all.main(["--grid", "precision", "--list", "--only", "s1-h512-i512/rnngraph-bf16"]) == 0
    assert capsys.readouterr().out.split() == ["lstm-l1-t100-s1-h512-i512/rnngraph-bf16",
                                               "lstm-l1-t100-s1-h512-i512/rnngraph-bf16-mma",
                                               "lstm-l4-t100-s1-h512-i512/rnngraph-bf16",
                                               "lstm-l4-t100-s1-h512-i512/rnngraph-bf16-mma"]
    with pytest.raises(SystemExit):
        run_all.main(["--grid", "precision", "--quick"])


def test_precision_targets_take_the_faster_of_each_side():
    """The ratio of a target is the faster rnngraph variant's fwd + bwd over the faster anchor's;
    a missing or failed record leaves it unmeasured (met None), not met."""
    run_all = load("run_all")
    h1024 = B.Config("lstm", 1, 100, 64, 1024, 1024).fields()
    recs = [{**h1024, "impl": "rnngraph-tf32", "fwdbwd_ms": 12.0}, {**h1024, "impl": "rnngraph-tf32-mma", "fwdbwd_ms": 9.0},
            {**h1024, "impl": "cudnn-tf32", "fwdbwd_ms": 10.0}, {**h1024, "impl": "cudnn-fp32", "fwdbwd_ms": 5.0},
            {**h1024, "impl": "rnngraph-bf16", "fwdbwd_ms": 8.0},
            {**h1024, "impl": "cudnn-fp16", "fwdbwd_ms": 12.0, "torch_dtype": "float16"},  # as run() returns them
            {**h1024, "impl": "cudnn-bf16", "fwdbwd_ms": 9.0, "torch_dtype": "bfloat16"},
            {**h1024, "S": 128, "impl": "rnngraph-tf32", "fwdbwd_ms": None, "error": "boom"},
            {**h1024, "S": 128, "impl": "cudnn-tf32", "fwdbwd_ms": 7.0}]
    got = {t["target"]: t for t in run_all.precision_targets(recs)}
    t = got["tf32 <= 1.0x cuDNN TF32, LSTM H=1024 S=64"]
    assert (t["impl"], t["anchor"], t["ratio"], t["met"]) == ("rnngraph-tf32-mma", "cudnn-tf32", 0.9, True)
    t = got["bf16 <= 0.8x cuDNN's faster half precision, LSTM H=1024 S=64"]
    assert (t["impl"], t["anchor"], t["met"]) == ("rnngraph-bf16", "cudnn-bf16", False) and t["ratio"] == pytest.approx(8 / 9)
    assert got["tf32 <= 1.0x cuDNN TF32, LSTM H=1024 S=128"]["met"] is None
    assert got["bf16 <= 0.15x cuDNN fp32, LSTM H=512 S=1"]["ratio"] is None


def test_run_all_grid_and_only(capsys):
    run_all = load("run_all")
    jobs = run_all.full_grid()
    labels = [c.label(i) for c, i in jobs]
    assert len(labels) == len(set(labels)) and labels[0] == "lstm-l1-t100-s64-h512-i512/cudnn-fp32"
    for must in ("lstm-l1-t1000-s1-h512-i512/rnngraph", "lstm-l4-t100-s64-h512-i512/cudnn-tf32",
                 "lstm-l1-t100-s128-h1024-i1024/rnngraph", "gru-l1-t100-s1-h512-i512/cudnn-fp32",
                 "layernorm_lstm-l1-t100-s64-h512-i512/torchscript", "lm-lstm-l1-t100-s64-h512-i128-v96/rnngraph-cpu"):
        assert must in labels
    assert not any(l.endswith("/torch-compile") for l in labels)
    assert sum(i == "torch-compile" for _, i in run_all.full_grid(compile=True)) == 8
    assert sum(i == "torch-compile-cell" for _, i in jobs) == 8  # 4 cells x S in {1, 64}, seconds each
    assert all(B.applicable(c, i) is None for c, i in run_all.full_grid(compile=True))
    assert run_all.main(["--list", "--only", "peephole.*s64.*torch"]) == 0
    assert capsys.readouterr().out.split() == ["peephole_lstm-l1-t100-s64-h512-i512/torch-eager",
                                               "peephole_lstm-l1-t100-s64-h512-i512/torchscript",
                                               "peephole_lstm-l1-t100-s64-h512-i512/torch-compile-cell"]
    assert run_all.main(["--only", "nothing-matches-this"]) == 2


# ---------------------------------------------------------------------------------- GPU paths, simulated
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="runs the simulator form of the GPU path")
def test_generated_step_timing_in_simulator():
    rec = B.run(B.Config("lstm", 1, 2, 1, 2, 2), "rnngraph", B.Protocol(warmup=0, iters=1))
    assert rec.get("error") is None, rec.get("error")
    assert rec["fwd_ms"] > 0 and rec["fwdbwd_ms"] > 0 and rec["plan"] and rec["launches_per_window"] > 0
    assert rec["precision"] == "fp32" and rec["loop_tuning"]["mma"] == 0
    # S = 2: one stream group asked for and taken by each persistent loop kernel
    assert rec["loop_tuning"]["groups"] == 1 and set(rec["loop_stream_groups"].values()) == {1}, rec["loop_stream_groups"]


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="runs the simulator form of the GPU path")
def test_reduced_precision_timing_in_simulator():
    """rnngraph-bf16-mma: the precision and the loops' tensor-core products reach the program."""
    rec = B.run(B.Config("lstm", 1, 2, 1, 2, 2), "rnngraph-bf16-mma", B.Protocol(warmup=0, iters=1))
    assert rec.get("error") is None, rec.get("error")
    assert rec["precision"] == "bf16" and rec["loop_tuning"]["mma"] == 1 and rec["fwdbwd_ms"] > 0


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("cell", ["lstm", "peephole_lstm", "gru", "layernorm_lstm"])
def test_torch_cells_match_reference(cell):
    torch = pytest.importorskip("torch")
    tc = B.torch_cells()
    T, S, I, H, layers = 4, 3, 5, 6, 2
    net = rg.stacked(rg.cells.STANDARD[cell], layers, H, input_size=I)
    rng = np.random.default_rng(1)
    params = {k: v + 0.1 * rng.normal(size=v.shape) for k, v in rg.init_params(net.graph, 1, "float64").items()}
    x = rng.normal(size=(T, S, I))
    want = rg.Reference(net.graph).forward(params, {"x": x}).values[net.graph.outputs[0]]
    stack = tc.Stack(cell, layers, I, H).double()
    tc.load_rnngraph_params(stack, params)
    for model in (stack, torch.jit.script(stack)):
        got = model(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("impl", ["cudnn-fp32", "cudnn-tf32", "cudnn-bf16", "torch-eager", "torchscript",
                                  pytest.param("torch-compile-cell", marks=pytest.mark.slow)])  # torch.compile: seconds
def test_torch_baselines_on_cpu(impl):
    pytest.importorskip("torch")
    rec = B.run(B.Config("gru", 1, 3, 2, 4, 3), impl, B.Protocol(1, 2), torch_device="cpu")
    assert rec.get("error") is None, rec.get("error")
    assert rec["fwd_ms"] > 0 and rec["fwdbwd_ms"] > 0 and rec["tflops_fwdbwd"] > 0
    assert rec["iters"] == {"fwd": 2, "fwdbwd": 2}
    if impl.startswith("cudnn"):
        assert rec["dtype"] == "float32"  # the configuration's: records of one configuration are compared
        assert rec["torch_dtype"] == ("bfloat16" if impl == "cudnn-bf16" else "float32")


def test_bench_out_in_a_missing_directory_fails_before_timing(capsys, tmp_path):
    """Regression: `rnngraph bench --out /nonexistent/dir/x.json` timed
    everything, then failed naming the internal x.json.tmp."""
    missing = tmp_path / "no" / "x.json"
    assert cli.main(["bench", "--iters", "1", "--warmup", "0", "--out", str(missing)]) != 0
    err = capsys.readouterr().err
    assert "--out" in err and "no such directory" in err and ".tmp" not in err


@pytest.mark.parametrize("content", ['{"format": "lm_vs_torch", "impls": {}}', '{"records": [{"pass": "fuse"}]}',
                                     "not json", "[]"])
def test_report_refuses_other_files_in_one_line(tmp_path, capsys, content):
    """Regression: report.py on bench/results/*-lm.json or passes-cpu-*.json
    raised KeyError tracebacks."""
    f = tmp_path / "x.json"
    f.write_text(content)
    with pytest.raises(SystemExit) as e:
        load("report").main([str(f)])
    assert e.value.code == 2
    assert str(f) in capsys.readouterr().err



def test_sync_micro_kernels():
    """bench/sync_micro.py's kernels: T syncs of the chosen barrier, each after every thread's store
    (``work``); the inline barriers keep their counter (and barrier 3 its phase). In the simulator
    numba's grid.sync runs (one block): every thread has stored T - 1 at the end."""
    sync_micro = load("sync_micro")
    for barrier in (1, 2, 3):
        src = sync_micro.kernel_source(barrier, work=False)
        assert "grid_barrier(BAR, nblocks" in src and ("bphase = barrier_phase(BAR)" in src) == (barrier == 3)
        assert "if False:" in src
    src = sync_micro.kernel_source(0, work=True)
    assert src.count("grid.sync()") == 2 and "if True:" in src
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        return
    from numba import cuda
    from rnngraph.codegen import module
    kern = module.load(src).sync_loop
    out = cuda.to_device(np.full(3, -1.0, np.float32))
    kern[1, 3](4, cuda.to_device(np.zeros(1, np.uint32)), out)
    np.testing.assert_array_equal(out.copy_to_host(), [3.0, 3.0, 3.0])


def test_the_data_parallel_benchmark_runs_one_cpu_process_and_appends_its_row(tmp_path):
    pytest.importorskip("torch")  # bench/distributed.py runs through torch.distributed
    bench = load("distributed")
    out = tmp_path / "d.json"
    row = bench.main(["--device", "cpu", "--smoke", "--out", str(out)])
    assert row["processes"] == 1 and row["tokens_per_s"] == pytest.approx(1 * 4 * 2 * 2 / row["seconds"])
    assert np.isfinite(row["last_loss"]) and 0 < row["last_loss"] < 5  # ln(11) = 2.4 at the start
    bench.main(["--device", "cpu", "--smoke", "--out", str(out)])  # the same count again: replaced, not added
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["speedup_vs_1"] == 1.0


@pytest.mark.slow
def test_lsh_gpu_smoke_runs_on_the_cpu(tmp_path):
    """bench/lsh_gpu.py --smoke --label-skew 1.1: tiny shapes, the LSH (with and without the batch's
    labels) and dense fp32 / bf16 layers in the simulator (bf16: numba's GEMM on rounded operands),
    PyTorch on the CPU, the JSON written with the skew, and the label stats of the skewed set (the
    generator's, so the flag reached it)."""
    out = tmp_path / "lsh.json"
    bench = load("lsh_gpu")
    assert bench.parse(["--smoke"]).label_skew == 0.0                     # uniform unless asked
    for bad in ("-1", "nan", "inf"):  # argparse's one-line error (exit 2), not a traceback later
        with pytest.raises(SystemExit) as e:
            bench.parse(["--smoke", "--label-skew", bad])
        assert e.value.code == 2
    result = bench.main(["--smoke", "--label-skew", "1.1", "--variants",
                         "lsh,lsh-batch-labels,dense-fp32,dense-bf16,torch-fp32", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "lsh_gpu" and saved["shape"]["label_skew"] == 1.1
    d = rg.data.synthetic_xc(8 + 4, 40, 64, seed=0, label_skew=1.1).data  # SMOKE's shape: 8 train, 4 test
    counts = np.bincount(d.label_ids[:d.label_offsets[8]], minlength=64)
    assert saved["label_stats"]["distinct_train_labels"] == (counts > 0).sum()
    assert saved["label_stats"]["most_frequent_train_label_count"] == counts.max() == 5  # uniform: 14 labels, 2
    recs = {r["variant"]: r for r in result["records"]}
    for name in ("lsh", "lsh-batch-labels", "dense-fp32") + (("torch-fp32",) if importlib.util.find_spec("torch") else ()):
        assert "error" not in recs[name], recs[name]
        assert 0 <= recs[name]["p_at_1"] <= 1 and recs[name]["epoch_s_mean"] > 0
    assert recs["lsh"]["mean_active_per_batch"] >= 8 * 4      # min_active 8, batches of 4
    assert recs["lsh-batch-labels"]["mean_active_per_batch"] >= 8 * 4
    assert "error" not in recs["dense-bf16"], recs["dense-bf16"]
    assert recs["dense-bf16"]["loss"][-1] != recs["dense-fp32"]["loss"][-1]  # the bf16 rounding shows


@pytest.mark.parametrize("script,bad", [
    ("lsh_crossover", ["--steps", "0"]), ("lsh_crossover", ["--warmup", "-1"]),
    ("lsh_crossover", ["--min-samples", "-1"]), ("lsh_crossover", ["--classes", "1"]),
    ("lsh_crossover", ["--K", "0"]), ("lsh_crossover", ["--min-active", "-5"]),
    ("lsh_crossover", ["--smoke", "--steps", "0"]), ("lsh_gpu", ["--K", "0"]), ("lsh_gpu", ["--rebuild-every", "0"]),
])
def test_lsh_bench_bad_counts_are_one_line_errors(script, bad, capsys):
    """Regression: bench/lsh_crossover.py took --steps 0 (every point then a ZeroDivisionError
    record), --warmup -1, --min-samples -1 and --classes 1 silently, and both LSH scripts ended a
    bad LSH flag (--K 0) in a ValueError traceback; now argparse's exit 2 with one line."""
    with pytest.raises(SystemExit) as e:
        load(script).parse(bad)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in err
    assert bad[-2] in err or "LSHConfig" in err


@pytest.mark.slow  # about 20 s: three layers in the simulator
def test_lsh_crossover_smoke_times_each_head_and_the_ratio(tmp_path):
    """bench/lsh_crossover.py --smoke: one grid point, the LSH and both dense heads timed (at least
    one step each), the LSH record's ratio to the dense bf16 step, the JSON written; bad grid
    values are argparse's one-line errors."""
    out = tmp_path / "crossover.json"
    bench = load("lsh_crossover")
    for bad in (["--classes", "0"], ["--hidden", "x"], ["--heads", "lsh,sparse"], ["--steps", "-1"],
                ["--steps", "0", "--min-samples", "0"], ["--K", "0"]):
        with pytest.raises(SystemExit) as e:
            bench.parse(bad)
        assert e.value.code == 2
    assert bench.parse(["--batch", "256,2240"]).batch == [256, 2240]
    assert not bench.parse([]).config.batch_labels           # G-SLIDE's sets unless asked
    assert bench.parse(["--smoke", "--batch-labels"]).config.batch_labels
    result = bench.main(["--smoke", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "lsh_crossover" and saved["grid"] == {"classes": [64], "hidden": [8], "batch": [4]}
    assert saved["lsh_config"]["batch_labels"] is False      # which sets were timed is in the file
    recs = {r["head"]: r for r in result["records"]}
    assert set(recs) == {"lsh", "dense-fp32", "dense-bf16"} and all("error" not in r for r in recs.values())
    assert all(r["steps"] == 2 and r["samples"] == 8 and r["step_ms"] > 0 for r in recs.values())
    assert recs["lsh"]["lsh_over_dense_bf16"] == pytest.approx(recs["lsh"]["step_ms"] / recs["dense-bf16"]["step_ms"])
    fastest = min(recs["dense-fp32"]["step_ms"], recs["dense-bf16"]["step_ms"])
    assert recs["lsh"]["lsh_over_best_dense"] == pytest.approx(recs["lsh"]["step_ms"] / fastest)
    assert recs["lsh"]["mean_active_per_batch"] >= 8 * 4   # min_active 8, batches of 4


def test_word_lm_smoke_times_the_numpy_backend(tmp_path):
    """bench/word_lm.py --smoke: the NumPy backend's step on tiny shapes, tokens/s = T * S / step."""
    out = tmp_path / "word.json"
    result = load("word_lm").main(["--smoke", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "word_lm" and saved["gpu"] == [] and saved["memory"] == []
    cpu = result["cpu"]
    assert cpu["impl"] == "rnngraph-numpy" and cpu["tokens_per_s"] == pytest.approx(3 * 2 / cpu["step_ms"] * 1e3)


def test_startup_precision_reaches_rnngraphs_children_only(tmp_path, monkeypatch):
    """bench/startup.py --precision: every rnngraph child gets it, the torch children (TF32 off / on)
    do not, and the results file records it; a precision rg.compile does not know is argparse's
    error."""
    bench = load("startup")
    spawned = []
    monkeypatch.setattr(bench, "_spawn",
                        lambda args, env: spawned.append(args) or {"step_ms": 2.0, "process_wall_s": 0.1})
    out = tmp_path / "startup.json"
    assert bench.main(["--models", "2x512-s64", "--steps", "1", "--precision", "tf32", "--out", str(out)]) == 0
    rnngraph = [s for s in spawned if "--torch-tf32" not in s]
    torch = [s for s in spawned if "--torch-tf32" in s]
    assert len(rnngraph) == 2 and all(s[-2:] == ["--precision", "tf32"] for s in rnngraph)   # cold, warm
    assert len(torch) == 2 and not any("--precision" in s for s in torch)
    assert json.loads(out.read_text())["precision"] == "tf32"
    with pytest.raises(SystemExit) as e:
        bench.main(["--precision", "fp16"])
    assert e.value.code == 2


def test_startup_absent_hides_a_package_and_its_submodules():
    """bench/startup.py --absent: the children's import hook makes a package (and its submodules)
    fail to import as an uninstalled one does (numba-cuda's BLAS check catches ImportError), and
    leaves other packages importable."""
    import sys
    hook = load("startup")._Absent(["xml"])
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "xml" or k.startswith("xml.")}
    sys.meta_path.insert(0, hook)
    try:
        for name in ("xml", "xml.dom.minidom"):
            with pytest.raises(ModuleNotFoundError, match="hidden by --absent"):
                importlib.import_module(name)
        assert importlib.import_module("xmlrpc").__name__ == "xmlrpc"  # a name that starts alike imports
    finally:
        sys.meta_path.remove(hook)
        sys.modules.update(saved)


@pytest.mark.slow  # about 20 s: a whole script in the simulator
def test_lsh_gpu_smoke_chooses_the_simulator_itself(tmp_path):
    """Regression: `python bench/lsh_gpu.py --smoke` on a machine without a GPU ended in numba's
    driver error unless NUMBA_ENABLE_CUDASIM=1 was set by hand; --smoke now chooses the simulator."""
    import subprocess
    import sys
    out = tmp_path / "lsh.json"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "lsh_gpu.py"), "--smoke", "--variants", "dense-fp32",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = json.loads(out.read_text())
    assert [r["variant"] for r in saved["records"]] == ["dense-fp32"] and "error" not in saved["records"][0]
