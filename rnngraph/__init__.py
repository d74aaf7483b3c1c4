"""rnngraph: a graph compiler for generalized LSTM-like recurrent networks.

Declare a cell in Python (``@rg.cell``), stack cells with ``rg.Sequential``, and run the
network with the NumPy reference (``rg.Reference``), train it with ``rg.compile``, or use it as a
layer with ``rg.compile_rnn`` (and ``rnngraph.torch.RNN`` inside PyTorch). See README.md (use) and
ARCHITECTURE.md (how the compiler is built).
"""
from __future__ import annotations

import importlib
import importlib.util

#: The package's names and the module each comes from, imported at first use (PEP 562): ``import
#: rnngraph`` itself imports nothing else, so a process that needs only part of it -- a compile
#: worker importing codegen modules (codegen/parallel_compile.py), the CLI's --help -- does not pay
#: for the rest (NumPy, networkx, the passes: 0.17 s of a worker's 1.05 s start on the CPU).
_EXPORTS = {
    **dict.fromkeys(["CycleError", "DelayError", "DtypeError", "GraphError", "OpError", "ShapeError", "StateError",
                     "UnusedWarning"], "errors"),
    **dict.fromkeys(["Graph", "Init", "parse"], "ir"),
    **dict.fromkeys(["CompiledRNN", "compile_rnn"], "layer"),
    "LoopTuning": "codegen.tuning", "LazyLoss": "lazy_loss", "LSHConfig": "lsh", "LSHSoftmax": "lsh_head",
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


def __getattr__(name: str):
    """A name of :data:`_EXPORTS` from its module, or a submodule (``rg.cells``, ``rg.ops``), each
    imported at its first use and kept; AttributeError for anything else."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "TrainingStep", "StepForward", "LazyLoss", "LSHConfig", "compile", "CompiledRNN", "compile_rnn", "ScheduleOptions", "LoopTuning",
    "State", "Value", "cell", "concat", "exp", "layer_norm", "linear", "param", "relu", "sigmoid", "slice",
    "split", "tanh",
]
