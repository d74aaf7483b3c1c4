"""The NumPy reference executor: the executable specification of a graph over a window.

Layouts: a float input is (T, S, n), token ids are (T, S) integers; every node's values over the
window are (T, S, n); a state is (depth, S, n), oldest first (entry depth-k holds the node at
t = -k), so the final states of one window are the initial states of the next. The training
loss is the mean of the loss node over the T*S columns (PyTorch's CrossEntropyLoss 'mean').

Backward is reverse-mode BPTT through the window: gradients of the loss (plus optional output
and final-state gradients) with respect to every parameter, every initial state and every
float input. Gradients stop at the window's start (truncated BPTT): carry the final states
into the next window with :meth:`Reference.forward`'s ``states``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops
from .errors import GraphError, ShapeError, UnusedWarning
from .ir import INDEX, Graph

DTYPES = {"float32": np.float32, "float64": np.float64}


def init_params(g: Graph, seed: int = 0, dtype: str = "float64") -> dict[str, np.ndarray]:
    """Sample every parameter from its initialiser with ``np.random.default_rng(seed)``, in graph order."""
    rng = np.random.default_rng(seed)
    return {p.name: p.init.sample(p.shape, rng).astype(_dtype(dtype)) for p in g.params}


def zero_states(g: Graph, streams: int, dtype: str = "float64") -> dict[str, np.ndarray]:
    """All-zero initial states: state name -> (depth, S, size)."""
    return {s.name: np.zeros((s.depth, streams, g.by_name[s.node].size), _dtype(dtype)) for s in g.states}


def reset_streams(states: dict[str, np.ndarray], streams) -> dict[str, np.ndarray]:
    """A copy of ``states`` with the given stream columns (ints or a bool mask over S) set to zero,
    as at the start of a new sequence in those streams."""
    out = {k: v.copy() for k, v in states.items()}
    for v in out.values():
        v[:, streams] = 0
    return out


def id_limits(g: Graph) -> dict[str, tuple[int, int | None]]:
    """Token-id input -> (the number of ids it may hold, the id it may hold besides them or
    None): from the op registry's ``ids`` rule of each reader (an embedding's table rows, a
    loss's classes and its ignore_index); the smallest limit if several read it, an ignored id
    only where every reader ignores it."""
    limits: dict[str, tuple[int, int | None]] = {}
    for n in g.nodes:
        rule = ops.REGISTRY[n.op].ids
        if rule is None:
            continue
        for k, (bound, ignore) in rule(g, n).items():
            name = n.args[k].node
            if name in limits:
                old_bound, old_ignore = limits[name]
                bound, ignore = min(bound, old_bound), (ignore if ignore == old_ignore else None)
            limits[name] = (bound, ignore)
    return limits


def check_real(name: str, a: np.ndarray) -> None:
    """Raise ShapeError naming input ``name`` unless ``a`` holds real numbers (floats, integers or
    booleans): complex values would be cast to their real part."""
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise ShapeError(f"input {name!r}: expected real numbers, got {a.dtype}")


def check_ids(name: str, ids: np.ndarray, limit: int | None, ignore: int | None = None) -> None:
    """Raise ShapeError naming input ``name`` (for a network's ``x`` / ``y``, also the training
    step's argument: inputs / targets) unless every id is in [0, limit) or equals ``ignore``."""
    if limit is None or ids.size == 0:
        return
    if ignore is not None:
        ids = ids[ids != ignore]
        if ids.size == 0:
            return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= limit:
        bad = lo if lo < 0 else hi
        also = "" if ignore is None else f" and is not the ignore_index {ignore}"
        called = {"x": "inputs (input 'x')", "y": "targets (input 'y')"}.get(name, f"input {name!r}")
        raise ShapeError(f"{called}: token id {bad} is outside [0, {limit}){also}")


def loss_columns(g: Graph, ids, columns: int) -> int:
    """How many of the window's ``columns`` the mean loss divides by: all of them, less those
    whose target id is the loss's ignored id (PyTorch CrossEntropyLoss(ignore_index=...)).
    ``ids(name)`` returns the fed token ids of input ``name`` (any shape; called only when the
    loss ignores an id). 0 when every target is ignored (the loss and its gradient are then 0)."""
    n = g.by_name[g.loss]
    rule = ops.REGISTRY[n.op].ids
    for k, (_, ignore) in (rule(g, n) if rule else {}).items():
        if ignore is not None:
            columns -= int(np.count_nonzero(np.asarray(ids(n.args[k].node)) == ignore))
    return columns


def mean_loss(per_column: np.ndarray, count: int) -> float:
    """The window's loss: the per-column losses summed over ``count`` columns (their mean, in
    the array's dtype, when every column counts); 0.0 when ``count`` is 0 (every target
    ignored, where PyTorch gives nan)."""
    if count == per_column.size:
        return float(per_column.mean())
    return float(np.sum(per_column, dtype=np.float64) / count) if count else 0.0


def dtype_name(dtype) -> str:
    """``"float32"`` or ``"float64"`` for ``dtype`` given as that string or as a NumPy float type
    (``np.float32``, ``np.dtype("float64")``); ValueError naming the value for anything else."""
    if not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            pass
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64' (or the NumPy type), got {dtype!r}")
    return dtype


def _dtype(name: str):
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype {name!r} is not supported (float32, float64)") from None


@dataclass
class Forward:
    """A forward pass: ``values`` node -> (T, S, n); ``states``/``final_states`` name -> (depth, S, n);
    ``params`` as used; ``loss`` the mean loss (float) or None."""

    values: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    states: dict[str, np.ndarray]
    final_states: dict[str, np.ndarray]
    loss: float | None

    def outputs(self, g: Graph) -> dict[str, np.ndarray]:
        """The graph's outputs over the window: name -> (T, S, n)."""
        return {o: self.values[o] for o in g.outputs}


@dataclass
class Gradients:
    """Gradients of a backward pass: ``params`` (param shapes), ``states`` ((depth, S, n) each),
    ``inputs`` (float inputs, (T, S, n))."""

    params: dict[str, np.ndarray]
    states: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]


class Reference:
    """Runs a validated Graph over windows of T timesteps for S streams with NumPy.

    dtype: ``"float64"`` (default; used for gradient checks) or ``"float32"``.
    """

    def __init__(self, graph: Graph, dtype: str = "float64"):
        from .passes.validate import validate  # late: passes import this module's siblings
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnusedWarning)  # warned when the graph was built
            self.graph = validate(graph)
        self.dtype = _dtype(dtype)
        self.order = self.graph.nodes
        self.id_limits = id_limits(self.graph)
        #: node name -> an Op run in place of its registry entry (the sparse loss of an
        #: rg.LSHSoftmax during a training call: rnngraph/lsh_train.py); empty otherwise
        self.overrides: dict[str, ops.Op] = {}

    def op(self, n) -> ops.Op:
        """The Op that runs node ``n``: its override, else its registry entry."""
        return self.overrides.get(n.name) or ops.REGISTRY[n.op]

    # ------------------------------------------------------------------ inputs
    def _inputs(self, inputs: dict) -> tuple[dict, int, int]:
        g = self.graph
        vals, T, S = {}, None, None
        for n in g.inputs:
            if n.name not in inputs:
                raise GraphError(f"input {n.name!r} of graph {g.name!r} is missing")
            a = np.asarray(inputs[n.name])
            if n.dtype == INDEX:
                if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
                    raise ShapeError(f"input {n.name!r}: token ids must be an integer array of shape (T, S), "
                                     f"got {a.dtype} {a.shape}")
                check_ids(n.name, a, *self.id_limits.get(n.name, (None, None)))
                a = a.astype(np.int64)[..., None]
            else:
                if a.ndim != 3 or a.shape[2] != n.size:
                    raise ShapeError(f"input {n.name!r}: expected shape (T, S, {n.size}), got {a.shape}")
                check_real(n.name, a)
                a = a.astype(self.dtype)
            if T is None:
                T, S = a.shape[:2]
            elif a.shape[:2] != (T, S):
                raise ShapeError(f"input {n.name!r} has (T, S) = {a.shape[:2]}, other inputs {(T, S)}")
            vals[n.name] = a
        unknown = sorted(set(inputs) - {n.name for n in g.inputs})
        if unknown:
            raise GraphError(f"graph {g.name!r} has no input(s) {unknown}")
        if not T or not S:
            raise ShapeError(f"a window needs T >= 1 and S >= 1, got T={T}, S={S}")
        return vals, T, S

    def _states(self, states: dict | None, S: int) -> dict:
        g = self.graph
        out = zero_states(g, S, self.dtype.__name__)
        for name, a in (states or {}).items():
            if name not in out:
                raise GraphError(f"graph {g.name!r} has no state {name!r} (states: {sorted(out)})")
            a = np.asarray(a, dtype=self.dtype)
            if a.shape != out[name].shape:
                raise ShapeError(f"state {name!r}: expected shape {out[name].shape} (depth, S, size), got {a.shape}")
            out[name] = a.copy()
        return out

    def _param_arrays(self, params: dict) -> dict:
        g, out = self.graph, {}
        for p in g.params:
            if p.name not in params:
                raise GraphError(f"parameter {p.name!r} is missing")
            a = np.asarray(params[p.name], dtype=self.dtype)
            if a.shape != p.shape:
                raise ShapeError(f"parameter {p.name!r}: expected shape {p.shape}, got {a.shape}")
            out[p.name] = a
        return out

    def _read(self, values, hist, node: str, tau: int):
        """Node ``node`` at timestep ``tau`` (from the initial history when tau < 0)."""
        if tau >= 0:
            return values[node][tau]
        h = hist[node]
        return h[h.shape[0] + tau]

    # ------------------------------------------------------------------ forward
    def forward(self, params: dict, inputs: dict, states: dict | None = None) -> Forward:
        """Run the window. params: name -> array; inputs: name -> (T, S) ids or (T, S, n) floats;
        states: name -> (depth, S, n), zeros where absent. Raises ShapeError/GraphError naming
        the offending input, state or parameter."""
        g = self.graph
        vals, T, S = self._inputs(inputs)
        st = self._states(states, S)
        ps = self._param_arrays(params)
        hist = {s.node: st[s.name] for s in g.states}
        values = {n.name: vals.get(n.name) if n.op == "input" else np.zeros((T, S, n.size), self.dtype)
                  for n in g.nodes}
        for t in range(T):
            for n in self.order:
                if n.op == "input":
                    continue
                xs = [self._read(values, hist, r.node, t - r.delay) for r in n.args]
                y = self.op(n).forward(xs, [ps[p] for p in n.params], n.attr)
                values[n.name][t] = y
        final = {s.name: np.stack([self._read(values, hist, s.node, T - k) for k in range(s.depth, 0, -1)])
                 for s in g.states}
        loss = mean_loss(values[g.loss], self.loss_columns(values)) if g.loss else None
        return Forward(values, ps, st, final, loss)

    def loss_columns(self, values: dict) -> int:
        """The columns the mean loss of a forward pass with ``values`` divides by (:func:`loss_columns`)."""
        T, S = next(iter(values.values())).shape[:2]
        return loss_columns(self.graph, lambda name: values[name], T * S)

    # ------------------------------------------------------------------ backward
    def backward(self, fwd: Forward, d_outputs: dict | None = None, d_final_states: dict | None = None,
                 loss_scale: float = 1.0) -> Gradients:
        """Reverse-mode BPTT over the window of ``fwd``.

        Seeds: ``loss_scale`` times the gradient of the mean loss (when the graph has a loss),
        plus ``d_outputs`` (node name -> (T, S, n); any node, usually the outputs) and
        ``d_final_states`` (state name -> (depth, S, n)). Raises TypeError for seeds that are not
        dicts, GraphError for an unknown node or state name, ShapeError for a seed of another
        shape (nothing is reshaped or broadcast).
        """
        g = self.graph
        grads, ghist, gparams = self._seed(fwd, d_outputs, d_final_states, loss_scale)
        T = next(iter(grads.values())).shape[0]
        hist_values = {s.node: fwd.states[s.name] for s in g.states}
        for t in range(T - 1, -1, -1):
            for n in reversed(self.order):
                if n.op == "input":
                    continue
                gy = grads[n.name][t]
                xs = [self._read(fwd.values, hist_values, r.node, t - r.delay) for r in n.args]
                pa = [fwd.params[p] for p in n.params]
                gxs, gps = self.op(n).vjp(gy, fwd.values[n.name][t], xs, pa, n.attr)
                for p, gp in zip(n.params, gps):
                    gparams[p] += gp
                for r, gx in zip(n.args, gxs):
                    if gx is not None:
                        self._at(grads, ghist, r.node, t - r.delay, gx)
        return self._gradients(grads, ghist, gparams)

    def _seed(self, fwd: Forward, d_outputs, d_final_states, loss_scale: float):
        """Zeroed gradient buffers (nodes (T, S, n), state histories by node, params) with the
        seeds of :meth:`backward` added."""
        g = self.graph
        T, S = next(iter(fwd.values.values())).shape[:2]
        grads = {n.name: np.zeros((T, S, n.size), self.dtype) for n in g.nodes}
        ghist = {s.node: np.zeros_like(fwd.states[s.name]) for s in g.states}
        gparams = {k: np.zeros_like(v) for k, v in fwd.params.items()}
        if g.loss:
            count = self.loss_columns(fwd.values)
            grads[g.loss] += self.dtype(loss_scale / count if count else 0.0)
        for what, seeds in (("d_outputs", d_outputs), ("d_final_states", d_final_states)):
            if seeds is not None and not isinstance(seeds, dict):
                raise TypeError(f"{what} takes a dict name -> array, got {type(seeds).__name__}")
        unknown = sorted(set(d_outputs or {}) - set(grads))
        if unknown:
            raise GraphError(f"d_outputs: no node(s) {unknown} (outputs: {list(g.outputs)})")
        for name, d in (d_outputs or {}).items():
            d = np.asarray(d, self.dtype)
            want = grads[name].shape
            if d.shape != want:
                raise ShapeError(f"d_outputs[{name!r}]: expected shape {want} (T, S, n), got {d.shape}")
            grads[name] += d
        names = {s.name: s for s in g.states}
        unknown = sorted(set(d_final_states or {}) - set(names))
        if unknown:
            raise GraphError(f"d_final_states: no state(s) {unknown} (states: {sorted(names)})")
        for s in g.states:
            d = (d_final_states or {}).get(s.name)
            if d is not None:
                d = np.asarray(d, self.dtype)
                if d.shape != fwd.final_states[s.name].shape:
                    raise ShapeError(f"d_final_states[{s.name!r}]: expected shape {fwd.final_states[s.name].shape} "
                                     f"(depth, S, n), got {d.shape}")
                for j, k in enumerate(range(s.depth, 0, -1)):
                    self._at(grads, ghist, s.node, T - k, np.asarray(d[j], self.dtype))
        return grads, ghist, gparams

    def _gradients(self, grads, ghist, gparams) -> Gradients:
        g = self.graph
        gstate = {s.name: ghist[s.node] for s in g.states}
        inputs = {n.name: grads[n.name] for n in g.inputs if n.dtype != INDEX}
        return Gradients(gparams, gstate, inputs)

    @staticmethod
    def _at(grads, ghist, node: str, tau: int, gx) -> None:
        """Add ``gx`` to the gradient of ``node`` at timestep ``tau`` (its history when tau < 0)."""
        if tau >= 0:
            grads[node][tau] += gx
        else:
            h = ghist[node]
            h[h.shape[0] + tau] += gx
