"""The :class:`Value`: a symbolic per-column vector of a cell being traced, and its operators."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import TYPE_CHECKING

from ..cell_api import CELL_API, CELL_FUNCTIONS, MAX_POWER
from ..errors import OpError, StateError
from ..ir import check_delay
from .active import _ACTIVE

if TYPE_CHECKING:
    from .builder import Builder


class Value:
    """A symbolic per-column vector inside a cell being traced (shape (size,) per column).

    Supports ``+ - *`` with Values and numbers (Python's or NumPy scalars), unary ``-``, ``/ number``,
    ``abs()`` and ``** k`` for an integer k from 1 to :data:`MAX_POWER`. Other powers, ``b ** x``,
    ``b / x``, ``x / Value``, the orderings (``<``: max and min too), ``@``, ``len``, indexing and
    slicing, iteration and NumPy's functions raise an OpError saying what to write instead (where
    a cell has something); ``==`` is Python's identity.
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
        self._refuse(f"{self._local()} / {_text(other)}", "a Value can be divided only by a nonzero number (a cell "
                                                          "has no reciprocal op)")

    def __rtruediv__(self, other):
        """``b / x``: OpError (there is no reciprocal op)."""
        self._refuse(f"{_text(other)} / {self._local()}", "nothing can be divided by a Value: a cell has no "
                                                          "reciprocal op (a Value can be divided by a nonzero number)")

    def _compare(self, op: str, other):
        """``x < b`` and the other orderings (Python's max and min compare too): OpError naming
        rg.relu and rg.sigmoid, what a cell has instead."""
        z = self._local()
        self._refuse(f"{z} {op} {_text(other)}",
                     f"a cell has no comparisons (nor max or min, which compare): max({z}, 0) is rg.relu({z}), "
                     f"min({z}, 0) is -rg.relu(-{z}), a smooth step is rg.sigmoid(k * {z})")

    def __lt__(self, other):
        self._compare("<", other)

    def __le__(self, other):
        self._compare("<=", other)

    def __gt__(self, other):
        self._compare(">", other)

    def __ge__(self, other):
        self._compare(">=", other)

    def __matmul__(self, other):
        """``x @ W``: OpError naming rg.linear, a cell's product with a weight matrix."""
        self._refuse_matmul(f"{self._local()} @ {_text(other)}")

    def __rmatmul__(self, other):
        self._refuse_matmul(f"{_text(other)} @ {self._local()}")

    def _refuse_matmul(self, what: str):
        z = self._local()
        self._refuse(what, f"a weight matrix times a Value is rg.linear({z}, n) (its own trainable n x {self.size} "
                           f"weight, PyTorch's layout)")

    def __len__(self):
        """``len(x)``: OpError naming ``x.size``."""
        z = self._local()
        self._refuse(f"len({z})", f"a Value is one column's vector: its size is {z}.size ({self.size})")

    def __neg__(self):
        return self.builder.add("neg", [self])

    def __abs__(self):
        """``|x|`` as relu(x) + relu(-x): exact, and its gradient at 0 is 0 (PyTorch's abs'(0) = 0),
        as relu's is."""
        return self.builder.add("add", [self.builder.add("relu", [self]), self.builder.add("relu", [-self])])

    def __pow__(self, k, modulo=None):
        """``x ** k`` for an integer k from 1 to :data:`MAX_POWER` (Python's or NumPy's, or a float
        such as 2.0 that is one), as products of x (so its gradient is the product rule's);
        OpError for any other exponent: there is no power, square root or reciprocal op."""
        if modulo is None and _small_power(k):
            return self._power(int(k))
        z = self._local()
        if _whole_number(k) and k > MAX_POWER:
            instead = f"write it as a product of smaller powers ({z} ** {MAX_POWER} * {z} for {z} ** {MAX_POWER + 1})"
        elif _whole_number(k) and k == 0:
            instead = f"{z} ** 0 is the constant 1: write 1 (or drop the factor)"
        else:
            instead = "a cell has no power, square root or reciprocal op"
        what = f"{z} ** {_text(k)}" if modulo is None else f"pow({z}, {_text(k)}, {_text(modulo)})"
        self._refuse(what, f"a Value can be raised only to an integer power from 1 to {MAX_POWER} (built as "
                           f"products); {instead}")

    def _power(self, k: int) -> "Value":
        """``x ** k`` for k in 1..4 by products: x, x*x, (x*x)*x, (x*x)*(x*x)."""
        if k == 1:
            return self
        square = self * self
        if k == 2:
            return square
        return square * self if k == 3 else square * square

    def __rpow__(self, base):
        """``b ** x``: OpError (there is no power op) showing it through rg.exp."""
        z = self._local()
        self._refuse(f"{_text(base)} ** {z}", f"for a positive base b write rg.exp(math.log(b) * {z})")

    def __getitem__(self, key):
        """``x[key]``: OpError naming the rg.slice or rg.split call to write instead."""
        self._refuse(f"{self._local()}[{_key_text(key)}]",
                     f"indexing and slicing are not supported: a Value is one column's vector, with no batch "
                     f"dimension; {_slice_hint(self, key)}")

    def __iter__(self):
        """Iteration and unpacking (``a, b = z``): OpError pointing at rg.split."""
        self._refuse(f"iterating or unpacking {self._local()}",
                     f"split it into k equal parts with rg.split({self._local()}, k) (i, f, g, o = rg.split(z, 4))")

    def _local(self) -> str:
        """How messages name this Value: the cell's local variable (or op) without the layer prefix."""
        return self.builder.provisional(self.id).removeprefix(self.builder.prefix)

    def _refuse(self, what: str, instead: str):
        """Raise the OpError of an operation a Value does not have: ``what``, ``instead`` (what to
        write) and the cell API."""
        raise OpError(f"{what}: {instead}{self.builder.where()}. {CELL_API}")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy scalar on the left (np.float32(0.5) * z) reaches here: it counts as the number it is
        # (2 / z, 2 ** z and 0 < z are refused by the Value's operators, as with Python numbers)
        op = _SCALAR_UFUNCS.get(ufunc.__name__)
        if op is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            a, b = (_number(x) for x in inputs)
            if all(isinstance(x, (Value, float)) for x in (a, b)):
                return op(a, b)
        name = ufunc.__name__
        if name == "matmul":
            self._refuse_matmul(" @ ".join(_text(x) for x in inputs))
        instead = f"write rg.{name}({self._local()})" if name in CELL_FUNCTIONS else \
            "use rnngraph's functions and operators"
        raise OpError(f"NumPy's {name} was applied to a traced Value{self.builder.where()}; inside a cell "
                      f"{instead}. {CELL_API}")

    def __bool__(self):
        raise OpError("a traced Value has no truth value: Python control flow (if, while, and, or, comparisons) "
                      f"cannot depend on it; compute both branches and blend them{self.builder.where()}")

    def __repr__(self):
        return f"Value({self.builder.provisional(self.id)!r}, size={self.size})"


#: NumPy ufuncs a Value takes with a NumPy scalar on its left, as Python's operators
_SCALAR_UFUNCS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
                  "divide": lambda a, b: a / b, "power": lambda a, b: a ** b, "less": lambda a, b: a < b,
                  "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
                  "greater_equal": lambda a, b: a >= b}


def _number(x):
    """A NumPy scalar (or the 0-d array NumPy hands a comparison) as the Python float it holds; a
    Value or anything else as it is."""
    if not isinstance(x, Value) and getattr(x, "ndim", None) == 0:
        x = x.item()
    return float(x) if isinstance(x, Real) else x


def _text(x) -> str:
    """How a message writes an operand: a Value as the cell's local name, a number as written,
    anything else as its type (``ndarray``)."""
    if isinstance(x, Value):
        return x._local()
    return repr(x) if isinstance(x, Real) else type(x).__name__


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


def _whole_number(k) -> bool:
    """Whether ``k`` is a real number equal to an integer (2, np.int64(2), 2.0), not a bool."""
    if isinstance(k, bool) or not isinstance(k, Real):
        return False
    return _is_int(k) or (math.isfinite(k) and float(k).is_integer())


def _small_power(k) -> bool:
    """Whether ``x ** k`` is built: k a whole number from 1 to MAX_POWER."""
    return _whole_number(k) and 1 <= k <= MAX_POWER


def _key_text(key) -> str:
    """An index as it was written: ``:2``, ``0``, ``:, :2``."""
    def one(k):
        if isinstance(k, slice):
            text = f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}"
            return text if k.step is None else f"{text}:{k.step}"
        return "..." if k is Ellipsis else repr(k)
    return ", ".join(one(k) for k in key) if isinstance(key, tuple) else one(key)


def _slice_hint(x: Value, key) -> str:
    """What to write instead of ``x[key]``: rg.slice with the bounds of a plain slice or of one
    index, and rg.split."""
    z = x._local()
    split = f"rg.split({z}, k) cuts it into k equal parts (i, f, g, o = rg.split(z, 4))"
    if _is_int(key) and -x.size <= key < x.size:
        i = key % x.size
        return f"rg.slice({z}, {i}, {i + 1}) is element {i} as a Value of size 1; {split}"
    if isinstance(key, slice) and key.step in (None, 1) and all(b is None or _is_int(b) for b in (key.start, key.stop)):
        start, stop, _ = key.indices(x.size)
        if stop > start:
            return f"write rg.slice({z}, {start}, {stop}) for elements {start}:{stop} of its {x.size}; {split}"
    return f"rg.slice({z}, start, stop) takes elements start:stop of its {x.size}; {split}"


def _is_int(k) -> bool:
    """Whether ``k`` is an integer (Python's or NumPy's), not a bool."""
    return isinstance(k, Integral) and not isinstance(k, bool)
