"""The reduced-precision GEMMs of the CUDA backend on a real GPU (cuBLAS ``cublasGemmEx``,
codegen/gemm_precision.py): tensor cores are used (the error is TF32's / bf16's, far above
float32's) and stay within their precision; a training step in bf16 equals the NumPy backend's
emulation far more closely than float32 does, and one in TF32 stays within the emulation's own
distance from float32 (cuBLAS rounds its TF32 operands in its own way, not necessarily to
nearest as rnngraph/precision.py does)."""
import numpy as np
import pytest

import rnngraph as rg
from rnngraph.precision import round_bf16

from conftest import rollout_deviation, tensor_core_layer_run

pytestmark = pytest.mark.gpu


def _gemm(a, b, precision):
    from numba import cuda

    from rnngraph.codegen import library
    out = cuda.to_device(np.zeros((a.shape[0], b.shape[0]), np.float32))
    library.gemm(cuda.to_device(a), cuda.to_device(b), out, trans_b=True, precision=precision)
    cuda.synchronize()
    return out.copy_to_host().astype(np.float64)


def test_cublas_gemm_in_each_precision_has_its_own_error():
    """(64, 256) x (48, 256)^T of standard normals: float32 errs by about 1e-6 of the exact
    product, TF32 and bf16 by about 1e-2 (k = 256 products of 11- and 8-bit significands); bf16's
    operands are rounded by our conversion kernel, so its result is the exact product of the
    rounded operands to float32 accumulation."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 256)).astype(np.float32), rng.standard_normal((48, 256)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    err = {p: np.abs(_gemm(a, b, p) - exact).max() for p in ("fp32", "tf32", "bf16")}
    print("max abs error against the float64 product:", err)
    assert err["fp32"] < 1e-4
    assert 20 * err["fp32"] < err["tf32"] < 0.1
    assert 20 * err["fp32"] < err["bf16"] < 0.5
    rounded = round_bf16(a).astype(np.float64) @ round_bf16(b).astype(np.float64).T
    assert np.abs(_gemm(a, b, "bf16") - rounded).max() < 1e-3


def _params_after_one_step(device, precision):
    net = rg.stacked(rg.cells.lstm, 1, 64, vocab=50, embed=32)
    step = rg.compile(net, window=8, streams=16, device=device, optimizer=rg.SGD(lr=1.0), clip_norm=5.0, seed=1,
                      precision=precision)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 50, (8, 16)), rng.integers(0, 50, (8, 16))
    loss = float(step.train(x, y))
    return loss, step.parameters


@pytest.mark.parametrize("precision, closer", [("bf16", 0.1), ("tf32", 1.0)])
def test_training_step_in_a_precision_is_near_its_numpy_emulation(precision, closer):
    loss_gpu, gpu = _params_after_one_step("cuda", precision)
    loss_cpu, cpu = _params_after_one_step("cpu", precision)
    loss_fp32, fp32 = _params_after_one_step("cuda", "fp32")
    same = max(np.abs(gpu[k] - cpu[k]).max() for k in cpu)
    apart = max(np.abs(fp32[k] - cpu[k]).max() for k in cpu)
    used = max(np.abs(gpu[k] - fp32[k]).max() for k in cpu)
    print(f"{precision}: |gpu - emulation| {same:.3g}, |fp32 gpu - emulation| {apart:.3g}, "
          f"|gpu - fp32 gpu| {used:.3g}; losses {loss_gpu:.6f} {loss_cpu:.6f} {loss_fp32:.6f}")
    assert loss_gpu == pytest.approx(loss_cpu, rel=1e-3)
    assert same <= closer * apart, (same, apart)
    assert used > 1e-6  # the reduced precision was used on the GPU


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
@pytest.mark.parametrize("S", [1, 64])
@pytest.mark.parametrize("cell", ["lstm", "gru", "peephole_lstm", "layernorm_lstm"])
def test_loop_kernels_on_tensor_cores_match_the_emulation(cell, S, precision):
    """The persistent loop kernels' recurrent products on tensor cores (codegen/loop_mma.py,
    ``loop_tensor_cores``): a layer's outputs and gradients in a reduced precision are closer to
    the NumPy emulation of that precision (every GEMM's operands rounded) than float32 results are.
    Not bit for bit: TF32 ties round away from zero on the GPU, the accumulation order differs, and
    through the recurrence a last-bit difference moves an operand across a rounding boundary now
    and then, a whole bf16 / TF32 step in one element (the worst elements: 0.08-0.18 of the fp32
    distance for bf16 and 0.15-0.35 for TF32 at S=64 on the H200). So the mean relative difference
    is compared (a quarter of fp32's), and the worst element within the fp32 distance."""
    gpu = tensor_core_layer_run(cell, 128, S, "cuda", precision)
    emulation = tensor_core_layer_run(cell, 128, S, "cpu", precision)
    fp32 = tensor_core_layer_run(cell, 128, S, "cpu", "fp32")
    scale = {k: max(1e-3, np.abs(v).max()) for k, v in emulation.items()}

    def distance(other, reduce):
        return max(reduce(np.abs(other[k] - emulation[k])) / scale[k] for k in emulation)
    same, apart = distance(gpu, np.mean), distance(fp32, np.mean)
    worst, worst_apart = distance(gpu, np.max), distance(fp32, np.max)
    print(f"{cell} S={S} {precision}: mean |gpu - emulation| {same:.3g}, |fp32 - emulation| {apart:.3g}; "
          f"max {worst:.3g}, {worst_apart:.3g} (relative)")
    assert same <= 0.25 * apart, (same, apart)
    assert worst <= worst_apart, (worst, worst_apart)


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_forced_tensor_core_loops_with_the_flagged_backward_of_small_s_match_the_emulation(cell, precision):
    """``loop_tensor_cores`` forced at S = 4 keeps the backward loops' flagged exchange of the S = 2
    to 8 defaults (its flagged vector is polled whole, not in the chunks of the grid-synced
    tensor-core loops): as close to the emulation as the test above asks of the chunked loops."""
    gpu = tensor_core_layer_run(cell, 128, 4, "cuda", precision, flagged_exchange=True)
    emulation = tensor_core_layer_run(cell, 128, 4, "cpu", precision)
    fp32 = tensor_core_layer_run(cell, 128, 4, "cpu", "fp32")
    scale = {k: max(1e-3, np.abs(v).max()) for k, v in emulation.items()}
    same = max(np.abs(gpu[k] - emulation[k]).mean() / scale[k] for k in emulation)
    apart = max(np.abs(fp32[k] - emulation[k]).mean() / scale[k] for k in emulation)
    print(f"{cell} S=4 flagged {precision}: mean |gpu - emulation| {same:.3g}, |fp32 - emulation| {apart:.3g}")
    assert same <= 0.25 * apart, (same, apart)


@pytest.mark.parametrize("loop_tensor_cores", [False, True])
@pytest.mark.parametrize("precision, u", [("tf32", 2.0 ** -11), ("bf16", 2.0 ** -8)])
def test_a_long_rollout_on_the_gpu_stays_within_a_few_unit_roundoffs_of_fp32(precision, u, loop_tensor_cores):
    """tests/test_precision.py's long rollout on the GPU at the benchmark's shape: T = 1000 forward
    of an LSTM, H = 512, S = 64, in the precision against fp32 on the GPU, with only the hoisted
    products on tensor cores and with the loops' too. The same bounds: final states within 4u of
    fp32's (relative to their largest element; the emulation of this shape measured 1.13u and
    0.83u for tf32's h and c, 1.14u and 0.79u for bf16's), and the outputs' deviation over the last
    100 steps within twice the first 100's (emulation: 1.06 and 1.14 times)."""
    states, growth = rollout_deviation("cuda", precision, H=512, S=64, loop_tensor_cores=loop_tensor_cores)
    print(f"{precision} loops on tensor cores {loop_tensor_cores}: "
          + ", ".join(f"{k} {dev / u:.2f} u" for k, dev in states.items()) + f"; growth {growth:.2f}")
    assert all(0 < dev <= 4 * u for dev in states.values()), {k: dev / u for k, dev in states.items()}
    assert growth <= 2, growth


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_weight_rows_in_dynamic_shared_memory_give_the_same_layer(precision):
    """LSTM H = 1024, S = 64 with the loops on tensor cores (fp32: FFMA): a block's weight rows
    (128 KiB, 128.5 in TF32) exceed the static shared memory, so they go to the dynamic shared memory
    (``dsmem_kib``, codegen/loop_plan.py), which the launch must allow past 48 KiB. The same
    operands, rounded the same way, in the same order as when every fragment is read from
    global memory (``dsmem_kib=0``): outputs, final states and gradients equal to the bit, but
    the bias gradient, whose column sums meet by atomics in an order that varies from run to
    run (codegen/gemm.py ``column_sum``; 1e-6 apart on the H200)."""
    def run(dsmem_kib):
        net = rg.Sequential(rg.cells.lstm(hidden=1024), input_size=1024)
        options = rg.ScheduleOptions.defaults(64).replace(loop_tensor_cores=True)
        rnn = rg.compile_rnn(net, device="cuda", precision=precision, seed=4, options=options,
                             tuning=rg.LoopTuning.defaults(64).replace(dsmem_kib=dsmem_kib))
        plans = rnn.program(4, 64).loop_plans.values()
        rng = np.random.default_rng(5)
        y, hT = rnn.forward(rng.standard_normal((4, 64, 1024)).astype(np.float32))
        dx, _, dparams = rnn.backward(rng.standard_normal(np.shape(y)).astype(np.float32))
        out = {"y": y, "dx": dx, **{f"h_T.{k}": v for k, v in hT.items()}, **{f"d.{k}": v for k, v in dparams.items()}}
        return [p.dynamic_smem for p in plans], {k: np.asarray(v) for k, v in out.items()}

    dynamic, shared = run(176)
    none, global_reads = run(0)
    assert min(dynamic) > 48 * 1024 and none == [0] * len(none), (dynamic, none)
    for k in shared:
        if k.endswith(".bias"):
            np.testing.assert_allclose(shared[k], global_reads[k], rtol=0, atol=1e-5 * np.abs(shared[k]).max(), err_msg=k)
        else:
            np.testing.assert_array_equal(shared[k], global_reads[k], err_msg=k)
