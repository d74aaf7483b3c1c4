"""twin_biases: linear nodes whose gradients are one value, so one column sum gives both biases'.

An LSTM's gates are ``linear(x, W, b_W) + linear(h, U, b_U)`` (PyTorch's two bias vectors). When
two biased linear nodes are read by one ``add`` node alone -- as its two arguments, with delay 0,
by nothing else, and neither is a graph output -- backpropagation gives each the add's gradient:
the same float32 values at every timestep and stream, written by the same kernel. The gradients of
``b_W`` and ``b_U``, the column sums of those values over the window, are then equal too, and one
column sum can add into both (codegen/library_launches.py ``wgrad_launcher``; codegen/gemm.py
``column_sum``'s ``twin``). The 2 x 512 S = 64 char LM's step summed each layer's gate gradients
(6,400 x 2,048) twice: 4 column sums of 0.039 ms on an H100
(bench/results/h100-20261206-lm-step-trace-2x512-s64.json).

Reads the graph only; the backends and the schedule are unchanged.
"""
from __future__ import annotations

from ..ir import Graph


def twin_biases(graph: Graph) -> dict[str, str]:
    """The pairs of biased linear nodes whose output gradients are equal (see the module
    docstring): the node whose weight-gradient step sums the gradient -> its twin, whose bias
    gradient gets the same sums and whose step sums nothing. The first of a pair in graph order
    sums."""
    consumers, order = graph.consumers(), {m.name: i for i, m in enumerate(graph.nodes)}
    outputs = set(graph.outputs) | {graph.loss}
    pairs: dict[str, str] = {}
    for n in graph.nodes:
        if n.op != "add" or len(n.args) != 2 or n.args[0].node == n.args[1].node:
            continue
        refs = [graph.by_name[r.node] for r in n.args]
        if all(r.delay == 0 for r in n.args) and all(
                m.op == "linear" and len(m.params) == 2 and m.name not in outputs
                and [(c.name, r.delay) for c, r in consumers[m.name]] == [(n.name, 0)] for m in refs):
            first, second = sorted(refs, key=lambda m: order[m.name])
            pairs[first.name] = second.name
    return pairs
