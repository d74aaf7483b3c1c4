"""Errors in a user's cell function become one GraphError naming the cell and its source line
(the command line prints them as one line): NumPy applied to a traced value, any exception of the
cell's own code, a missing keyword argument, what a PyTorch tensor has and a Value has not
(indexing, unpacking, powers other than 1 to 4) and a function rnngraph lacks (``rg.softplus``)."""
import numpy as np
import pytest

import rnngraph as rg


@rg.cell
def numpy_cell(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = np.tanh(z)
    return h_next, {"h": h_next}


@rg.cell
def broken_cell(x, h: rg.State, *, hidden: int):
    z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
    h_next = z.no_such_method()
    return h_next, {"h": h_next}


@rg.cell
def gain_cell(x, h: rg.State, *, hidden: int, gain: float):
    h_next = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")) * gain
    return h_next, {"h": h_next}


def _line(fn, text: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(fn.__wrapped__)
    return start + next(k for k, line in enumerate(lines) if text in line)


def test_numpy_on_a_traced_value_names_the_cell_line():
    """A NumPy function that is a cell function too is named as rnngraph's; the cell API follows.
    Before: "(rg.tanh, rg.sigmoid, rg.exp, rg.relu, rg.linear, + - *)", a third list of it."""
    with pytest.raises(rg.OpError) as info:
        rg.Sequential(numpy_cell(hidden=3), input_size=2).graph
    assert str(info.value) == (
        f"NumPy's tanh was applied to a traced Value (in cell 'numpy_cell', {__file__}:"
        f"{_line(numpy_cell, 'np.tanh')}); inside a cell write rg.tanh(z). A cell has rg.linear, rg.param, rg.tanh, "
        "rg.sigmoid, rg.relu, rg.exp, rg.layer_norm, rg.slice, rg.split, rg.concat and the operators + - * (Values "
        "and numbers), / number, unary -, abs(), ** 1 to 4")


def test_the_cell_functions_listed_are_those_rnngraph_exports():
    """rnngraph/cell_api.py's list, which every message of what a cell can use writes out, is
    the package's exports from rnngraph.trace that trace/functions.py defines: none missing, none
    extra."""
    from rnngraph.cell_api import CELL_FUNCTIONS
    exported = {n for n, module in rg._EXPORTS.items()
                if module == "trace" and getattr(rg, n).__module__ == "rnngraph.trace.functions"}
    assert sorted(CELL_FUNCTIONS) == sorted(exported) == sorted(set(CELL_FUNCTIONS))
    assert set(CELL_FUNCTIONS) <= set(rg.__all__)


def test_an_exception_in_the_cell_code_names_the_cell_and_line():
    with pytest.raises(rg.OpError, match=rf"cell 'broken_cell' raised AttributeError: .*no_such_method.*"
                                         rf"test_cell_errors.py:{_line(broken_cell, 'no_such_method')}\)"):
        rg.Sequential(broken_cell(hidden=3), input_size=2).graph


def test_a_missing_keyword_argument_is_named_when_the_cell_is_made():
    with pytest.raises(rg.GraphError, match="'gain_cell' needs the keyword argument\\(s\\) gain \\(given: hidden\\)"):
        gain_cell(hidden=3)
    assert rg.Sequential(gain_cell(hidden=3, gain=2.0), input_size=2).graph.states


@rg.cell
def sized_cell(x, h: rg.State(size=3)):
    """A cell that takes no hidden= (its state's size is fixed)."""
    h_next = rg.tanh(rg.linear(x, 3) + rg.linear(h, 3))
    return h_next, {"h": h_next}


def test_a_cell_without_hidden_is_told_that_stacks_pass_it():
    """rg.stacked (and the CLI's --hidden) pass hidden= to every cell: a cell without it hears why."""
    with pytest.raises(rg.GraphError, match="unexpected keyword argument 'hidden'; .*declare it as a keyword-only"):
        rg.stacked(sized_cell, 1, 3, input_size=2)
    assert rg.Sequential(sized_cell(), input_size=2).graph.states  # made without hidden= it traces


@rg.cell
def wide_third_tanh(x, h: rg.State, *, hidden: int):
    a = rg.tanh(rg.linear(x, hidden) + rg.linear(h, hidden, bias=False))
    b = rg.sigmoid(rg.tanh(a))
    z = rg.tanh(a) * rg.linear(x, hidden + 1, name="wide")
    return z + b, {"h": z}


def test_a_shape_error_deep_in_a_stack_names_its_layers_nodes():
    """An unnamed argument's provisional name counts the unnamed nodes of the same op before it in
    its layer alone (trace/builder.py's indexes; they replaced a scan of every node, which made
    tracing quadratic in the layers): the third tanh of layer 2 is ``layer2.tanh_2``."""
    net = rg.Sequential(rg.cells.lstm(hidden=4), rg.cells.lstm(hidden=4), wide_third_tanh(hidden=4), input_size=2)
    with pytest.raises(rg.ShapeError, match=r"node 'layer2.mul' \(op mul\): sizes differ: 'layer2.tanh_2' \[4\] "
                                            r"and 'layer2.wide' \[5\]"):
        net.graph


def test_numpy_scalars_count_as_numbers_on_either_side():
    """Before: ``np.float32(0.5) * z`` raised "NumPy's multiply was applied to a traced Value" (the
    scalar's own operator goes through NumPy), while ``z * np.float32(0.5)`` worked."""
    import numpy as np

    @rg.cell
    def scaled(x, h: rg.State, *, hidden: int):
        z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
        h_next = rg.tanh(np.float32(0.5) * z + (np.float32(3.0) - z) + (np.int64(2) + z) - z / np.float32(4.0))
        return h_next, {"h": h_next}

    @rg.cell
    def with_floats(x, h: rg.State, *, hidden: int):
        z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
        h_next = rg.tanh(0.5 * z + (3.0 - z) + (2.0 + z) - z / 4.0)
        return h_next, {"h": h_next}

    x = np.random.default_rng(0).normal(size=(4, 2, 2))
    y = [rg.compile_rnn(rg.Sequential(c(hidden=3), input_size=2), device="cpu", dtype="float64", seed=1)
         .forward(x, train=False)[0] for c in (scaled, with_floats)]
    np.testing.assert_array_equal(y[0], y[1])
    assert np.abs(y[0]).max() > 0.1

    @rg.cell
    def divided(x, h: rg.State, *, hidden: int):
        z = rg.tanh(rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U"))
        h_next = np.float32(2.0) / z
        return h_next, {"h": h_next}

    with pytest.raises(rg.OpError, match=r"2\.0 / z: nothing can be divided by a Value"):
        rg.Sequential(divided(hidden=3), input_size=2).graph


def _cell_of(expression):
    """A tanh RNN cell whose pre-activation ``z`` goes through ``expression(z)`` first."""
    @rg.cell
    def custom(x, h: rg.State, *, hidden: int):
        z = rg.linear(x, hidden, name="W") + rg.linear(h, hidden, name="U")
        h_next = rg.tanh(expression(z))
        return h_next, {"h": h_next}
    return custom


CELL_API = r"\. A cell has rg\.linear, rg\.param, rg\.tanh, rg\.sigmoid, rg\.relu, rg\.exp, rg\.layer_norm, rg\.slice"


def _unpacked(z):
    first, *rest = z
    return first


@pytest.mark.parametrize("expression, message", [
    (lambda z: z[:2], r"z\[:2\]: indexing and slicing are not supported: a Value is one column's vector, with no "
                      r"batch dimension; write rg\.slice\(z, 0, 2\) for elements 0:2 of its 3; rg\.split\(z, k\) cuts"),
    (lambda z: z[-1], r"z\[-1\]: indexing .* rg\.slice\(z, 2, 3\) is element 2 as a Value of size 1"),
    (lambda z: z[:, :2], r"z\[:, :2\]: indexing .* rg\.slice\(z, start, stop\) takes elements start:stop of its 3"),
    (_unpacked, r"iterating or unpacking z: split it into k equal parts with rg\.split\(z, k\)"),
    (lambda z: z ** 0.5, r"z \*\* 0\.5: a Value can be raised only to an integer power from 1 to 4 \(built as "
                         r"products\); a cell has no power, square root or reciprocal op"),
    (lambda z: z ** 0, r"z \*\* 0: a Value can be raised only to an integer power from 1 to 4 \(built as products\); "
                       r"z \*\* 0 is the constant 1: write 1 \(or drop the factor\)"),
    (lambda z: z ** z, r"z \*\* z: a Value can be raised only to an integer power from 1 to 4 \(built as products\); "
                       r"a cell has no power, square root or reciprocal op"),
    (lambda z: z ** 5, r"z \*\* 5: .* write it as a product of smaller powers \(z \*\* 4 \* z for z \*\* 5\)"),
    (lambda z: 2 ** z, r"2 \*\* z: for a positive base b write rg\.exp\(math\.log\(b\) \* z\)"),
    (lambda z: np.float64(2) ** z, r"2\.0 \*\* z: for a positive base b write rg\.exp\(math\.log\(b\) \* z\)"),
    (lambda z: 1 / z, r"1 / z: nothing can be divided by a Value: a cell has no reciprocal op \(a Value can be divided "
                      r"by a nonzero number\)"),
    (lambda z: z / z, r"z / z: a Value can be divided only by a nonzero number \(a cell has no reciprocal op\)"),
    (lambda z: z > 0, r"z > 0: a cell has no comparisons \(nor max or min, which compare\): max\(z, 0\) is "
                      r"rg\.relu\(z\), min\(z, 0\) is -rg\.relu\(-z\), a smooth step is rg\.sigmoid\(k \* z\)"),
    (lambda z: np.float64(0) <= z, r"z >= 0\.0: a cell has no comparisons"),
    (lambda z: max(z, 0), r"z < 0: a cell has no comparisons \(nor max or min, which compare\): max\(z, 0\) is "
                          r"rg\.relu\(z\)"),
    (lambda z: z @ z, r"z @ z: a weight matrix times a Value is rg\.linear\(z, n\) \(its own trainable n x 3 weight, "
                      r"PyTorch's layout\)"),
    (lambda z: np.ones((3, 3)) @ z, r"ndarray @ z: a weight matrix times a Value is rg\.linear\(z, n\)"),
    (lambda z: len(z), r"len\(z\): a Value is one column's vector: its size is z\.size \(3\)"),
], ids=["slice", "index", "two_axes", "unpack", "square_root", "power_0", "power_value", "power_5", "base_2",
        "numpy_base", "reciprocal", "value_divisor", "compare", "numpy_compare", "max", "matmul", "numpy_matmul",
        "len"])
def test_what_a_value_cannot_do_names_the_operation_and_what_to_write(expression, message):
    """Before: Python's own TypeError from the cell's code ('Value' object is not subscriptable,
    unsupported operand type(s) for ** or pow(), for /, '>' not supported, object of type 'Value'
    has no len()), ``z ** z`` naming Value('layer0.z', size=3) and NumPy's message for
    ``np.float64(2) ** z``; now an OpError naming the expression as written, what to write instead,
    the cell's line and the cell API."""
    custom = _cell_of(expression)
    where = rf"\(in cell 'custom', .*test_cell_errors\.py:{_line(custom, 'expression(z)')}\)"
    with pytest.raises(rg.OpError, match=message + ".*" + where + CELL_API):
        rg.Sequential(custom(hidden=3), input_size=2).graph


def test_a_missing_rnngraph_function_in_a_cell_lists_the_cell_functions():
    """Before: ``rg.softplus(z)`` said only "module 'rnngraph' has no attribute 'softplus'"."""
    def softplus(z):
        return rg.softplus(z)
    custom = _cell_of(softplus)
    with pytest.raises(rg.OpError) as info:
        rg.Sequential(custom(hidden=3), input_size=2).graph
    assert str(info.value) == (
        "cell 'custom' raised AttributeError: module 'rnngraph' has no attribute 'softplus'. A cell has rg.linear, "
        "rg.param, rg.tanh, rg.sigmoid, rg.relu, rg.exp, rg.layer_norm, rg.slice, rg.split, rg.concat and the "
        "operators + - * (Values and numbers), / number, unary -, abs(), ** 1 to 4 (README.md, Declaring a cell) "
        f"({__file__}:{softplus.__code__.co_firstlineno + 1})")


def _import_softplus():
    from rnngraph import softplus
    return softplus


def test_an_unknown_rnngraph_name_suggests_the_closest_and_stays_an_attribute_error():
    """The module's ``__getattr__`` keeps AttributeError (hasattr, ``from rnngraph import``) and
    Python's plain message for private names."""
    with pytest.raises(AttributeError, match=r"no attribute 'sigmoud'\. Did you mean rg\.sigmoid\? A cell has"):
        rg.sigmoud
    assert not hasattr(rg, "softplus") and hasattr(rg, "relu") and hasattr(rg, "cells")
    with pytest.raises(ImportError, match="cannot import name 'softplus'"):
        _import_softplus()
    with pytest.raises(AttributeError) as info:
        rg.__no_such_dunder__
    assert str(info.value) == "module 'rnngraph' has no attribute '__no_such_dunder__'"


def _missing_message(name: str) -> str:
    """The module ``__getattr__``'s message for ``name`` (called directly: a test before may have
    imported rnngraph.torch or rnngraph.lm, which binds them as attributes of the package)."""
    with pytest.raises(AttributeError) as info:
        rg.__getattr__(name)
    return str(info.value)


def test_an_unknown_rnngraph_name_hears_of_its_own_kind():
    """Before: every public name got the cell functions and difflib's closest of all names:
    ``rg.torch`` "Did you mean rg.trace?", ``rg.softmax`` "Did you mean rg.LSHSoftmax?". A submodule
    imported by name says so; a capitalized name (a class) gets the closest classes and no cell
    functions, a lowercase one the closest functions (and submodules) and the cell functions;
    a name equal to an export but for case is suggested first."""
    for module in ("torch", "lm"):
        assert _missing_message(module) == (f"module 'rnngraph' has no attribute '{module}'; rnngraph.{module} is a "
                                            f"submodule imported by name: import rnngraph.{module}")
    cell_api = ("A cell has rg.linear, rg.param, rg.tanh, rg.sigmoid, rg.relu, rg.exp, rg.layer_norm, rg.slice, "
                "rg.split, rg.concat and the operators + - * (Values and numbers), / number, unary -, abs(), ** 1 to 4 "
                "(README.md, Declaring a cell)")
    assert _missing_message("softmax") == f"module 'rnngraph' has no attribute 'softmax'. {cell_api}"
    assert _missing_message("compil") == (f"module 'rnngraph' has no attribute 'compil'. Did you mean rg.compile or "
                                          f"rg.compile_rnn? {cell_api}")
    assert _missing_message("Relu") == "module 'rnngraph' has no attribute 'Relu'. Did you mean rg.relu?"
    assert _missing_message("Sequentail") == "module 'rnngraph' has no attribute 'Sequentail'. Did you mean " \
                                             "rg.Sequential?"
