"""Ctrl-C and SIGTERM deferred to the end of a training step (:class:`SigintGuard`), for ``rnngraph train``."""
from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a job scheduler's stop), raised where Ctrl-C raises
    KeyboardInterrupt so that it takes the same path (the step finished, a checkpoint written);
    :func:`exit_status` makes it 143 (128 + SIGTERM) where Ctrl-C is 130 (128 + SIGINT)."""


def exit_status(exc: KeyboardInterrupt) -> int:
    """The conventional exit status of a command stopped by ``exc``: 128 + the signal's number."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def stopped_word(exc: KeyboardInterrupt) -> str:
    """``"terminated"`` (SIGTERM) or ``"interrupted"`` (Ctrl-C), for the line a stopped command prints."""
    return "terminated" if isinstance(exc, Terminated) else "interrupted"


def _raise(signum: int):
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


class SigintGuard:
    """Defers Ctrl-C and SIGTERM out of a training step: while ``critical`` is set, a first signal
    only sets ``pending`` and :meth:`check` raises (KeyboardInterrupt, or :class:`Terminated` for
    SIGTERM) once the step is over (so the parameters are whole and can be saved); a second
    signal, or one outside a step, raises at once. Installed only in the main thread, for SIGINT
    where it has Python's default handler and for SIGTERM where it has the system's default
    (ignored or handled by someone else, each stays so)."""

    def __init__(self):
        self.critical = False
        self.pending = None  # the deferred signal's number
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
            for signum, default in defaults.items():
                if signal.getsignal(signum) is default:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum, frame):
        if self.critical and self.pending is None:
            self.pending = signum
            return
        _raise(signum)

    def check(self):
        if self.pending is not None:
            signum, self.pending = self.pending, None
            _raise(signum)
