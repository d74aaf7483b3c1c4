"""rnngraph: a graph compiler for generalized LSTM-like recurrent networks.

Declare a cell in Python (``@rg.cell``), stack cells with ``rg.Sequential``, and run the
network with the NumPy reference (``rg.Reference``), train it with ``rg.compile``, or use it as a
layer with ``rg.compile_rnn`` (and ``rnngraph.torch.RNN`` inside PyTorch). See README.md (use) and
ARCHITECTURE.md (how the compiler is built).
"""
from . import cells, ir, ops, passes, schedule
from .codegen.tuning import LoopTuning
from .errors import CycleError, DelayError, DtypeError, GraphError, OpError, ShapeError, StateError, UnusedWarning
from .ir import Graph, Init, parse
from .layer import CompiledRNN, compile_rnn
from .lazy_loss import LazyLoss
from .lsh import LSHConfig
from .lsh_head import LSHSoftmax
from .bidirectional import Bidirectional
from .distributed import PeerFailure, distributed, global_state, set_global_state
from .network import MSE, Dropout, Embedding, SequenceClassifier, Sequential, SoftmaxCrossEntropy, stacked
from .optim import SGD, Adam, AdamW, clip_grad_norm
from .reference import Reference, init_params, reset_streams, zero_states
from .runtime import TrainingStep, compile
from .step_forward import StepForward
from .schedule_options import ScheduleOptions
from .trace import State, Value, cell, concat, exp, layer_norm, linear, param, relu, sigmoid, slice, split, tanh

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
