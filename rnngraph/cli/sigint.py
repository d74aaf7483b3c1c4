"""Ctrl-C and SIGTERM deferred to the end of a training step (:class:`SigintGuard`), for ``rnngraph train``."""
from __future__ import annotations

import contextlib
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


def _terminate(signum, frame):
    """SIGTERM's handler under :func:`sigterm_raises`: :class:`Terminated` at once, as Python's
    default SIGINT handler raises KeyboardInterrupt."""
    raise Terminated


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_raises():
    """Inside the block SIGTERM raises :class:`Terminated` wherever it lands, as Ctrl-C raises
    KeyboardInterrupt, so that ``rnngraph train`` stopped while it sets up (before its first step)
    prints one line, ``rnngraph: terminated``, and exits 143, as Ctrl-C there prints ``rnngraph:
    interrupted`` and exits 130 (rnngraph/cli/__init__.py), instead of dying silently; during the
    steps :class:`SigintGuard` defers it. Installed only in the main thread where SIGTERM has the
    system's default handler (ignored or handled by someone else, it stays so)."""
    previous = None
    if _main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class SigintGuard:
    """Defers Ctrl-C and SIGTERM out of a training step: while ``critical`` is set, a first signal
    only sets ``pending`` and :meth:`check` raises (KeyboardInterrupt, or :class:`Terminated` for
    SIGTERM) once the step is over (so the parameters are whole and can be saved); a second
    signal, or one outside a step, raises at once. Installed only in the main thread, for SIGINT
    where it has Python's default handler and for SIGTERM where it has the system's default or
    :func:`sigterm_raises`'s (ignored or handled by someone else, each stays so)."""

    def __init__(self):
        self.critical = False
        self.pending = None  # the deferred signal's number
        self._previous = {}

    def __enter__(self):
        if _main_thread():
            defaults = {signal.SIGINT: (signal.default_int_handler,), signal.SIGTERM: (signal.SIG_DFL, _terminate)}
            for signum, handlers in defaults.items():
                if any(signal.getsignal(signum) is h for h in handlers):
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
