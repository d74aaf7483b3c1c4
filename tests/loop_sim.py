"""A compiled CUDA step's loop kernels run alone in numba's simulator, each against the NumPy
backend (rnngraph.executor.ScheduleExecutor, float64) running the same schedule.

Training a whole network in the simulator to check a loop kernel spends nearly all its time in
the library kernels around the loop (the window GEMMs, the gradient fills, the norm's block
sums, Adam), each simulated thread costing about 0.1 ms. Here every buffer is set from the NumPy
backend's state just before the loop, the loop's own launches run, and every buffer is compared
with the NumPy backend's state just after it:

- forward: all value buffers (history rows too) hold the NumPy forward values, those the loop
  writes NaN in the window rows (a value the kernel should store and does not stays NaN); after
  the launch every value buffer must equal the forward values (a folded bias, passes/
  folded_biases.py, moved from the window product's buffer to the loop product's);
- backward: the gradient buffers and parameter gradients hold the NumPy backward's state after
  the steps before the loop, the value buffers the forward values (the layer norms' row sums
  stay as the forward loop kernels left them); after the launch every parameter gradient and
  every gradient buffer must equal the state after the loop, but those of the loop's own ops
  that no later step reads (the kernel may keep them in registers or shared memory). A loop
  that leaves its layer norms' gain and bias gradients to the phase after it (``post_sums``)
  is run with that phase.

Inputs are random (fixed seed): token ids below their limits, floats and the carried states
normal; a graph without a loss is seeded with random output gradients.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from rnngraph.executor import ScheduleExecutor
from rnngraph.ir import INDEX
from rnngraph.passes.folded_biases import loop_folded
from rnngraph.reference import id_limits
from rnngraph.schedule import Loop


class _Prefix(ScheduleExecutor):
    """The NumPy backend over the first ``n`` backward steps, returning its raw buffers: node
    gradients (T, S, n), state-history gradients by node, parameter gradients."""

    def __init__(self, schedule, n: int):
        super().__init__(schedule, "float64")
        self.schedule = replace(schedule, backward=schedule.backward[:n])

    def _gradients(self, grads, ghist, gparams):
        return grads, ghist, gparams


def _inputs(g, T: int, S: int, rng) -> dict:
    limits = id_limits(g)
    return {n.name: rng.integers(0, limits[n.name][0], (T, S)) if n.dtype == INDEX else rng.normal(size=(T, S, n.size))
            for n in g.inputs}


def _base(name: str) -> str:
    return name.split("[")[0]


def check_loops(step, seed: int = 0, rtol: float = 1e-4, atol: float = 1e-5) -> dict[str, dict[str, np.ndarray]]:
    """Run every loop of ``step`` (a TrainingStep compiled with ``device="cuda"`` in the
    simulator) alone, forward loops then backward loops, each against the NumPy backend (see the
    module docstring). Returns {loop name: {buffer: what the device computed}} of the buffers
    compared (``d.`` names gradients), for comparisons between two compilations bit for bit
    (:func:`assert_same_results`). AssertionError names the loop and the buffer that differs."""
    s, prog = step.schedule, step._cuda.program
    g, buf, T, S = s.graph, prog.buf, s.window, s.streams
    rng = np.random.default_rng(seed)
    params = {k: v.astype(np.float64) for k, v in step.parameters.items()}  # as the device holds them
    states = {st.name: rng.normal(size=(st.depth, S, g.by_name[st.node].size)) for st in g.states}
    inputs = _inputs(g, T, S, rng)
    dy = None if g.loss else {o: rng.normal(size=(T, S, g.by_name[o].size)) for o in g.outputs}
    fwd = ScheduleExecutor(s, "float64").forward(params, inputs, states)
    for loop_node, window_node in loop_folded(s.forward).items():  # the buffers hold the sum as the code splits it
        bias = params[g.by_name[window_node].params[1]]
        fwd.values[loop_node], fwd.values[window_node] = fwd.values[loop_node] + bias, fwd.values[window_node] - bias
    hist = {st.node: fwd.states[st.name] for st in g.states}

    def full(node: str, window, history) -> np.ndarray:
        """A node's buffer as the device lays it out: history rows, then the window."""
        if node in history:
            return np.concatenate([history[node], window]).astype(np.float32)
        return np.asarray(window, np.float32)

    def set_values(nan: set) -> None:
        for n in g.nodes:
            if n.name not in buf.V:  # (the schedule's value_nodes: the others stay in registers)
                continue
            if n.dtype == INDEX:
                buf.V[n.name].copy_to_device(np.ascontiguousarray(fwd.values[n.name][..., 0], np.int32))
                continue
            a = np.array(full(n.name, np.broadcast_to(fwd.values[n.name], (T, S, n.size)), hist))
            if n.name in nan:
                a[a.shape[0] - T:] = np.nan
            buf.V[n.name].copy_to_device(a)

    results: dict[str, dict[str, np.ndarray]] = {}

    def compare(device_array, want, loop: str, name: str) -> None:
        got = results.setdefault(loop, {})[name] = device_array.copy_to_host()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{loop}: {name}")

    for step_, launches in zip(s.forward, prog.forward_plan):
        if not isinstance(step_, Loop):
            continue
        set_values({_base(w) for k in step_.kernels for w in k.writes})
        for launch in launches:
            launch()
        for n in g.nodes:
            if n.dtype != INDEX and n.op != "param" and n.name in buf.V:
                compare(buf.V[n.name], full(n.name, fwd.values[n.name], hist), step_.name, n.name)

    backward = list(zip(s.backward, prog.backward_plan))
    for i, (step_, launches) in enumerate(backward):
        if not isinstance(step_, Loop):
            continue
        set_values(set())
        grads, ghist, gparams = _Prefix(s, i).backward(fwd, dy)
        for name, grad in buf.G.items():  # (the schedule's gradient_nodes: the others stay in registers)
            grad.copy_to_device(full(name, grads[name], ghist))
        for name, value in gparams.items():
            buf.PG[name].copy_to_device(np.asarray(value, np.float32))
        runs = launches + (backward[i + 1][1] if step_.post_sums else [])
        for launch in runs:
            launch()
        done = i + (2 if step_.post_sums else 1)
        grads, ghist, gparams = _Prefix(s, done).backward(fwd, dy)
        # the gradients of the loop's own ops are its business but for those the steps after it read
        later = {_base(r[2:]) for st in s.backward[i + 1:] for k in st.kernels for r in k.reads if r.startswith("d.")}
        inner = {m for k in step_.kernels for m in k.ops} - later
        for n in g.nodes:
            if n.name in buf.G and g.differentiable(n.name) and n.name not in inner:  # (data: no gradient)
                compare(buf.G[n.name], full(n.name, grads[n.name], ghist), step_.name, f"d.{n.name}")
        for name, value in gparams.items():
            compare(buf.PG[name], value, step_.name, f"d.{name}")
    return results


def assert_same_results(a: dict, b: dict) -> None:
    """Two :func:`check_loops` results hold the same loops, buffers and values, bit for bit."""
    assert list(a) == list(b) and a, (list(a), list(b))
    for loop in a:
        assert list(a[loop]) == list(b[loop]), loop
        for name, value in a[loop].items():
            np.testing.assert_array_equal(b[loop][name], value, err_msg=f"{loop}: {name}")
