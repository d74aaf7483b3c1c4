"""The :class:`Value`: a symbolic per-column vector of a cell being traced, and its operators."""
from __future__ import annotations

import math
from numbers import Real
from typing import TYPE_CHECKING

from ..errors import OpError, StateError
from ..ir import check_delay
from .active import _ACTIVE

if TYPE_CHECKING:
    from .builder import Builder


class Value:
    """A symbolic per-column vector inside a cell being traced (shape (size,) per column).

    Supports ``+ - *`` with Values and numbers (Python's or NumPy scalars), unary ``-`` and ``/ number``.
    """

    def __init__(self, builder: Builder, vid: int, delay: int = 0):
        self.builder, self.id, self.delay = builder, vid, delay

    @property
    def size(self) -> int:
        """Elements per column."""
        return self.builder.nodes[self.id].size

    def delayed(self, k: int) -> "Value":
        """This state's next value read k >= 1 timesteps back (only on state arguments)."""
        if self.builder.nodes[self.id].op != "__state__":
            raise StateError(f"{self.builder.provisional(self.id)!r} is not a state argument; only states "
                             f"can be read with a delay{self.builder.where()}")
        k = check_delay(k, f"{self.builder.provisional(self.id)}.delayed")
        if k < 1:
            raise StateError(f"{self.builder.provisional(self.id)}.delayed({k}): delay must be >= 1")
        return Value(self.builder, self.id, k)

    def _other(self, other, op: str) -> "Value":
        if isinstance(other, Value):
            return _value(other, op)
        raise OpError(f"unsupported operand for {op}: Value and {type(other).__name__}{self.builder.where()}; "
                      f"use rg.param for a trainable vector, or a Python number")

    def _scalar(self, value) -> float:
        value = float(value)
        if not math.isfinite(value):
            raise OpError(f"a constant in a cell must be finite, not {value}{self.builder.where()}")
        return value

    def __add__(self, other):
        if isinstance(other, Real):
            self._scalar(other)
            return self.builder.add("add_scalar", [self], attrs={"value": float(other)})
        return self.builder.add("add", [self, self._other(other, "+")])

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Real):
            return self.builder.add("add_scalar", [self], attrs={"value": -float(other)})
        return self.builder.add("sub", [self, self._other(other, "-")])

    def __rsub__(self, other):
        if isinstance(other, Real):
            return self.builder.add("add_scalar", [-self], attrs={"value": float(other)})
        return NotImplemented

    def __mul__(self, other):
        if isinstance(other, Real):
            self._scalar(other)
            return self.builder.add("mul_scalar", [self], attrs={"value": float(other)})
        return self.builder.add("mul", [self, self._other(other, "*")])

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Real) and float(other) != 0.0:
            return self * (1.0 / float(other))
        raise OpError(f"a Value can only be divided by a nonzero number, not {other!r}{self.builder.where()}")

    def __neg__(self):
        return self.builder.add("neg", [self])

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy scalar on the left (np.float32(0.5) * z) reaches here: it counts as the number it is
        # (a number divided by a Value stays refused, as with Python numbers)
        op = _SCALAR_UFUNCS.get(ufunc.__name__)
        if op is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            a, b = (x if isinstance(x, Value) or not isinstance(x, Real) else float(x) for x in inputs)
            if all(isinstance(x, (Value, float)) for x in (a, b)):
                return op(a, b)
        raise OpError(f"NumPy's {ufunc.__name__} was applied to a traced Value{self.builder.where()}; inside a cell "
                      f"use rnngraph's operations (rg.tanh, rg.sigmoid, rg.exp, rg.relu, rg.linear, + - *)")

    def __bool__(self):
        raise OpError("a traced Value has no truth value: Python control flow (if, while, and, or, comparisons) "
                      f"cannot depend on it; compute both branches and blend them{self.builder.where()}")

    def __repr__(self):
        return f"Value({self.builder.provisional(self.id)!r}, size={self.size})"


#: NumPy ufuncs a Value takes with a NumPy scalar on its left, as Python's operators
_SCALAR_UFUNCS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}


def _value(x, fn: str) -> Value:
    """``x`` if it is a Value of the network being traced; OpError naming ``fn`` otherwise."""
    if not isinstance(x, Value):
        raise OpError(f"rg.{fn} expects a traced Value, got {type(x).__name__}")
    if not _ACTIVE or x.builder is not _ACTIVE[-1]:
        raise OpError(f"rg.{fn}: this Value belongs to another network's tracing; a Value lives only "
                      f"while its cell is traced (don't keep Values across networks)")
    return x


def _ids_of(xs, fn: str):
    return [_value(x, fn) for x in xs]
