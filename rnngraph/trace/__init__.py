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

The package's modules, bottom up: ``active.py`` (the stack of builders being traced into,
:func:`tracing`), ``value.py`` (:class:`Value` and its operators), ``builder.py``
(:class:`Builder`), ``functions.py`` (``rg.linear``, ``rg.tanh``, ... on Values) and
``cell_function.py`` (:class:`State`, :class:`Cell`, :func:`cell`). A leading underscore marks
a name private to the package: no module outside it uses one (tests/test_layering.py).
"""
from .active import tracing
from .builder import Builder
from .cell_function import Cell, State, cell
from .functions import concat, exp, layer_norm, linear, param, relu, sigmoid, slice, split, tanh
from .value import Value

__all__ = ["Builder", "Cell", "State", "Value", "cell", "concat", "exp", "layer_norm", "linear", "param", "relu",
           "sigmoid", "slice", "split", "tanh", "tracing"]


# here, not in cell_function.py: Cell.__reduce__ names it, and pickled cells load it, as
# rnngraph.trace._rebuild_cell
def _rebuild_cell(module: str, qualname: str, kwargs: dict) -> "Cell":
    """The Cell ``module.qualname(**kwargs)`` (how a pickled Cell is loaded)."""
    import importlib
    factory = importlib.import_module(module)
    for part in qualname.split("."):
        factory = getattr(factory, part)
    return factory(**kwargs)
