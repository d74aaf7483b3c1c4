"""The functions of the cell API on Values: ``rg.linear``, ``rg.param``, the pointwise functions,
``rg.slice``, ``rg.split``, ``rg.concat`` and ``rg.layer_norm``; each records into the builder
being traced into (GraphError outside a cell being traced)."""
from __future__ import annotations

from ..errors import ShapeError
from ..ir import Init
from .active import _builder
from .value import Value, _ids_of, _value


def _whole(x: Value, op: str) -> Value:
    """``x`` as an op that reads the whole vector takes it: an ``rg.param`` vector through an
    identity node. The CUDA backend's fused kernels read a parameter element by element where
    they use it; a product or layer norm reads its input vector from a value buffer, which the
    identity's kernel fills (the parameter broadcast over timesteps and streams) and whose
    gradient it sums back into the parameter's."""
    x = _value(x, op)
    node = x.builder.nodes[x.id]
    if node.op == "param":  # named after the parameter: layer0.q -> layer0.q_vector
        return x.builder.add("identity", [x], hint=node.name[len(node.layer):] + "_vector")
    return x


def linear(x: Value, out: int, *, bias: bool = True, name: str | None = None,
           init: Init | None = None, bias_init: Init | None = None) -> Value:
    """``W @ x + b`` with W of shape (out, x.size) (PyTorch layout), params ``NAME.weight``/``NAME.bias``.

    Default init: U(-1/sqrt(hidden), 1/sqrt(hidden)) inside a cell with ``hidden`` (PyTorch's RNN
    convention), else U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear's bound).
    """
    b = _builder("linear")
    x = _whole(x, "linear")
    if not isinstance(out, int) or out < 1:
        raise ShapeError(f"rg.linear: out={out!r} must be a positive integer{b.where()}")
    base = name or f"linear{sum(1 for n in b.nodes.values() if n.op == 'linear' and n.layer == b.prefix)}"
    dflt = b.default_init(x.size)
    pnames = [b.param(f"{base}.weight", (out, x.size), init or dflt)]
    if bias:
        pnames.append(b.param(f"{base}.bias", (out,), bias_init or dflt))
    return b.add("linear", [x], pnames, hint=base)


def param(name: str, shape: int | tuple[int], init: Init | None = None) -> Value:
    """A trainable vector of ``shape`` (n,) used as a per-column value (broadcast over columns).

    Raises ShapeError when ``shape`` is not a positive int or a tuple of them."""
    b = _builder("param")
    if not isinstance(shape, (int, tuple, list)):
        raise ShapeError(f"rg.param {name!r}: shape={shape!r} must be a positive integer or a tuple of them{b.where()}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    full = b.param(name, shape, init or b.default_init(shape[0]))
    return b.add("param", [], [full], name=full)


def _unary(op: str):
    def f(x: Value) -> Value:
        return _builder(op).add(op, [_value(x, op)])

    f.__name__ = op
    f.__doc__ = f"Pointwise {op} of a Value (same size)."
    return f


sigmoid = _unary("sigmoid")
sigmoid.__doc__ = "Logistic 1/(1+exp(-x)), computed without overflow for any x."
tanh = _unary("tanh")
relu = _unary("relu")
exp = _unary("exp")


def slice(x: Value, start: int, stop: int) -> Value:  # noqa: A001 - the field's name for it
    """Elements ``start:stop`` of x (size stop - start)."""
    return _builder("slice").add("slice", [_value(x, "slice")], attrs={"start": start, "stop": stop})


def split(x: Value, k: int) -> list[Value]:
    """k equal consecutive slices of x (an LSTM's gates: ``i, f, g, o = rg.split(z, 4)``).

    Raises ShapeError when x.size is not divisible by k.
    """
    x = _value(x, "split")
    if not isinstance(k, int) or k < 1 or x.size % k:
        raise ShapeError(f"rg.split: cannot split {x.builder.provisional(x.id)!r} of size {x.size} "
                         f"into {k} equal parts{x.builder.where()}")
    n = x.size // k
    return [slice(x, j * n, (j + 1) * n) for j in range(k)]


def concat(*xs: Value) -> Value:
    """The vectors one after another (size = sum of sizes)."""
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = tuple(xs[0])  # rg.concat([a, b]) as well as rg.concat(a, b)
    return _builder("concat").add("concat", _ids_of(xs, "concat"))


def layer_norm(x: Value, *, name: str = "ln") -> Value:
    """PyTorch's nn.LayerNorm over the vector: (x - mean)/sqrt(var + 1e-5) * gain + bias.

    Params ``NAME.weight`` (ones) and ``NAME.bias`` (zeros), shape (x.size,).
    """
    b = _builder("layer_norm")
    x = _whole(x, "layer_norm")
    g = b.param(f"{name}.weight", (x.size,), Init("constant", 1.0))
    bb = b.param(f"{name}.bias", (x.size,), Init("constant", 0.0))
    return b.add("layer_norm", [x], [g, bb], hint=name)
