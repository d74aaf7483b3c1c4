"""The loss op of the LSH-sparsified output layer (``rg.LSHSoftmax``, rnngraph/lsh_head.py):
``lsh_softmax_xent(h, y)`` with parameters W (classes, n) and b (classes,).

As a graph op it is the *dense* layer: logits W h + b over all classes and the softmax
cross-entropy of ``chunked_softmax_xent`` with one chunk of all classes (the same values and
gradients as ``linear`` then ``softmax_xent``). That is what evaluation runs (``step.forward``, a
loss without training), as G-SLIDE (Pan et al., IEEE TPDS 2022) evaluates P@1 with the dense
layer. A training call replaces it, for that call only, by the sparse softmax over each column's
LSH active set (SLIDE, Chen et al., MLSys 2020): rnngraph/lsh_train.py on the NumPy backend,
rnngraph/codegen/lsh_step.py on CUDA, whose dense launchers (``cuda_loss``, codegen/losses.py: the
chunked softmax cross-entropy over all classes) serve evaluation. The attributes K, L and
min_active (and batch_labels when set) are the head's :class:`rnngraph.lsh.LSHConfig`'s, for the
schedule dump and the cost model; the rest of the config stays with the head.
"""
from __future__ import annotations

from .errors import ShapeError
from .ops_losses import chunked_backward, chunked_forward, chunked_ids, chunked_params
from .ops_registry import Op, node_label, register

#: the op's name, which the schedule dump, the cost model and the backends look for
LSH_OP = "lsh_softmax_xent"


def _shape(node, args, params):
    at = node.attr
    for key in ("K", "L", "min_active"):
        value = at.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "min_active" else 1):
            raise ShapeError(f"{node_label(node)}: attribute {key} = {value!r} must be a "
                             f"{'non-negative' if key == 'min_active' else 'positive'} integer (the LSHConfig's)")
    return chunked_params(node, args, params)


def _dense(at: dict, ps) -> dict:
    """The attributes of the one-chunk dense computation."""
    return {**at, "chunk": ps[0].shape[0]}


def _forward(xs, ps, at):
    return chunked_forward(xs, ps, _dense(at, ps))


def _vjp(g, y, xs, ps, at):
    return chunked_backward(g, y, xs, ps, _dense(at, ps))


def lsh_setting(g, node) -> tuple[int, int, int] | None:
    """(K, L, min_active) of an ``lsh_softmax_xent`` node; None for any other node."""
    if node.op != LSH_OP:
        return None
    at = node.attr
    return at["K"], at["L"], at["min_active"]


def lsh_text(g, node) -> str:
    """The schedule dump's note for a kernel of an LSH head: ``   [LSH: K=6 L=50 tables, min
    active 1500 of V classes]`` (``+ the batch's labels`` added with ``batch_labels``; ``all V
    classes active (min_active M)`` where M >= V), or '' for any other node."""
    found = lsh_setting(g, node)
    if found is None:
        return ""
    K, L, least = found
    classes = g.param_by_name[node.params[0]].shape[0]
    shared = " + the batch's labels" if node.attr.get("batch_labels") else ""
    if least >= classes:   # the padding is capped at the classes: the head trains densely
        return f"   [LSH: K={K} L={L} tables, all {classes} classes active (min_active {least}){shared}]"
    return f"   [LSH: K={K} L={L} tables, min active {least} of {classes} classes{shared}]"


def active_estimate(g, node) -> int:
    """Active classes a column the cost model assumes for an LSH head: min(min_active, classes)
    (the buckets' union may add more)."""
    return min(node.attr["min_active"], g.param_by_name[node.params[0]].shape[0])


# lsh_softmax_xent(h, y), params W (classes, n) and b (classes,), attributes K, L, min_active and
# optionally batch_labels and ignore_index (as softmax_xent): evaluated densely; trained sparsely (both backends).
register(Op(LSH_OP, "loss", _shape, _forward, _vjp, (2, 2), ids=chunked_ids,
            cuda_loss=("run_lsh_softmax_xent", "run_lsh_softmax_xent_grad")))
