"""The loss of a GPU training call, read when it is first needed.

``TrainingStep.train`` on the CUDA backend enqueues the whole step (codegen/step.py) and returns
at once with a :class:`LazyLoss`: the host is free to prepare the next window (read data, draw
batches) while the GPU computes. The value is computed -- waiting for the GPU -- the first time
it is read: ``float(loss)``, ``loss.item()`` (as for a torch tensor), formatting, arithmetic,
comparisons, ``np.asarray(loss)``; or when the step is next used (its next ``train``, its
``parameters``, ``state``, ``forward`` ...), which settles it. The next ``train`` does not wait
for it: it settles the call before it and is enqueued behind it (codegen/step.py
``CudaBackend.train``'s overlap; not with an LSH head, data parallelism, or dropout in skip mode). A call whose
loss or gradients were not finite raises its FloatingPointError (``nonfinite="raise"``) at
that moment -- naming the step count -- and again at every read of its loss; in raise mode the
call enqueued behind it changed nothing, and its loss raises :class:`NotApplied`.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["LazyLoss", "NotApplied"]


class NotApplied(FloatingPointError):
    """Raised when the loss of a training call is read whose update the device withheld because
    the call enqueued before it turned out not finite (``nonfinite="raise"``; that call raised
    the error). The step never raises it on its own when it settles its calls."""


class LazyLoss:
    """A float-like training loss (nats per target, as ``train`` documents) computed on first
    read by ``resolve()`` (which may raise FloatingPointError; the error is kept and raised again
    at each read). ``ready``: whether it has been read."""

    __slots__ = ("_resolve", "_value", "_error")

    def __init__(self, resolve):
        self._resolve, self._value, self._error = resolve, None, None

    @property
    def ready(self) -> bool:
        return self._resolve is None

    def item(self) -> float:
        """The loss as a Python float (waits for the GPU on the first read)."""
        if self._resolve is not None:
            resolve, self._resolve = self._resolve, None
            try:
                self._value = float(resolve())
            except FloatingPointError as e:
                self._error = e
            except BaseException:  # e.g. KeyboardInterrupt while waiting for the GPU: read it again later
                self._resolve = resolve
                raise
        if self._error is not None:
            raise self._error
        return self._value

    def __float__(self) -> float:
        return self.item()

    def __repr__(self) -> str:
        return repr(self.item()) if self.ready else "LazyLoss(<on the GPU>)"

    def __str__(self) -> str:
        return str(self.item())

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.item(), dtype=dtype)

    def __hash__(self) -> int:
        return hash(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __round__(self, ndigits=None):
        return round(self.item(), ndigits)

    def __neg__(self):
        return -self.item()

    def __pos__(self):
        return self.item()

    def __abs__(self):
        return abs(self.item())

    def __trunc__(self):
        return int(self.item())

    def __floor__(self):
        return math.floor(self.item())

    def __ceil__(self):
        return math.ceil(self.item())

    # the rest of numbers.Real's interface (registered below): pytest.approx's report reads .imag
    @property
    def real(self) -> float:
        return self.item()

    @property
    def imag(self) -> float:
        return 0.0

    def conjugate(self) -> float:
        return self.item()


def _binary(name: str):
    """``float.<name>`` on the loss's value (and another LazyLoss's, or any real number's)."""
    op = getattr(float, name)

    def method(self, other):
        if isinstance(other, LazyLoss):
            other = other.item()
        if not isinstance(other, (numbers.Real, np.generic)):
            return NotImplemented
        return op(self.item(), float(other))
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__eq__", "__ne__",
              "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(LazyLoss, _name, _binary(_name))

numbers.Real.register(LazyLoss)
