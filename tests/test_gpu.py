"""GPU tier (pytest -m gpu; skipped without a GPU): the generated training step at real sizes
against the NumPy backend in float64, and no float64 instruction in any float32 kernel's PTX.

Sizes: hidden 512, T = 100, S in {1, 64}; lstm, peephole_lstm, gru, layernorm_lstm at 1 layer,
lstm at 4 layers. The GPU computes in float32, so it is held to float32's own accuracy: its error
against the float64 NumPy backend must be within 4x (plus 1e-5) of the float32 NumPy backend's
error against the same float64 result, for the outputs and for every parameter gradient
(gradient errors relative to the largest gradient of the parameter).
"""
import re

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.executor import ScheduleExecutor

pytestmark = pytest.mark.gpu
T, H = 100, 512
CASES = [(c, 1, s) for c in ("lstm", "peephole_lstm", "gru", "layernorm_lstm") for s in (1, 64)] + \
        [("lstm", 4, 1), ("lstm", 4, 64)]


def _gpu_grads(step, feed, dy, out):
    from rnngraph.codegen import library
    be = step._cuda
    b, g = be.buf, step.graph
    be._feed(feed)
    be.program.run_forward()
    library.fill(b.grad_arena, 0.0, stream=be.stream)
    library.fill(b.param_grad_arena, 0.0, stream=be.stream)
    b.window(out, grad=True).copy_to_device(np.ascontiguousarray(dy.reshape(-1, dy.shape[-1])), stream=be.stream)
    be.program.run_backward()
    y = b.window(out).copy_to_host(stream=be.stream).reshape(dy.shape)
    grads = {k: v.copy_to_host(stream=be.stream) for k, v in b.PG.items()}
    be.stream.synchronize()
    return y, grads


@pytest.mark.parametrize("cell, layers, S", CASES, ids=[f"{c}-{n}l-s{s}" for c, n, s in CASES])
def test_generated_step_matches_float64_reference(cell, layers, S):
    net = rg.stacked(rg.cells.STANDARD[cell], layers, H, input_size=H)
    step = rg.compile(net, window=T, streams=S, device="cuda", seed=0)
    g, out = net.graph, net.graph.outputs[0]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(T, S, H)).astype(np.float32)
    dy = rng.normal(size=(T, S, H)).astype(np.float32)
    y, grads = _gpu_grads(step, {"x": x}, dy, out)
    params32 = step.parameters
    runs = {}
    for dtype in ("float64", "float32"):
        ex = ScheduleExecutor(step.schedule, dtype)
        f = ex.forward(params32, {"x": x})
        runs[dtype] = (f.values[out], ex.backward(f, {out: dy}).params)
    (y64, g64), (y32, g32) = runs["float64"], runs["float32"]
    bound = lambda cpu_err: 4 * cpu_err + 1e-5
    assert np.abs(y - y64).max() <= bound(np.abs(y32 - y64).max())
    for name, want in g64.items():
        scale = max(np.abs(want).max(), 1e-12)
        gpu_err, cpu_err = np.abs(grads[name] - want).max() / scale, np.abs(g32[name] - want).max() / scale
        assert gpu_err <= bound(cpu_err), f"{name}: GPU error {gpu_err:.2e}, float32 NumPy error {cpu_err:.2e}"


def test_no_f64_in_float32_kernels():
    net = rg.stacked(rg.cells.peephole_lstm, 2, 64, vocab=50)
    step = rg.compile(net, window=8, streams=4, device="cuda", optimizer=rg.Adam(), clip_norm=1.0)
    rng = np.random.default_rng(0)
    step.train(rng.integers(0, 50, (8, 4)), rng.integers(0, 50, (8, 4)))
    mod = step._cuda.program.module
    checked = 0
    for name in dir(mod):
        d = getattr(mod, name)
        if hasattr(d, "inspect_asm") and getattr(d, "overloads", None):
            for ptx in d.inspect_asm().values():
                body = "\n".join(line for line in ptx.splitlines() if not line.strip().startswith("//"))
                assert not re.search(r"\.f64\b", body), f"generated kernel {name} uses float64"
                checked += 1
    assert checked >= 2  # the persistent forward and backward loops at least
    from rnngraph.codegen import library
    assert all(n == 0 for n in library.ptx_f64_report().values())
