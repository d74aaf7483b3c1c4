"""The tensor-core loop kernels (codegen/loop_mma.py, ``loop_tensor_cores``) run in numba's CUDA
simulator in their GPU code shape (``coop=True``: warps of 32 simulated threads, fragments,
K-split, flagged polls), with tests/mma_stand_ins.py's Python stand-ins for codegen/ptx.py's
intrinsics, against the NumPy backend's emulation of the same precision. The GPU tier
(tests/test_gpu_precision.py) runs the real instructions; this checks the generated indexing on
the CPU, in shapes the GPU tier's H = 128 does not reach: items of two 16-row tiles, a partial
last k-step (the inner dimension not a multiple of 8 / 16), an odd-width bf16 weight copy,
S above 1 and not a multiple of 8, flagged vectors (S = 1)."""
import dataclasses
import os

import numpy as np
import pytest

import mma_stand_ins
from conftest import tensor_core_layer_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                                                   reason="simulator tests")]


@pytest.fixture
def warp_shaped_loops(monkeypatch):
    """The simulator's loop kernels planned and emitted as on the GPU (coop, no inline barrier, no
    launch bounds), importing the stand-ins instead of codegen/ptx.py, 64 threads a block."""
    import rnngraph.codegen.program_loops as pl
    plan, emit = pl.plan_loop_kernel, pl.emit_loop_kernel

    def gpu_plan(g, loop, name, coop=True, recompute=None, streams=1, nblocks=1, tuning=None, virtual_blocks=0,
                 precision="fp32"):
        return plan(g, loop, name, True, recompute, streams, nblocks, dataclasses.replace(tuning, barrier=0, bounds=0),
                    0, precision)

    def stand_in_emit(g, p, kernel_of):
        src, args = emit(g, p, kernel_of)
        return src.replace("from rnngraph.codegen.ptx import", "from mma_stand_ins import").replace(
            "cuda.syncwarp()", "pass"), args
    monkeypatch.setattr(pl, "plan_loop_kernel", gpu_plan)
    monkeypatch.setattr(pl, "emit_loop_kernel", stand_in_emit)
    monkeypatch.setattr(pl, "SIM_THREADS", 64)
    mma_stand_ins.reset()
    yield
    mma_stand_ins.reset()


@pytest.mark.parametrize("cell, H, S, precision", [("lstm", 40, 3, "bf16"), ("gru", 12, 1, "tf32"),
                                                    ("lstm", 44, 3, "tf32"), ("lstm", 8, 9, "tf32"),
                                                    ("lstm", 6, 9, "bf16")])
def test_tensor_core_loop_kernels_equal_the_emulation(warp_shaped_loops, cell, H, S, precision):
    """lstm H=40 bf16: items of 32 rows, inner 40 (a partial last 16-column step), a 20-word bf16
    copy row, S=3, K-split, the backward's inner 160 in two whole 64-column chunks (16-byte vector
    loads, a permuted weight copy) then k-steps; gru H=12 tf32 at S=1: flagged vectors, inner 12
    (a partial 8-column step); lstm H=44 tf32 S=3: one whole 32-column chunk, a k-step and a
    partial one forward (inner 44), five chunks and two k-steps backward (inner 176). (At H=36
    S=2 the simulated and emulated results differ by 1.5e-6, with chunks and without, and so do
    the simulator's own FFMA loops with rounded operands, which run none of this code: a float32
    sum that differs in its last bit moves an operand across a TF32 rounding boundary, as on the
    GPU (tests/test_gpu_precision.py). Reading a chunk's vector words in reverse gives 2e-2 here.) The backward at H = 8 and
    H = 6 with S = 9 (one simulated block owns its 8 or 6 rows): swapped items of 8 rows x 16
    streams, K-split; tf32 in one whole chunk (inner 32), bf16 a k-step and a partial one (inner
    24). The simulated tensor cores agree with the emulation to float32 rounding (mean relative
    difference 1e-8 when checked, 1e-4 for fp32 results; a fragment index off by one gives 1e-1)."""
    sim = tensor_core_layer_run(cell, H, S, "cuda", precision, T=3)
    assert mma_stand_ins.CALLS[0] > 0  # the warps did run the products
    assert (mma_stand_ins.LOADS[0] > 0) == (H % 4 == 0 and S > 1)  # chunked: unflagged, rows of 4k floats
    emulation = tensor_core_layer_run(cell, H, S, "cpu", precision, T=3)
    fp32 = tensor_core_layer_run(cell, H, S, "cpu", "fp32", T=3)
    scale = {k: max(1e-3, np.abs(v).max()) for k, v in emulation.items()}
    same = max(np.mean(np.abs(sim[k] - emulation[k])) / scale[k] for k in emulation)
    apart = max(np.mean(np.abs(fp32[k] - emulation[k])) / scale[k] for k in emulation)
    assert same < 1e-6 and apart > 1e-5, (same, apart)


@pytest.mark.parametrize("H, precision", [(44, "tf32"), (40, "bf16")])
def test_pipelined_chunks_give_the_same_layer(warp_shaped_loops, monkeypatch, H, precision):
    """LoopTuning ``pipeline`` (RNNGRAPH_LOOP key): the chunk loop loads the next chunk's vectors
    before this chunk's products (codegen/loop_mma.py ``_chunk``), the same products in the same
    order, so the layer is the same to the bit: LSTM S = 3, tf32 H = 44 (one whole chunk forward,
    five backward, K-split) and bf16 H = 40 (the backward's two 64-column chunks)."""
    plain = tensor_core_layer_run("lstm", H, 3, "cuda", precision, T=3)
    monkeypatch.setenv("RNNGRAPH_LOOP", "pipeline=1")
    mma_stand_ins.reset()
    pipelined = tensor_core_layer_run("lstm", H, 3, "cuda", precision, T=3)
    assert mma_stand_ins.LOADS[0] > 0  # the chunks' 16-byte loads ran
    for k in plain:
        np.testing.assert_array_equal(pipelined[k], plain[k], err_msg=k)
