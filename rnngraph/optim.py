"""Optimizers and gradient clipping with PyTorch's update rules (NumPy; the GPU kernels follow them).

Every optimizer updates a dict of parameter arrays in place from a dict of gradients of the same
shapes, and keeps its own slots (momentum, moments) so a checkpoint can restore it exactly.
"""
from __future__ import annotations

import math

import numpy as np


class Optimizer:
    """Base class: ``step(params, grads)`` updates params in place; ``state_dict()``/``load_state_dict()``."""

    name = "optimizer"

    def __init__(self, lr: float):
        if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
            raise ValueError(f"{type(self).__name__}: lr must be a positive number, got {lr!r}")
        self.lr = float(lr)
        self.slots: dict[str, np.ndarray] = {}
        self.steps = 0
        self.on_save = None  # set by a device backend: copy its slots into ``slots`` before saving
        self.on_load = None  # ... and back to the device after loading
        self.on_settle = None  # ... and wait for its unsettled calls, whose outcome changes ``steps``

    def config(self) -> dict:
        """Hyper-parameters, for checkpoints."""
        return {"name": self.name, "lr": self.lr}

    def state_dict(self) -> dict[str, np.ndarray]:
        """The optimizer's slots and step count as arrays (``slot/param`` keys)."""
        if self.on_save is not None:
            self.on_save()
        out = {f"{k}": v for k, v in self.slots.items()}
        out["steps"] = np.array(self.steps)
        return out

    def load_state_dict(self, d: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        if self.on_settle is not None:  # before ``steps`` is set: a call settled later would change it
            self.on_settle()
        self.steps = int(d["steps"])
        self.slots = {k: np.array(v) for k, v in d.items() if k != "steps"}
        if self.on_load is not None:
            self.on_load()

    def _slot(self, kind: str, name: str, like: np.ndarray) -> np.ndarray:
        key = f"{kind}/{name}"
        if key not in self.slots:
            self.slots[key] = np.zeros_like(like)
        return self.slots[key]


class SGD(Optimizer):
    """torch.optim.SGD: v = momentum*v + g (v = g on the first step); p -= lr*v."""

    name = "sgd"

    def __init__(self, lr: float = 0.1, momentum: float = 0.0):
        super().__init__(lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1), got {momentum!r}")
        self.momentum = float(momentum)

    def config(self) -> dict:
        return {**super().config(), "momentum": self.momentum}

    def step(self, params: dict, grads: dict) -> None:
        """One update of every parameter (in place)."""
        for name, p in params.items():
            g = grads[name]
            if self.momentum:
                v = self._slot("momentum", name, p)
                v[...] = g if self.steps == 0 else self.momentum * v + g
                g = v
            p -= p.dtype.type(self.lr) * g
        self.steps += 1


class Adam(Optimizer):
    """torch.optim.Adam (Kingma & Ba 2015): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
    p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)."""

    name = "adam"

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(lr)
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam: betas must be in [0, 1), got {betas!r}")
        self.betas, self.eps = (float(betas[0]), float(betas[1])), float(eps)

    def config(self) -> dict:
        return {**super().config(), "betas": list(self.betas), "eps": self.eps}

    def step(self, params: dict, grads: dict) -> None:
        """One update of every parameter (in place)."""
        b1, b2 = self.betas
        t = self.steps + 1
        for name, p in params.items():
            g = grads[name]
            m, v = self._slot("m", name, p), self._slot("v", name, p)
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            denom = np.sqrt(v / (1 - b2 ** t)) + self.eps
            p -= (self.lr / (1 - b1 ** t)) * m / denom
        self.steps += 1


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019, "Decoupled
    Weight Decay Regularization"; PyTorch's rule, ``amsgrad=False``). Each step first shrinks
    every parameter, then makes :class:`Adam`'s update with the unchanged gradient:

        p *= 1 - lr * weight_decay
        m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
        p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)

    The decay is not added to the gradient, so it does not enter m and v (unlike Adam with L2
    regularisation). weight_decay is per unit of lr (a pure number; the shrink factor per step is
    1 - lr*weight_decay, with the lr of that step); default 1e-2, PyTorch's. ValueError (naming
    AdamW) for a weight_decay that is negative, not finite or not a number, and for a bad lr or
    betas as :class:`Adam`.
    """

    name = "adamw"

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(lr, betas, eps)
        if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0 and math.isfinite(weight_decay)):
            raise ValueError(f"AdamW: weight_decay must be a finite number >= 0, got {weight_decay!r}")
        self.weight_decay = float(weight_decay)

    def config(self) -> dict:
        return {**super().config(), "weight_decay": self.weight_decay}

    def decay_factor(self) -> float:
        """The factor ``1 - lr * weight_decay`` each parameter is multiplied by before the Adam update
        (computed in float64; the update casts it to the parameter's dtype, as the GPU kernel does)."""
        return 1.0 - self.lr * self.weight_decay

    def step(self, params: dict, grads: dict) -> None:
        """One update of every parameter (in place): the decay, then :meth:`Adam.step`."""
        decay = self.decay_factor()
        for p in params.values():
            p *= p.dtype.type(decay)
        super().step(params, grads)


def from_config(cfg: dict) -> Optimizer:
    """Rebuild an optimizer from :meth:`Optimizer.config`; ValueError for an unknown name."""
    cfg = dict(cfg)
    kind = cfg.pop("name")
    if kind == "adam":
        return Adam(cfg["lr"], tuple(cfg.get("betas", (0.9, 0.999))), cfg.get("eps", 1e-8))
    if kind == "adamw":
        return AdamW(cfg["lr"], tuple(cfg.get("betas", (0.9, 0.999))), cfg.get("eps", 1e-8),
                     cfg.get("weight_decay", 1e-2))
    if kind == "sgd":
        return SGD(cfg["lr"], cfg.get("momentum", 0.0))
    raise ValueError(f"unknown optimizer {kind!r} (adam, adamw, sgd)")


def cosine_lr(lr: float, final_fraction: float, done: float) -> float:
    """Cosine annealing from ``lr`` down to ``low = lr * final_fraction``:

        lr(done) = low + (lr - low) * (1 + cos(pi * done)) / 2

    PyTorch's ``torch.optim.lr_scheduler.CosineAnnealingLR`` (Loshchilov & Hutter 2017, "SGDR")
    with ``eta_min = low``: step k of ``T_max`` steps (0-based, the step about to run) is
    ``done = k / T_max``. ``done`` is clipped to [0, 1], so the lr stays at ``low`` after the end
    (where PyTorch's would rise again). ``lr`` and the result are in the optimizer's lr units (per
    update); final_fraction and done are pure numbers. ValueError for a final_fraction outside [0, 1].
    """
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"the final lr fraction must be in [0, 1], got {final_fraction!r}")
    low = lr * final_fraction
    return low + (lr - low) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, done))))


def clip_grad_norm(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scale all gradients in place so their global L2 norm is at most ``max_norm``
    (torch.nn.utils.clip_grad_norm_: factor max_norm / (norm + 1e-6) when norm > max_norm).
    Returns the norm before clipping."""
    total = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads.values():
            g *= g.dtype.type(scale)
    return total
