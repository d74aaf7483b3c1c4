"""What a cell can use, written once for the messages about what it cannot: the Value's refusals
(trace/value.py) and an unknown ``rg.`` name (the package's ``__getattr__``). Imports nothing, so
that the package's ``__getattr__`` can import it without the tracing modules (or NumPy)."""

#: The largest integer power ``z ** k`` a Value builds (from products)
MAX_POWER = 4

#: The functions of rnngraph a cell calls on Values, in the order the messages list them
#: (tests/test_cell_errors.py checks them against the package's exports)
CELL_FUNCTIONS = ("linear", "param", "tanh", "sigmoid", "relu", "exp", "layer_norm", "slice", "split", "concat")

#: The operators a Value has
OPERATORS = f"the operators + - * (Values and numbers), / number, unary -, abs(), ** 1 to {MAX_POWER}"

#: What a cell can use, as the messages end
CELL_API = f"A cell has {', '.join(f'rg.{name}' for name in CELL_FUNCTIONS)} and {OPERATORS}"
