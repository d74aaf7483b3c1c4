"""Variable-length windows in ``rg.compile``'s training step: ``step.train(inputs, targets,
lengths=)`` and ``step.forward(..., lengths=)``.

A call with lengths (S,) (integers in [0, T], host data, any order; rnngraph/lengths.py checks
them) runs the network's variable-length graph (``Sequential.masked_graph``): each stream's
state stops at its last valid step, so the state carried into the next window is the state at
its length (the state it came in with for a length of 0), the cells' outputs past the length
are zero, and no gradient flows through a padded step (PyTorch's packed sequences, as
``rg.compile_rnn``). The loss leaves the padded steps out, per head:

- SequenceClassifier: each stream's label sits at its last valid step (t = length - 1); a
  stream of length 0 has none and is not counted in the mean over streams;
- SoftmaxCrossEntropy: the padded steps' targets are replaced by the ignored id (the head's
  ``ignore_index``, or for a head without one an id the masked graph ignores, never a class
  id), so the mean is over the counted columns (CrossEntropyLoss(ignore_index=...));
- MSE: the prediction is zero past each length (the cells' masked output, or for ``rg.MSE(n)``
  the projection masked the same way) and the padded steps' targets are replaced by zero, so a
  padded element adds exactly 0 to the loss and its gradient; the mean is over the valid
  elements, sum(lengths) * n (nn.MSELoss(reduction="mean") over the packed elements).

Whatever the padding of the inputs or the targets holds (NaN, out-of-range ids) reaches nothing:
padded float inputs are zeroed (:func:`rnngraph.lengths.zero_padded_steps`) and padded targets
replaced before anything reads them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import shape_of
from .errors import ShapeError
from .heads import MSE, NO_LABEL, PADDED_TARGET, SequenceClassifier, SoftmaxCrossEntropy, host_array
from .lengths import check_lengths, is_cuda_tensor, length_masks, valid_steps, zero_padded_steps
from .network import Sequential
from .reference import loss_columns, mean_loss
from .step_forward import StepForward, step_forward

__all__ = ["LengthsFeed", "host_loss", "lengths_feed", "masked_step_forward", "padded", "step_result"]


@dataclass
class LengthsFeed:
    """What a call with lengths feeds the masked graph: ``feed`` (input name -> array: ``x``
    with its padded steps zeroed, ``y`` the head's targets with padded steps replaced, the
    masks ``lengths.mask<size>`` (T, S, size) in the step's dtype), ``columns``, what the
    window's mean loss divides by (None without targets), and ``valid`` (T, S) NumPy, the valid
    steps the masks were made from (rnngraph.lengths.valid_steps)."""

    feed: dict
    columns: int | None
    valid: np.ndarray


def padded(lengths, T: int, S: int) -> np.ndarray | None:
    """Checked ``lengths`` (int64 (S,)), or None when there are none or every one is T (the
    plain graph then computes the same). Raises what :func:`rnngraph.lengths.check_lengths`
    raises, naming ``lengths``."""
    if lengths is None:
        return None
    lengths = check_lengths(lengths, T, S)
    return None if np.all(lengths == T) else lengths


def lengths_feed(net: Sequential, lengths: np.ndarray, inputs, targets, dtype: str) -> LengthsFeed:
    """The masked graph's feed for a window of ``inputs`` ((T, S) ids or (T, S, I) floats)
    with checked ``lengths`` (S,) int64 and the head's ``targets`` (None: a forward without
    targets, fed blank targets). Raises ShapeError naming ``targets`` for a wrong shape, dtype
    or (at a valid step) a class id outside [0, classes)."""
    g = net.masked_graph
    T, S = shape_of(inputs)[0], len(lengths)
    valid = valid_steps(lengths, T, None, dtype)  # (T, S) NumPy: the masks are fed from the host
    on_device = valid_steps(lengths, T, inputs, dtype) if is_cuda_tensor(inputs) else valid
    x = zero_padded_steps(inputs, on_device)  # a CUDA tensor on its own device
    feed = {"x": x, **length_masks(g, valid)}
    head, columns = net.head, None
    if head is not None:
        width = g.by_name["y"].size
        if targets is None:
            feed["y"] = head.blank(T, S, width)
        else:
            feed["y"], columns = _targets(head, g, targets, lengths, valid, T, S, width)
    return LengthsFeed(feed, columns, valid)


def _targets(head, g, targets, lengths, valid, T, S, width):
    """(``y`` for the masked graph, the columns its mean divides by)."""
    keep = valid > 0
    if isinstance(head, SequenceClassifier):
        y = head.feed(targets, T, S, width, last=np.maximum(lengths - 1, 0))
        y[:, lengths == 0] = NO_LABEL  # no step, no label: not counted
    elif isinstance(head, SoftmaxCrossEntropy):
        y = host_array(head.feed(targets, T, S, width)).astype(np.int64)
        ignore = PADDED_TARGET if head.ignore_index is None else head.ignore_index
        bad = keep & ((y < 0) | (y >= head.vocab)) & (y != ignore)
        if bad.any():
            t, s = (int(i[0]) for i in np.nonzero(bad))
            raise ShapeError(f"targets[{t}, {s}] = {int(y[t, s])} is not a class id in [0, {head.vocab})"
                             + ("" if head.ignore_index is None else f" nor the ignore_index {ignore}")
                             + f" (stream {s} has length {int(lengths[s])})")
        y = np.where(keep, y, ignore)
    elif isinstance(head, MSE):
        y = host_array(head.feed(targets, T, S, width))
        y = np.where(keep[:, :, None], y, y.dtype.type(0))
        return y, int(np.count_nonzero(keep))
    else:  # pragma: no cover - every head is above
        raise TypeError(f"lengths= with a {type(head).__name__} head")
    return y, loss_columns(g, lambda name: y, T * S)


def host_loss(executor, fwd, columns: int | None) -> tuple[float, float]:
    """(the window's mean loss, the ``loss_scale`` of its backward) for the NumPy backend's
    Forward ``fwd``, whose own loss divides by the executor's count of columns: ``columns``
    (None: that count) is what it should divide by; the scale makes the backward's seed
    1/columns (0 when no column counts)."""
    count = executor.loss_columns(fwd.values)
    if columns is None or columns == count:
        return fwd.loss, 1.0
    return mean_loss(fwd.values[executor.graph.loss], columns), (count / columns if columns else 0.0)


def step_result(net: Sequential, masked: bool, values: dict, loss, states: dict, final: dict,
                all_values: bool) -> StepForward:
    """The StepForward of a run of the network graph or, with ``masked``, of its
    variable-length graph (:func:`masked_step_forward`)."""
    if masked:
        return masked_step_forward(net, values, loss, states, final, all_values)
    return step_forward(net.graph, values, loss, states, final)


def masked_step_forward(net: Sequential, values: dict, loss, states: dict, final: dict,
                        all_values: bool) -> StepForward:
    """A :class:`StepForward` of a masked-graph run keyed as a plain one: ``outputs`` by the
    network graph's output names (the masked graph's output of rg.MSE() is the cells' masked
    output ``layerK.y_masked``: it is reported under the plain output's name). ``values`` the
    same (and the loss node's per-column losses) unless ``all_values``: then every node of the
    masked graph under its own name (``layerK.h_next`` the cell's value before masking)."""
    plain, masked = net.graph.outputs, net.masked_graph.outputs
    outputs = {p: values[m] for p, m in zip(plain, masked)}
    if not all_values:
        rename = dict(zip(masked, plain))
        values = {rename.get(k, k): v for k, v in values.items()}
    return StepForward(outputs, values, loss, states, final)
