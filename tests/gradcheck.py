"""Central-difference gradient checks against the reference executor (float64)."""
import numpy as np

import rnngraph as rg

EPS = 1e-6


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / max(||a||, ||b||, 1e-12): the relative error of two gradient vectors."""
    a, b = np.ravel(a), np.ravel(b)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b), 1e-12))


def numeric(f, x: np.ndarray, indices) -> np.ndarray:
    """Central differences of the scalar f() w.r.t. the flat elements ``indices`` of x (changed in place and restored)."""
    flat = x.reshape(-1)
    out = []
    for i in indices:
        keep = flat[i]
        flat[i] = keep + EPS
        up = f()
        flat[i] = keep - EPS
        down = f()
        flat[i] = keep
        out.append((up - down) / (2 * EPS))
    return np.array(out)


def sample(x: np.ndarray, rng, most: int = 12) -> np.ndarray:
    """Up to ``most`` random flat indices of x."""
    return rng.choice(x.size, size=min(most, x.size), replace=False)


def check_graph(g, T=3, S=2, seed=0, most=12, tol=1e-6, states=True, given=None):
    """Gradient-check every parameter, initial state and float input of graph ``g``.

    The scalar checked is mean loss (if any) + sum(outputs * dy) + sum(final states * ds) with
    random dy, ds. ``given``: inputs to feed instead of random ones (e.g. targets with ignored
    ids). Returns the largest relative error (asserted < tol).
    """
    rng = np.random.default_rng(seed)
    ref = rg.Reference(g, "float64")
    params = rg.init_params(g, seed=seed)
    inputs = {}
    for n in g.inputs:
        if n.dtype == "index":
            hi = next((p.shape[0] for p in g.params if p.name == "embed.weight"), None)
            if n.name == "y":
                hi = g.node(g.outputs[0]).size
            inputs[n.name] = rng.integers(0, hi, size=(T, S))
        else:
            inputs[n.name] = rng.normal(size=(T, S, n.size))
    inputs |= given or {}
    st = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()} if states else {}
    dy = {o: rng.normal(size=(T, S, g.node(o).size)) for o in g.outputs}
    ds = {k: rng.normal(size=v.shape) for k, v in rg.zero_states(g, S).items()}

    def scalar():
        f = ref.forward(params, inputs, st)
        total = f.loss or 0.0
        total += sum(float((f.values[o] * dy[o]).sum()) for o in g.outputs)
        total += sum(float((f.final_states[k] * ds[k]).sum()) for k in ds)
        return total

    grads = ref.backward(ref.forward(params, inputs, st), dy, ds)
    floor = rounding_floor(scalar())
    worst = 0.0
    groups = [(params, grads.params), (st, grads.states),
              ({k: v for k, v in inputs.items() if k in grads.inputs}, grads.inputs)]
    for arrays, analytic in groups:
        for name, arr in arrays.items():
            idx = sample(arr, rng, most)
            num, ana = numeric(scalar, arr, idx), analytic[name].reshape(-1)[idx]
            err = relative_error(num, ana)
            within_rounding = np.linalg.norm(num - ana) <= floor * np.sqrt(len(idx))
            assert err < tol or within_rounding, f"{name}: relative error {err:.2e}"
            worst = max(worst, err)
    return worst


def rounding_floor(total: float) -> float:
    """How far a central difference of a float64 scalar of size ``total`` can be off from rounding
    alone: each evaluation is off by a few ulps of |total| (8 eps here), and the difference is divided by
    2 EPS. A tiny gradient beside a large scalar can have a relative error above ``tol`` that is
    only this (tests/test_random_cells.py's ROUNDING_CASE); a wrong gradient is off by far more."""
    return 8 * np.finfo(np.float64).eps * max(abs(total), 1.0) / (2 * EPS)
