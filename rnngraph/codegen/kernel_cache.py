"""Compiled kernels persist across processes: numba-cuda's disk cache, checked and keyed by rnngraph.

Every CUDA kernel rnngraph launches -- the generated modules' persistent loop and pointwise
kernels (codegen/module.py writes them to content-hashed files) and the library's kernels
(optimizer, clipping, embedding, losses, layer norm) -- goes through :func:`cached`, which gives
its numba dispatcher a :class:`CheckedCache`: numba-cuda's own ``CUDACache`` (the cubin and PTX of
each signature, per compute capability, under the source file's ``__pycache__`` or numba's user
cache directory; an entry is stale when the file's modification time or size changes, or the
numba / numba-cuda version does) with three additions:

- the index key also holds :func:`toolchain_key`, a hash of rnngraph's code-generator sources:
  a kernel that calls device functions of another file (``grid_barrier``, ``flag_exchange``,
  ``reductions``) is recompiled when that file changes, which numba's per-file stamp misses;
- a cache entry that cannot be read back (a truncated or corrupt file, a pickle of another
  version) is dropped and the kernel compiled again: numba-cuda 0.30 raises there instead;
- a failed write (read-only or full disk) leaves the kernel compiled in memory and the run going.

Writes are numba's: a temporary file renamed over the entry, so concurrent processes writing the
same entry are safe (the last rename wins; both files are complete).

Per kernel it counts cache hits and misses and the seconds spent compiling or loading
(:func:`compile_stats`) and logs each to the ``rnngraph.compile`` logger (the CLI shows them with
``RNNGRAPH_DEBUG=1``). In numba's CUDA simulator nothing is compiled: :func:`cached` returns the
kernel unchanged.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from .device import in_simulator

__all__ = ["CompileRecord", "cached", "compile_stats", "toolchain_key"]

log = logging.getLogger("rnngraph.compile")

_KEY: str | None = None


def toolchain_key() -> str:
    """A sha256 prefix over the sources of ``rnngraph/codegen`` (what generated kernels import and
    how they are generated) and the numba and numba-cuda versions; computed once per process."""
    global _KEY
    if _KEY is None:
        import numba
        try:
            import numba_cuda
            cuda_version = numba_cuda.__version__
        except ImportError:  # numba's bundled CUDA target
            cuda_version = "bundled"
        h = hashlib.sha256(f"numba {numba.__version__} numba-cuda {cuda_version}".encode())
        for path in sorted(Path(__file__).parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _KEY = h.hexdigest()[:16]
    return _KEY


@dataclass
class CompileRecord:
    """One kernel's compilations in this process: ``hits`` signatures loaded from the disk cache,
    ``misses`` compiled; ``seconds`` (wall, s) spent on both; ``file`` the source file it lives in."""
    name: str
    file: str
    hits: int = 0
    misses: int = 0
    seconds: float = 0.0


_STATS: dict[tuple[str, str], CompileRecord] = {}


def compile_stats() -> list[CompileRecord]:
    """Every cached kernel that compiled or loaded a signature in this process, in first-use order."""
    return [r for r in _STATS.values() if r.hits or r.misses]


def _cache_class():
    from numba.cuda.cudadrv.error import CudaDriverError, CudaSupportError
    from numba.cuda.dispatcher import CUDACache

    class CheckedCache(CUDACache):
        """numba-cuda's CUDACache keyed also by :func:`toolchain_key`, dropping unreadable entries,
        surviving failed writes, and timing each kernel (see the module docstring)."""

        def __init__(self, py_func):
            super().__init__(py_func)
            self.record = _STATS.setdefault((py_func.__code__.co_filename, py_func.__qualname__),
                                            CompileRecord(py_func.__qualname__, py_func.__code__.co_filename))
            self._started = None

        def _index_key(self, sig, codegen):
            return super()._index_key(sig, codegen) + (("rnngraph", toolchain_key()),)

        def load_overload(self, sig, target_context):
            self._started = time.perf_counter()
            try:
                kernel = super().load_overload(sig, target_context)
            except (CudaDriverError, CudaSupportError):  # the device, not the entry
                raise
            except Exception as e:  # truncated, corrupt or foreign entry: compile again
                log.warning("rnngraph: the cached %s in %s could not be read (%s: %s); compiling it again",
                            self.record.name, self._cache_path, type(e).__name__, e)
                self.flush()
                kernel = None
            if kernel is not None:
                self._done(hit=True)
            return kernel

        def has_entry(self, sig, target_context) -> bool:
            """Whether the index holds ``sig`` (nothing is loaded; False when it cannot be read)."""
            try:
                return self._index_key(sig, target_context.codegen()) in self._cache_file._load_index()
            except Exception:
                return False

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception as e:  # read-only or full disk: the compiled kernel still runs
                log.warning("rnngraph: could not cache %s in %s (%s: %s)", self.record.name, self._cache_path,
                            type(e).__name__, e)
            self._done(hit=False)

        def flush(self):
            try:
                super().flush()
            except OSError as e:
                log.warning("rnngraph: could not reset the cache index in %s (%s)", self._cache_path, e)

        def _done(self, hit: bool) -> None:
            r, seconds = self.record, time.perf_counter() - (self._started or time.perf_counter())
            r.seconds += seconds
            if hit:
                r.hits += 1
            else:
                r.misses += 1
            log.info("rnngraph: %s %s in %.2f s", "loaded" if hit else "compiled", r.name, seconds)

    return CheckedCache


_CHECKED = None


def cached(kernel):
    """``kernel`` (a ``cuda.jit`` dispatcher, not a device function) with its compiled signatures
    kept in the disk cache (see the module docstring); returned unchanged in the simulator."""
    global _CHECKED
    if in_simulator() or getattr(kernel, "_cache", None) is None:
        return kernel
    if _CHECKED is None:
        _CHECKED = _cache_class()
    kernel._cache = _CHECKED(kernel.py_func)  # numba's enable_caching(), with the checked cache
    return kernel
