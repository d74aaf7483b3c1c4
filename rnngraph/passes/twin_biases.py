"""twin_biases: linear nodes whose gradients are one value, so one column sum gives both biases'.

An LSTM's gates are ``linear(x, W, b_W) + linear(h, U, b_U)`` (PyTorch's two bias vectors). When
two biased linear nodes are read by one ``add`` node alone -- as its two arguments, with delay 0,
by nothing else, and neither is a graph output, the loss or a state's node (a caller seeds those
gradients: the layer adds the final states' gradient into a state's) -- backpropagation gives each
the add's gradient: the same float32 values at every timestep and stream, written by the same
kernel. The gradients of
``b_W`` and ``b_U``, the column sums of those values over the window, are then equal too, and one
column sum can add into both (codegen/library_launches.py ``wgrad_launcher``; codegen/gemm.py
``column_sum``'s ``twin``). The 2 x 512 S = 64 char LM's step summed each layer's gate gradients
(6,400 x 2,048) twice: 4 column sums of 0.039 ms on an H100
(bench/results/h100-20261206-lm-step-trace-2x512-s64.json).

The same argument makes each of the two gradients one kernel's alone, written whole once a step:
:func:`written_once` names them, so the backward stores them without reading the old value
(codegen/pointwise.py) and the gradient arena need not zero them (codegen/buffers.py
``zeroed_grads``): of the 2 x 512 S = 64 step's 270 MB of gradients zeroed each step, 210 MB were
these; on an H100 the zeroing went from 0.088 to 0.023 ms and each backward loop kernel from
1.29 to 1.27 ms (bench/results/h100-20261206-lm-step-trace-2x512-s64-fwdgroups-1.json,
-unzeroed-gates.json).

Reads the graph only; the NumPy backends are unchanged. In the schedule the weight-gradient steps'
written gradients say who sums which bias (passes/lower.py decides), and the code generator reads
the pairs back from those steps (:func:`scheduled_twins`), so the dump and the launches follow one
decision.
"""
from __future__ import annotations

from ..ir import Graph


def sole_add_pairs(graph: Graph) -> list[tuple[str, str]]:
    """(a, b), a before b in graph order, for every two-argument ``add`` of two linear nodes that
    it reads at delay 0 and alone reads, neither an output, the loss or a state's node (a caller
    seeds those gradients): only their sum is ever read, and both get the add's gradient."""
    consumers, order = graph.consumers(), {m.name: i for i, m in enumerate(graph.nodes)}
    outputs = graph.seeded  # gradients a caller seeds
    out = []
    for n in graph.nodes:
        if n.op != "add" or len(n.args) != 2 or n.args[0].node == n.args[1].node:
            continue
        refs = [graph.by_name[r.node] for r in n.args]
        if all(r.delay == 0 for r in n.args) and all(
                m.op == "linear" and m.name not in outputs
                and [(c.name, r.delay) for c, r in consumers[m.name]] == [(n.name, 0)] for m in refs):
            first, second = sorted(refs, key=lambda m: order[m.name])
            out.append((first.name, second.name))
    return out


def twin_biases(graph: Graph) -> dict[str, str]:
    """The pairs of biased linear nodes whose output gradients are equal (see the module
    docstring): the node whose weight-gradient step sums the gradient -> its twin, whose bias
    gradient gets the same sums and whose step sums nothing. The first of a pair in graph order
    sums."""
    return {a: b for a, b in sole_add_pairs(graph)
            if len(graph.by_name[a].params) == 2 and len(graph.by_name[b].params) == 2}


def scheduled_twins(graph: Graph, steps) -> dict[str, str]:
    """The twins as a lowered schedule decided them (passes/lower.py): node whose weight-gradient
    step sums the bias gradient -> its twin, read from the ``wgrad`` kernels of ``steps`` that
    write another node's bias gradient (the dump shows the same). The code generator launches
    from this, so the dump and the launches follow one decision."""
    writes = {m: set(k.writes) for st in steps for k in getattr(st, "kernels", (st,))
              if getattr(k, "kind", None) == "wgrad" for m in k.ops}
    return {a: b for a, b in twin_biases(graph).items()
            if f"d.{graph.by_name[b].params[1]}" in writes.get(a, ())}


def written_once(graph: Graph, flagged=frozenset()) -> frozenset[str]:
    """The nodes of :func:`twin_biases`' pairs, both members: the add's backward writes each one's
    gradient whole, once a step, and nothing else writes it -- with variable lengths too (the
    loops' ``skip``, codegen/tuning.py, leaves out the products of streams that ended, not the
    pointwise kernels that write these: zeros at padded steps; tests/test_unzeroed_gradients_sim.py)
    -- but not the nodes in ``flagged`` (node names, without ``d.``, whose gradients are handed
    between blocks as flagged words, passes/flag_exchange.py: their unwritten chunks are stored
    with their old values)."""
    return frozenset(m for pair in twin_biases(graph).items() for m in pair if m not in flagged)
