"""What ``TrainingStep.forward`` returns: the same structure on the CPU and the CUDA backend.

:class:`StepForward` holds host NumPy arrays in the step's dtype (float32 on CUDA): the graph's
outputs, the loss, the states the window started from and those it ended with, and the values
of the nodes :func:`value_names` lists (opt-in for every node, on both backends alike).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import Graph

#: Ops whose nodes are no computed value: the fed inputs and the broadcast ``rg.param`` vectors
#: (read those from ``step.parameters``).
NOT_COMPUTED = ("input", "param")


@dataclass
class StepForward:
    """One window's forward pass of a :class:`rnngraph.TrainingStep`, the same on both backends.

    outputs: graph output name -> (T, S, n) (e.g. ``"head.logits"``; a head's logits, or the
    last layer's value before an ``rg.MSE()``).
    values: node name -> (T, S, n): the outputs, plus the loss node's per-column losses (T, S, 1)
    when targets were given; with ``all_values=True`` every node an op computes (not the inputs
    and not the ``rg.param`` vectors), e.g. ``"layer0.c_next"``. The output arrays are those of
    ``outputs``.
    loss: the window's mean loss (float), None without targets or without a loss head.
    states: state name -> (depth, S, n), the states the window started from (oldest first).
    final_states: state name -> (depth, S, n), the states it ended with (what ``carry=True``
    makes ``step.state``).
    Every array is a host NumPy array of the step's dtype (float32 on CUDA), owned by this
    object: changing one changes neither the step's states nor another call's result.
    """

    outputs: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    loss: float | None
    states: dict[str, np.ndarray]
    final_states: dict[str, np.ndarray]


def value_names(g: Graph, all_values: bool, with_loss: bool) -> list[str]:
    """The nodes of ``StepForward.values``, in graph order: the outputs (and the loss node when
    ``with_loss``), or with ``all_values`` every computed node (the loss node too only when
    ``with_loss``: without targets its losses are those of blank targets)."""
    wanted = set(g.outputs) | ({g.loss} if with_loss and g.loss else set())
    if all_values:
        wanted |= {n.name for n in g.nodes if n.op not in NOT_COMPUTED and n.name != g.loss}
    return [n.name for n in g.nodes if n.name in wanted]


def step_forward(g: Graph, values: dict, loss: float | None, states: dict, final_states: dict) -> StepForward:
    """A :class:`StepForward` from a backend's host arrays (``values``: the nodes
    :func:`value_names` lists for the call; ``outputs`` shares their arrays)."""
    outputs = {o: values[o] for o in g.outputs}
    return StepForward(outputs, values, loss, states, final_states)
