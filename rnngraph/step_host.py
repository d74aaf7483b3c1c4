"""A TrainingStep on the NumPy backend (rnngraph/executor.py): its training and forward calls.

A training call runs the forward and the backward of the schedule, then the gradient norm, the
non-finite check, clipping and the optimizer's update. Two hooks join in where the step has them:
an ``rg.LSHSoftmax`` head's sparse training loss and index (``step._lsh``, rnngraph/lsh_train.py)
and, in data-parallel training, the all-reduce of the loss and gradients
(``step.gradient_reducer``, rnngraph/distributed.py).
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from .optim import clip_grad_norm
from .step_forward import StepForward
from .step_lengths import host_loss, step_result


def host_train(step, feed: dict) -> float:
    """One training call of ``step`` on its NumPy executor; returns the window's mean loss."""
    if step.dropout:
        feed.update(step.dropout_masks(train=True))
    # A NaN or inf in the inputs, targets, parameters or states makes the loss or the gradient norm not
    # finite, which the check below reports (step._not_finite): NumPy's warnings about it on the way are
    # silenced here, so that the error is all the user sees, and only here, up to the check.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        fwd, grads = _loss_and_gradients(step, feed)
        squares = sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values())
        step.last_grad_norm = float(np.sqrt(squares))
    if not (np.isfinite(fwd.loss) and np.isfinite(step.last_grad_norm)):
        return step._not_finite(fwd.loss)
    if step.clip_norm is not None:
        clip_grad_norm(grads, step.clip_norm)
    step.optimizer.step(step._params, grads)
    step._state = fwd.final_states
    step._note_carried(step._state)
    if step._lsh:
        step._lsh.after_update(step._loss_columns(feed), step._params)
    return fwd.loss


def _loss_and_gradients(step, feed: dict):
    """The forward and the backward of one training call: ``(fwd, gradients)``, its loss in ``fwd.loss``
    (with data parallelism the global batch's mean loss and gradients, on every process)."""
    with step._lsh.training(step._executor, step._params) if step._lsh else nullcontext():
        fwd = step._executor.forward(step._params, feed, step._state)
        fwd.loss, scale = host_loss(step._executor, fwd, step._columns)
        grads = step._executor.backward(fwd, loss_scale=scale).params
    if step.gradient_reducer is not None:
        fwd.loss, grads = step.gradient_reducer(fwd.loss, grads, step._loss_columns(feed))
    return fwd, grads


def host_forward(step, feed: dict, names, carry: bool, all_values: bool, with_loss: bool) -> StepForward:
    """One forward call of ``step`` on its NumPy executor, without dropout (masks of ones)."""
    if step.dropout:
        feed.update(step.dropout_masks(train=False))
    fwd = step._executor.forward(step._params, feed, step._state)
    if carry:
        step._state = fwd.final_states
    final = {k: v.copy() for k, v in fwd.final_states.items()}  # the step's own stay apart
    loss = host_loss(step._executor, fwd, step._columns)[0] if with_loss else None
    return step_result(step.net, step._masked, {name: fwd.values[name] for name in names}, loss, fwd.states,
                       final, all_values)
