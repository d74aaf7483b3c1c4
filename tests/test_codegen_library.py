"""The fixed CUDA kernel library (rnngraph.codegen.library) against the NumPy reference.

Runs in numba's CUDA simulator on tiny shapes where no GPU is present (the simulator must be
chosen before numba.cuda is first imported, hence the environment lines at the very top), and on
the GPU where there is one (the ``gpu`` tests add real sizes there). The PTX check compiles every kernel for
sm_90 in a subprocess without the simulator and asserts no float64 instruction.
"""
import os
import shutil

if not shutil.which("nvidia-smi"):  # no GPU: the simulator (as conftest.py does; either suffices)
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba.cuda is first imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

from conftest import run_outside_simulator  # noqa: E402
from rnngraph import ops, optim  # noqa: E402
from rnngraph.codegen import device, library  # noqa: E402

if not device.in_simulator() and not cuda.is_available():
    pytest.skip("numba.cuda was imported without the simulator and no GPU is present",
                allow_module_level=True)

TOL = dict(rtol=1e-5, atol=1e-5)


def dev(x):
    return cuda.to_device(np.ascontiguousarray(x))


def host(d):
    return d.copy_to_host()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def f32(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


@pytest.fixture
def small_rows(monkeypatch):
    """Row kernels with blocks of 4 threads: rows longer than a block and not a power of two."""
    monkeypatch.setattr(device, "MAX_ROW_THREADS", 4)


# ---------------------------------------------------------------------------- device helpers
def test_device_helpers():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = device.as_device(x)
    assert device.is_device_array(d)
    assert device.as_device(d) is d
    np.testing.assert_array_equal(host(d), x)
    if device.in_simulator():
        assert not device.have_cupy()


# ---------------------------------------------------------------------------- GEMM
GEMM_SHAPES = [(5, 6, 7), (17, 18, 20), (1, 1, 1), (16, 3, 33)]  # (M, N, K); not multiples of 16


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("mnk", GEMM_SHAPES)
def test_gemm(rng, mnk, trans_a, trans_b):
    m, n, k = mnk
    a = f32(rng, m, k)
    b = f32(rng, k, n)
    out = dev(np.full((m, n), np.nan, np.float32))  # beta = 0 must not read out
    library.gemm(dev(a.T.copy() if trans_a else a), dev(b.T.copy() if trans_b else b), out,
                 trans_a=trans_a, trans_b=trans_b, backend="numba")
    np.testing.assert_allclose(host(out), a.astype(np.float64) @ b, **TOL)


def test_gemm_alpha_beta_accumulate(rng):
    a, b, c = f32(rng, 9, 4), f32(rng, 4, 11), f32(rng, 9, 11)
    out = dev(c)
    library.gemm(dev(a), dev(b), out, alpha=0.5, beta=1.0)
    library.gemm(dev(a), dev(b), out, alpha=2.0, beta=1.0)
    np.testing.assert_allclose(host(out), c + 2.5 * (a.astype(np.float64) @ b), **TOL)
    library.gemm(dev(a), dev(b), out, alpha=1.0, beta=-1.0)
    np.testing.assert_allclose(host(out), a.astype(np.float64) @ b - c - 2.5 * (a.astype(np.float64) @ b),
                               **TOL)


def test_gemm_weight_gradient_and_views(rng):
    """The weight-gradient form (gW += gy^T x) and operands that are column slices."""
    gy, x, gw = f32(rng, 6, 5), f32(rng, 6, 8), f32(rng, 5, 8)
    out = dev(gw)
    library.gemm(dev(gy), dev(x), out, trans_a=True, beta=1.0)
    np.testing.assert_allclose(host(out), gw + gy.T.astype(np.float64) @ x, **TOL)
    big = f32(rng, 6, 12)
    dbig = dev(big)
    out = dev(np.zeros((6, 4), np.float32))
    library.gemm(dbig[:, 2:7], dev(f32(rng, 5, 4) * 0 + 1), out)
    np.testing.assert_allclose(host(out), np.repeat(big[:, 2:7].sum(1, keepdims=True), 4, 1), **TOL)


def test_prepared_gemms_keep_their_own_grid_and_see_new_inputs(rng):
    """Regression: gemm_launcher kept the numba kernel configured at build time, but the
    simulator's kernel[grid, block] sets the grid on the shared kernel object, so the first of two
    prepared products of different sizes ran with the second's grid (an LM trained on the simulator
    diverged from the CPU backend). Each prepared product must use its own grid, and read the
    operands' current contents at each call."""
    a1, b1, a2, b2 = f32(rng, 40, 3), f32(rng, 3, 37), f32(rng, 2, 5), f32(rng, 5, 3)
    d1, o1, o2 = dev(a1), dev(np.zeros((40, 37), np.float32)), dev(np.zeros((2, 3), np.float32))
    run1, _ = library.gemm_launcher(d1, dev(b1), o1, backend="numba")
    run2, _ = library.gemm_launcher(dev(a2), dev(b2), o2, backend="numba")
    run2()
    run1()
    np.testing.assert_allclose(host(o1), a1.astype(np.float64) @ b1, **TOL)
    np.testing.assert_allclose(host(o2), a2.astype(np.float64) @ b2, **TOL)
    a1[...] = f32(rng, 40, 3)
    d1.copy_to_device(a1)
    run1()
    np.testing.assert_allclose(host(o1), a1.astype(np.float64) @ b1, **TOL)


def test_gemm_zero_k_scales_out(rng):
    c = f32(rng, 3, 2)
    out = dev(c)
    library.gemm(dev(np.zeros((3, 0), np.float32)), dev(np.zeros((0, 2), np.float32)), out, beta=0.5)
    np.testing.assert_allclose(host(out), 0.5 * c, **TOL)


def test_gemm_shape_errors(rng):
    with pytest.raises(ValueError, match="gemm"):
        library.gemm(dev(f32(rng, 3, 4)), dev(f32(rng, 5, 2)), dev(f32(rng, 3, 2)))
    with pytest.raises(ValueError, match="float32"):
        library.gemm(dev(np.zeros((3, 4))), dev(f32(rng, 4, 2)), dev(f32(rng, 3, 2)))
    with pytest.raises(ValueError, match="backend"):
        library.gemm(dev(f32(rng, 3, 4)), dev(f32(rng, 4, 2)), dev(f32(rng, 3, 2)), backend="mkl")


def test_add_bias(rng):
    out, bias = f32(rng, 4, 7), f32(rng, 7)
    d = dev(out)
    library.add_bias(d, dev(bias))
    np.testing.assert_allclose(host(d), out + bias, **TOL)


@pytest.mark.parametrize("rows_per_block", [None, 2, 3, 5])  # 5: a chunk of four rows a trip and one more
@pytest.mark.parametrize("accumulate", [True, False])
def test_column_sum(rng, accumulate, rows_per_block):
    g, start = f32(rng, 7, 5), f32(rng, 5)
    out = dev(start)
    library.column_sum(dev(g), out, accumulate=accumulate, rows_per_block=rows_per_block)
    want = g.astype(np.float64).sum(0) + (start if accumulate else 0)
    np.testing.assert_allclose(host(out), want, **TOL)


@pytest.mark.parametrize("rows_per_block", [None, 3])  # 3: chunks meeting by atomics
@pytest.mark.parametrize("accumulate", [True, False])
def test_column_sum_fills_a_twin_with_the_same_sums(rng, accumulate, rows_per_block):
    """Two bias gradients of one value (passes/twin_biases.py): each gets the sums its own way."""
    g, start, twin_start = f32(rng, 7, 5), f32(rng, 5), f32(rng, 5)
    out, twin = dev(start), dev(twin_start)
    library.column_sum(dev(g), out, accumulate=accumulate, rows_per_block=rows_per_block, twin=twin)
    sums = g.astype(np.float64).sum(0)
    np.testing.assert_allclose(host(out), sums + (start if accumulate else 0), **TOL)
    np.testing.assert_allclose(host(twin), sums + (twin_start if accumulate else 0), **TOL)


# ---------------------------------------------------------------------------- layer norm
LN = ops.REGISTRY["layer_norm"]


@pytest.mark.parametrize("n", [1, 3, 8])
def test_layer_norm_forward(rng, n):
    x, g, b = f32(rng, 5, n, scale=3.0), f32(rng, n), f32(rng, n)
    out = dev(np.zeros((5, n), np.float32))
    library.layer_norm_forward(dev(x), dev(g), dev(b), out)
    want = LN.forward([x.astype(np.float64)], [g.astype(np.float64), b.astype(np.float64)], {})
    np.testing.assert_allclose(host(out), want, **TOL)


def test_layer_norm_forward_strided_rows(rng, small_rows):
    x, g, b = f32(rng, 3, 7) + 100.0, f32(rng, 7), f32(rng, 7)  # a large mean: two-pass variance
    out = dev(np.zeros((3, 7), np.float32))
    library.layer_norm_forward(dev(x), dev(g), dev(b), out)
    want = LN.forward([x.astype(np.float64)], [g.astype(np.float64), b.astype(np.float64)], {})
    np.testing.assert_allclose(host(out), want, rtol=1e-4, atol=1e-4)  # x is only float32-exact


@pytest.mark.parametrize("rows_per_chunk", [None, 2])
@pytest.mark.parametrize("threads", ["default", "small"])
def test_layer_norm_backward(rng, monkeypatch, rows_per_chunk, threads):
    if threads == "small":
        monkeypatch.setattr(device, "MAX_ROW_THREADS", 4)
    N, n = 5, 7
    x, g, b, gy = f32(rng, N, n), f32(rng, n), f32(rng, n), f32(rng, N, n)
    gx0, gg0, gb0 = f32(rng, N, n), f32(rng, n), f32(rng, n)  # the launcher adds into these
    dgx, dgg, dgb = dev(gx0), dev(gg0), dev(gb0)
    library.layer_norm_backward(dev(x), dev(g), dev(gy), dgx, dgg, dgb, rows_per_chunk=rows_per_chunk)
    d = lambda a: a.astype(np.float64)  # noqa: E731
    (gx,), (gg, gb) = LN.vjp(d(gy), None, [d(x)], [d(g), d(b)], {})
    np.testing.assert_allclose(host(dgx), gx0 + gx, **TOL)
    np.testing.assert_allclose(host(dgg), gg0 + gg, **TOL)
    np.testing.assert_allclose(host(dgb), gb0 + gb, **TOL)


def test_layer_norm_backward_row_chunks(rng):
    """10 rows in chunks of 4 (the column kernel's atomics meet from 3 chunks, the last one
    partial) against the backward formulas in float64; called twice, each time followed by a
    call with another row count, to check the cached stats scratch and the accumulation. (Each
    row is a block of the simulator's threads: 70 rows in chunks of 32 made the same three
    chunks in 5 times the time.)"""
    N, n = 10, 12
    x, g, gy = f32(rng, N, n, scale=2.0) + 3.0, f32(rng, n), f32(rng, N, n)
    gx0, gg0, gb0 = f32(rng, N, n), f32(rng, n), f32(rng, n)
    dgx, dgg, dgb = dev(gx0), dev(gg0), dev(gb0)
    for _ in range(2):
        library.layer_norm_backward(dev(x), dev(g), dev(gy), dgx, dgg, dgb, rows_per_chunk=4)
        # in between, another row count (its own cached scratch) into throwaway outputs
        other = f32(rng, 7, n)
        library.layer_norm_backward(dev(other), dev(g), dev(other), dev(other), dev(g), dev(g), rows_per_chunk=3)
    xd, gd, gyd = x.astype(np.float64), g.astype(np.float64), gy.astype(np.float64)
    mean = xd.mean(1, keepdims=True)
    rstd = 1.0 / np.sqrt(((xd - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    xhat = (xd - mean) * rstd
    gh = gyd * gd
    gx = rstd * (gh - gh.mean(1, keepdims=True) - xhat * (gh * xhat).mean(1, keepdims=True))
    np.testing.assert_allclose(host(dgx), gx0 + 2 * gx, **TOL)
    np.testing.assert_allclose(host(dgg), gg0 + 2 * (gyd * xhat).sum(0), **TOL)
    np.testing.assert_allclose(host(dgb), gb0 + 2 * gyd.sum(0), **TOL)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_layer_norm_backward_bad_rows_per_chunk(bad):
    z = np.zeros((3, 4), np.float32)
    v = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="rows_per_chunk"):
        library.layer_norm_backward(dev(z), dev(v), dev(z), dev(z), dev(v), dev(v), rows_per_chunk=bad)


# ---------------------------------------------------------------------------- softmax cross-entropy
XENT = ops.REGISTRY["softmax_xent"]


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_softmax_xent(rng, small_rows, id_dtype, scale):
    N, V = 6, 7
    z = f32(rng, N, V, scale=scale)
    if scale > 1:
        z[0] = [1000, -1000, 1000, 0, -1000, 999, 1000]  # ties at the max, far-apart values
        z[1] = -1000.0
    y = rng.integers(0, V, N).astype(id_dtype)
    y[0] = 1  # the target at -1000 while the max is 1000: loss 2000, not inf
    gl = f32(rng, N)
    loss = dev(np.zeros(N, np.float32))
    library.softmax_xent_forward(dev(z), dev(y), loss)
    zd, yd = z.astype(np.float64), y.astype(np.int64)[:, None]
    np.testing.assert_allclose(host(loss), XENT.forward([zd, yd], [], {})[:, 0], **TOL)
    assert np.isfinite(host(loss)).all()
    gz = dev(np.full((N, V), np.nan, np.float32))  # written, not accumulated
    library.softmax_xent_backward(dev(z), dev(y), dev(gl), gz)
    (want, _), _ = XENT.vjp(gl.astype(np.float64)[:, None], None, [zd, yd], [], {})
    np.testing.assert_allclose(host(gz), want, **TOL)


def test_softmax_xent_default_threads(rng):
    z, y = f32(rng, 2, 5), np.array([4, 0], np.int64)
    loss = dev(np.zeros(2, np.float32))
    library.softmax_xent_forward(dev(z), dev(y), loss)
    np.testing.assert_allclose(host(loss), XENT.forward([z.astype(np.float64), y[:, None]], [], {})[:, 0],
                               **TOL)


def test_softmax_xent_bad_target_is_nan(rng):
    loss = dev(np.zeros(2, np.float32))
    library.softmax_xent_forward(dev(f32(rng, 2, 3)), dev(np.array([1, 3], np.int32)), loss)
    got = host(loss)
    assert np.isfinite(got[0]) and np.isnan(got[1])


# ---------------------------------------------------------------------------- embedding
EMB = ops.REGISTRY["embedding"]


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding(rng, id_dtype):
    V, E = 7, 5
    table = f32(rng, V, E)
    ids = np.array([3, 0, 3, 6, 3, 1], id_dtype)  # repeated ids must add up in the backward
    out = dev(np.full((6, E), np.nan, np.float32))
    library.embedding_forward(dev(ids), dev(table), out)
    ids2 = ids.astype(np.int64)[:, None]
    np.testing.assert_array_equal(host(out), EMB.forward([ids2], [table], {}))
    gout, g0 = f32(rng, 6, E), f32(rng, V, E)
    gt = dev(g0)
    library.embedding_backward(dev(ids), dev(gout), gt)
    _, (want,) = EMB.vjp(gout.astype(np.float64), None, [ids2], [table.astype(np.float64)], {})
    np.testing.assert_allclose(host(gt), g0 + want, **TOL)


def test_embedding_shape_errors(rng):
    with pytest.raises(ValueError, match="int32 or int64"):
        library.embedding_forward(dev(np.zeros(2, np.float32)), dev(f32(rng, 3, 2)), dev(f32(rng, 2, 2)))
    with pytest.raises(ValueError, match="shape"):
        library.embedding_forward(dev(np.zeros(2, np.int64)), dev(f32(rng, 3, 2)), dev(f32(rng, 2, 3)))


# ---------------------------------------------------------------------------- optimizers
def _run_reference(opt, p0, grads):
    params = {"w": p0.copy()}
    for g in grads:
        opt.step(params, {"w": g.copy()})
    return params["w"]


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_update(rng, momentum):
    p0 = f32(rng, 3, 4)
    grads = [f32(rng, 3, 4) for _ in range(3)]
    p, v = dev(p0), dev(np.zeros_like(p0))
    for step, g in enumerate(grads):
        library.sgd_update(p, dev(g), v if momentum else None, lr=0.1, momentum=momentum,
                           first_step=step == 0)
    want = _run_reference(optim.SGD(lr=0.1, momentum=momentum), p0, grads)
    np.testing.assert_allclose(host(p), want, **TOL)


def test_adam_update(rng):
    p0 = f32(rng, 2, 5)
    grads = [f32(rng, 2, 5) for _ in range(4)]
    p, m, v = dev(p0), dev(np.zeros_like(p0)), dev(np.zeros_like(p0))
    for step, g in enumerate(grads, start=1):
        library.adam_update(p, dev(g), m, v, lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, step=step)
    want = _run_reference(optim.Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6), p0, grads)
    np.testing.assert_allclose(host(p), want, **TOL)
    with pytest.raises(ValueError, match="step"):
        library.adam_update(p, dev(grads[0]), m, v, lr=0.01, step=0)


def test_fill(rng):
    d = dev(f32(rng, 2, 3, 2))
    library.fill(d, 1.5)
    np.testing.assert_array_equal(host(d), np.full((2, 3, 2), 1.5, np.float32))


@pytest.mark.parametrize("p", [0.0, 0.3, 0.75])
def test_dropout_threshold(rng, p):
    """Uniforms in (0, 1] -> 1/(1-p) (float32) where u > p, else 0, in place, any shape."""
    u = rng.uniform(0, 1, size=(3, 5, 7)).astype(np.float32)
    u.reshape(-1)[:3] = [np.float32(p), np.nextafter(np.float32(p), np.float32(2)), 1.0]  # the boundary
    d = dev(u)
    library.dropout_threshold(d, p)
    want = np.where(u > np.float32(p), np.float32(1.0 / (1.0 - p)), np.float32(0.0))
    np.testing.assert_array_equal(host(d), want)
    assert host(d).reshape(-1)[:2].tolist() == [0.0, np.float32(1.0 / (1.0 - p))]  # u == p is dropped
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        library.dropout_threshold(d, 1.0)


# ---------------------------------------------------------------------------- clipping
def test_sum_squares_and_scale(rng):
    g = f32(rng, 40)
    acc = dev(np.array([1.0], np.float32))
    library.sum_squares(dev(g), acc)
    np.testing.assert_allclose(host(acc)[0], 1.0 + (g.astype(np.float64) ** 2).sum(), **TOL)
    dg = dev(g)
    norm = dev(np.zeros(1, np.float32))
    library.scale_by_clip(dg, acc, 2.0, norm=norm)
    total = np.sqrt(host(acc)[0])
    np.testing.assert_allclose(host(norm)[0], total, **TOL)
    np.testing.assert_allclose(host(dg), g * (2.0 / (total + 1e-6)), **TOL)


def test_scale_by_reciprocal_divides_by_a_device_count(rng):
    x = f32(rng, 37)
    d = dev(x)
    library.scale_by_reciprocal(d, dev(np.array([5.0, 4.0], np.float32)), 1)
    np.testing.assert_array_equal(host(d), x / np.float32(4.0))
    library.scale_by_reciprocal(d, dev(np.array([5.0, 0.0], np.float32)), 1)  # no column counted: zero
    np.testing.assert_array_equal(host(d), np.zeros(37, np.float32))


@pytest.mark.parametrize("max_norm", [0.5, 100.0])  # clipped, and left alone
def test_clip_grad_norm(rng, max_norm):
    grads = {"a": f32(rng, 3, 4), "b": f32(rng, 5), "c": f32(rng, 33)}
    dgrads = [dev(g) for g in grads.values()]
    acc = dev(np.array([123.0], np.float32))  # stale contents: zeroed on the device first
    norm = library.clip_grad_norm(dgrads, max_norm, acc=acc)
    want = {k: v.copy() for k, v in grads.items()}
    total = optim.clip_grad_norm(want, max_norm)
    np.testing.assert_allclose(host(norm)[0], total, **TOL)
    for d, w in zip(dgrads, want.values()):
        np.testing.assert_allclose(host(d), w, **TOL)


# ---------------------------------------------------------------------------- PTX: no float64
_PTX_SCRIPT = r"""
import json, sys
from numba import cuda, float32
def probe(x):
    x[0] = float32(1.0)
try:
    cuda.compile_ptx(probe, "void(float32[::1])", cc=(9, 0))
except Exception as e:  # no NVVM / NVRTC here
    print(json.dumps({"skip": f"{type(e).__name__}: {e}"[:500]}))
    sys.exit(0)
from rnngraph.codegen.library import ptx_f64_report
print(json.dumps({"report": ptx_f64_report()}))
"""


def test_kernels_list_covers_every_kernel():
    from rnngraph.codegen import gemm, optim_kernels, reductions

    names = {fn.__name__ for fn, _ in library.KERNELS}
    for mod in (gemm, reductions, optim_kernels, library):
        for attr, obj in vars(mod).items():
            if attr.endswith("_kernel") and hasattr(obj, "py_func"):
                assert obj.py_func.__name__ in names, attr


@pytest.mark.slow
def test_ptx_has_no_f64():
    """Every library kernel compiled for sm_90 outside the simulator: no .f64 instruction
    (skips where cuda.compile_ptx cannot run: no numba-cuda NVVM/NVRTC on this machine)."""
    report = run_outside_simulator(_PTX_SCRIPT)["report"]
    assert len(report) == len(library.KERNELS)
    assert {k: v for k, v in report.items() if v} == {}


# ---------------------------------------------------------------------------- GPU tier: real sizes
def _close(got, want, k=1):
    """float32 against float64 for sums of k terms: relative 1e-5, absolute scaled by sqrt(k)."""
    scale = float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.sqrt(k) * scale)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cublas", "numba"])
def test_gpu_gemm_real_sizes(rng, backend):
    if backend == "cublas" and not device.have_cupy():
        pytest.skip("CuPy not usable here")
    x, w, gy = f32(rng, 640, 512), f32(rng, 2048, 512), f32(rng, 640, 2048)
    dx, dw, dgy = dev(x), dev(w), dev(gy)
    out = dev(np.zeros((640, 2048), np.float32))
    stream = cuda.stream()
    library.gemm(dx, dw, out, trans_b=True, stream=stream, backend=backend)  # zx = x W^T
    gw0 = f32(rng, 2048, 512)
    gw = dev(gw0)
    library.gemm(dgy, dx, gw, trans_a=True, beta=1.0, stream=stream, backend=backend)  # gW += gy^T x
    gx = dev(np.zeros((640, 512), np.float32))
    library.gemm(dgy, dw, gx, alpha=0.5, stream=stream, backend=backend)  # gx = 0.5 gy W
    stream.synchronize()
    d = lambda a: a.astype(np.float64)  # noqa: E731
    _close(out.copy_to_host(), d(x) @ d(w).T, 512)
    _close(gw.copy_to_host(), gw0 + d(gy).T @ d(x), 640)
    _close(gx.copy_to_host(), 0.5 * d(gy) @ d(w), 2048)


@pytest.mark.gpu
def test_gpu_row_kernels_real_sizes(rng):
    N, n, V = 6400, 512, 10000
    d = lambda a: a.astype(np.float64)  # noqa: E731
    x, g, b, gy = f32(rng, N, n), f32(rng, n), f32(rng, n), f32(rng, N, n)
    out = dev(np.zeros((N, n), np.float32))
    library.layer_norm_forward(dev(x), dev(g), dev(b), out)
    _close(out.copy_to_host(), LN.forward([d(x)], [d(g), d(b)], {}), n)
    dgx, dgg, dgb = dev(np.zeros((N, n), np.float32)), dev(np.zeros(n, np.float32)), dev(np.zeros(n, np.float32))
    library.layer_norm_backward(dev(x), dev(g), dev(gy), dgx, dgg, dgb)
    (gx,), (gg, gb) = LN.vjp(d(gy), None, [d(x)], [d(g), d(b)], {})
    _close(dgx.copy_to_host(), gx, n)
    _close(dgg.copy_to_host(), gg, N)
    _close(dgb.copy_to_host(), gb, N)
    z, y, gl = f32(rng, 300, V, scale=10.0), rng.integers(0, V, 300).astype(np.int64), f32(rng, 300)
    loss, gz = dev(np.zeros(300, np.float32)), dev(np.zeros((300, V), np.float32))
    library.softmax_xent_forward(dev(z), dev(y), loss)
    library.softmax_xent_backward(dev(z), dev(y), dev(gl), gz)
    _close(loss.copy_to_host(), XENT.forward([d(z), y[:, None]], [], {})[:, 0], V)
    (want, _), _ = XENT.vjp(d(gl)[:, None], None, [d(z), y[:, None]], [], {})
    _close(gz.copy_to_host(), want, V)
    table, ids, gout = f32(rng, V, 128), rng.integers(0, 50, N).astype(np.int32), f32(rng, N, 128)
    emb, gt = dev(np.zeros((N, 128), np.float32)), dev(np.zeros((V, 128), np.float32))
    library.embedding_forward(dev(ids), dev(table), emb)
    library.embedding_backward(dev(ids), dev(gout), gt)
    np.testing.assert_array_equal(emb.copy_to_host(), table[ids])
    want = np.zeros((V, 128))
    np.add.at(want, ids, d(gout))
    _close(gt.copy_to_host(), want, N // 50)


@pytest.mark.gpu
def test_gpu_optim_and_clip_real_sizes(rng):
    p0, grads = f32(rng, 1000, 1000), [f32(rng, 1000, 1000) for _ in range(3)]
    p, m, v = dev(p0), dev(np.zeros_like(p0)), dev(np.zeros_like(p0))
    for step, g in enumerate(grads, start=1):
        library.adam_update(p, dev(g), m, v, lr=2e-3, step=step)
    np.testing.assert_allclose(p.copy_to_host(), _run_reference(optim.Adam(lr=2e-3), p0, grads), **TOL)
    gs = {"a": f32(rng, 2048, 512), "b": f32(rng, 2048), "c": f32(rng, 10000, 128)}
    dgs = [dev(a) for a in gs.values()]
    norm = library.clip_grad_norm(dgs, 1.0)
    want = {k: a.copy() for k, a in gs.items()}
    total = optim.clip_grad_norm(want, 1.0)
    np.testing.assert_allclose(norm.copy_to_host()[0], total, rtol=1e-5)
    for dg, w in zip(dgs, want.values()):
        np.testing.assert_allclose(dg.copy_to_host(), w, rtol=1e-5, atol=1e-9)


@pytest.mark.gpu
def test_gpu_foreign_arrays(rng):
    """CuPy and PyTorch arrays go in without copies (as_device wraps, launchers write through)."""
    a, b = f32(rng, 33, 17), f32(rng, 17, 9)
    want = a.astype(np.float64) @ b
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        ca, cb, cout = cupy.asarray(a), cupy.asarray(b), cupy.zeros((33, 9), np.float32)
        library.gemm(ca, cb, cout)
        _close(cupy.asnumpy(cout), want, 17)
        wrapped = device.as_device(cout)
        assert wrapped.__cuda_array_interface__["data"][0] == cout.data.ptr
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tout = torch.zeros((33, 9), dtype=torch.float32, device="cuda")
    library.gemm(ta, tb, tout, backend="numba")
    torch.cuda.synchronize()
    _close(tout.cpu().numpy(), want, 17)


def test_cublas_library_is_found_in_the_process_maps():
    """codegen/cublas.py calls the libcublas CuPy loaded: the first ``libcublas.so*`` mapping,
    never libcublasLt (whose name shares the prefix ``libcublas``), never an unmapped line."""
    from rnngraph.codegen.cublas import cublas_in_maps
    maps = ["7f00-7f01 r-xp 00000000 08:01 11 /usr/lib/libc.so.6",
            "7f10-7f11 r-xp 00000000 08:01 12 /site/nvidia/cublas/lib/libcublasLt.so.13",
            "7f20-7f21 r--p 00000000 00:00 0",
            "7f30-7f31 r-xp 00000000 08:01 13 /site/nvidia/cublas/lib/libcublas.so.13",
            "7f40-7f41 r-xp 00000000 08:01 14 /other/libcublas.so.12"]
    assert cublas_in_maps(maps) == "/site/nvidia/cublas/lib/libcublas.so.13"
    assert cublas_in_maps(maps[:3]) is None


def test_cublas_gives_each_stream_its_own_workspace_and_names_failures():
    """codegen/cublas.py with a stand-in library: a stream change sets the stream and then that
    stream's workspace (cublasSetStream resets it; two programs' streams must not share one, a
    captured split-K GEMM keeps its address); no calls while the stream stays; a failed SGEMM
    raises CublasError naming the status and the shape."""
    import threading

    from rnngraph.codegen import cublas
    calls = []

    class Lib:
        def cublasSetStream_v2(self, handle, stream):
            calls.append(("stream", stream))
            return 0

        def cublasSetWorkspace_v2(self, handle, ptr, size):
            calls.append(("workspace", ptr, size))
            return 0

        def cublasSgemm_v2(self, handle, op_a, op_b, m, n, k, *rest):
            calls.append(("sgemm", m, n, k))
            return 7 if m == 0 else 0

    c = cublas.Cublas.__new__(cublas.Cublas)
    c.lib, c.handle, c.workspaces, c.stream, c.lock = Lib(), None, {}, None, threading.Lock()
    addresses = iter([1000, 2000])
    c._new_workspace = lambda: (None, next(addresses))
    gemm = lambda stream, m=4: c.sgemm(stream, 0, 0, m, 5, 6, 0, 0, 4, 0, 6, 0, 0, 4)  # noqa: E731
    gemm(5), gemm(5), gemm(9), gemm(5)
    size = cublas.WORKSPACE_BYTES
    assert calls == [("stream", 5), ("workspace", 1000, size), ("sgemm", 4, 5, 6), ("sgemm", 4, 5, 6),
                     ("stream", 9), ("workspace", 2000, size), ("sgemm", 4, 5, 6),
                     ("stream", 5), ("workspace", 1000, size), ("sgemm", 4, 5, 6)]
    failed = r"cublasSgemm \(m=0, n=5, k=6, .*\) failed: CUBLAS_STATUS_INVALID_VALUE \(7\)"
    with pytest.raises(cublas.CublasError, match=failed):
        gemm(5, m=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf in the simulated check
@pytest.mark.parametrize("before, chain, acc, want_ok, want_row", [
    (1, 0.0, [1.0, 2.0], 1, 0),  # the previous call counted: its row
    (0, 0.0, [1.0, 2.0], 1, 1),  # it did not: the other row; unchained, this call stands alone
    (0, 1.0, [1.0, 2.0], 0, 1),  # chained behind a failed call: withheld though finite
    (1, 1.0, [1.0, np.inf], 0, 0),  # not finite
])
def test_all_finite_picks_the_step_scalars_row_by_the_previous_flag(before, chain, acc, want_ok, want_row):
    rows = np.array([[0.5, 1.0, 2.0, 3.0, chain], [0.5, 4.0, 5.0, 6.0, chain]], np.float32)
    ok, hyper = dev(np.array([before], np.int32)), dev(np.zeros(5, np.float32))
    library.all_finite(dev(np.array(acc, np.float32)), ok, dev(rows), hyper)
    assert ok.copy_to_host()[0] == want_ok
    np.testing.assert_array_equal(hyper.copy_to_host(), rows[want_row])
    with pytest.raises(ValueError, match=r"all_finite rows: expected float32 \(2, 5\)"):
        library.all_finite(dev(np.array(acc, np.float32)), ok, dev(rows[:, :4]), hyper)
