"""The stack of builders being traced into: :func:`tracing` pushes one, the cell API records into the top.

Every function of the cell API (``rg.linear``, the operators on a Value, ...) records into the
innermost builder; :func:`_builder` is that builder, or a GraphError outside any tracing.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import GraphError

if TYPE_CHECKING:
    from .builder import Builder

_ACTIVE: list[Builder] = []  # the builders being traced into, innermost last


@contextmanager
def tracing(builder: Builder):
    """Context manager: ``builder`` is the one :func:`linear`, :func:`param`, the operators on
    :class:`Value` and :meth:`Builder.add` record into while the ``with`` block runs; the
    builder active before it is restored at the end, on an error too. Yields ``builder``."""
    _ACTIVE.append(builder)
    try:
        yield builder
    finally:
        _ACTIVE.pop()


def _builder(what: str) -> Builder:
    if not _ACTIVE:
        raise GraphError(f"rg.{what} can only be used inside a cell while it is traced "
                         f"(put the cell in an rg.Sequential and read its .graph, or compile it)")
    return _ACTIVE[-1]
