"""rnngraph.memory: the bytes a step needs, against sums by hand and the arrays a step really holds."""
import tracemalloc

import numpy as np
import pytest

import rnngraph as rg
from rnngraph import memory
from rnngraph.passes import schedule

# The tiny LSTM language model below, by hand (V = 11, E = 4, H = 6):
# parameters: embed 11*4 + W 24*4 + 24 + U 24*6 + 24 + head 11*6 + 11 = 409 elements;
# float nodes per column: embed.e 4, layer0.W 24, layer0.U 24, gates 24, four slices of 6,
# nine gate and state values of 6, logits 11, loss 1 = 166; two token-id inputs (x, y).
PARAMS, FLOATS, IDS = 409, 166, 2
T, S = 5, 3


def tiny_schedule(dtype="float32"):
    net = rg.stacked(rg.cells.lstm, 1, 6, vocab=11, embed=4)
    return net, schedule(net.graph, T, S, dtype, None)


@pytest.mark.parametrize("dtype, b", [("float32", 4), ("float64", 8)])
def test_numpy_backend_by_hand(dtype, b):
    _, s = tiny_schedule(dtype)
    train = memory.estimate(s, "cpu", training=True, slots=2).host
    assert train.parameters == train.gradients == b * PARAMS
    assert train.optimizer == 2 * b * PARAMS
    # forward values (token ids kept as int64) + every node's gradient
    assert train.activations == T * S * (b * FLOATS + 8 * IDS) + T * S * b * (FLOATS + IDS)
    # scratch: the float64 draw of U (24 x 6) or two windows of the largest node (24 wide)
    assert train.scratch == max(8 * 24 * 6, 2 * T * S * b * 24)
    fwd = memory.estimate(s, "cpu", training=False).host
    assert (fwd.parameters, fwd.gradients, fwd.optimizer) == (b * PARAMS, 0, 0)
    assert fwd.activations == T * S * (b * FLOATS + 8 * IDS)
    assert fwd.scratch == train.scratch
    assert memory.estimate(s, "cpu").gpu.total == 0
    sgd = memory.estimate(s, "cpu", slots=memory.optimizer_slots(rg.SGD(lr=0.1).config())).host
    assert sgd.optimizer == 0 and sgd.total == train.total - 2 * b * PARAMS


def test_numpy_backend_equals_the_arrays_a_training_step_holds():
    """Parameters, gradients, Adam's slots and the node values and gradients of one window,
    summed from the arrays the NumPy backend really allocates."""
    net, s = tiny_schedule()
    step = rg.compile(net, window=T, streams=S, device="cpu", optimizer=rg.Adam(lr=0.01))
    x = np.random.default_rng(0).integers(0, 11, (T + 1, S))
    step.train(x[:-1], x[1:])
    fwd = step._executor.forward(step.parameters, {"x": x[:-1], "y": x[1:]}, step.state)
    grads, _, gparams = step._executor._seed(fwd, None, None, 1.0)
    owned = sum(v.nbytes for v in fwd.values.values() if v.flags.writeable)  # not the read-only broadcast parameter views
    est = memory.estimate(s, "cpu", training=True, slots=2).host
    assert est.parameters == sum(v.nbytes for v in step.parameters.values())
    assert est.gradients == sum(v.nbytes for v in gparams.values())
    assert est.optimizer == sum(v.nbytes for k, v in step.optimizer.state_dict().items() if k != "steps")
    assert est.activations == owned + sum(v.nbytes for v in grads.values())
    assert est.total == est.model + est.activations + est.scratch


def test_cuda_backend_equals_its_device_buffers():
    """The simulator allocates the CUDA backend's buffers as host arrays: sum them."""
    net, s = tiny_schedule()
    step = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.SGD(lr=0.1))
    cuda, buf = step._cuda, step._cuda.buf
    gpu = memory.estimate(s, "cuda", slots=0).gpu
    transposed = sum(a.nbytes for a in buf.PT.values())
    assert transposed == 4 * 24 * 6  # layer0.U.weight, read transposed by the backward loop
    assert gpu.parameters == sum(a.nbytes for a in buf.P.values()) + transposed
    assert gpu.gradients == buf.param_grad_arena.nbytes == 4 * PARAMS
    assert gpu.optimizer == sum(a.nbytes for arrays in cuda.slots.values() for a in arrays) == 8 * PARAMS
    values = sum(a.nbytes for a in buf.V.values())
    assert gpu.activations == values + buf.grad_arena.nbytes
    # by hand: (T + depth) * S * n floats; h_next and c_next have depth 1. Values and gradients of
    # the nodes crossing a kernel boundary alone -- embed.e (4), layer0.W and layer0.U (24 each),
    # c_next and h_next (6 each), the logits (11) and the loss (1); the cell's pointwise nodes
    # keep theirs in registers of its fused kernels. Each gradient array starts 16-byte aligned
    # (codegen/buffers.py): the logits (165 floats) end 3 short of a multiple of 4, the loss (15) 1
    crossing = ("embed.e", "layer0.W", "layer0.U", "layer0.c_next", "layer0.h_next", "head.logits", "head.loss")
    assert s.gradient_nodes == s.value_nodes == crossing
    assert set(buf.G) == set(crossing) and set(buf.V) == set(crossing) | {"x", "y"}  # (x, y: token ids)
    values = T * S * (4 + 24 + 24 + 6 + 6 + 11 + 1) + 1 * S * (6 + 6)
    assert gpu.activations == 4 * (values + values + 3 + 1) + 4 * T * S * IDS
    assert gpu.scratch == 0
    host = memory.estimate(s, "cuda", slots=0).host  # the parameters drawn (in float64) and copied back
    assert (host.parameters, host.optimizer, host.scratch) == (4 * PARAMS, 0, 8 * 24 * 6)


@pytest.mark.parametrize("cell, H, T, S, training", [
    ("lstm", 192, 12, 32, True), ("layernorm_lstm", 192, 12, 32, True), ("gru", 128, 12, 32, True),
    ("lstm", 512, 4, 2, True),        # the parameters dominate
    ("lstm", 512, 1, 1, False),       # sampling: the float64 draw of U at initialisation makes the peak
    ("layernorm_lstm", 128, 16, 128, False)])
def test_the_peak_of_a_numpy_step_is_near_the_estimate(cell, H, T, S, training):
    """tracemalloc sees NumPy's allocations: the peak of compiling a step and training (or
    running forward) one window, temporaries and the interpreter's objects included, is 0.85 to
    1.25 times the estimate (the module docstring's claim)."""
    net = rg.stacked(rg.cells.STANDARD[cell], 1, H, vocab=50, embed=16)
    est = memory.estimate(schedule(net.graph, T, S, "float32", None), "cpu", training=training, slots=2).host
    x = np.random.default_rng(0).integers(0, 50, (T + 1, S))
    tracemalloc.start()
    try:
        step = rg.compile(net, window=T, streams=S, device="cpu", optimizer=rg.Adam(lr=0.01), clip_norm=1.0)
        (step.train if training else step.forward)(x[:-1], x[1:])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.total > 10 * 2**20  # the arrays, not the interpreter, make the peak
    assert 0.85 < peak / est.total < 1.25, (peak, est)


def test_optimizer_slots_and_errors():
    assert memory.optimizer_slots(rg.Adam().config()) == 2
    assert memory.optimizer_slots(rg.AdamW(lr=0.1).config()) == 2
    assert memory.optimizer_slots(rg.SGD(lr=0.1, momentum=0.9).config()) == 1
    with pytest.raises(ValueError, match="unknown optimizer 'lion'"):
        memory.optimizer_slots({"name": "lion"})
    _, s = tiny_schedule()
    with pytest.raises(ValueError, match="device must be"):
        memory.estimate(s, "tpu")


def test_estimates_add_up():
    """Two steps' arrays add up; their temporaries do not meet (one step runs at a time)."""
    a = memory.Footprint(memory.Estimate(1, 2, 3, 4, 500), memory.Estimate(activations=5))
    b = memory.Footprint(memory.Estimate(10, 20, 30, 40, 700))
    total = a + b
    assert total.host == memory.Estimate(11, 22, 33, 44, 700) and total.host.total == 810
    assert total.host.model == 66 and total.gpu.total == 5


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (23 * 2**30, "23 GiB"),
                                     (int(1.24 * 2**40), "1.2 TiB"), (512 * 2**20, "512 MiB"),
                                     (999 * 2**50, "999 PiB"), (1000 * 2**50, "more than 1,000 PiB"),
                                     (10**60, "more than 1,000 PiB")])  # was a 45-digit number of PiB
def test_format_bytes(n, text):
    assert memory.format_bytes(n) == text


def test_available_host_bytes_reads_mem_available(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemFree:         1000000 kB\n"
                       "MemAvailable:   24000000 kB\n", encoding="ascii")
    assert memory.available_host_bytes(str(meminfo)) == 24000000 * 1024
    fallback = memory.available_host_bytes(str(tmp_path / "absent"))  # os.sysconf's free pages
    assert fallback is None or fallback > 0


def test_check_fits_at_the_boundary():
    _, s = tiny_schedule()
    need = memory.estimate(s, "cpu")
    memory.check_fits(need, "it", "do less", host_available=need.host.total, gpu_available=0)  # no GPU need
    memory.check_fits(need, "it", "do less", host_available=None, gpu_available=None)  # unknown: not checked
    with pytest.raises(memory.NotEnoughMemory, match=r"^it needs about \d+(\.\d)? KiB of memory \(parameters, gradients "
                       r"and optimizer slots 6\.4 KiB, activations and temporaries .*\); this machine has "
                       r"\d+(\.\d)? KiB available: do less$"):
        memory.check_fits(need, "it", "do less", host_available=need.host.total - 1, gpu_available=None)
    gpu = memory.estimate(s, "cuda")
    with pytest.raises(memory.NotEnoughMemory, match="of GPU memory .*; the GPU has 1.0 KiB free: do less"):
        memory.check_fits(gpu, "it", "do less", host_available=None, gpu_available=1024)


def test_a_gradient_kept_in_registers_has_no_buffer():
    """The CUDA backend allocates values and gradients for the schedule's value and gradient
    nodes alone: asking for a fused pointwise node's names the node instead of returning memory
    nobody writes."""
    net, s = tiny_schedule()
    buf = rg.compile(net, window=T, streams=S, device="cuda", optimizer=rg.SGD(lr=0.1))._cuda.buf
    assert "layer0.zi" not in s.gradient_nodes and "layer0.zi" not in s.value_nodes
    with pytest.raises(KeyError, match="node 'layer0.zi' has no gradient buffer"):
        buf.window("layer0.zi", grad=True)
    with pytest.raises(KeyError, match="node 'layer0.zi' has no value buffer"):
        buf.window("layer0.zi")


def test_layer_norms_launched_on_their_own_keep_their_values():
    """Regression: outside a persistent loop (layer norms at S > 64 run per timestep) a reduction
    kernel is split into launches at its layer norm, which hand values on through memory though
    no kernel lists them: value_nodes keeps that kernel's ops there, and only there."""
    from rnngraph.codegen.program import CudaProgram
    graph = rg.stacked(rg.cells.layernorm_lstm, 1, 4, input_size=3).graph
    per_step, persistent = schedule(graph, 2, 65), schedule(graph, 2, 2)
    assert "layer0.ln_h" in per_step.value_nodes and "layer0.ln_h" not in persistent.value_nodes
    prog = CudaProgram(per_step, replay=False, compile_workers=1)  # a missing buffer: KeyError naming it
    assert "layer0.ln_h" in prog.buf.V and "layer0.zi" not in persistent.value_nodes
