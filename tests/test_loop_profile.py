"""bench/loop_profile.py's source variants (the knock-outs are only timed on the GPU; here their
text): each removes exactly the sections it names, whatever block barriers those contain. The
knock-outs and fastmath are generated from the loop's plan (LoopKernelPlan.knockout), the other
variants are edits of the generated text."""
import re
import sys
from pathlib import Path

import pytest

import rnngraph as rg
from rnngraph.codegen.loop import emit_loop_kernel
from rnngraph.codegen.loop_plan import plan_loop_kernel
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.passes import schedule
from rnngraph.schedule import Loop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from loop_profile import variant_source  # noqa: E402


def _variants(cell: str, S: int, tuning: LoopTuning, nblocks: int = 4, options=None, loops=(False, True)):
    """[(a variant_source function of the loop's plan, its generated source)] of the one-layer
    ``cell``'s persistent loops (forward, backward), H=8."""
    net = rg.stacked(rg.cells.STANDARD[cell], 1, 8, input_size=8)
    s = schedule(net.graph, 4, S, "float32", None, options)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    out = []
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop) and st.reverse in loops]:
        plan = plan_loop_kernel(net.graph, loop, "k", True, kernel_of, S, nblocks, tuning)
        variant = lambda name, plan=plan: variant_source(net.graph, plan, kernel_of, name, 4, S)  # noqa: E731
        out.append((variant, emit_loop_kernel(net.graph, plan, kernel_of)[0]))
    return out


@pytest.mark.parametrize("lnsum", [0, 1, 2])
def test_knock_outs_remove_what_they_name(lnsum):
    options = rg.ScheduleOptions.defaults(64).replace(persistent_layer_norms=True)
    for variant, src in _variants("layernorm_lstm", 64, LoopTuning(lnsum=lnsum), options=options):
        assert variant("full") == src
        assert "row sums of the owned elements" in src and ("_fwd(t, s, j" in src or "_bwd(t, s, j" in src)
        no_sums = variant("no-ln-sums")
        assert "row sums of the owned elements" not in no_sums and "cuda.atomic.add(N" not in no_sums
        assert "cuda.atomic.add(M" not in no_sums and "cuda.atomic.add(lns" not in no_sums and "lnp[" not in no_sums
        assert no_sums.count("_fwd(t, s, j") + no_sums.count("_bwd(t, s, j") == \
            src.count("_fwd(t, s, j") + src.count("_bwd(t, s, j")  # the pointwise calls stay
        for name in ("no-gemm", "no-pointwise", "sync-only"):
            out = variant(name)
            assert "cuda.atomic.add(lns" not in out and "lnp[" not in out, name
            assert "row sums of the owned elements" not in out, name
            gemm = "= mad_rows" in out  # a call of the products (codegen/mad_rows.py)
            pointwise = bool(re.search(r"^ +k\d+_(fwd|bwd)(_pre)?\(t, s, j", out, re.M))  # a call, not a def
            assert (gemm, pointwise) == {"no-gemm": (False, True), "no-pointwise": (True, False),
                                         "sync-only": (False, False)}[name]
        assert src.count("grid.sync()") == no_sums.count("grid.sync()")


def test_no_grid_sync_variant_keeps_the_syncs_before_the_time_loop():
    """no-grid-sync: the time loop's grid syncs (level ends, reduction syncs) become ``pass``; the
    one after the layer-norm sums are zeroed stays (layernorm_lstm S=64, barrier=0 and 1)."""
    options = rg.ScheduleOptions.defaults(64).replace(persistent_layer_norms=True)
    for barrier, sync in ((0, "grid.sync()"), (1, "grid_barrier(BAR, nblocks)")):
        for variant, src in _variants("layernorm_lstm", 64, LoopTuning(barrier=barrier), options=options):
            before, loop = src.split("for tick in range(")
            out_before, out_loop = variant("no-grid-sync").split("for tick in range(")
            assert out_before == before and loop.count(sync) >= 2 and sync not in out_loop
            assert out_loop.count("\n        pass\n") == loop.count(f"\n        {sync}\n")


def test_compile_option_variants_keep_the_kernel_options():
    """Regression: the fastmath and lineinfo variants replaced a bare ``@cuda.jit``
    line only, so a kernel compiled with options (bounds=1, carveout, fast=1) lost them or
    kept its line unchanged; now lineinfo is added to the kernel's list, once, and fastmath is the
    kernel generated with ``fast=1`` (its device functions too)."""
    for tuning, head in ((LoopTuning(bounds=0), "@cuda.jit"), (LoopTuning(bounds=1, fast=1), "@cuda.jit(fastmath=True, launch_bounds=(512, 1))")):
        (variant, src), = _variants("lstm", 2, tuning, loops=(False,))
        assert head + "\ndef k(" in src
        inner = head[len("@cuda.jit("):-1] if "(" in head else ""
        opts = [o for o in inner.split(", ") if o]
        assert "@cuda.jit(" + ", ".join(opts + ["lineinfo=True"]) + ")\ndef k(" in variant("lineinfo")
        fast = ["fastmath=True"] + [o for o in opts if o != "fastmath=True"]
        out = variant("fastmath")
        assert "@cuda.jit(" + ", ".join(fast) + ")\ndef k(" in out, out[:300]
        assert "@cuda.jit(device=True, inline=True, fastmath=True)" in out
        assert "@cuda.jit(device=True, inline=True)\n" not in out


def test_no_vector_loads_variant_drops_only_the_gemm_vector_loads():
    """no-vector-loads: every inner-product vector load (``v<m>_<i>_<u> = X[...]``) becomes a
    register copy of a weight; the weight loads, the accumulations and every other line stay."""
    for variant, src in _variants("lstm", 64, LoopTuning()):
        out = variant("no-vector-loads")
        loads = re.findall(r"\n\s+v\d+_\d+_r*\d+ = [A-Z]\d+\[", src)
        assert loads and not re.findall(r"\n\s+v\d+_\d+_r*\d+ = [A-Z]\d+\[", out)
        assert out.count("\n") == src.count("\n") and out.count("= mad_rows") == src.count("= mad_rows") > 0
        assert len(re.findall(r"\n\s+v\d+_\d+_r*\d+ = w\d+_0_r*\d+\n", out)) == len(loads)


def test_uint64_indices_variant_casts_every_subscript():
    """uint64-indices: every subscript part but integer literals becomes ``uint64(part)`` (the GEMM
    column index already is one); removing the casts gives the same text for both."""
    for variant, src in _variants("layernorm_lstm", 64, LoopTuning(lnsum=2)):
        out = variant("uint64-indices")
        subscripts = re.findall(r"\b[A-Za-z_]\w*\[([^\[\]]+)\]", out)
        assert len(subscripts) > 20
        for sub in subscripts:
            for part in sub.split(", "):
                assert part.isdigit() or (part.startswith("uint64(") and part.endswith(")")), sub
        unwrap = lambda text: re.sub(r"uint64\(([^()]*(?:\([^()]*\)[^()]*)*)\)", r"\1", text)  # noqa: E731
        assert unwrap(out) == unwrap(src) and out != src


def test_no_gemm_variant_removes_the_split_partial_sums():
    """With ``ksplit`` (the S=1 default) a GEMM section holds its own block barrier and the pass
    adding the warps' partial sums; no-gemm must drop all of it (a leftover read of kp<n> would
    time garbage) and keep the pointwise calls."""
    net = rg.stacked(rg.cells.lstm, 1, 512, input_size=512)
    s = schedule(net.graph, 4, 1, "float32", None)
    loop = next(st for st in s.backward if isinstance(st, Loop))
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    plan = plan_loop_kernel(net.graph, loop, "k", True, kernel_of, 1, 132, LoopTuning(threads=256, rows=2, ksplit=8))
    src, _ = emit_loop_kernel(net.graph, plan, kernel_of)
    assert "kp0[kw, ix] = red" in src and "acc = kp0[item * 4 + 0, c]" in src
    out = variant_source(net.graph, plan, kernel_of, "no-gemm", 4, 1)
    assert "kp0[" not in out.split("cuda.shared.array")[-1] and "+= acc" not in out
    calls = lambda text: sum(line.strip().startswith("k3_bwd(") for line in text.splitlines())  # noqa: E731
    assert calls(out) == calls(src) == 1


def test_tiles_and_groups_variants_replan_the_loop():
    """tiles / groups4 / groupbar4: the loop re-planned with LoopTuning tiles=1 / groups=4 with one
    barrier over the grid (groupbar=0) / groups=4 with a barrier a group, the module led by
    its DYNAMIC_SMEM (the bytes the launch gives it); the kernel as generated has neither."""
    for variant, src in _variants("lstm", 64, LoopTuning()):
        tiled, grouped, both = variant("tiles"), variant("groups4"), variant("tiles-groups4")
        assert "# tiled GEMM partial sums" in tiled and "# tiled GEMM partial sums" not in src
        assert re.match(r"DYNAMIC_SMEM = \d+\n", tiled) and re.search(r"= mad_rows\d+\(ap", tiled)
        assert "sbase = sgroup * (S // 4)" in grouped and "sbase" not in src and "# tiled GEMM" not in grouped
        assert "sbase = sgroup * (S // 4)" in both and "# tiled GEMM partial sums" in both
        assert "group_barrier(BAR, sgroup, bid, nblocks)" in variant("groupbar4") and "group_barrier" not in grouped
    # by default from S = 64 the backward in groups with a barrier a group, the forward in one group;
    # the groups variants put both in four
    (fwd, fwd_src), (bwd, bwd_src) = _variants("lstm", 64, LoopTuning.defaults(64))
    assert "group_barrier(BAR, sgroup" in bwd_src and "sbase" not in fwd_src
    for variant in (fwd, bwd):
        assert "grid_barrier(BAR, nblocks * 4)" in variant("groups4")
        assert "group_barrier(BAR, sgroup, bid, nblocks)" in variant("groupbar4")
