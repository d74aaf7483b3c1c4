"""``RNNGRAPH_DEBUG``, read in one place: the level the CLI and the pass pipeline act on.

0 (unset, empty, ``0``, ``false``, ``no``, ``off``): nothing; 1 (``1``, ``true``, ``yes``,
``on``): the verifier between passes, tracebacks instead of one-line CLI errors, each GPU
kernel's compile or load time (in the CLI a kernel's first only, the repeats counted in one line
at the end); 2 and above: also a summary of the plan after each pass, on stderr, once per
distinct compile (rnngraph/passes/__init__.py).
"""
from __future__ import annotations

import os

__all__ = ["debug_level"]

_WORDS = {"": 0, "false": 0, "no": 0, "off": 0, "true": 1, "yes": 1, "on": 1}


def debug_level() -> int:
    """The ``RNNGRAPH_DEBUG`` level (see the module docstring). ValueError naming the variable for
    anything else (e.g. ``RNNGRAPH_DEBUG=abc``)."""
    raw = os.environ.get("RNNGRAPH_DEBUG", "").strip().lower()
    if raw in _WORDS:
        return _WORDS[raw]
    if raw.isdigit():
        return int(raw)
    raise ValueError(f"RNNGRAPH_DEBUG={raw!r}: expected a level 0, 1 or 2 (or true/false, yes/no, on/off)")
