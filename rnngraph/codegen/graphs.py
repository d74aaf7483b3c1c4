"""Replaying a step's launches from a CUDA graph (stream capture on the numba stream).

A launch from Python costs about 18 us; the same kernel replayed from a captured graph about
1.2 us (ARCHITECTURE.md). :class:`Replay` runs a step's launches directly the first time (numba
compiles its kernels then), captures them into a graph the second time
(``cuStreamBeginCapture`` / ``cuStreamEndCapture`` / ``cuGraphInstantiate`` from
``cuda.bindings.driver`` on the numba stream's handle), and replays the graph afterwards
(``cuGraphLaunch``). Kernel arguments are baked into the graph, which is right here: a
compiled program's buffers never move. If capture fails, the step falls back to direct
launches and ``error`` says why. The simulator has no graphs: there it always launches directly.
"""
from __future__ import annotations


def driver():
    """``cuda.bindings.driver`` (imported on first use: the simulator has no driver)."""
    from cuda.bindings import driver as drv
    return drv


def check(result):
    """A driver call's result: RuntimeError for an error code, else its value (None if none)."""
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err}")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


class Replay:
    """Wraps ``run`` (a function launching kernels on ``stream``) so later calls replay a graph."""

    def __init__(self, run, stream, name: str = "step", enabled: bool = True):
        self.run, self.stream, self.name = run, stream, name
        self.enabled = enabled
        self.calls = 0
        self.exe = None
        self.error: str | None = None

    def __call__(self) -> None:
        self.calls += 1
        if self.exe is not None:
            check(driver().cuGraphLaunch(self.exe, self.stream.handle))
            return
        if not self.enabled or self.error is not None or self.calls == 1:
            self.run()
            return
        self._capture()

    def _capture(self) -> None:
        drv = driver()
        h = self.stream.handle
        try:
            check(drv.cuStreamBeginCapture(h, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        except Exception as e:  # capture unavailable: launch directly from now on
            self.error = f"{type(e).__name__}: {e}"
            self.run()
            return
        failure = None
        try:
            self.run()
        except Exception as e:
            failure = e
        try:
            graph = check(drv.cuStreamEndCapture(h))
            if failure is None:
                self.exe = check(drv.cuGraphInstantiate(graph, 0))
        except Exception as e:
            failure = failure or e
        if failure is not None or self.exe is None:
            self.error = f"{type(failure).__name__}: {failure}" if failure else "no graph"
            self.exe = None
            self.run()
            return
        check(drv.cuGraphLaunch(self.exe, h))
