"""The NumPy backend: runs a Schedule step by step, in exactly the order the GPU runs it.

Phases compute each kernel once over all T*S columns (a delayed read shifts the window by the
delay, taking the first values from the state history); loops step through ticks, and in each
tick through levels and stages (stage s runs timestep tick - s; backward mirrors it in reverse
time). In backward, a GEMM kernel computes input gradients only; its weight gradient is the
``wgrad`` kernel that follows (once per window); likewise a loop's ``post_sums`` layer norms,
whose gain and bias gradients are the ``reduce`` kernels after the loop. Results equal :class:`rnngraph.reference.Reference`'s
naive time-stepping (the property tests check it), with the same layouts and API. A loop's
``folded_biases`` (passes/folded_biases.py) are not followed: each product here holds its own
bias, where the CUDA backend adds the window product's to the loop product's (the same sums, in
another order).

A schedule in precision ``"tf32"`` or ``"bf16"`` (rnngraph/precision.py) is emulated as the CUDA
backend runs it: the GEMMs of its phases (forward products, input-gradient products, weight
gradients) multiply operands rounded to that format (:func:`rnngraph.precision.round_operand`) in
float32, and so do the loops' products where the schedule puts them on tensor cores
(``ScheduleOptions.loop_tensor_cores``: rnngraph/schedule.py ``loop_precision``); bias sums and
everything else stay float32.
"""
from __future__ import annotations

import numpy as np

from .precision import round_operand
from .reference import Forward, Gradients, Reference, mean_loss
from .schedule import Loop, Phase, Schedule, loop_precision


class ScheduleExecutor(Reference):
    """Runs ``schedule`` with NumPy in ``dtype`` ("float64" or "float32"); same API as Reference.
    The schedule's ``precision`` is emulated (module docstring); ValueError, naming it, for a
    reduced precision with dtype float64."""

    def __init__(self, schedule: Schedule, dtype: str = "float64"):
        super().__init__(schedule.graph, dtype)
        self.schedule = schedule
        self.precision = getattr(schedule, "precision", "fp32")
        self.loop_precision = loop_precision(schedule)
        if self.precision != "fp32" and dtype != "float32":
            raise ValueError(f"precision={self.precision!r} needs dtype float32, got dtype {dtype!r}")

    def _rounded(self, xs: list, ps: list, k, precision: str | None = None) -> tuple[list, list]:
        """A GEMM's arguments and weight as ``precision`` (default: the phases' precision) stores
        them (the bias, ``ps[1]``, stays); other kernels' unchanged."""
        precision = precision or self.precision
        if precision == "fp32" or k.kind not in ("gemm", "wgrad"):
            return xs, ps
        return [round_operand(x, precision) for x in xs], [round_operand(p, precision) for p in ps[:1]] + ps[1:]

    # ------------------------------------------------------------------ window helpers
    @staticmethod
    def _window(values, hist, node: str, delay: int) -> np.ndarray:
        """Node ``node`` read with ``delay`` over the whole window: (T, S, n)."""
        v = values[node]
        if delay == 0:
            return v
        h = hist[node]
        D, T = h.shape[0], v.shape[0]
        return np.concatenate([h, v])[D - delay:D - delay + T]

    @staticmethod
    def _push(grads, ghist, node: str, delay: int, gx: np.ndarray) -> None:
        """Add the gradient ``gx`` (T, S, n) of a read with ``delay`` to its producer's timesteps."""
        if delay == 0:
            grads[node] += gx
            return
        h = ghist[node]
        D, T = h.shape[0], gx.shape[0]
        idx = D - delay + np.arange(T)  # position of the producer in [history | window]
        past = idx < D
        h[idx[past]] += gx[past]
        grads[node][idx[~past] - D] += gx[~past]

    # ------------------------------------------------------------------ forward
    def forward(self, params: dict, inputs: dict, states: dict | None = None) -> Forward:
        g = self.graph
        vals, T, S = self._inputs(inputs)
        st = self._states(states, S)
        ps = self._param_arrays(params)
        hist = {s.node: st[s.name] for s in g.states}
        values = {}
        for n in g.nodes:
            if n.op == "input":
                values[n.name] = vals[n.name]
            elif n.op == "param":
                values[n.name] = np.broadcast_to(ps[n.params[0]], (T, S, n.size))
            else:
                values[n.name] = np.zeros((T, S, n.size), self.dtype)
        for step in self.schedule.forward:
            if isinstance(step, Phase):
                for k in step.kernels:
                    for name in k.ops:
                        n = g.by_name[name]
                        xs = [self._window(values, hist, r.node, r.delay).reshape(T * S, -1) for r in n.args]
                        y = self.op(n).forward(*self._rounded(xs, [ps[p] for p in n.params], k), n.attr)
                        values[name][...] = y.reshape(T, S, n.size)
            else:
                for t, k in self._ticks(step, T):
                    for name in k.ops:
                        n = g.by_name[name]
                        xs = [self._read(values, hist, r.node, t - r.delay) for r in n.args]
                        params = [ps[p] for p in n.params]
                        values[name][t] = self.op(n).forward(*self._rounded(xs, params, k, self.loop_precision), n.attr)
        final = {s.name: np.stack([self._read(values, hist, s.node, T - k) for k in range(s.depth, 0, -1)])
                 for s in g.states}
        loss = mean_loss(values[g.loss], self.loss_columns(values)) if g.loss else None
        return Forward(values, ps, st, final, loss)

    @staticmethod
    def _ticks(loop: Loop, T: int):
        """(timestep, kernel) pairs of a loop in execution order: tick, level, stage, kernel."""
        top = max(o for o, _ in loop.stages)
        for tick in range(T + top):
            for level in range(1, loop.levels + 1):
                for offset, _ in loop.stages:
                    t = tick - offset
                    if 0 <= t < T:
                        for k in loop.at(level, offset):
                            yield (T - 1 - t if loop.reverse else t), k

    # ------------------------------------------------------------------ backward
    def backward(self, fwd: Forward, d_outputs: dict | None = None, d_final_states: dict | None = None,
                 loss_scale: float = 1.0) -> Gradients:
        g = self.graph
        grads, ghist, gparams = self._seed(fwd, d_outputs, d_final_states, loss_scale)
        T = next(iter(grads.values())).shape[0]
        hist = {s.node: fwd.states[s.name] for s in g.states}
        rounded = {}  # weight -> its rounded copy (reduced precision), made once a backward
        for step in self.schedule.backward:
            if isinstance(step, Phase):
                for k in step.kernels:
                    self._phase_backward(k, fwd, hist, grads, ghist, gparams, rounded)
                continue
            for t, k in self._ticks(step, T):
                for name in reversed(k.ops):
                    n = g.by_name[name]
                    xs = [self._read(fwd.values, hist, r.node, t - r.delay) for r in n.args]
                    if k.kind == "gemm" and self.loop_precision != "fp32":
                        gxs = self._rounded_input_grads(n, grads[name][t], fwd.values[name][t], xs, fwd.params, rounded)
                    else:
                        args_only = k.kind == "gemm" or name in step.post_sums
                        gxs = self._vjp(n, grads[name][t], fwd.values[name][t], xs, fwd.params, gparams, args_only)
                    for r, gx in zip(n.args, gxs):
                        if gx is not None:
                            self._at(grads, ghist, r.node, t - r.delay, gx)
        return self._gradients(grads, ghist, gparams)

    def _vjp(self, n, gy, y, xs, params, gparams, args_only: bool = False) -> list:
        """Argument gradients of node ``n``; its parameter gradients are added to ``gparams``
        unless ``args_only``: a GEMM kernel's weight gradients are the later ``wgrad`` kernel's
        work, a loop's ``post_sums`` layer norms' the later ``reduce`` kernel's."""
        op = self.op(n)
        pa = [params[p] for p in n.params]
        if args_only:
            return op.arg_grads(gy, y, xs, pa, n.attr)
        gxs, gps = op.vjp(gy, y, xs, pa, n.attr)
        for p, gp in zip(n.params, gps):
            gparams[p] += gp
        return gxs

    def _rounded_input_grads(self, n, gy, y, xs, params: dict, rounded: dict) -> list:
        """A GEMM node's input gradients in the reduced precision: the output gradient and the
        weight rounded (the weight's rounded copy kept in ``rounded``), multiplied in float32."""
        w = n.params[0]
        if w not in rounded:
            rounded[w] = round_operand(params[w], self.precision)
        return self._vjp(n, round_operand(gy, self.precision), y, xs, dict(params, **{w: rounded[w]}), None,
                         args_only=True)

    def _phase_backward(self, k, fwd, hist, grads, ghist, gparams, rounded) -> None:
        """One once-per-window backward kernel over all T*S columns (``rounded``: the weights'
        rounded copies, :meth:`_rounded_input_grads`)."""
        g = self.graph
        for name in reversed(k.ops):
            n = g.by_name[name]
            T, S = grads[name].shape[:2]
            gy = grads[name].reshape(T * S, -1)
            if k.kind == "reduce" and n.op == "param":  # a vector parameter's gradient: the column sum
                gparams[n.params[0]] += gy.sum(0)
                continue
            xs = [self._window(fwd.values, hist, r.node, r.delay).reshape(T * S, -1) for r in n.args]
            y = fwd.values[name].reshape(T * S, -1)
            if k.kind in ("wgrad", "reduce"):  # parameter gradients only: a GEMM's, a loop's layer norm's
                pa = [fwd.params[p] for p in n.params]
                _, gps = self.op(n).vjp(gy, y, xs, pa, n.attr)
                if self.precision != "fp32" and k.kind == "wgrad":  # the weight's from rounded operands
                    (gy_r, *xs_r), _ = self._rounded([gy, *xs], [], k)
                    gps = [self.op(n).vjp(gy_r, y, xs_r, pa, n.attr)[1][0], *gps[1:]]
                for p, gp in zip(n.params, gps):
                    gparams[p] += gp
                continue
            if k.kind == "gemm" and self.precision != "fp32":  # input gradients from rounded operands
                gxs = self._rounded_input_grads(n, gy, y, xs, fwd.params, rounded)
            else:
                gxs = self._vjp(n, gy, y, xs, fwd.params, gparams, args_only=k.kind == "gemm")
            for r, gx in zip(n.args, gxs):
                if gx is not None:
                    self._push(grads, ghist, r.node, r.delay, gx.reshape(T, S, -1))
