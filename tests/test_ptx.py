"""The tensor-core intrinsics of rnngraph/codegen/ptx.py and their NumPy layouts
(rnngraph/codegen/mma_fragments.py):

- the fragment tables cover each matrix once, and the TF32 reference of one warp's m16n8k8 MMA
  gives a hand-checked result (CPU);
- small kernels using each intrinsic compile for sm_90 on the CPU (numba's NVVM, in a subprocess
  outside the simulator; skipped where compile_ptx cannot run) to PTX with the exact
  mma / cvt instructions and no ``.f64``, which ptxas (where it is on PATH) assembles for sm_90;
- on a GPU (``gpu`` marker; skipped without one): one warp runs each MMA intrinsic, compared with
  the reference.
"""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import PTX_PREAMBLE, run_outside_simulator
from rnngraph.codegen import mma_fragments as mf
from rnngraph.precision import round_tf32

MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
MMA_BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


@pytest.mark.parametrize("table, shape", [(mf.A_TF32, (16, 8)), (mf.B_TF32, (8, 8)), (mf.C_M16N8, (16, 8)),
                                          (mf.A_BF16, (16, 16)), (mf.B_BF16, (16, 8))])
def test_each_table_covers_its_matrix_once(table, shape):
    cells = table.reshape(-1, 2)
    assert len(cells) == shape[0] * shape[1] == len({tuple(c) for c in cells})
    assert cells.min(axis=0).tolist() == [0, 0] and (cells.max(axis=0) + 1).tolist() == list(shape)
    m = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(mf.from_fragments(mf.fragments(m, table), table, shape), m)


def test_the_layouts_at_one_lane():
    """Lane 6: group g = 1, place t = 2 (PTX ISA's figures for m16n8k8 / m16n8k16)."""
    assert mf.A_TF32[6].tolist() == [[1, 2], [9, 2], [1, 6], [9, 6]]
    assert mf.B_TF32[6].tolist() == [[2, 1], [6, 1]]
    assert mf.C_M16N8[6].tolist() == [[1, 4], [1, 5], [9, 4], [9, 5]]
    assert mf.A_BF16[6].tolist() == [[[1, 4], [1, 5]], [[9, 4], [9, 5]], [[1, 12], [1, 13]], [[9, 12], [9, 13]]]
    assert mf.B_BF16[6].tolist() == [[[4, 1], [5, 1]], [[12, 1], [13, 1]]]


def test_tf32_reference_on_a_hand_checked_case():
    """A = ones but A[0, 0] = 1 + 2^-12 (1 in TF32: 2^-12 is under half of TF32's last mantissa
    bit, 2^-10), B[k, n] = k + n, C[m, n] = m: D[m, n] = sum_k (k + n) + m = 28 + 8 n + m; row 0
    has no 2^-12 (k + n) term. Lane 13 (g = 3, t = 1) holds D[3, 2], D[3, 3], D[11, 2], D[11, 3]."""
    A = np.ones((16, 8), np.float32)
    A[0, 0] = np.float32(1 + 2.0 ** -12)
    B = np.add.outer(np.arange(8), np.arange(8)).astype(np.float32)
    C = np.repeat(np.arange(16, dtype=np.float32)[:, None], 8, axis=1)
    d = mf.mma_tf32_m16n8k8_reference(mf.fragments(A, mf.A_TF32), mf.fragments(B, mf.B_TF32),
                                      mf.fragments(C, mf.C_M16N8))
    assert d.dtype == np.float32 and d.shape == (32, 4)
    assert d[13].tolist() == [28 + 16 + 3, 28 + 24 + 3, 28 + 16 + 11, 28 + 24 + 11]
    D = mf.from_fragments(d, mf.C_M16N8, (16, 8))
    np.testing.assert_array_equal(D, 28 + 8 * np.arange(8)[None, :] + np.arange(16)[:, None])


def test_tf32_reference_rounds_its_operands_and_checks_shapes():
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in [(16, 8), (8, 8), (16, 8)])
    d = mf.mma_tf32_m16n8k8_reference(mf.fragments(A, mf.A_TF32), mf.fragments(B, mf.B_TF32),
                                      mf.fragments(C, mf.C_M16N8))
    want = (round_tf32(A).astype(np.float64) @ round_tf32(B).astype(np.float64) + C).astype(np.float32)
    np.testing.assert_array_equal(mf.from_fragments(d, mf.C_M16N8, (16, 8)), want)
    assert not np.array_equal(want, (A.astype(np.float64) @ B + C).astype(np.float32))  # TF32 is coarser
    with pytest.raises(ValueError, match=r"a: per-lane fragments of shape \(32, 4\) expected, got \(16, 8\)"):
        mf.mma_tf32_m16n8k8_reference(A, mf.fragments(B, mf.B_TF32), mf.fragments(C, mf.C_M16N8))


def test_bf16_reference_matches_the_matrix_product():
    """Packed words (pack_bf16x2_reference: lo low) through the A_BF16/B_BF16 tables give the
    product of the bf16-rounded matrices."""
    from rnngraph.precision import round_bf16
    rng = np.random.default_rng(1)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in [(16, 16), (16, 8), (16, 8)])
    fa, fb = mf.fragments(A, mf.A_BF16), mf.fragments(B, mf.B_BF16)
    a = mf.pack_bf16x2_reference(fa[..., 0], fa[..., 1])
    b = mf.pack_bf16x2_reference(fb[..., 0], fb[..., 1])
    assert a.dtype == np.uint32 and a.shape == (32, 4) and b.shape == (32, 2)
    assert mf.pack_bf16x2_reference(np.float32(1.0), np.float32(-2.0)) == 0xC0003F80
    d = mf.mma_bf16_m16n8k16_reference(a, b, mf.fragments(C, mf.C_M16N8))
    want = (round_bf16(A).astype(np.float64) @ round_bf16(B).astype(np.float64) + C).astype(np.float32)
    np.testing.assert_array_equal(mf.from_fragments(d, mf.C_M16N8, (16, 8)), want)


# Kernels of one warp using each intrinsic; the GPU test launches the same ones.
KERNELS = r"""
from numba import cuda
from rnngraph.codegen.ptx import cvt_rna_tf32, mma_bf16_m16n8k16, mma_tf32_m16n8k8, pack_bf16x2

def k_tf32(a, b, c, d):  # a (32, 4), b (32, 2), c, d (32, 4) float32: one lane's fragments a row
    l = cuda.threadIdx.x
    r = mma_tf32_m16n8k8(cvt_rna_tf32(a[l, 0]), cvt_rna_tf32(a[l, 1]), cvt_rna_tf32(a[l, 2]),
                         cvt_rna_tf32(a[l, 3]), cvt_rna_tf32(b[l, 0]), cvt_rna_tf32(b[l, 1]),
                         c[l, 0], c[l, 1], c[l, 2], c[l, 3])
    for i in range(4):
        d[l, i] = r[i]

def k_bf16(a, b, c, d):  # a (32, 4) uint32, b (32, 2) uint32, c, d (32, 4) float32
    l = cuda.threadIdx.x
    d0, d1, d2, d3 = mma_bf16_m16n8k16(a[l, 0], a[l, 1], a[l, 2], a[l, 3], b[l, 0], b[l, 1],
                                       c[l, 0], c[l, 1], c[l, 2], c[l, 3])
    d[l, 0] = d0
    d[l, 1] = d1
    d[l, 2] = d2
    d[l, 3] = d3

def k_pack(x, out):  # x (32, 2) float32, out (32,) uint32
    l = cuda.threadIdx.x
    out[l] = pack_bf16x2(x[l, 0], x[l, 1])
"""

_SCRIPT = PTX_PREAMBLE + KERNELS + r"""
import os, tempfile
f4, f2 = np.zeros((32, 4), np.float32), np.zeros((32, 2), np.float32)
u4, u2, u1 = np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32), np.zeros(32, np.uint32)
out, folder = {}, tempfile.mkdtemp()
for name, fn, args in [("tf32", k_tf32, (f4, f2, f4, f4)), ("bf16", k_bf16, (u4, u2, f4, f4)),
                       ("pack", k_pack, (f2, u1))]:
    ptx, _ = cuda.compile_ptx(fn, tuple(typeof(v) for v in args), cc=(9, 0))
    path = os.path.join(folder, name + ".ptx")
    with open(path, "w") as fh:
        fh.write(ptx)
    body = [" ".join(l.split()) for l in ptx.splitlines() if not l.strip().startswith("//")]
    out[name] = {"path": path, "lines": [l for l in body if l.startswith(("mma.", "cvt.rna", "cvt.rn.bf16x2"))],
                 "f64": sum(".f64" in l for l in body)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ptx_of():
    return run_outside_simulator(_SCRIPT)


def test_ptx_holds_the_exact_instructions(ptx_of):
    """Operand order: {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}; cvt.rn.bf16x2 takes hi first."""
    tf32, bf16, pack = (ptx_of[k] for k in ("tf32", "bf16", "pack"))
    assert sum(l.startswith("cvt.rna.tf32.f32 %r") for l in tf32["lines"]) == 6, tf32["lines"]
    mma = [l for l in tf32["lines"] if l.startswith("mma.")]
    assert len(mma) == 1 and mma[0].startswith(MMA_TF32 + " {%f"), mma
    assert [l.split(" ", 1)[0] for l in bf16["lines"]] == [MMA_BF16], bf16["lines"]
    assert len(pack["lines"]) == 1 and pack["lines"][0].startswith("cvt.rn.bf16x2.f32 %r"), pack["lines"]
    for name, c in ptx_of.items():
        assert c["f64"] == 0, name


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas on PATH")
@pytest.mark.parametrize("name", ["tf32", "bf16", "pack"])
def test_ptxas_assembles_them_for_sm90(ptx_of, name, tmp_path):
    proc = subprocess.run(["ptxas", "-arch=sm_90", ptx_of[name]["path"], "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.gpu
def test_one_warp_mma_on_the_gpu_matches_the_reference():
    """One warp of each MMA intrinsic against the NumPy reference: TF32 on operands exact in TF32
    (cvt.rna leaves them; the reference's ties-to-even rounding leaves them too), bf16 on packed
    words, both within 4 fp32 ulps of sum |A||B| + |C| (the tensor core's summation order is not
    documented); pack_bf16x2 bit for bit against pack_bf16x2_reference."""
    from numba import cuda
    scope = {}
    exec(KERNELS, scope)
    k_tf32, k_bf16, k_pack = (cuda.jit(scope[k]) for k in ("k_tf32", "k_bf16", "k_pack"))
    rng = np.random.default_rng(2)

    def close(got, want, absA, absB, C):
        scale = (absA.astype(np.float64) @ absB + np.abs(C))
        assert np.all(np.abs(got.astype(np.float64) - want) <= 4 * 2.0 ** -23 * scale + 1e-30)

    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in [(16, 8), (8, 8), (16, 8)])
    A, B = round_tf32(A), round_tf32(B)
    a, b, c = mf.fragments(A, mf.A_TF32), mf.fragments(B, mf.B_TF32), mf.fragments(C, mf.C_M16N8)
    d = cuda.device_array((32, 4), np.float32)
    k_tf32[1, 32](np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(c), d)
    got = mf.from_fragments(d.copy_to_host(), mf.C_M16N8, (16, 8))
    want = mf.from_fragments(mf.mma_tf32_m16n8k8_reference(a, b, c), mf.C_M16N8, (16, 8))
    close(got, want, np.abs(A), np.abs(B), C)

    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in [(16, 16), (16, 8), (16, 8)])
    fa, fb = mf.fragments(A, mf.A_BF16), mf.fragments(B, mf.B_BF16)
    a, b = mf.pack_bf16x2_reference(fa[..., 0], fa[..., 1]), mf.pack_bf16x2_reference(fb[..., 0], fb[..., 1])
    c = mf.fragments(C, mf.C_M16N8)
    k_bf16[1, 32](np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(c), d)
    got = mf.from_fragments(d.copy_to_host(), mf.C_M16N8, (16, 8))
    want = mf.from_fragments(mf.mma_bf16_m16n8k16_reference(a, b, c), mf.C_M16N8, (16, 8))
    close(got, want, np.abs(A), np.abs(B), C)

    x = rng.standard_normal((32, 2)).astype(np.float32)
    out = cuda.device_array(32, np.uint32)
    k_pack[1, 32](x, out)
    np.testing.assert_array_equal(out.copy_to_host(), mf.pack_bf16x2_reference(x[:, 0], x[:, 1]))
