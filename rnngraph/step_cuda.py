"""A TrainingStep on the CUDA backend (rnngraph/codegen/step.py): its backends, one per compiled
(T, S), and its training and forward calls.

A training call enqueues its inputs' copies, settles the call before the previous one (the
previous one too with an LSH head, data parallelism, or dropout in skip mode, whose masks its
step count seeds), enqueues the step behind the previous call and returns a
:class:`rnngraph.lazy_loss.LazyLoss`; the previous call's results reach
the step through ``TrainingOutcome._cuda_finished`` (rnngraph/step_outcome.py). An
``rg.LSHSoftmax`` head's index and sparse loss: ``step._lsh``, rnngraph/codegen/lsh_step.py.
"""
from __future__ import annotations

from .reference import mean_loss
from .step_forward import StepForward
from .step_lengths import step_result


def cuda_backend(step, schedule, params, tuning, share=None):
    """The CUDA backend of ``schedule`` for ``step`` (its optimizer, clip norm, dropout seed and
    backward flag); ``share``: the backend of another (T, S) of the step, whose parameters and
    optimizer slots it uses (``params`` is then None)."""
    from .codegen.step import CudaBackend
    backend = CudaBackend(schedule, params, step.optimizer, step.clip_norm, dropout_seed=step.seed, share=share,
                          tuning=tuning, backward=step.backward)
    backend.lsh = step._lsh  # an rg.LSHSoftmax head's DeviceLSHHead (codegen/lsh_step.py), or None
    return backend


def cuda_train(step, feed: dict):
    """One training call of ``step`` on its current CUDA backend; returns the LazyLoss."""
    backend = step._cuda
    # the previous call may still run while this one is enqueued (CudaBackend.train's overlap),
    # except where the host needs its outcome first: an LSH head's index follows its clock, a
    # gradient reducer's all-reduce is a host call, and the dropout masks are seeded by the step
    # count -- which counts the previous call before its outcome is known: right when it counts,
    # and in raise mode a call behind a failed one changes nothing, but in skip mode the call
    # behind a skipped one would draw the masks of the step after its own
    overlap = (not step._lsh and backend.gradient_reducer is None
               and (not step.dropout or step.nonfinite == "raise"))
    backend.feed(feed)  # before waiting for a previous call: its inputs are then on the GPU when it ends
    backend.settle(keep_last=overlap)
    if step.dropout:
        backend.train_masks(step.optimizer.steps, keep_last=overlap)
    columns, on_finish = step._loss_columns(feed), step._cuda_finished
    if step._lsh:  # the index built or rebuilt on the clock, before the replay; the clock told when finite
        step._lsh.before_call(backend)
        on_finish = step._lsh.counting(columns, on_finish)
    return backend.train(None, columns, on_finish=on_finish, overlap=overlap, chain=step.nonfinite == "raise")


def cuda_forward(step, feed: dict, names, carry: bool, all_values: bool, with_loss: bool) -> StepForward:
    """One forward call of ``step`` on its current CUDA backend, without dropout (masks of ones)."""
    if step.dropout:
        step._cuda.ones_masks()
    values, states, final = step._cuda.forward(feed, names, carry, every_value=all_values)
    loss = mean_loss(values[step.graph.loss], step._loss_columns(feed)) if with_loss else None
    return step_result(step.net, step._masked, values, loss, states, final, all_values)
