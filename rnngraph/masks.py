"""Dropout masks: which graph inputs are masks, and the masks a training call feeds them.

A :class:`rnngraph.network.Dropout` layer is traced as a float graph input ``dropK.mask`` with
the attribute ``dropout=p``; every backend (rnngraph/runtime.py and step_feed.py, rnngraph/layer.py and the
CUDA step, rnngraph/codegen/step.py) finds those inputs with :func:`mask_inputs` and fills
them with :func:`draw_mask` under the seed :func:`mask_seed`. This module depends on NumPy and
the graph (rnngraph/ir.py) only, so the code generator can use it without importing the
network API above it.
"""
from __future__ import annotations

import numpy as np

from .ir import Graph

__all__ = ["draw_mask", "mask_inputs", "mask_seed"]


def mask_inputs(g: Graph) -> dict[str, float]:
    """Dropout mask input -> its probability p, in graph order: the float inputs carrying a
    ``dropout`` attribute (see :class:`rnngraph.network.Dropout`). Read from the graph alone, so
    a parsed graph works too."""
    return {n.name: float(n.attr["dropout"]) for n in g.inputs if "dropout" in n.attr}


def mask_seed(seed: int, step: int, k: int) -> np.random.SeedSequence:
    """The seed of mask ``k`` (its position among :func:`mask_inputs`) in the training call
    that follows ``step`` earlier ones, for a network compiled with ``seed``: a pure function of
    the three numbers, so a resumed run draws the masks an uninterrupted one would."""
    return np.random.SeedSequence([seed, step, k, _MASK_TAG])


_MASK_TAG = 0x64726F70  # "drop": keeps mask streams apart from init_params' default_rng(seed)


def draw_mask(p: float, shape: tuple[int, ...], seed: np.random.SeedSequence, dtype="float32") -> np.ndarray:
    """An inverted-dropout mask of ``shape`` (T, S, width) in ``dtype``: each element
    independently 0 with probability p, else 1/(1-p) (PyTorch's nn.Dropout scaling), from
    ``np.random.default_rng(seed)``. The pattern of zeros depends only on the seed, not on
    ``dtype`` (the uniforms are drawn in float64)."""
    dt = np.dtype(dtype)
    keep = np.random.default_rng(seed).random(shape) >= p
    return np.where(keep, dt.type(1.0 / (1.0 - p)), dt.type(0.0))
