"""The training side of ``rg.LSHSoftmax`` on the NumPy backend (the CUDA backend's:
rnngraph/codegen/lsh_step.py, chosen by :func:`lsh_training`): the LSH index of the head's
weights and the sparse loss that stands in for the dense ``lsh_softmax_xent`` during a training
call (G-SLIDE, Pan et al., IEEE TPDS 2022; SLIDE, Chen et al., MLSys 2020).

For the N = T*S columns of a call (or of a timestep, where a plan runs the loss per timestep),
with query h_i (n,), label y_i and active set A_i (rnngraph/lsh/active.py, y_i included):

    z_a = W[a] . h_i + b[a],   loss_i = -log softmax_{A_i}(z)[y_i]                  (a in A_i)
    dz_a = g_i (p_a - [a = y_i]),  dh_i = sum_a dz_a W[a],  dW[a] += dz_a h_i,  db[a] += dz_a

A column whose target is ignored (padding) has loss 0 and no gradient. The executors call the
stand-in's forward, then in backward its VJP with the same columns: the active sets of each
forward call are kept (keyed by the columns' values, last in first out) until that VJP.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from .lsh import LSHIndex, Ragged
from .lsh.sparse_layer import active_logits, add_rows_at, segment_log_softmax
from .ops import REGISTRY, Op


def lsh_training(head, graph, device: str):
    """The training side of the ``rg.LSHSoftmax`` ``head`` of a step of ``graph`` on ``device``:
    an :class:`LSHTraining` (``"cpu"``) or a :class:`rnngraph.codegen.lsh_step.DeviceLSHHead`
    (``"cuda"``; GraphError naming the head for a densified config)."""
    if device == "cuda":
        from .codegen.lsh_step import DeviceLSHHead
        return DeviceLSHHead(head, graph)
    return LSHTraining(head, graph)


class LSHTraining:
    """The index and the sparse training loss of one ``rg.LSHSoftmax`` head of a TrainingStep.

    head: the :class:`rnngraph.lsh_head.LSHSoftmax`; graph: the network's graph (its loss node
    names the parameters W (classes, n) and b (classes,)).
    """

    def __init__(self, head, graph):
        node = graph.by_name[graph.loss]
        self.head, self.weight, self.bias = head, node.params[0], node.params[1]
        self.classes, self.dim = graph.param_by_name[self.weight].shape
        self.index: LSHIndex | None = None
        self.stale = True  # rebuild from the weights before the next training call
        self._kept: dict[bytes, list] = {}
        dense = REGISTRY[node.op]
        self.op = Op(dense.name, "loss", dense.shape, self._forward, self._vjp, dense.n_params, ids=dense.ids)

    @contextmanager
    def training(self, executor, params: dict):
        """Within the block, ``executor`` (a NumPy backend) runs its loss node sparsely over
        active sets from the index of ``params``' current weights (built first when stale)."""
        if self.index is None:
            self.index = LSHIndex(self.head.config, self.dim, self.classes, self.head.seed)
        if self.stale:
            self.index.rebuild(params[self.weight])
            self.stale = False
        loss = executor.graph.loss
        executor.overrides[loss] = self.op
        try:
            yield
        finally:
            del executor.overrides[loss]
            self._kept.clear()

    def after_update(self, columns: int, params: dict) -> tuple[bool, bool]:
        """After the optimizer's update of a call that trained ``columns`` columns: rebuilds the
        tables from the current weights when the clock says so (new bins too when due);
        returns (rebuilt, redrawn)."""
        if columns < 1 or self.index is None:
            return False, False
        return self.index.after_batch(columns, params[self.weight])

    # ------------------------------------------------------------------ the stand-in op
    @staticmethod
    def _key(h, ids) -> bytes:
        return h.tobytes() + ids.tobytes()

    def _forward(self, xs, ps, at):
        h, ids = xs
        w, b = ps
        y = ids[:, 0]
        keep = np.ones(y.shape, bool) if at.get("ignore_index") is None else y != at["ignore_index"]
        offsets = np.zeros(y.size + 1, np.int64)
        offsets[1:] = np.cumsum(keep)
        active = self.index.query(h, Ragged.of(y[keep], offsets, "targets"))
        rows = active.rows
        t = ((active.ids == y[rows]) & keep[rows]).astype(h.dtype)  # the label: one entry a kept column
        log_p = segment_log_softmax(active_logits(h, w, b, active), active)
        self._kept.setdefault(self._key(h, ids), []).append((active, t, np.exp(log_p)))
        loss = -np.bincount(rows, weights=t * log_p, minlength=y.size)
        return loss[:, None].astype(h.dtype, copy=False)

    def _vjp(self, g, y, xs, ps, at):
        h, ids = xs
        w, b = ps
        active, t, p = self._kept[self._key(h, ids)].pop()
        rows, act = active.rows, active.ids
        dz = g[rows, 0] * (p * np.bincount(rows, weights=t, minlength=h.shape[0])[rows] - t)
        gh = add_rows_at(np.zeros_like(h), rows, dz[:, None] * w[act])
        gw = add_rows_at(np.zeros_like(w), act, dz[:, None] * h[rows])
        gb = np.bincount(act, weights=dz, minlength=w.shape[0]).astype(b.dtype, copy=False)
        return [gh, None], [gw, gb]
