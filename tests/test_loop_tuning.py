"""Persistent-loop code shapes (rnngraph/codegen/tuning.py): weights in shared memory or not,
unrolled inner products with a remainder loop. Every variant must train exactly like the NumPy
backend (in numba's simulator), and bad RNNGRAPH_LOOP values must name the variable."""
import os

import numpy as np
import pytest

from conftest import run_outside_simulator
import rnngraph as rg
from rnngraph.codegen.tuning import LoopTuning, default_tuning, loop_tuning
from rnngraph.schedule import Loop

V, T, S, H = 5, 2, 2, 4
sim = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

# (RNNGRAPH_LOOP, shared arrays expected): unroll 3 over an inner size of 4 (hidden) leaves a
# remainder trip; smem_kib=0 reads the weights from global memory.
VARIANTS = [("unroll=3,rows=1,smem_kib=0", False), ("unroll=3,rows=3,smem_kib=44", True), ("unroll=1,smem_kib=1,rows=2", True)]


@sim
@pytest.mark.parametrize("env, shared", VARIANTS, ids=[v for v, _ in VARIANTS])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_loop_variants_train_like_numpy(monkeypatch, env, shared, cell):
    monkeypatch.setenv("RNNGRAPH_LOOP", env)
    net = rg.stacked(rg.cells.STANDARD[cell], 2, H, vocab=V, embed=3)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.Adam(lr=1e-2), seed=3,
                                plan="wavefront")
    cpu, gpu = mk("cpu"), mk("cuda")
    rng = np.random.default_rng(4)
    for _ in range(2):
        x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
        assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    for name, value in cpu.parameters.items():
        np.testing.assert_allclose(gpu.parameters[name], value, atol=1e-5, err_msg=name)
    assert ("cuda.shared.array" in gpu.kernels) == shared
    unrolled = "unroll=3" in env  # loads of the third unrolled copy (w0_2) and the remainder loop
    assert ("w0_0_2 = " in gpu.kernels and "kk + 2 < " in gpu.kernels) == unrolled
    assert ("w0_0_1 = " in gpu.kernels) == unrolled
    rows = int(dict(kv.split("=") for kv in env.split(",")).get("rows", 1))  # row blocking: rows 0 .. rows-1
    assert f"w0_{rows - 1}_0 = " in gpu.kernels and f"w0_{rows}_0 = " not in gpu.kernels


def test_budget_limits_the_shared_arrays():
    """smem_kib=1 holds one 4x4-hidden LSTM's rows (4*4*4 floats = 256 B per weight in one block)
    but not a hidden-32 one's (4*32*32*4 B = 16 KiB)."""
    from rnngraph.codegen.loop import LoopEmitter
    for hidden, expect in ((4, True), (32, False)):
        net = rg.stacked(rg.cells.lstm, 1, hidden, input_size=3)
        sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
        loop = next(s for s in sched.forward if isinstance(s, Loop))
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=1, tuning=LoopTuning(smem_kib=1)).source()
        assert ("cuda.shared.array" in src) == expect, hidden


@pytest.mark.parametrize("text, msg", [("threads=100", "multiple of 32"), ("unroll=0", "unroll"),
                                       ("smem_kib=64", "smem_kib"), ("rows=9", "rows"), ("blocks=3", "keys"),
                                       ("threads=lots", "integer"), ("barrier=3", "barrier")])
def test_bad_environment_names_the_variable(monkeypatch, text, msg):
    monkeypatch.setenv("RNNGRAPH_LOOP", text)
    with pytest.raises(ValueError, match=msg) as err:
        loop_tuning()
    assert "RNNGRAPH_LOOP" in str(err.value)


def test_environment_overrides_defaults(monkeypatch):
    monkeypatch.setenv("RNNGRAPH_LOOP", "threads=256, unroll=2,")  # a trailing comma is harmless
    assert loop_tuning() == LoopTuning(threads=256, unroll=2, rows=LoopTuning().rows, smem_kib=LoopTuning().smem_kib)
    # the keys the variable leaves out keep the defaults of the step's number of streams
    assert loop_tuning(1) == LoopTuning(threads=256, unroll=2, rows=2, smem_kib=44, ln=1, xreduce=0)
    assert loop_tuning(64) == loop_tuning() == LoopTuning(threads=256, unroll=2)
    monkeypatch.delenv("RNNGRAPH_LOOP")
    assert loop_tuning() == loop_tuning(17) == LoopTuning()
    assert loop_tuning(2) == LoopTuning(ln=1) and loop_tuning(16) == LoopTuning(ln=1)
    assert default_tuning(1).rows == 2 and default_tuning(2).rows == 4
    assert default_tuning(1).xreduce == 0 and default_tuning(2).xreduce == 1


def test_bad_environment_fails_for_every_graph(monkeypatch):
    """Regression (session 3 review): RNNGRAPH_LOOP=rows=99 was parsed only for graphs with a
    layer norm, so `rnngraph schedule lstm` and CPU training ran on, silently ignoring it."""
    from rnngraph.passes import schedule
    monkeypatch.setenv("RNNGRAPH_LOOP", "rows=99")
    for cell in ("lstm", "gru"):
        with pytest.raises(ValueError, match="RNNGRAPH_LOOP: rows must be in"):
            schedule(rg.stacked(rg.cells.STANDARD[cell], 1, 8).graph, 4, 2)
    with pytest.raises(ValueError, match="RNNGRAPH_LOOP"):
        rg.compile(rg.stacked(rg.cells.lstm, 1, 8, vocab=5), window=2, streams=1, device="cpu")


def test_inline_barrier_replaces_the_level_syncs():
    """barrier=2 (1 without its sleeps) on the GPU emitter: every level's grid sync becomes
    codegen/grid_barrier.py's inline barrier on the kernel's counter BAR (an argument after S);
    one grid.sync() stays at kernel start (numba then launches the kernel cooperatively)."""
    from rnngraph.codegen.loop import LoopEmitter
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=3)
    sched = rg.compile(net, window=2, streams=1, device="cpu").schedule
    for loop in [s for s in sched.forward + sched.backward if isinstance(s, Loop)]:
        syncs = len(loop.syncs) + loop.reduction_syncs
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(barrier=2, ln=1)).source()
        assert src.count("grid_barrier(BAR, nblocks)") == syncs > 0 and src.count("grid.sync()") == 1, loop.name
        assert "def k(T, S, BAR, " in src
        assert "from rnngraph.codegen.grid_barrier import grid_barrier_backoff as grid_barrier" in src
        plain, _ = LoopEmitter(net.graph, loop, "k", coop=True, nblocks=4, tuning=LoopTuning(ln=1)).source()
        assert plain.count("grid.sync()") == syncs + 1 and "BAR" not in plain  # + the row sums' zeroing
        sim, _ = LoopEmitter(net.graph, loop, "k", coop=False, tuning=LoopTuning(barrier=1, ln=1)).source()
        assert "BAR" not in sim  # the simulator: numba's grid.sync()


# Compiles (no GPU: numba's NVVM) the S=1 LSTM loop kernels as generated with an inline barrier to
# PTX for sm_90 and prints, per kernel and barrier knob: how many acquire loads sit in a loop (a
# branch after the load goes back to a label before it; the compiler also peels one poll out of
# the loop), fences, device-runtime grid syncs and .f64 instructions.
_BARRIER_PTX_SCRIPT = r"""
import json, re, sys
import numpy as np
from numba import cuda, typeof
def probe(x):
    x[0] = 1.0
try:
    cuda.compile_ptx(probe, "void(float32[::1])", cc=(9, 0))
except Exception as e:  # no NVVM here
    print(json.dumps({"skip": f"{type(e).__name__}: {e}"[:500]}))
    sys.exit(0)
import numba.cuda.dispatcher
class _H200:  # device functions called from a kernel compile for the current device's cc: none here
    compute_capability = (9, 0)
numba.cuda.dispatcher.get_current_device = _H200
import rnngraph as rg
from rnngraph.codegen import module
from rnngraph.codegen.loop import LoopEmitter
from rnngraph.codegen.pointwise import PRELUDE, Names
from rnngraph.codegen.tuning import LoopTuning, default_tuning
from rnngraph.passes import schedule
from rnngraph.schedule import Loop

def polled_in_loop(ptx):
    lines = [" ".join(l.split()) for l in ptx.splitlines()]
    hits = 0
    for i, line in enumerate(lines):
        if line.startswith("ld.acquire.gpu"):
            labels = [l[:-1] for l in lines[max(0, i - 12):i] if l.endswith(":")]
            hits += any(l.endswith("bra " + lab + ";") or l.endswith("bra.uni " + lab + ";")
                        for lab in labels for l in lines[i + 1:i + 12])
    return hits

net = rg.stacked(rg.cells.lstm, 1, 64, input_size=64)
g, names = net.graph, Names(net.graph)
s = schedule(g, 4, 1, "float32", None)
kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
params = {names.param(p.name): p for p in g.params}
out = {}
for knob in (1, 2):
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop)]:
        tuning = LoopTuning(**{**default_tuning(1).__dict__, "barrier": knob})
        src, args = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, nblocks=132, tuning=tuning).source()
        kern = module.load(PRELUDE + "\n\n" + src).k
        arrays = [np.zeros((2, 2, 2), np.float32) if a[0] in "VGNM" else
                  np.zeros(params["P" + a[1:]].shape[::-1 if a[0] == "T" else 1], np.float32) for a in args]
        sig = tuple(typeof(v) for v in [4, 1, np.zeros(1, np.uint32), *arrays])
        ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
        out[f"{loop.name} barrier={knob}"] = {
            "polled_in_loop": polled_in_loop(ptx), "fences": ptx.count("fence.acq_rel.gpu"),
            "cg_syncs": ptx.count("cudaCGSynchronize,"),
            "nanosleep": ptx.count("nanosleep"), "f64": len(re.findall(r"\.f64\b", ptx)),
            "syncs": len(loop.syncs)}
print(json.dumps(out))
"""


def test_inline_barrier_compiles_to_a_polling_loop(tmp_path):
    """The inline barrier in real generated kernels, compiled to PTX (numba's NVVM, no GPU; skips
    where it cannot run): per grid sync one acquire load polled in a loop (the compiler kept it
    in the loop), two fences; numba's device-runtime grid sync only once (kernel start); no
    float64. (Its speed and correctness on the H200: bench/loop_sweep.py, tests/test_gpu.py.)"""
    result = run_outside_simulator(_BARRIER_PTX_SCRIPT, cache_dir=tmp_path, timeout=900)
    assert len(result) == 4
    for name, r in result.items():
        n = r["syncs"]
        assert r["polled_in_loop"] == n and r["fences"] == 2 * n, (name, r)
        assert r["cg_syncs"] <= 1 and r["f64"] == 0, (name, r)
        assert r["nanosleep"] == (n if name.endswith("barrier=2") else 0), (name, r)
