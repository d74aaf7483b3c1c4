"""What a training call leaves behind: the gradient norm, the windows skipped as not finite, and the
non-finite policy (raise or skip) -- for :class:`rnngraph.runtime.TrainingStep`, whose mixin this is.

On the GPU a call's results arrive when it is settled (rnngraph/lazy_loss.py): reading
``last_grad_norm`` or ``skipped_steps`` settles the step's last call first. The mixin uses the
step's ``_cuda`` (the CUDA backend or None), ``nonfinite``, ``optimizer`` and ``_carried_nonfinite``
(rnngraph/step_state.py: the error then names the carried states, not the inputs, as the cause).
"""
from __future__ import annotations


class TrainingOutcome:
    """Mixin of ``TrainingStep``: the last call's gradient norm, the skipped-window count and the
    non-finite policy."""

    def _cuda_finished(self, loss: float, finite: bool, grad_norm: float) -> float:
        """A GPU training call's results, taken when it is settled (rnngraph/lazy_loss.py)."""
        self._last_grad_norm = grad_norm
        if finite:  # its final states carry on (read on the host only when a forward or an assignment sets them)
            self._carried_nonfinite = False
        return loss if finite else self._not_finite(loss)

    def _settle(self) -> None:
        """Wait for the last GPU training call and take its results (may raise its FloatingPointError)."""
        if self._cuda:
            self._cuda.settle()

    @property
    def skipped_steps(self) -> int:
        """Training calls skipped as not finite (``nonfinite="skip"``)."""
        self._settle()
        return self._skipped_steps

    @skipped_steps.setter
    def skipped_steps(self, value: int) -> None:
        self._skipped_steps = value

    @property
    def last_grad_norm(self) -> float | None:
        """The global gradient norm (before clipping) of the last training call, None before one."""
        self._settle()
        return self._last_grad_norm

    @last_grad_norm.setter
    def last_grad_norm(self, value: float | None) -> None:
        self._last_grad_norm = value

    def _not_finite(self, loss: float) -> float:
        """After a training call whose loss or gradients were not finite (nothing changed):
        FloatingPointError, or with ``nonfinite="skip"`` count it and return the loss."""
        if self.nonfinite == "skip":
            self._skipped_steps += 1
            return loss
        cause = ("the states it started from, carried from the previous call, are not finite: a forward(..., "
                 "carry=True) on a NaN or inf input or an assigned step.state left them so; reset them with "
                 "step.reset_state() or assign step.state"
                 if self._carried_nonfinite else
                 "a NaN or inf in the inputs, targets or parameters, or a too-large learning rate")
        raise FloatingPointError(
            f"training call after step {self.optimizer.steps}: the loss is {loss} and the gradient norm "
            f"{self.last_grad_norm}: not finite ({cause}); parameters, optimizer state and states are unchanged "
            f"(rg.compile(nonfinite='skip') skips such windows and counts them in step.skipped_steps)")
