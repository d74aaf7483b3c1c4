"""Generated source -> an importable module, written to a content-hashed file.

numba's disk cache needs kernels to live in a real source file, and users read generated
code through ``step.kernels``: each module is written once to
``$RNNGRAPH_CACHE/kernels/rg_<sha256 prefix>.py`` (default ``~/.cache/rnngraph``), atomically
(temporary file, then rename), and imported from there. Its kernels (not its device functions)
keep their compiled signatures in that folder's ``__pycache__`` (codegen/kernel_cache.py), so a
second process that generates the same text loads them instead of compiling.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from .kernel_cache import cached

_LOADED: dict[str, object] = {}


def cache_dir() -> Path:
    """Where generated modules are written (created on first use)."""
    root = Path(os.environ.get("RNNGRAPH_CACHE") or Path.home() / ".cache" / "rnngraph")
    path = root / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load(source: str):
    """Write ``source`` to its content-hashed file (if new) and import it; the same text gives the same module."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    if digest in _LOADED:
        return _LOADED[digest]
    path = cache_dir() / f"rg_{digest}.py"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"rnngraph_generated_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for value in vars(module).values():
        if getattr(value, "py_func", None) is not None and not getattr(value, "targetoptions", {}).get("device"):
            cached(value)
    _LOADED[digest] = module
    return module
