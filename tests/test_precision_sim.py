"""The reduced-precision GEMMs of the CUDA backend in numba's simulator (numba's GEMM on operands
rounded by codegen/precision_kernels.py) against the NumPy backend's emulation in the same
precision, and the conversion kernels against rnngraph/precision.py's rounding; their PTX for
sm_90 (CPU only: NVVM)."""
import os

import numpy as np
import pytest

import rnngraph as rg
from rnngraph.precision import round_bf16, round_tf32, to_bf16_bits

from conftest import run_outside_simulator

SIM = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                         reason="simulator tests (the GPU tier runs tests/test_gpu.py)")

V, T, S, H = 5, 2, 2, 4


@SIM
def test_conversion_kernels_round_as_the_numpy_emulation():
    """On a column slice (a row stride longer than the row) holding inf, -inf, NaN, -0 and ties."""
    from numba import cuda

    from rnngraph.codegen.precision_kernels import conversion_launcher
    x = np.random.default_rng(0).standard_normal((3, 9)).astype(np.float32)
    x[0, 2:6] = [np.inf, -np.inf, np.nan, -0.0]
    x[1, 2:4] = np.array([0x3F801000, 0x3F818000], np.uint32).view(np.float32)  # a TF32 tie, a bf16 tie
    src = cuda.to_device(x)[:, 2:7]
    want = x[:, 2:7]
    for precision, target, expect in (("tf32", "float32", round_tf32(want).view(np.uint32)),
                                      ("bf16", "float32", round_bf16(want).view(np.uint32)),
                                      ("bf16", "bf16", to_bf16_bits(want))):
        run, copy = conversion_launcher(src, precision, target, f"test-{target}", None)
        run()
        got = copy.copy_to_host()
        np.testing.assert_array_equal(got.view(expect.dtype), expect, err_msg=f"{precision} -> {target}")
    with pytest.raises(ValueError, match="no conversion of precision 'tf32' to 'bf16'"):
        conversion_launcher(src, "tf32", "bf16", "x", None)


@SIM
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_gemm_in_a_precision_equals_numpy_on_rounded_operands(precision):
    from numba import cuda

    from rnngraph.codegen import library
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((3, 7)).astype(np.float32)
    out = cuda.to_device(np.ones((5, 3), np.float32))
    library.gemm(cuda.to_device(a), cuda.to_device(b), out, trans_b=True, beta=1.0, precision=precision)
    r = round_tf32 if precision == "tf32" else round_bf16
    want = r(a).astype(np.float64) @ r(b).astype(np.float64).T + 1.0
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-6, atol=1e-6)
    assert np.abs(want - (a.astype(np.float64) @ b.T + 1.0)).max() > 1e-4  # the rounding shows
    with pytest.raises(ValueError, match="gemm: precision must be one of"):
        library.gemm(cuda.to_device(a), cuda.to_device(b), out, trans_b=True, precision="fp16")


@SIM
@pytest.mark.parametrize("loop_tensor_cores", [False, True])
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_training_step_matches_numpy_backend_in_the_same_precision(precision, loop_tensor_cores):
    """One training step (forward, BPTT, clip, SGD) of a 1-layer LSTM LM: the simulator's CUDA
    backend equals the NumPy backend in the same precision to float32 rounding (1e-6 on O(1)
    values), while the fp32 NumPy backend differs from both by far more (the rounding is applied
    on both sides, to the same GEMMs: with ``loop_tensor_cores`` the loop kernel's products too,
    codegen/operand_rounding.py)."""
    net = rg.stacked(rg.cells.lstm, 1, H, vocab=V, embed=3)
    options = rg.ScheduleOptions.defaults(S).replace(loop_tensor_cores=loop_tensor_cores)
    mk = lambda dev, p: rg.compile(net, window=T, streams=S, device=dev, optimizer=rg.SGD(lr=1.0),  # noqa: E731
                                   clip_norm=5.0, seed=1, precision=p, options=options)
    cpu, gpu, fp32 = mk("cpu", precision), mk("cuda", precision), mk("cpu", "fp32")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    lc, lg, l32 = float(cpu.train(x, y)), float(gpu.train(x, y)), float(fp32.train(x, y))
    assert lg == pytest.approx(lc, abs=1e-6)
    pc, pg, p32 = cpu.parameters, gpu.parameters, fp32.parameters
    same = max(np.abs(pg[k] - pc[k]).max() for k in pc)
    apart = max(np.abs(p32[k] - pc[k]).max() for k in pc)
    assert same <= 1e-6, same
    assert apart > 20 * max(same, 1e-7), (same, apart)
    for name in cpu.state:
        np.testing.assert_allclose(gpu.state[name], cpu.state[name], atol=1e-6, err_msg=name)
    assert f"precision={precision}" in str(gpu.schedule)


_PTX_SCRIPT = r"""
import json, sys
from numba import cuda
def probe(x):
    x[0] = 1.0
try:
    cuda.compile_ptx(probe, "void(float32[::1])", cc=(9, 0))
except Exception as e:  # no NVVM / NVRTC here
    print(json.dumps({"skip": f"{type(e).__name__}: {e}"[:500]}))
    sys.exit(0)
from rnngraph.codegen.precision_kernels import KERNELS
out = {}
for fn, sig in KERNELS:
    ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
    out[fn.__name__] = {"f64": ptx.count(".f64"), "u16_store": "st.global.u16" in ptx}
print(json.dumps(out))
"""


def test_conversion_kernels_compile_for_sm90_without_f64():
    """The three conversion kernels compile to PTX for sm_90 (NVVM, no GPU), integer-only (no
    .f64), the bf16 one storing 16-bit words."""
    report = run_outside_simulator(_PTX_SCRIPT)
    assert set(report) == {"_round_tf32_kernel", "_round_bf16_kernel", "_to_bf16_kernel"}
    assert all(r["f64"] == 0 for r in report.values())
    assert report["_to_bf16_kernel"]["u16_store"]
