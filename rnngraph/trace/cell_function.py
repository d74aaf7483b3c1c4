"""Cells: :func:`cell` turns a function into a cell factory, :class:`Cell` is one bound to its
configuration and traces it into a Builder; :class:`State` annotates its recurrent states."""
from __future__ import annotations

import inspect
import sys

from ..errors import GraphError, OpError, ShapeError, StateError, positive_int
from ..ir import FLOAT, check_delay
from ..lengths import hold_padded_steps
from .active import _ACTIVE
from .builder import Builder, _Pending
from .value import Value


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


def missing_keywords(params, given) -> list[str]:
    """The names of the keyword-only parameters among ``params`` (a cell function's signature's)
    that have no default and are not in ``given`` (names): what making the cell lacks (:class:`Cell`,
    and the command line's ``--cell-arg`` check, rnngraph.cellfile.bind_cell_args)."""
    return [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty and p.name not in given]


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
            hint = ("; rg.stacked, rnngraph.torch.RNN and the command line's --hidden give every cell hidden=: "
                    "declare it as a keyword-only argument (def cell(x, h: rg.State, *, hidden))"
                    if "hidden" in kwargs and "hidden" not in sig.parameters else "")
            raise GraphError(f"cell {self.name!r}: {e}{hint}") from None
        missing = missing_keywords(sig.parameters.values(), kwargs)
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
        from . import _rebuild_cell  # the package's name for it, which pickles keep

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
        out = _output_node(b, out)
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


def _output_node(b: Builder, out: Value) -> Value:
    """The cell's output as a node of this step: ``out`` itself, or a copy of it (``y``) where it is
    one of the cell's states as read (``return h, {"h": h_next}`` returns h at t-1). A state's read
    is no node of the graph but a placeholder for its next value and a delay, which a layer after
    the cell keeps in its arguments but a network output (rg.compile_rnn's, the schedule's) cannot."""
    if out.delay == 0 and b.nodes[out.id].op != "__state__":
        return out
    return b.add("identity", [out], hint="y")


def _cell_line(exc: BaseException, fn) -> str:
    """`` (FILE:LINE)`` of the deepest frame of ``exc``'s traceback in ``fn``'s source file."""
    where, tb = "", exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == fn.__code__.co_filename:
            where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return where


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
