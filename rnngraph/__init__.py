"""rnngraph: a graph compiler for generalized LSTM-like recurrent networks.

Declare a cell in Python (``@rg.cell``), stack cells with ``rg.Sequential``, and run the
network with the NumPy reference (``rg.Reference``), train it with ``rg.compile``, or use it as a
layer with ``rg.compile_rnn`` (and ``rnngraph.torch.RNN`` inside PyTorch). See README.md (use) and
ARCHITECTURE.md (how the compiler is built).
"""
import importlib as _importlib

#: The package's names and the module each comes from, imported at first use (PEP 562), so that a
#: process needing only part of the package does not import the rest: a compile worker
#: (codegen/parallel_compile.py), which imports codegen modules only, leaves networkx, the passes
#: and the network API out (its imports 1.01 -> 0.92 s on the CPU,
#: bench/results/cpu-20261205-startup-imports.txt). NumPy still comes with ``rg.distributed``.
_EXPORTS = {
    **dict.fromkeys(["CycleError", "DelayError", "DtypeError", "GraphError", "OpError", "ShapeError", "StateError",
                     "UnusedWarning"], "errors"),
    **dict.fromkeys(["Graph", "Init", "parse"], "ir"),
    **dict.fromkeys(["CompiledRNN", "compile_rnn"], "layer"),
    "LoopTuning": "codegen.tuning", "LazyLoss": "lazy_loss", "NotApplied": "lazy_loss", "LSHConfig": "lsh", "LSHSoftmax": "lsh_head",
    "Bidirectional": "bidirectional",
    **dict.fromkeys(["PeerFailure", "global_state", "set_global_state"], "distributed"),
    **dict.fromkeys(["MSE", "Dropout", "Embedding", "SequenceClassifier", "Sequential", "SoftmaxCrossEntropy",
                     "stacked"], "network"),
    **dict.fromkeys(["SGD", "Adam", "AdamW", "clip_grad_norm"], "optim"),
    **dict.fromkeys(["Reference", "init_params", "reset_streams", "zero_states"], "reference"),
    **dict.fromkeys(["TrainingStep", "compile"], "runtime"),
    "StepForward": "step_forward", "ScheduleOptions": "schedule_options",
    **dict.fromkeys(["State", "Value", "cell", "concat", "exp", "layer_norm", "linear", "param", "relu", "sigmoid",
                     "slice", "split", "tanh"], "trace"),
}

#: The submodules reachable as attributes (``rg.cells``, ``rg.optim``): those the package bound when
#: it imported everything at once. Others (``rnngraph.torch``, ``rnngraph.lm``, ...) are imported by
#: name, so that ``hasattr(rg, "torch")`` neither imports PyTorch nor fails without it.
_SUBMODULES = frozenset([
    "arrays", "bidirectional", "cells", "codegen", "data", "debug", "devices", "errors", "executor", "heads", "ir",
    "layer", "lazy_loss", "lengths", "loop_env", "lsh", "lsh_head", "lsh_train", "masks", "network", "ops",
    "ops_losses", "ops_lsh", "ops_registry", "optim", "passes", "precision", "reference", "runtime", "schedule",
    "schedule_options", "shards", "step_cuda", "step_feed", "step_forward", "step_host", "step_lengths",
    "step_outcome", "step_state", "trace"])


def __getattr__(name: str):
    """A name of :data:`_EXPORTS` from its module, or a submodule of :data:`_SUBMODULES`, each
    imported at its first use and kept; AttributeError for anything else."""
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(_missing(name))
    globals()[name] = value
    return value


def _missing(name: str) -> str:
    """The message of a missing attribute ``name``. A submodule imported by name (``rg.torch``)
    says ``import rnngraph.torch``; any other public name gets the closest public names of its
    kind (a lowercase name: functions and submodules; a capitalized one: classes) and, where it
    looks like a function, what a cell can use (a cell's ``rg.softplus(z)`` hears what it can write
    instead). ``hasattr`` comes here too, mid-import as well, and so does ``from rnngraph import X``,
    but Python replaces that message with its own ImportError ("cannot import name 'X'").
    Imports rnngraph.cell_api only (which imports nothing), difflib and importlib.util."""
    message = f"module {__name__!r} has no attribute {name!r}"
    if name.startswith("_") or not name.isidentifier():
        return message
    import importlib.util
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return f"{message}; rnngraph.{name} is a submodule imported by name: import rnngraph.{name}"
    close = _closest(name)
    hint = f" Did you mean {' or '.join(f'rg.{n}' for n in close)}?" if close else ""
    if name[0].isupper():
        return f"{message}.{hint}"
    from .cell_api import CELL_API
    return f"{message}.{hint} {CELL_API} (README.md, Declaring a cell)"


def _closest(name: str) -> list[str]:
    """Up to 3 public names close to ``name``: one equal to it but for case first (``Relu``:
    ``relu``), then difflib's closest among those of its kind: capitalized (classes) for a
    capitalized name, else lowercase (functions, submodules)."""
    import difflib
    public = set(_EXPORTS) | _SUBMODULES | set(globals().get("__all__", ()))  # __all__ comes last
    same_case = [n for n in sorted(public) if n.lower() == name.lower()]
    kind = sorted(n for n in public if n[0].isupper() == name[0].isupper())
    return list(dict.fromkeys(same_case + difflib.get_close_matches(name, kind, n=3)))[:3]


def __dir__() -> list[str]:
    """The names in ``__all__``, the submodules of :data:`_SUBMODULES` and those already bound."""
    return sorted(n for n in set(globals()) | set(__all__) | _SUBMODULES if not n.startswith("_"))


# ``rg.distributed`` is a function named as its module: imported now, or the module's first import
# elsewhere would bind the package's name to the module (0.07 s, NumPy's import most of it)
from .distributed import distributed  # noqa: E402


__version__ = "0.1.0"

__all__ = [
    "cells", "ir", "ops", "Graph", "Init", "parse",
    "CycleError", "DelayError", "DtypeError", "GraphError", "OpError", "ShapeError", "StateError", "UnusedWarning",
    "Bidirectional", "Dropout", "Embedding", "LSHSoftmax", "MSE", "SequenceClassifier", "Sequential", "SoftmaxCrossEntropy", "stacked",
    "Reference", "init_params", "reset_streams", "zero_states", "SGD", "Adam", "AdamW", "clip_grad_norm",
    "distributed", "global_state", "set_global_state", "PeerFailure",
    "TrainingStep", "StepForward", "LazyLoss", "NotApplied", "LSHConfig", "compile", "CompiledRNN", "compile_rnn", "ScheduleOptions", "LoopTuning",
    "State", "Value", "cell", "concat", "exp", "layer_norm", "linear", "param", "relu", "sigmoid", "slice",
    "split", "tanh",
]
