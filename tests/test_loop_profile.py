"""bench/loop_profile.py's source variants (the knock-outs are only timed on the GPU; here their
text): each removes exactly the sections it names, whatever block barriers those contain."""
import sys
from pathlib import Path

import pytest

import rnngraph as rg
from rnngraph.codegen.loop import LoopEmitter
from rnngraph.codegen.tuning import LoopTuning
from rnngraph.passes import schedule
from rnngraph.schedule import Loop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from loop_profile import variant_source  # noqa: E402


def _sources(lnsum: int) -> list[str]:
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=8)
    s = schedule(net.graph, 4, 64, "float32", None, rg.ScheduleOptions.defaults(64).replace(persistent_layer_norms=True))
    out = []
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop)]:
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, streams=64, nblocks=4,
                             tuning=LoopTuning(lnsum=lnsum)).source()
        out.append(src)
    return out


@pytest.mark.parametrize("lnsum", [0, 1, 2])
def test_knock_outs_remove_what_they_name(lnsum):
    for src in _sources(lnsum):
        assert "row sums of the owned elements" in src and ("_fwd(t, s, j" in src or "_bwd(t, s, j" in src)
        no_sums = variant_source(src, "no-ln-sums", 4, 64, 4)
        assert "row sums of the owned elements" not in no_sums and "cuda.atomic.add(N" not in no_sums
        assert "cuda.atomic.add(M" not in no_sums and "cuda.atomic.add(lns" not in no_sums and "lnp[" not in no_sums
        assert no_sums.count("_fwd(t, s, j") + no_sums.count("_bwd(t, s, j") == \
            src.count("_fwd(t, s, j") + src.count("_bwd(t, s, j")  # the pointwise calls stay
        for name in ("no-gemm", "no-pointwise", "sync-only"):
            out = variant_source(src, name, 4, 64, 4)
            assert "cuda.atomic.add(lns" not in out and "lnp[" not in out, name
            assert "row sums of the owned elements" not in out, name
        assert src.count("grid.sync()") == no_sums.count("grid.sync()")


def test_compile_option_variants_keep_the_kernel_options():
    """Regression: the fastmath and lineinfo variants replaced a bare ``@cuda.jit``
    line only, so a kernel compiled with options (bounds=1, carveout, fast=1) lost them or
    kept its line unchanged; now the option is added to the kernel's list, once."""
    net = rg.stacked(rg.cells.lstm, 1, 8, input_size=8)
    loop = next(st for st in schedule(net.graph, 4, 2, "float32", None).forward if isinstance(st, Loop))
    for tuning, head in ((LoopTuning(bounds=0), "@cuda.jit"), (LoopTuning(bounds=1, fast=1), "@cuda.jit(fastmath=True, launch_bounds=(512, 1))")):
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, streams=2, nblocks=4, tuning=tuning).source()
        assert head + "\ndef k(" in src
        inner = head[len("@cuda.jit("):-1] if "(" in head else ""
        for variant, option in (("lineinfo", "lineinfo=True"), ("fastmath", "fastmath=True")):
            out = variant_source(src, variant, 4, 2, 4)
            opts = [o for o in inner.split(", ") if o]
            want = "@cuda.jit(" + ", ".join(opts + ([option] if option not in opts else [])) + ")\ndef k("
            assert want in out, (variant, out[:300])
        assert "@cuda.jit(device=True, inline=True, fastmath=True)" in variant_source(src, "fastmath", 4, 2, 4)


def test_no_vector_loads_variant_drops_only_the_gemm_vector_loads():
    """no-vector-loads: every inner-product vector load (``v = X[...]``) becomes a register copy
    of a weight; the weight loads, the accumulations and every other line stay."""
    import re
    net = rg.stacked(rg.cells.lstm, 1, 8, input_size=8)
    s = schedule(net.graph, 4, 64, "float32", None)
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop)]:
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, streams=64, nblocks=4, tuning=LoopTuning()).source()
        out = variant_source(src, "no-vector-loads", 4, 64, 4)
        loads = re.findall(r"\n\s+v = [A-Z]\d+\[", src)
        assert loads and not re.findall(r"\n\s+v = [A-Z]\d+\[", out)
        assert out.count("\n") == src.count("\n") and out.count("+= w") == src.count("+= w") > 0
        assert len(re.findall(r"\n\s+v = w\d+_0_\d+\n", out)) == len(loads)


def test_uint64_indices_variant_casts_every_subscript():
    """uint64-indices: every subscript part but integer literals becomes ``uint64(part)`` (the GEMM
    column index already is one); removing the casts gives the same text for both."""
    import re
    net = rg.stacked(rg.cells.layernorm_lstm, 1, 8, input_size=8)
    s = schedule(net.graph, 4, 64, "float32", None)
    for loop in [st for st in s.forward + s.backward if isinstance(st, Loop)]:
        src, _ = LoopEmitter(net.graph, loop, "k", coop=True, streams=64, nblocks=4,
                             tuning=LoopTuning(lnsum=2)).source()
        out = variant_source(src, "uint64-indices", 4, 64, 4)
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
    src, _ = LoopEmitter(net.graph, loop, "k", coop=True, streams=1, nblocks=132,
                         tuning=LoopTuning(threads=256, rows=2, ksplit=8)).source()
    assert "kp0[kw, ix] = red" in src and "acc = kp0[item * 4 + 0, c]" in src
    out = variant_source(src, "no-gemm", 4, 1, 132)
    assert "kp0[" not in out.split("cuda.shared.array")[-1] and "+= acc" not in out
    calls = lambda text: sum(line.strip().startswith("k3_bwd(") for line in text.splitlines())  # noqa: E731
    assert calls(out) == calls(src) == 1
