"""Ctrl-C deferred to the end of a training step (:class:`SigintGuard`), for ``rnngraph train``."""
from __future__ import annotations

import signal
import threading


class SigintGuard:
    """Defers Ctrl-C out of a training step: while ``critical`` is set, a first SIGINT only sets
    ``pending`` and :meth:`check` raises KeyboardInterrupt once the step is over (so the
    parameters are whole and can be saved); a second SIGINT, or one outside a step, raises at
    once. Installed only in the main thread and where SIGINT has Python's default handler."""

    def __init__(self):
        self.critical = self.pending = False
        self._previous = None

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum, frame):
        if self.critical and not self.pending:
            self.pending = True
            return
        raise KeyboardInterrupt

    def check(self):
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt
