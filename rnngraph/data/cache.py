"""Where downloaded and unpacked data sets are kept."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$RNNGRAPH_CACHE`` if that environment variable is set (and not empty), else
    ``~/.cache/rnngraph``. Each data set keeps a folder below it (``austen/``, ``uea/``)."""
    root = os.environ.get("RNNGRAPH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rnngraph"
