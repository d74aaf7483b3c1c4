"""The persistent loop kernels as generated, compiled to PTX for sm_90 on the CPU (numba's NVVM; no
GPU needed, outside the simulator, in a subprocess; the tests skip where cuda.compile_ptx cannot
run). The GPU tier (tests/test_gpu.py) runs them; these tests check their code in CI:

- no float64 instruction in any float32 loop kernel of the issue's cells, S = 1 and S = 64 (each
  S has its own code shape, codegen/tuning.py);
- the inline grid barrier (codegen/grid_barrier.py, ``barrier=1|2``): per grid sync one relaxed
  GPU-scope load polled in a loop (a branch after the load goes back to a label before it; the compiler
  peels one more poll out of the loop), two fences, and numba's device-runtime grid sync only
  once (at kernel start).
"""
import json

import pytest

from conftest import PTX_PREAMBLE, run_outside_simulator

# Prints {"<cell> S=<S> barrier=<b> <loop>": {counts}} for the configurations in CONFIGS (JSON).
_SCRIPT = PTX_PREAMBLE + r"""
import rnngraph as rg
from rnngraph.codegen import module
from rnngraph.codegen.loop import LoopEmitter
from rnngraph.codegen.pointwise import PRELUDE, Names
from rnngraph.loop_env import parse, resolve
from rnngraph.passes import schedule
from rnngraph.schedule import Loop, loop_precision

def polled_in_loop(ptx):
    lines = [" ".join(l.split()) for l in ptx.splitlines()]
    hits = 0
    for i, line in enumerate(lines):
        if line.startswith("ld.relaxed.gpu"):
            labels = [l[:-1] for l in lines[max(0, i - 12):i] if l.endswith(":")]
            hits += any(l.endswith("bra " + lab + ";") or l.endswith("bra.uni " + lab + ";")
                        for lab in labels for l in lines[i + 1:i + 12])
    return hits


def inner_loop(ptx):
    # (fma, other) instruction counts of the basic block with the most fma.rn.f32: the in-loop
    # product's unrolled inner loop; other = all but the FMAs, the loads and the branch
    blocks, cur = [], []
    for line in ptx.splitlines():
        line = line.strip()
        if line.endswith(":"):
            blocks.append(cur)
            cur = []
        elif line and not line.startswith(("//", ".", "{", "}")):
            cur.append(line.split()[0].rstrip(";"))
    blocks.append(cur)
    body = max(blocks, key=lambda b: b.count("fma.rn.f32"))
    fma = body.count("fma.rn.f32")
    return fma, sum(not (op == "fma.rn.f32" or op.startswith(("ld.", "@", "bra"))) for op in body)

out = {}
for cell, S, knob, *opts in json.loads(CONFIGS):  # opts: {"hidden": H, "tuning": {RNNGRAPH_LOOP keys}}
    opts = opts[0] if opts else {}
    # the config's keys (``flags`` for the schedule, the others for the code shape) over the defaults for S
    keys = ",".join(f"{k}={v}" for k, v in {**opts.get("tuning", {}), "barrier": knob}.items())
    options, tuning = resolve(S, overrides=parse(keys))
    hidden, precision = opts.get("hidden", 64), opts.get("precision", "fp32")
    net = rg.stacked(rg.cells.STANDARD[cell], 1, hidden, input_size=hidden)
    g = net.masked_graph if opts.get("lengths") else net.graph  # lengths: the variable-length graph
    names = Names(g)
    s = schedule(g, 4, S, "float32", None, options, precision=precision)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    params = {names.param(p.name): p for p in g.params}
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]:
        emitter = LoopEmitter(g, loop, "k", coop=True, recompute=kernel_of, streams=S, nblocks=132, tuning=tuning,
                              precision=loop_precision(s))
        src, args = emitter.source()
        groups = emitter.plan.stream_groups  # the groups the plan took (1 where the loop keeps out groups)
        kern = module.load(PRELUDE + "\n\n" + src).k
        arrays = [np.zeros((2, 2, 2), np.float32) if a[0] in "VGNM" else np.zeros(2, np.int32) if a[0] == "O" else
                  np.zeros(params["P" + a[1:]].shape[::-1 if a[0] == "T" else 1], np.float32) for a in args]
        flags = [np.zeros((2, 2, 2), np.uint64) for _ in loop.flagged]
        sig = tuple(typeof(v) for v in [4, S] + ([np.zeros(1, np.uint32)] if knob else []) + flags + arrays)
        ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
        body = "\n".join(l for l in ptx.splitlines() if not l.strip().startswith("//"))
        out[f"{cell} S={S} barrier={knob} H={hidden} {precision} mma={int(options.loop_tensor_cores)}"
            f"{' lengths' if opts.get('lengths') else ''}{' pipelined' if tuning.pipeline else ''}"
            f"{' tiles' if tuning.tiles else ''}{f' groups={groups}' if groups > 1 else ''}"
            f"{' groupbar' if emitter.plan.group_barriers else ''} {loop.name}"] = {
            "mma": re.findall(r"mma\.sync\.aligned\.[a-z0-9.]+", body),
            "v4_loads": len(re.findall(r"ld\.global\.v4\.f32", body)),
            "shared_v4_loads": len(re.findall(r"ld\.shared\.v4\.f32", body)),
            "tiled": src.count("# tiled GEMM partial sums"),
            "polled_in_loop": polled_in_loop(ptx), "fences": ptx.count("fence.acq_rel.gpu"),
            "red_release": ptx.count("red.release.gpu.global.add.u32"),
            "cg_syncs": ptx.count("cudaCGSynchronize,"), "nanosleep": ptx.count("nanosleep"),
            "f64": len(re.findall(r"\.f64\b", body)), "syncs": len(loop.syncs) + loop.reduction_syncs,
            "flagged": len(loop.flagged),
            "inner_loop": inner_loop(ptx)}
print(json.dumps(out))
"""


def compile_loops(configs, tmp_path) -> dict:
    """The counts of _SCRIPT for [cell, S, barrier knob] or [cell, S, knob, {"hidden": H, "tuning":
    {RNNGRAPH_LOOP keys}}] items."""
    script = f"CONFIGS = {json.dumps(json.dumps(configs))}\n" + _SCRIPT
    return run_outside_simulator(script, cache_dir=tmp_path, timeout=1200)


@pytest.fixture(scope="module")
def issue_cells(tmp_path_factory) -> dict:
    """The counts of every loop kernel of the issue's four cells at S = 1 and S = 64 (barrier=0)."""
    configs = [[cell, S, 0] for cell in ("lstm", "peephole_lstm", "gru", "layernorm_lstm") for S in (1, 64)]
    return compile_loops(configs, tmp_path_factory.mktemp("ptx"))


@pytest.mark.slow
def test_float32_loop_kernels_have_no_f64(issue_cells):
    result = issue_cells
    # every loop is persistent by default (layernorm_lstm too, up to S=64): 8 configurations x 2
    assert len(result) == 16, sorted(result)
    assert {name: r["f64"] for name, r in result.items() if r["f64"]} == {}
    # numba's grid syncs: one a sync, and one at kernel start where the layer norms' sums or the flag
    # words (the S=1 defaults: passes/flag_exchange.py) are zeroed
    assert all(r["cg_syncs"] == r["syncs"] + ("layernorm" in name or r["flagged"] > 0) for name, r in result.items()), result
    assert [name for name, r in result.items() if r["flagged"]] == [
        f"{c} S=1 barrier=0 H=64 fp32 mma=0 {lp}" for c in ("lstm", "peephole_lstm", "gru", "layernorm_lstm")
        for lp in ("loop0", "loop0 (backward)")]


# The large-S code shape before the launch bounds (rows=4, cols=8, unroll=4), on which the H=64 part of the
# inner-loop test below was
# calibrated. The H=64 test nets' inner products are too short for the current default shape from S=2 (the
# unrolled loop runs once or not at all, so the block with the most FMAs also holds the item's
# prologue: 60 other instructions to 32 FMAs in the LSTM backward, signed or not); H=512 covers it.
PRE_BOUNDS_SHAPE = {"hidden": 64, "tuning": {"rows": 4, "cols": 8, "unroll": 4, "bounds": 0, "groups": 1}}


@pytest.mark.slow
def test_in_loop_product_index_arithmetic_is_folded(tmp_path):
    """numba wrapped each signed column index of the in-loop products (a sign test and
    an add in 64 bits per read), which also kept ptxas from folding the unrolled offsets into the
    loads. With the uint64 column index (codegen/loop_gemm.py ``emit_rows``):

    - the code shape before the launch bounds (``PRE_BOUNDS_SHAPE``), H=64 S=64, the four cells: 13-56 other PTX
      instructions to 32-64 FMAs in the inner loop (at most 1.31 a FMA); signed 62-141 (at least
      1.73). The bound 1.5 separates the two at H=64 only: with that shape the H=512 LSTM forward
      has about 56 other instructions to 128 FMAs, 191 (1.49 a FMA) signed (SASS 250 instructions
      a trip, 417 signed: bench/results/cpu-20261201-u64-sass-inner-loop.txt).
    - the default shape of S=64 (rows=8, cols=4, unroll=8, bounds=1, groups=4), H=512, lstm and
      layernorm_lstm: 12-72 other instructions to 128-256 FMAs (at most 0.31 a FMA); signed 145-363
      (at least 1.13; 0.94 for the GRU backward). Bound: 0.6."""
    cells = ("lstm", "peephole_lstm", "gru", "layernorm_lstm")
    configs = [[cell, 64, 0, PRE_BOUNDS_SHAPE] for cell in cells] + \
        [[cell, 64, 0, {"hidden": 512}] for cell in ("lstm", "layernorm_lstm")]
    inner = {name: r["inner_loop"] for name, r in compile_loops(configs, tmp_path).items()}
    assert len(inner) == 12, sorted(inner)
    for name, (fma, other) in inner.items():
        bound = 0.6 if "H=512" in name else 1.5
        assert fma >= 32 and other <= bound * fma, (name, fma, other)


@pytest.mark.slow
def test_tiled_loop_kernels_compile_to_wide_loads(tmp_path):
    """LoopTuning ``tiles=1`` (codegen/loop_tiles.py) at S = 64, H = 512: every loop kernel of the
    four cells has tiled row loops, reads its weights from shared memory and its vectors from
    global memory with 16-byte loads, and has no float64 instruction. The LSTM's trips: forward
    two steps of 4 rows x 4 streams (8 shared and 8 global wide loads), backward four steps of 4
    rows x 2 streams (16 and 8). At H = 1024 the weight rows (128 KiB a block) are views of the
    dynamic shared memory, read flat (``load_f32x4_1d``), still as ``ld.shared.v4``; with lengths
    the tiles take their streams through the stream order. (Their SASS: 172 instructions a trip, 128 of them FFMA, against
    425 / 256 and 217 / 128 of the work items: bench/results/cpu-20261205-loop-tiles-sass.txt.)"""
    cells = ("lstm", "peephole_lstm", "gru", "layernorm_lstm")
    one = {"tiles": 1, "groups": 1}  # in one stream group (the default from S = 64 is four)
    result = compile_loops([[cell, 64, 0, {"hidden": 512, "tuning": one}] for cell in cells]
                           + [["lstm", 64, 0, {"hidden": 1024, "tuning": one}],
                              ["lstm", 64, 0, {"hidden": 512, "lengths": True, "tuning": one}]], tmp_path)
    assert len(result) == 12, sorted(result)
    for name, r in result.items():
        assert r["tiled"] >= 1 and r["f64"] == 0, (name, r)
        assert r["v4_loads"] >= 1 and r["shared_v4_loads"] >= 1, (name, r)
    lstm = "lstm S=64 barrier=0 H=512 fp32 mma=0 tiles loop0"
    assert (result[lstm]["shared_v4_loads"], result[lstm]["v4_loads"]) == (8, 8)
    assert (result[lstm + " (backward)"]["shared_v4_loads"], result[lstm + " (backward)"]["v4_loads"]) == (16, 8)


@pytest.mark.slow
def test_stream_grouped_loop_kernels_compile(tmp_path):
    """LoopTuning ``groups=4`` (codegen/loop_plan.py ``stream_groups``) at S = 64, H = 512, work
    items and tiles: the LSTM's loop kernels compile for sm_90 without float64, their weight rows
    (128 KiB a block) read from dynamic shared memory, with 16-byte loads where tiled; so do the
    layer-norm LSTM's with lngroups=1."""
    result = compile_loops([["lstm", 64, 0, {"hidden": 512, "tuning": {"groups": 4, "fwdgroups": 0}}],
                            ["lstm", 64, 0, {"hidden": 512, "tuning": {"groups": 4, "tiles": 1, "fwdgroups": 0}}],
                            ["layernorm_lstm", 64, 0, {"hidden": 512, "tuning": {"groups": 4, "lngroups": 1}}]], tmp_path)
    assert len(result) == 6 and all(" groups=4 " in name for name in result), sorted(result)
    assert all(r["f64"] == 0 for r in result.values()), result
    assert sorted(r["tiled"] for r in result.values()) == [0, 0, 0, 0, 1, 1]
    assert all(r["shared_v4_loads"] > 0 for r in result.values() if r["tiled"])


@pytest.mark.slow
def test_group_barriers_compile_to_one_polling_loop_a_sync(tmp_path):
    """LoopTuning ``groupbar=1`` in four stream groups (codegen/grid_barrier.py ``group_barrier``):
    the S = 64 LSTM's and layer-norm LSTM's loop kernels still poll once a sync, with the fences
    of their barrier kind and numba's grid sync only once, at kernel start, and no float64."""
    result = compile_loops([["lstm", 64, 1, {"hidden": 512, "tuning": {"groups": 4, "groupbar": 1, "fwdgroups": 0}}],
                            ["lstm", 64, 3, {"hidden": 512, "tuning": {"groups": 4, "groupbar": 1, "fwdgroups": 0}}],
                            ["layernorm_lstm", 64, 1, {"hidden": 512, "tuning": {"groups": 4, "lngroups": 1, "groupbar": 1}}]],
                           tmp_path)
    assert len(result) == 6 and all(" groups=4 groupbar " in name for name in result), sorted(result)
    for name, r in result.items():
        n, red = r["syncs"], "barrier=3" in name
        assert r["polled_in_loop"] == n and r["fences"] == (1 if red else 2) * n, (name, r)
        assert r["red_release"] == (n if red else 0) and r["f64"] == 0, (name, r)
        assert r["cg_syncs"] == 1, (name, r)  # at kernel start (the layer norms': after the sums' zeroing)


def test_f64_count_sees_a_float64_constant(tmp_path):
    """The check above can fail: a kernel with a bare float literal (float64) is counted."""
    script = r'''
import json, re
from numba import cuda
def bad(x):
    x[0] = x[0] * 1.1
try:
    ptx, _ = cuda.compile_ptx(bad, "void(float32[::1])", cc=(9, 0))
except Exception as e:
    print(json.dumps({"skip": str(e)[:300]}))
else:
    print(json.dumps({"f64": len(re.findall(r"\.f64\b", ptx))}))
'''
    assert run_outside_simulator(script)["f64"] > 0


@pytest.mark.slow
def test_inline_barrier_compiles_to_a_polling_loop(tmp_path):
    # S=1's default flags leave the LSTM no grid sync a timestep, and add their own polled loops
    synced = {"tuning": {"flags": 0}}
    result = compile_loops([["lstm", 1, 1, synced], ["lstm", 1, 2, synced], ["lstm", 64, 1], ["layernorm_lstm", 1, 1, synced],
                            ["lstm", 1, 3, synced], ["layernorm_lstm", 1, 3, synced]], tmp_path)
    assert len(result) == 12, sorted(result)
    for name, r in result.items():
        n = r["syncs"]
        red = "barrier=3" in name  # the arrival's release is the red's own; one fence (acquire) a sync
        assert r["polled_in_loop"] == n and r["fences"] == (1 if red else 2) * n, (name, r)
        assert r["red_release"] == (n if red else 0), (name, r)
        assert r["cg_syncs"] == 1 and r["f64"] == 0, (name, r)  # numba's, at kernel start: a cooperative launch
        assert r["nanosleep"] == (n if "barrier=2" in name else 0), (name, r)


@pytest.mark.slow
def test_sync_micro_kernels_compile(tmp_path):
    """bench/sync_micro.py's barrier loops compile for sm_90: one polled loop a sync for the inline
    barriers (barrier 3 arriving with red.release), numba's device-runtime sync otherwise."""
    script = PTX_PREAMBLE + r'''
import importlib.util
spec = importlib.util.spec_from_file_location("sync_micro", "bench/sync_micro.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
from rnngraph.codegen import module
out = {}
for b in (0, 1, 3):
    kern = module.load(m.kernel_source(b, work=True)).sync_loop
    sig = (typeof(4), typeof(np.zeros(1, np.uint32)), typeof(np.zeros(4, np.float32)))
    ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
    out[b] = {"red": ptx.count("red.release.gpu"), "relaxed": ptx.count("ld.relaxed.gpu"),
              "cg": ptx.count("cudaCGSynchronize,"), "f64": ptx.count(".f64")}
print(json.dumps(out))
'''
    r = run_outside_simulator(script, cache_dir=tmp_path)
    assert r["0"]["cg"] >= 2 and r["0"]["relaxed"] == 0  # the start's and the loop's (unrolled) grid.sync()
    assert r["1"]["cg"] == 1 and r["1"]["relaxed"] >= 1 and r["1"]["red"] == 0
    assert r["3"]["cg"] == 1 and r["3"]["red"] == 1 and r["3"]["relaxed"] >= 2  # + the phase read
    assert all(v["f64"] == 0 for v in r.values())


@pytest.mark.slow
def test_loop_tensor_cores_emit_mma_and_no_f64(tmp_path):
    """With ``loop_tensor_cores`` (RNNGRAPH_LOOP key ``mma``) and a reduced precision, every loop
    kernel's products are ``mma.sync`` of that precision (codegen/loop_mma.py), with no float64
    instruction: the LSTM at S = 64 (shared weight copies, K-split) and the GRU at S = 1 (flagged
    vectors, an inner dimension of 72: a partial last k-step of bf16). The LSTM's vectors are read
    in whole chunks with 16-byte loads (``ld.global.v4.f32``), the GRU's flagged ones are not.
    Without the key the same precision leaves the loops without ``mma``."""
    on = {"tuning": {"mma": 1}}
    configs = [["lstm", 64, 0, {**on, "precision": p}] for p in ("tf32", "bf16")] + \
        [["gru", 1, 0, {**on, "precision": "bf16", "hidden": 72}], ["lstm", 64, 0, {"precision": "tf32"}]]
    result = compile_loops(configs, tmp_path)
    assert len(result) == 8, sorted(result)  # 4 configurations x (forward, backward)
    want = {"tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
            "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}
    for name, r in result.items():
        assert r["f64"] == 0, name
        if "mma=1" in name:
            precision = "bf16" if " bf16 " in name else "tf32"
            assert r["mma"] and set(r["mma"]) == {want[precision]}, (name, r["mma"])
            assert (r["v4_loads"] > 0) == name.startswith("lstm"), (name, r["v4_loads"])
        else:
            assert r["mma"] == [] and r["v4_loads"] == 0, name


@pytest.mark.slow
def test_pipelined_chunks_compile_with_the_same_products(tmp_path):
    """LoopTuning ``pipeline`` (codegen/loop_mma.py ``_chunk``): the tensor-core chunk loop loads
    the next chunk's vectors before this chunk's products. The LSTM at S = 64, H = 256 in tf32 and
    bf16 compiles with the same ``mma.sync`` products as without and no float64 instruction, and
    with more 16-byte vector loads in its code (the first chunk's before the loop; H = 256 tf32:
    16 against 12 in the forward)."""
    configs = [["lstm", 64, 0, {"hidden": 256, "precision": p, "tuning": {"mma": 1, "pipeline": q}}]
               for p in ("tf32", "bf16") for q in (0, 1)]
    result = compile_loops(configs, tmp_path)
    assert len(result) == 8, sorted(result)
    for name, r in result.items():
        if " pipelined " not in name:
            continue
        plain = result[name.replace(" pipelined", "")]
        assert r["f64"] == 0 and r["mma"] == plain["mma"] and r["mma"], name
        assert r["v4_loads"] > plain["v4_loads"] > 0, (name, r["v4_loads"], plain["v4_loads"])


@pytest.mark.slow
def test_variable_length_loops_skip_without_slowing_the_inner_loop(tmp_path):
    """The variable-length LSTM's loop kernels at S = 64, H = 512 (GEMM items that skip padded
    steps and take the streams through the stream order, LoopTuning ``skip``) compile with no
    float64 instruction, and their in-loop products' unrolled inner loops are the plain graph's:
    the same FMAs and other instructions a trip. (Zero stores for the skipped items in a second
    item loop had made the forward's inner loop recompute its addresses every trip.)"""
    # the plain graph in one stream group, as the variable-length one (lengths keep out groups)
    result = compile_loops([["lstm", 64, 0, {"hidden": 512, "tuning": {"groups": 1}}],
                            ["lstm", 64, 0, {"hidden": 512, "lengths": True}]], tmp_path)
    assert len(result) == 4, sorted(result)
    for name, r in result.items():
        assert r["f64"] == 0, name
    for backward in (False, True):
        plain, masked = (next(r for n, r in result.items() if ("(backward)" in n) == backward and ("lengths" in n) == m)
                         for m in (False, True))
        assert masked["inner_loop"] == plain["inner_loop"], ("backward" if backward else "forward", masked, plain)


_MAD_SCRIPT = PTX_PREAMBLE + r"""
from rnngraph.codegen.mad_rows import mad_rows3


def statements(a, w, out):
    i = cuda.grid(1)
    acc0, acc1, acc2 = a[i], a[i + 1], a[i + 2]
    w0, w1, w2, v = w[0], w[1], w[2], w[i]
    acc0 += w0 * v
    acc1 += w1 * v
    acc2 += w2 * v
    out[i] = acc0 * acc1 - acc2


def one_call(a, w, out):
    i = cuda.grid(1)
    acc0, acc1, acc2 = a[i], a[i + 1], a[i + 2]
    w0, w1, w2, v = w[0], w[1], w[2], w[i]
    acc0, acc1, acc2 = mad_rows3((acc0, acc1, acc2), w0, w1, w2, v)
    out[i] = acc0 * acc1 - acc2


def chained(a, w, out):  # as a row loop's trip: the tuple from call to call, unpacked at the end
    i = cuda.grid(1)
    acc0, acc1, acc2 = a[i], a[i + 1], a[i + 2]
    w0, w1, w2, v, x = w[0], w[1], w[2], w[i], w[i + 1]
    t = mad_rows3((acc0, acc1, acc2), w0, w1, w2, v)
    acc0, acc1, acc2 = mad_rows3(t, w1, w2, w0, x)
    out[i] = acc0 * acc1 - acc2


def chained_statements(a, w, out):
    i = cuda.grid(1)
    acc0, acc1, acc2 = a[i], a[i + 1], a[i + 2]
    w0, w1, w2, v, x = w[0], w[1], w[2], w[i], w[i + 1]
    acc0 += w0 * v
    acc1 += w1 * v
    acc2 += w2 * v
    acc0 += w1 * x
    acc1 += w2 * x
    acc2 += w0 * x
    out[i] = acc0 * acc1 - acc2


sig = "void(float32[::1], float32[::1], float32[::1])"
body = {}
for fastmath in (False, True):
    for f in (statements, one_call, chained, chained_statements):
        ptx = cuda.compile_ptx(f, sig, cc=(9, 0), fastmath=fastmath)[0]
        ptx = ptx[ptx.index("{", ptx.index(".visible .entry")):]   # the body, its parameters unnamed
        body[f"{f.__name__} {fastmath}"] = [re.sub(r"_ZN\w+(_param_\d+)", r"\1", " ".join(line.split()))
                                            for line in ptx.splitlines()]
print(json.dumps(body))
"""


def test_mad_rows_compile_to_the_statements_ptx():
    """codegen/mad_rows.py's intrinsic, the FFMA row loops' products in one call, gives the PTX of
    the statements ``acc_a += w_a * v`` it replaces (fma a row, rows in order), with and without
    fastmath (then with ftz), also with its tuple passed from one call to the next as a row loop's
    trip does: the loop kernels' GPU code does not change by it."""
    body = run_outside_simulator(_MAD_SCRIPT)
    for fastmath in ("False", "True"):
        for calls, statements, products in (("one_call", "statements", 3), ("chained", "chained_statements", 6)):
            assert body[f"{calls} {fastmath}"] == body[f"{statements} {fastmath}"]
            fma = [line for line in body[f"{calls} {fastmath}"] if line.startswith("fma.rn")]
            assert len(fma) == products and all((".ftz." in line) == (fastmath == "True") for line in fma)
