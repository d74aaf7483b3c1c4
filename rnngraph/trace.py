"""The Python API that builds graphs: operator overloading, parameters, states, cells.

A cell is a plain Python function decorated with :func:`cell`::

    @rg.cell
    def elman(x, h: rg.State, *, hidden: int):
        h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
        return h_next, {"h": h_next}

Calling the function runs it once on symbolic :class:`Value` objects and records a node per
operation. Nodes are named, in order of preference, by an explicit ``name=``, by the local
variable the value was last bound to in the cell (``h_next``), or by the op (``add_2``), all
under the layer's prefix (``layer0.``). A state argument stands for its next value read with
its delay (1 unless annotated ``rg.State(delay=d)``); ``h.delayed(k)`` reads it k timesteps
back. States have the cell's ``hidden`` size unless annotated ``rg.State(size=n)``.
"""
from __future__ import annotations

import inspect
import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Real

from . import ops
from .errors import GraphError, OpError, ShapeError, StateError, positive_int
from .ir import FLOAT, INDEX, Graph, Init, Node, Param, Ref, State as IRState, check_delay
from .lengths import hold_padded_steps


class State:
    """Annotation of a cell argument that is a recurrent state.

    ``h: rg.State`` reads the state's next value at t-1; ``h: rg.State(delay=2)`` at t-2;
    ``rg.State(size=n)`` overrides the default size (the cell's ``hidden`` argument).
    Raises DelayError for a delay that is not an integer >= 1, StateError for a size that is
    neither None nor a positive integer.
    """

    def __init__(self, delay: int = 1, size: int | None = None):
        self.delay = check_delay(delay, "rg.State")
        if self.delay < 1:
            raise StateError("rg.State: a state is read with delay >= 1 (delay 0 would be the value itself)")
        self.size = None if size is None else positive_int(size, "rg.State: size", StateError)


# ------------------------------------------------------------------------------- tracing
@dataclass
class _Pending:
    op: str
    args: list  # list of (id, delay)
    params: tuple
    attrs: tuple
    size: int
    dtype: str
    name: str | None  # explicit name (already prefixed) or None
    layer: str  # prefix of the layer that made it
    hint: str | None = None  # fallback name (unprefixed) used instead of the op's name


class Builder:
    """Collects the nodes, params and states of a network while its layers are traced.

    The layers of rnngraph/network.py and rnngraph/heads.py record into one: make it with the
    network's name, and inside ``with tracing(builder):`` set ``prefix`` (``"layer0."``, ...)
    and ``hidden`` per layer, record nodes with :meth:`add` and parameters with :meth:`param`,
    name each layer's nodes with :meth:`name_layer`, and finally get the :class:`Graph` with
    :meth:`graph`. Errors: those of the op's shape rule (ShapeError, DtypeError, ...) from
    :meth:`add`, naming the node and, inside a cell, its source line; OpError from :meth:`add`
    outside :func:`tracing` of this builder."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: dict[int, _Pending] = {}
        self.params: dict[str, Param] = {}
        self.states: list[tuple[str, int, int]] = []  # (state name, placeholder id, depth)
        self.resolved: dict[int, int] = {}  # placeholder id -> producer id
        self.names: dict[int, str] = {}
        self.prefix = ""
        self.hidden: int | None = None
        self.frame = None  # the running cell's frame, for error messages
        self.counter = 0
        self.length_masks: dict | None = None  # size -> mask Value when tracing for lengths (rnngraph/lengths.py)

    def new_id(self) -> int:
        self.counter += 1
        return self.counter

    def provisional(self, vid: int) -> str:
        """A name for a node not yet named: the cell's local variable bound to it, or its op."""
        if vid in self.names:
            return self.names[vid]
        if self.frame is not None:
            for var, val in self.frame.f_locals.items():
                if isinstance(val, Value) and val.id == vid:
                    return self.prefix + var
        n = self.nodes[vid]
        return n.name or f"{n.layer}{n.hint or n.op}"

    def add(self, op: str, args=(), params=(), attrs=None, size=None, dtype=FLOAT, name=None,
            hint=None) -> "Value":
        """Record one node; run its shape rule now so errors point at the user's line."""
        if not _ACTIVE or _ACTIVE[-1] is not self or any(a.builder is not self for a in args):
            raise OpError("this Value belongs to another network's tracing; a Value lives only while its "
                          "cell is traced (don't keep Values across networks)")
        refs = [(a.id, a.delay) for a in args]
        attrs = tuple(sorted((attrs or {}).items()))
        vid = self.new_id()
        pend = _Pending(op, refs, tuple(params), attrs, size or 1, dtype, name, self.prefix, hint)
        self.nodes[vid] = pend
        probe = Node(self.provisional(vid), op, tuple(Ref(self.provisional(i), d) for i, d in refs),
                     pend.params, attrs, pend.size, dtype)
        arg_nodes = [Node(self.provisional(i), self.nodes[i].op, size=self.nodes[i].size,
                          dtype=self.nodes[i].dtype) for i, _ in refs]
        try:
            pend.size, pend.dtype = ops.infer(probe, arg_nodes, [self.params[p] for p in params])
        except GraphError as e:
            raise type(e)(f"{e}{self.where()}") from None
        return Value(self, vid)

    def where(self) -> str:
        if self.frame is None:
            return ""
        code = self.frame.f_code
        return f" (in cell {code.co_name!r}, {code.co_filename}:{self.frame.f_lineno})"

    def param(self, name: str, shape: tuple[int, ...], init: Init) -> str:
        full = self.prefix + name
        if full in self.params:
            raise GraphError(f"parameter {full!r} is declared twice{self.where()}; give each a distinct name=")
        if any((not isinstance(s, int)) or s < 1 for s in shape):
            raise ShapeError(f"parameter {full!r}: shape {list(shape)} must be positive integers{self.where()}")
        self.params[full] = Param(full, tuple(shape), init)
        return full

    def default_init(self, fan_in: int) -> Init:
        """PyTorch's RNN init U(-1/sqrt(H), 1/sqrt(H)) inside a cell with ``hidden``; else nn.Linear's 1/sqrt(fan_in)."""
        return Init("uniform", 1.0 / math.sqrt(self.hidden or fan_in))

    # --------------------------------------------------------------------- finishing
    def name_layer(self, local_vars: dict) -> None:
        """Name this layer's unnamed nodes: explicit names, then locals, then op names."""
        taken = set(self.names.values())
        for var, val in local_vars.items():
            if isinstance(val, Value) and val.id not in self.names and self.nodes[val.id].layer == self.prefix \
                    and self.nodes[val.id].name is None and val.delay == 0 and self.nodes[val.id].op != "__state__":
                cand = self.prefix + var
                if cand not in taken:
                    self.names[val.id] = cand
                    taken.add(cand)
        for vid, n in self.nodes.items():
            if n.layer != self.prefix or vid in self.names:
                continue
            if n.name is not None:
                if n.name in taken:
                    raise GraphError(f"two nodes are named {n.name!r}; names must be unique")
                cand = n.name
            else:
                base, k = f"{self.prefix}{n.hint or n.op}", 0
                cand = base
                while cand in taken:
                    k += 1
                    cand = f"{base}_{k}"
            self.names[vid] = cand
            taken.add(cand)

    def graph(self, outputs: list["Value"], loss: "Value | None") -> Graph:
        def resolve(vid):
            seen = set()
            while vid in self.resolved:
                if vid in seen:
                    raise StateError("states update each other in a loop with no computation")
                seen.add(vid)
                vid = self.resolved[vid]
            return vid

        nodes, states = [], []
        for vid, n in self.nodes.items():
            if n.op == "__state__":
                continue
            refs = tuple(Ref(self.names[resolve(i)], d) for i, d in n.args)
            nodes.append(Node(self.names[vid], n.op, refs, n.params, n.attrs, n.size, n.dtype))
        for sname, pid, depth in self.states:
            states.append(IRState(sname, self.names[resolve(pid)], depth))
        return Graph(self.name, tuple(self.params.values()), tuple(nodes), tuple(states),
                     tuple(self.names[o.id] for o in outputs), self.names[loss.id] if loss is not None else None)


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


class Value:
    """A symbolic per-column vector inside a cell being traced (shape (size,) per column).

    Supports ``+ - *`` with Values and Python numbers, unary ``-`` and ``/ number``.
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
        raise OpError(f"NumPy's {ufunc.__name__} was applied to a traced Value{self.builder.where()}; inside a cell "
                      f"use rnngraph's operations (rg.tanh, rg.sigmoid, rg.exp, rg.relu, rg.linear, + - *)")

    def __bool__(self):
        raise OpError("a traced Value has no truth value: Python control flow (if, while, and, or, comparisons) "
                      f"cannot depend on it; compute both branches and blend them{self.builder.where()}")

    def __repr__(self):
        return f"Value({self.builder.provisional(self.id)!r}, size={self.size})"


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


# ------------------------------------------------------------------------------- ops
def linear(x: Value, out: int, *, bias: bool = True, name: str | None = None,
           init: Init | None = None, bias_init: Init | None = None) -> Value:
    """``W @ x + b`` with W of shape (out, x.size) (PyTorch layout), params ``NAME.weight``/``NAME.bias``.

    Default init: U(-1/sqrt(hidden), 1/sqrt(hidden)) inside a cell with ``hidden`` (PyTorch's RNN
    convention), else U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear's bound).
    """
    b = _builder("linear")
    x = _value(x, "linear")
    if not isinstance(out, int) or out < 1:
        raise ShapeError(f"rg.linear: out={out!r} must be a positive integer{b.where()}")
    base = name or f"linear{sum(1 for n in b.nodes.values() if n.op == 'linear' and n.layer == b.prefix)}"
    dflt = b.default_init(x.size)
    pnames = [b.param(f"{base}.weight", (out, x.size), init or dflt)]
    if bias:
        pnames.append(b.param(f"{base}.bias", (out,), bias_init or dflt))
    return b.add("linear", [x], pnames, hint=base)


def param(name: str, shape: int | tuple[int], init: Init | None = None) -> Value:
    """A trainable vector of ``shape`` (n,) used as a per-column value (broadcast over columns)."""
    b = _builder("param")
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
    x = _value(x, "layer_norm")
    g = b.param(f"{name}.weight", (x.size,), Init("constant", 1.0))
    bb = b.param(f"{name}.bias", (x.size,), Init("constant", 0.0))
    return b.add("layer_norm", [x], [g, bb], hint=name)


def _profiler(builder: Builder, fn):
    """A profile hook that remembers the cell's frame (for error messages) and its locals at return."""
    captured = {}
    code = fn.__code__
    previous = sys.getprofile()

    def prof(frame, event, arg):
        if frame.f_code is code:
            if event == "call":
                builder.frame = frame
            elif event == "return":
                captured.update(frame.f_locals)
        return None

    return prof, previous, captured


# ------------------------------------------------------------------------------- cells
class Cell:
    """A cell function bound to its configuration (``rg.cells.lstm(hidden=512)``); a layer of Sequential.

    ``hidden``, where given, is the default size of the cell's states: GraphError naming the
    cell and ``hidden`` unless it is a positive integer (NumPy's is taken as an int), raised
    when the cell is made, as for a missing or unknown keyword argument."""

    def __init__(self, fn, kwargs: dict):
        self.fn, self.kwargs = fn, kwargs
        self.name = fn.__name__
        sig = inspect.signature(fn, eval_str=True)
        pos = [p for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not pos:
            raise GraphError(f"cell {self.name!r} takes no input argument")
        self.input_name = pos[0].name
        self.state_args = []  # (arg name, State annotation)
        for p in pos[1:]:
            ann = p.annotation
            if ann is State:
                ann = State()
            if not isinstance(ann, State):
                raise GraphError(f"cell {self.name!r}: argument {p.name!r} is neither the input (the first "
                                 f"argument) nor annotated rg.State")
            self.state_args.append((p.name, ann))
        try:
            sig.bind_partial(*[None] * len(pos), **kwargs)
        except TypeError as e:
            raise GraphError(f"cell {self.name!r}: {e}") from None
        missing = [p.name for p in sig.parameters.values()
                   if p.kind == p.KEYWORD_ONLY and p.default is p.empty and p.name not in kwargs]
        if missing:
            raise GraphError(f"cell {self.name!r} needs the keyword argument(s) {', '.join(missing)} "
                             f"(given: {', '.join(sorted(kwargs)) or 'none'})")
        if kwargs.get("hidden") is not None:  # the states' default size (see the class docstring)
            kwargs["hidden"] = positive_int(kwargs["hidden"], f"cell {self.name!r}: hidden", GraphError)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.kwargs.items()))
        return f"{self.name}({args})"

    def __reduce__(self):
        # pickled by reference to the decorated factory (the function itself is not what its
        # module's name holds), so a pickled network or torch module loads where the cell imports
        return (_rebuild_cell, (self.fn.__module__, self.fn.__qualname__, self.kwargs))

    def trace(self, b: Builder, x: Value) -> Value:
        """Trace this cell on input ``x`` under ``b``'s current prefix; returns the output Value."""
        b.hidden = self.kwargs.get("hidden")
        placeholders = {}
        for arg, ann in self.state_args:
            size = ann.size if ann.size is not None else b.hidden
            if not isinstance(size, int) or size < 1:
                raise StateError(f"state {arg!r} of cell {self.name!r} has no size: give the cell a "
                                 f"`hidden` argument or annotate rg.State(size=N)")
            vid = b.new_id()
            b.nodes[vid] = _Pending("__state__", [], (), (), size, FLOAT, None, b.prefix)
            b.names[vid] = b.prefix + arg
            placeholders[arg] = Value(b, vid, ann.delay)
        prof, previous, local_vars = _profiler(b, self.fn)
        _ACTIVE.append(b)
        sys.setprofile(prof)
        try:
            result = self.fn(x, *placeholders.values(), **self.kwargs)
        except GraphError:
            raise
        except Exception as exc:  # the user's code failed: one line naming the cell and its line
            raise OpError(f"cell {self.name!r} raised {type(exc).__name__}: {exc}"
                          f"{_cell_line(exc, self.fn)}") from exc
        finally:
            sys.setprofile(previous)
            _ACTIVE.pop()
            b.frame = None
        out, nexts = self._unpack(result)
        if b.length_masks is not None:
            out = hold_padded_steps(b, self.name, placeholders, nexts, out)
        for arg, ph in placeholders.items():
            del b.names[ph.id]
        self._bind_states(b, placeholders, nexts)
        b.name_layer(local_vars)
        return out

    def _unpack(self, result):
        if not self.state_args:
            out, nexts = (result if isinstance(result, tuple) else (result, {}))
        elif isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            out, nexts = result
        else:
            raise StateError(f"cell {self.name!r} has states, so it must return (output, {{state: next value}})")
        if not isinstance(out, Value):
            raise GraphError(f"cell {self.name!r} returned {type(out).__name__} as its output, not a traced Value")
        return out, nexts

    def _bind_states(self, b: Builder, placeholders: dict, nexts: dict) -> None:
        unknown = sorted(set(nexts) - set(placeholders))
        if unknown:
            raise StateError(f"cell {self.name!r} returned next values for {unknown}, which are not its states "
                             f"({', '.join(placeholders) or 'none'})")
        producers = {}
        for arg, ph in placeholders.items():
            if arg not in nexts:
                raise StateError(f"state {arg!r} of cell {self.name!r} is never updated: return its next "
                                 f"value in the states dict")
            nv = nexts[arg]
            if not isinstance(nv, Value):
                raise StateError(f"cell {self.name!r}: the next value of state {arg!r} is a "
                                 f"{type(nv).__name__}, not a traced Value")
            if nv.size != ph.size:
                raise ShapeError(f"cell {self.name!r}: state {arg!r} has size {ph.size} but its next value "
                                 f"has size {nv.size}")
            # a state passed through unchanged, or a node already holding another state: copy it
            if b.nodes[nv.id].op == "__state__" or nv.id in producers.values():
                nv = b.add("identity", [nv], name=f"{b.prefix}{arg}_next")
            producers[arg] = nv.id
            b.resolved[ph.id] = nv.id
        for arg, ph in placeholders.items():
            depth = max([d for n in b.nodes.values() for i, d in n.args if i == ph.id] or [ph.delay])
            b.states.append((b.prefix + arg, ph.id, depth))


def _cell_line(exc: BaseException, fn) -> str:
    """`` (FILE:LINE)`` of the deepest frame of ``exc``'s traceback in ``fn``'s source file."""
    where, tb = "", exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == fn.__code__.co_filename:
            where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return where


def _rebuild_cell(module: str, qualname: str, kwargs: dict) -> "Cell":
    """The Cell ``module.qualname(**kwargs)`` (how a pickled Cell is loaded)."""
    import importlib
    factory = importlib.import_module(module)
    for part in qualname.split("."):
        factory = getattr(factory, part)
    return factory(**kwargs)


def cell(fn):
    """Decorator: turn ``fn(x, state..., *, config...)`` into a cell factory.

    ``fn(hidden=512)`` (keyword configuration only) returns a :class:`Cell` for rg.Sequential.
    When traced, ``x`` is a :class:`Value` (one vector per column: the previous layer's output,
    or the network input of size ``input_size``); each argument annotated ``rg.State`` is a
    Value holding that state's next value read with its delay (size: the cell's ``hidden``
    argument unless ``rg.State(size=n)``). The function must return ``output`` (no states) or
    ``(output, {state_name: next_value})``. Errors (raised when the network is traced, naming
    the node, op, shapes and the cell's source line): ShapeError, DtypeError, StateError (a
    state never updated, an unknown state name), OpError (a non-Value operand, Python control
    flow on a Value), DelayError.
    """

    def factory(**kwargs) -> Cell:
        return Cell(fn, kwargs)

    factory.__name__ = fn.__name__
    factory.__qualname__ = fn.__qualname__
    factory.__doc__ = fn.__doc__
    factory.__wrapped__ = fn
    factory.is_cell = True
    return factory
