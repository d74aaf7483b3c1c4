"""What a TrainingStep feeds its graph: the inputs and targets of a call, checked and converted,
the count of columns its mean loss divides by, and the dropout masks -- for
:class:`rnngraph.runtime.TrainingStep`, whose mixin this is.

The mixin uses the step's ``net``, ``graph``, ``dtype``, ``window``, ``streams``, ``dropout``,
``seed``, ``optimizer``, ``stream_shard`` (rnngraph/distributed.py), ``_cuda`` (the CUDA backend
or None), ``_ones``, ``_columns`` and ``_use``.
"""
from __future__ import annotations

import numpy as np

from .arrays import shape_of
from .heads import host_array
from .ir import INDEX
from .lengths import stream_order
from .masks import draw_mask, mask_seed
from .reference import check_ids, check_real, id_limits, loss_columns
from .step_lengths import lengths_feed, padded


class StepFeed:
    """Mixin of ``TrainingStep``: a call's feed (checked inputs, targets, lengths) and its masks."""

    def dropout_masks(self, train: bool) -> dict[str, np.ndarray]:
        """The masks the next :meth:`train` (``train=True``) or :meth:`forward` call feeds, as
        host arrays: mask name -> (T, S, width). The CUDA backend on a GPU with CuPy draws its
        training masks on the device instead (see the class docstring)."""
        shape = lambda name: (self.window, self.streams, self.graph.by_name[name].size)  # noqa: E731
        if not train:
            if self._ones is None:
                self._ones = {m: np.ones(shape(m), self.dtype) for m in self.dropout}
            return self._ones
        step, shard = self.optimizer.steps, self.stream_shard
        if shard is not None and shard[1] - shard[0] == self.streams:  # this process's streams of the global S
            lo, hi, total = shard
            return {m: draw_mask(p, (self.window, total, self.graph.by_name[m].size), mask_seed(self.seed, step, k),
                                 self.dtype)[:, lo:hi].copy() for k, (m, p) in enumerate(self.dropout.items())}
        return {m: draw_mask(p, shape(m), mask_seed(self.seed, step, k), self.dtype)
                for k, (m, p) in enumerate(self.dropout.items())}

    def _feed(self, inputs, targets, lengths=None) -> dict:
        shape = shape_of(inputs)
        if len(shape) < 2 or shape[0] < 1 or shape[1] < 1:
            raise ValueError(f"inputs: expected (T, S) token ids or (T, S, n) floats with T, S >= 1, "
                             f"got shape {shape}")
        T, S = shape[:2]
        lengths, graph, self._columns, valid = padded(lengths, T, S), self.graph, None, None
        if lengths is not None:  # the variable-length graph (rnngraph/step_lengths.py)
            graph, masked = self.net.masked_graph, lengths_feed(self.net, lengths, inputs, targets, self.dtype)
            feed, self._columns, valid = masked.feed, masked.columns, masked.valid
        elif self.net.head is not None:  # the targets are checked before the step switches to their (T, S)
            width, head = self.graph.by_name["y"].size, self.net.head
            feed = {"x": inputs, "y": head.blank(T, S, width) if targets is None else head.feed(targets, T, S, width)}
        else:
            feed = {"x": inputs}
        if self._cuda is None:
            feed = {k: np.asarray(v) for k, v in feed.items()}
        else:  # the NumPy backend checks inside; host arrays bound for the GPU are checked here
            for name, (limit, ignore) in id_limits(graph).items():
                if name in feed and not hasattr(feed[name], "__cuda_array_interface__"):
                    check_ids(name, np.asarray(feed[name]), limit, ignore)
            for n in graph.inputs:
                if n.name in feed and n.dtype != INDEX and not hasattr(feed[n.name], "__cuda_array_interface__"):
                    check_real(n.name, np.asarray(feed[n.name]))
        self._use(T, S, lengths is not None)
        if valid is not None and self._cuda is not None:  # the loops skip the streams that ended
            self._cuda.set_stream_order(*stream_order(valid))
        return feed

    def _loss_columns(self, feed: dict) -> int:
        """The columns the window's mean loss divides by (all T*S, less ignored targets; with
        lengths, less the padded steps)."""
        if self._columns is not None:
            return self._columns
        return loss_columns(self.graph, lambda name: host_array(feed[name]), self.window * self.streams)
