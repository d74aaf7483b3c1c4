"""Errors and warnings raised by rnngraph.

Every message names the offending node, op, shape or file, so a user can find it in the
cell they wrote. All errors derive from :class:`GraphError` (a ``ValueError``).
"""
from numbers import Integral


class GraphError(ValueError):
    """A cell or network graph is malformed."""


class ShapeError(GraphError):
    """An op got operands whose sizes it cannot combine (message names the op and shapes)."""


class CycleError(GraphError):
    """A dependency cycle whose delays sum to 0 (message prints the cycle)."""


class StateError(GraphError):
    """A state is never updated, updated twice, or read with a bad delay."""


class DelayError(GraphError):
    """A delay is negative or not an integer."""


class DtypeError(GraphError):
    """An op got an operand of the wrong kind (token ids where floats are needed, ...)."""


class OpError(GraphError, TypeError):
    """An op was given something it cannot take (a NumPy array, a list, a Value of another
    network, a Python ``if`` on a traced value)."""


class UnusedWarning(UserWarning):
    """An input or parameter of a graph is never read."""


def positive_int(value, what: str, error: type[Exception] = ValueError) -> int:
    """``value`` as an int; ``error`` (ValueError by default) naming ``what`` unless it is a
    positive integer: Python's or NumPy's, not a bool, a float or a string."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise error(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def counted(n: int, noun: str) -> str:
    """``1 window``, ``17 windows``, ``1,000 windows``: a count and its noun, for messages."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
