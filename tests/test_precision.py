"""The ``precision`` option (rnngraph/precision.py): the rounding helpers against hand-computed
bit patterns, the NumPy emulation against float64, the schedule dump, the cuBLAS argument
mapping with a stand-in library, and every bad input."""
import json
import threading

import numpy as np
import pytest

import rnngraph as rg
from conftest import rollout_deviation
from rnngraph.precision import (check_precision, require_tensor_cores, round_bf16, round_operand, round_tf32,
                                to_bf16_bits)


def bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def from_bits(*words) -> np.ndarray:
    return np.array(words, np.uint32).view(np.float32)


# ---------------------------------------------------------------------------- rounding helpers
def test_tf32_rounds_to_nearest_ties_to_even_on_the_bit_pattern():
    """TF32 keeps 10 mantissa bits (drops 13): below half the dropped ulp rounds down, above it up,
    exactly half to the even neighbour (both directions), a carry ripples into the exponent."""
    cases = {
        0x3F800000: 0x3F800000,  # 1.0 exact
        0x3F800FFF: 0x3F800000,  # just below half (0x1000): down
        0x3F801001: 0x3F802000,  # just above half: up
        0x3F801000: 0x3F800000,  # tie, kept mantissa even (...0): down
        0x3F803000: 0x3F804000,  # tie, kept mantissa odd (...1): up to even
        0x3FFFF000: 0x40000000,  # tie at the top of the binade, odd: carries into the exponent (2.0)
        0xBF801001: 0xBF802000,  # negative: rounds the magnitude the same way
        0x7F7FFFFF: 0x7F800000,  # the largest float rounds up to +inf (IEEE round to nearest)
        0x00000FFF: 0x00000000,  # a subnormal below half: to +0
        0x00001001: 0x00002000,  # a subnormal above half
    }
    got = bits(round_tf32(from_bits(*cases)))
    assert [hex(g) for g in got] == [hex(v) for v in cases.values()]


def test_bf16_rounds_to_nearest_ties_to_even_and_encodes_the_upper_half():
    cases = {
        0x3F800000: 0x3F80,  # 1.0
        0x3F807FFF: 0x3F80,  # below half (0x8000): down
        0x3F808001: 0x3F81,  # above half: up
        0x3F808000: 0x3F80,  # tie, even: down
        0x3F818000: 0x3F82,  # tie, odd: up to even
        0x3F7F8000: 0x3F80,  # tie, odd, carries into the exponent: 1.0
        0x7F7FFFFF: 0x7F80,  # overflow to +inf
        0xC0490FDB: 0xC049,  # -pi: 0x0FDB < half
    }
    enc = to_bf16_bits(from_bits(*cases))
    assert enc.dtype == np.uint16
    assert [hex(e) for e in enc] == [hex(v) for v in cases.values()]
    np.testing.assert_array_equal(bits(round_bf16(from_bits(*cases))), enc.astype(np.uint32) << 16)
    # PyTorch's .to(torch.bfloat16) of 1 + 2^-8 (a tie) is 1.0, of 1 + 3 * 2^-8 is 1 + 2^-6: ties to even
    assert round_bf16(np.float32(1 + 2 ** -8)) == 1.0
    assert round_bf16(np.float32(1 + 3 * 2 ** -8)) == np.float32(1 + 2 ** -6)


@pytest.mark.parametrize("fn", [round_tf32, round_bf16])
def test_rounding_keeps_infinities_signed_zeros_and_nans(fn):
    x = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan], np.float32)
    x = np.concatenate([x, from_bits(0x7F800001, 0xFF800001)])  # NaNs whose payload is only in dropped bits
    y = fn(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    assert bits(y[:4]).tolist() == [0x7F800000, 0xFF800000, 0x00000000, 0x80000000]
    assert np.isnan(y[4:]).all()
    assert np.signbit(y[6])  # a NaN keeps its sign


def test_round_operand_is_the_identity_for_fp32_and_keeps_shapes():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert round_operand(x, "fp32") is x
    for p, keep in (("tf32", 0x1FFF), ("bf16", 0xFFFF)):
        y = round_operand(x, p)
        assert y.shape == x.shape and not (bits(y) & keep).any()
        assert np.abs(y - x).max() <= np.abs(x).max() * 2.0 ** -(11 if p == "tf32" else 8)


# ---------------------------------------------------------------------------- errors
NET = lambda: rg.Sequential(rg.Embedding(11, 6), rg.cells.lstm(hidden=8), rg.SoftmaxCrossEntropy(11))  # noqa: E731


@pytest.mark.parametrize("value", ["fp16", "FP32", "", None, 32])
def test_an_unknown_precision_is_one_line_naming_it(value):
    for call in (lambda: rg.compile(NET(), 4, 2, device="cpu", precision=value),
                 lambda: rg.compile_rnn(rg.Sequential(rg.cells.lstm(hidden=4), input_size=3), device="cpu",
                                        precision=value)):
        with pytest.raises(ValueError, match=r"^precision must be one of 'fp32', 'tf32', 'bf16'; got ") as e:
            call()
        assert repr(value) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["tf32", "bf16"])
def test_a_reduced_precision_needs_float32(value):
    with pytest.raises(ValueError, match=f"^precision='{value}' needs dtype float32.*got dtype 'float64'$"):
        rg.compile(NET(), 4, 2, device="cpu", dtype="float64", precision=value)
    with pytest.raises(ValueError, match=f"precision='{value}' needs dtype float32"):
        rg.compile_rnn(rg.Sequential(rg.cells.lstm(hidden=4), input_size=3), device="cpu", dtype="float64",
                       precision=value)


class _Device:
    def __init__(self, cc, name):
        self.compute_capability, self.name = cc, name


def test_a_gpu_without_tensor_cores_is_named():
    """Compute capability below 8.0 (no TF32 / bf16 tensor cores) is a one-line RuntimeError naming
    the GPU; Ampere and later pass; fp32 never asks."""
    with pytest.raises(RuntimeError, match=r"^precision='tf32' needs tensor cores.*; Tesla V100-SXM2-16GB has "
                                           r"7\.0: use precision='fp32'$"):
        require_tensor_cores("tf32", _Device((7, 0), b"Tesla V100-SXM2-16GB"))
    with pytest.raises(RuntimeError, match="Tesla T4 has 7.5"):
        require_tensor_cores("bf16", _Device((7, 5), "Tesla T4"))
    require_tensor_cores("bf16", _Device((8, 0), b"NVIDIA A100"))
    require_tensor_cores("tf32", _Device((9, 0), b"NVIDIA H200"))
    require_tensor_cores("fp32", _Device((5, 2), b"old"))


def test_compile_on_a_gpu_without_tensor_cores_refuses(monkeypatch):
    """rg.compile(device="cuda", precision="tf32") asks numba's current device (here a stand-in of
    compute capability 7.5) before generating anything."""
    from numba import cuda

    from rnngraph import precision
    monkeypatch.setattr("rnngraph.codegen.device.in_simulator", lambda: False)
    monkeypatch.setattr(cuda, "get_current_device", lambda: _Device((7, 5), b"Tesla T4"))
    with pytest.raises(RuntimeError, match="Tesla T4 has 7.5"):
        precision.check_gpu("tf32")
    monkeypatch.setattr("rnngraph.runtime.resolve_device", lambda d: d)
    with pytest.raises(RuntimeError, match="Tesla T4 has 7.5"):
        rg.compile(NET(), 4, 2, device="cuda", precision="bf16")


def test_check_precision_names_the_argument():
    assert check_precision("tf32") == "tf32"
    with pytest.raises(ValueError, match=r"^gemm: precision must be one of"):
        check_precision("int8", where="gemm: precision")


# ---------------------------------------------------------------------------- the NumPy emulation
def _loss_and_grads(net, precision, dtype, x, y):
    step = rg.compile(net, window=x.shape[0], streams=x.shape[1], device="cpu", dtype=dtype, precision=precision,
                      seed=3, optimizer=rg.SGD(lr=1.0))
    before = {k: v.astype(np.float64) for k, v in step.parameters.items()}
    loss = float(step.train(x, y))
    grads = {k: before[k] - step.parameters[k].astype(np.float64) for k in before}  # SGD lr 1: the gradient
    return loss, grads


@pytest.mark.parametrize("precision, unit", [("tf32", 2.0 ** -11), ("bf16", 2.0 ** -8)])
def test_cpu_emulation_against_float64_within_the_derived_bound(precision, unit):
    """The NumPy backend in tf32 / bf16 against float64, loss and gradients.

    Derivation of the tolerance: each GEMM operand is rounded once, |fl(a) - a| <= u |a| with u
    the format's unit roundoff (2^-11 for TF32, 2^-8 for bf16); a product of rounded operands
    is then within (1 + u)^2 - 1 ~ 2u of the exact one, and a sum of K such products (plus
    float32 accumulation, K * 2^-24, negligible here) differs from the exact dot product by at
    most 2u * sum_k |a_k b_k| <= 2u * K * max|a| max|b| (Higham, "Accuracy and Stability of
    Numerical Algorithms", 3.1, with u for the operand rounding). The values here are O(1)
    (embeddings and weights ~ 0.3, gates squashed), K <= 16 (the widest reduction: the 4H = 32
    gate rows of the input-gradient product are at most 32, but each entry of the cell's values
    is a sum over H = 8 or E = 6 inputs and the gradients over 4H = 32 gate pre-activations), so
    2u K with K = 32 bounds each GEMM's relative error; a loss and its gradients pass through a
    few such products, so we allow 4 x 2u x 32 = 256u relative to the largest magnitude
    (TF32: 0.125 %; bf16: 1 %). The fp32 run must be far closer (its unit roundoff is 2^-24),
    and the reduced one must differ from it (the rounding is applied)."""
    net = NET()
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (5, 3)), rng.integers(0, 11, (5, 3))
    l64, g64 = _loss_and_grads(net, "fp32", "float64", x, y)
    l32, g32 = _loss_and_grads(net, "fp32", "float32", x, y)
    lp, gp = _loss_and_grads(net, precision, "float32", x, y)
    bound = 256 * unit
    assert abs(lp - l64) <= bound * abs(l64)
    scale = max(np.abs(g).max() for g in g64.values())
    worst = max(np.abs(gp[k] - g64[k]).max() for k in g64) / scale
    worst32 = max(np.abs(g32[k] - g64[k]).max() for k in g64) / scale
    assert worst <= bound
    assert worst32 < 1e-5 and worst > 4 * worst32


@pytest.mark.parametrize("precision, u", [("tf32", 2.0 ** -11), ("bf16", 2.0 ** -8)])
def test_a_long_rollout_stays_within_a_few_unit_roundoffs_of_fp32(precision, u):
    """T = 1000 forward of an LSTM (H = 32, S = 4, every matrix product's operands rounded, the
    loops' too: ``loop_tensor_cores``) in the emulation against fp32. Rounding both operands of a
    product moves it by at most about 2u of its terms' magnitude, and an LSTM's gates squash and its
    forget gate decays what reaches the state, so the final states should stay a few u from fp32's
    (bound 4u, relative to their largest element; measured 1.1u and 0.7u for tf32's h and c, 0.6u
    and 0.5u for bf16's). And the deviation must not build up along the sequence, TF32's known risk
    in long recurrences: the outputs' largest deviation over the last 100 steps is within twice
    that of the first 100 (measured 1.16 and 1.15 times; a bias that grew with T would give about
    10 over these 900 steps)."""
    states, growth = rollout_deviation("cpu", precision, H=32, S=4)
    assert all(0 < dev <= 4 * u for dev in states.values()), {k: dev / u for k, dev in states.items()}
    assert growth <= 2, growth


@pytest.mark.parametrize("loop_tensor_cores", [False, True])
def test_cpu_emulation_rounds_the_loop_products_only_with_loop_tensor_cores(loop_tensor_cores):
    """A forward in tf32 equals one computed by hand: the hoisted input product from rounded inputs
    and weights; the loop's recurrent product in plain float32 by default, from rounded operands
    with ``loop_tensor_cores`` (where the GPU runs it on tensor cores inside the loop kernel)."""
    options = rg.ScheduleOptions.defaults(2).replace(loop_tensor_cores=loop_tensor_cores)
    rnn = rg.compile_rnn(rg.Sequential(rg.cells.elman(hidden=4), input_size=3), device="cpu", precision="tf32",
                         seed=2, options=options)
    x = np.random.default_rng(1).standard_normal((3, 2, 3)).astype(np.float32)
    y, _ = rnn.forward(x)
    p = rnn.parameters
    zx = (round_tf32(x.reshape(6, 3)) @ round_tf32(p["layer0.W.weight"]).T + p["layer0.W.bias"]).reshape(3, 2, 4)
    rnd = round_tf32 if loop_tensor_cores else (lambda a: a)
    other = (lambda a: a) if loop_tensor_cores else round_tf32
    h = h_other = np.zeros((2, 4), np.float32)
    for t in range(3):
        h = np.tanh(zx[t] + rnd(h) @ rnd(p["layer0.U.weight"]).T + p["layer0.U.bias"])
        h_other = np.tanh(zx[t] + other(h_other) @ other(p["layer0.U.weight"]).T + p["layer0.U.bias"])
        np.testing.assert_allclose(y[t], h, atol=2e-6)
    assert not np.allclose(y[2], h_other, atol=1e-5, rtol=0)  # the other choice shows


# ---------------------------------------------------------------------------- schedule dump
def test_schedule_dump_names_each_gemms_precision_and_fp32_is_unchanged():
    from rnngraph.passes import schedule
    from rnngraph.schedule_export import to_json
    g = NET().graph
    plain = schedule(g, 4, 2)
    assert str(schedule(g, 4, 2, precision="fp32")) == str(plain)
    assert "precision" not in str(plain) and "precision" not in json.dumps(to_json(plain))
    s = schedule(g, 4, 2, precision="bf16")
    text = str(s)
    assert "float32  precision=bf16" in text.splitlines()[0]
    assert "the loops' recurrent products" in text
    gemm_lines = [ln for ln in text.splitlines() if " gemm " in ln or " wgrad " in ln]
    assert gemm_lines and all(ln.endswith("[bf16]") or ln.endswith("[fp32]") for ln in gemm_lines)
    assert any("layer0.U  <- layer0.h_next[t-1]" in ln and ln.endswith("[fp32]") for ln in gemm_lines)  # in-loop
    assert any("wgrad      layer0.U" in ln and ln.endswith("[bf16]") for ln in gemm_lines)
    d = to_json(s)
    assert d["precision"] == "bf16"
    kinds = {(k["kind"], k.get("precision")) for st in d["forward"] + d["backward"] for k in st["kernels"]}
    assert ("wgrad", "bf16") in kinds and ("gemm", "fp32") in kinds and ("pointwise", None) in kinds
    # with the loops' products on tensor cores every GEMM is bf16, and the dump says so
    tc = schedule(g, 4, 2, options=rg.ScheduleOptions.defaults(2).replace(loop_tensor_cores=True), precision="bf16")
    lines = str(tc).splitlines()
    assert "loop_tensor_cores=True" in str(tc) and any("by mma.sync inside the persistent kernels" in ln for ln in lines)
    assert all(ln.endswith("[bf16]") for ln in lines if " gemm " in ln or " wgrad " in ln)
    assert "no effect in fp32" not in str(tc)
    # in fp32 the option changes nothing, and the dump says so (it used to list it silently)
    fp32 = schedule(g, 4, 2, options=rg.ScheduleOptions.defaults(2).replace(loop_tensor_cores=True))
    assert "loop_tensor_cores=True (no effect in fp32" in str(fp32)


def test_schedule_command_takes_precision(capsys):
    from rnngraph.cli import main
    assert main(["schedule", "lstm", "--hidden", "8", "--window", "4", "--precision", "tf32"]) == 0
    assert "precision=tf32" in capsys.readouterr().out
    assert main(["schedule", "lstm", "--hidden", "8", "--precision", "tf32", "--dtype", "float64"]) != 0
    assert "--precision tf32 needs --dtype float32" in capsys.readouterr().err


# ---------------------------------------------------------------------------- cuBLAS mapping
def test_gemm_ex_arguments_map_each_precision():
    """Row-major out (M, N) = op(a) op(b) is cuBLAS's column-major out^T = op(b)^T op(a)^T: its A
    is our b. TF32: float32 operands, compute type 77 (CUBLAS_COMPUTE_32F_FAST_TF32); bf16:
    CUDA_R_16BF (14) operands, compute 68 (CUBLAS_COMPUTE_32F); C float32 (0) in both."""
    from rnngraph.codegen.gemm_precision import gemm_ex_arguments
    a, b, out = (1000, 7), (2000, 9), (3000, 5)
    args = gemm_ex_arguments("tf32", 4, 5, 6, False, True, a, b, out, 500)
    assert args == (1, 0, 5, 4, 6, 500, 2000, 0, 9, 1000, 0, 7, 504, 3000, 0, 5, 77)
    args = gemm_ex_arguments("bf16", 4, 5, 6, True, False, a, b, out, 500)
    assert args == (0, 1, 5, 4, 6, 500, 2000, 14, 9, 1000, 14, 7, 504, 3000, 0, 5, 68)


def test_cublas_gemm_ex_passes_compute_type_and_algorithm_through():
    """Cublas.gemm_ex with a stand-in library: the stream set once, then cublasGemmEx with the
    types, compute type and CUBLAS_GEMM_DEFAULT (-1); a failure names the types."""
    from rnngraph.codegen import cublas
    calls = []

    class Lib:
        def cublasSetStream_v2(self, handle, stream):
            return 0

        def cublasSetWorkspace_v2(self, handle, ptr, size):
            return 0

        def cublasGemmEx(self, handle, *args):
            calls.append(args)
            return 15 if args[2] == 0 else 0

    c = cublas.Cublas.__new__(cublas.Cublas)
    c.lib, c.handle, c.workspaces, c.stream, c.lock = Lib(), None, {}, None, threading.Lock()
    c._new_workspace = lambda: (None, 1)
    c.gemm_ex(5, 0, 1, 4, 5, 6, 10, 20, cublas.R_32F, 4, 30, cublas.R_32F, 6, 14, 40, cublas.R_32F, 4,
              compute=cublas.COMPUTE_32F_FAST_TF32)
    assert calls[0][-2:] == (77, -1) and calls[0][7] == 0
    with pytest.raises(cublas.CublasError, match=r"cublasGemmEx \(m=0, n=5, k=6, types 14/14/0\) failed: "
                                                 r"CUBLAS_STATUS_NOT_SUPPORTED"):
        c.gemm_ex(5, 0, 0, 0, 5, 6, 0, 0, cublas.R_16BF, 1, 0, cublas.R_16BF, 1, 0, 0, cublas.R_32F, 1)


# ---------------------------------------------------------------------------- command line, checkpoints
def test_lm_config_precision_defaults_to_fp32_for_older_checkpoints():
    from rnngraph import lm
    d = lm.LMConfig().to_json()
    assert d["precision"] == "fp32"
    del d["precision"]
    assert lm.LMConfig.from_json(d).precision == "fp32"
    assert lm.LMConfig.from_json({**d, "precision": "bf16"}).precision == "bf16"
    with pytest.raises(ValueError, match="precision must be one of"):
        lm.LMConfig.from_json({**d, "precision": "fp16"})


def test_train_stores_precision_and_a_resumed_run_may_change_it(capsys, tmp_path, text_file):
    from cli_helpers import assert_one_line_error, run, train
    ckpt = tmp_path / "ck"
    code, out, err = train(capsys, text_file, ckpt, "--precision", "tf32", steps=2)
    assert code == 0, err
    assert "float32 (tf32 GEMMs)" in out
    assert json.loads((ckpt / "config.json").read_text(encoding="utf-8"))["precision"] == "tf32"
    code, out, err = run(capsys, "train", "--checkpoint", ckpt, "--resume", "--steps", 3, "--no-progress",
                         "--precision", "bf16")
    assert code == 0, err
    assert json.loads((ckpt / "config.json").read_text(encoding="utf-8"))["precision"] == "bf16"
    code, _, err = run(capsys, "train", "--corpus", text_file, "--device", "cpu", "--dtype", "float64",
                       "--precision", "bf16")
    assert_one_line_error(code, err, "--precision bf16 needs --dtype float32")
    code, _, err = run(capsys, "train", "--corpus", text_file, "--precision", "fp16")
    assert code != 0 and "--precision" in err and "'fp16'" in err


def test_torch_rnn_takes_precision():
    torch = pytest.importorskip("torch")
    from rnngraph.torch import RNN
    with pytest.raises(ValueError, match="^precision must be one of 'fp32', 'tf32', 'bf16'; got 'fp16'$"):
        RNN("lstm", 4, precision="fp16")
    torch.manual_seed(0)
    fp32, bf16 = RNN("lstm", 8, input_size=3), RNN("lstm", 8, input_size=3, precision="bf16")
    bf16.load_state_dict(fp32.state_dict())
    x = torch.randn(4, 2, 3)
    y32, yb = fp32(x)[0], bf16(x)[0]
    assert 1e-5 < (y32 - yb).abs().max().item() < 0.05  # bf16 input products: close, not equal
    with pytest.raises(ValueError, match="precision='bf16' needs dtype float32"):
        bf16.double()(x.double())
