"""The training calls a CUDA backend has enqueued and not yet settled (codegen/step.py
``CudaBackend.train``): at most two, because a call may be enqueued behind the previous one
before that one's outcome is known (its ``overlap``). The host's step count already counts them;
settling a call takes its results in order and takes its step back where it did not count.

In ``nonfinite="raise"`` mode a call enqueued behind another has its finite check chained to that
one's flag on the device: when that one fails, the call behind changes nothing, and the host
marks it cancelled (:class:`Call`), takes its step back, and its loss raises
:class:`rnngraph.lazy_loss.NotApplied` when read. Settling never raises NotApplied: the call
before it raised the error.
"""
from __future__ import annotations

from ..lazy_loss import LazyLoss, NotApplied


class Call:
    """What the host knows of an unsettled training call: ``next``, the call enqueued behind it
    with its finite check chained to this one's (raise mode); ``cancelled``, whether the device
    withheld this call because the call before it failed."""

    __slots__ = ("next", "cancelled")

    def __init__(self):
        self.next: Call | None = None
        self.cancelled = False


def _settled(loss: LazyLoss | None) -> FloatingPointError | None:
    """Settle ``loss``'s call (None: nothing) if it is not yet; its FloatingPointError, if it
    raised one now (NotApplied excepted)."""
    if loss is None or loss.ready:
        return None
    try:
        loss.item()
    except NotApplied:
        return None
    except FloatingPointError as e:
        return e
    return None


class UnsettledCalls:
    """The last training call (``last``, its :class:`Call` ``last_call``) and the one before it
    (``before_last``) while unsettled, of a step whose count is ``optimizer.steps``."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.last: LazyLoss | None = None
        self.last_call: Call | None = None
        self.before_last: LazyLoss | None = None

    def settle(self, keep_last: bool = False) -> None:
        """Wait for the unsettled calls and take their results, once each, in order; raises the
        first FloatingPointError one raises (never NotApplied). With ``keep_last`` the last call
        may stay unsettled, unless an earlier one raised. An exception other than a
        FloatingPointError (e.g. KeyboardInterrupt while waiting) leaves the call to settle again."""
        older, self.before_last = self.before_last, None
        try:
            error = _settled(older)
        except BaseException:
            self.before_last = older if older is not None and not older.ready else None
            raise
        if error is not None or not keep_last:
            last, self.last = self.last, None
            try:
                error = error or _settled(last)
            except BaseException:
                self.last = last if last is not None and not last.ready else None
                raise
        if error is not None:
            raise error

    def previous(self, overlap: bool) -> tuple[LazyLoss | None, Call | None]:
        """Before a new call is enqueued (the one before the last settled): the call it goes
        behind and what is known of it, or (None, None) where it waits for nothing -- without
        ``overlap``, when the last call is settled, or when it was cancelled (its outcome is then
        known: it is settled here)."""
        prev = prev_call = None
        if overlap and self.last is not None and not self.last.ready:
            if self.last_call.cancelled:
                self.settle()
            else:
                prev, prev_call = self.last, self.last_call
        self.before_last, self.last = prev, None
        return prev, prev_call

    def add(self, loss: LazyLoss, call: Call) -> None:
        """The call just enqueued."""
        self.last, self.last_call = loss, call

    def cancel(self, call: Call | None) -> None:
        """Mark ``call`` (if any) withheld by the device and take its step back, once."""
        if call is not None and not call.cancelled:
            call.cancelled = True
            self.optimizer.steps -= 1


__all__ = ["Call", "UnsettledCalls"]
