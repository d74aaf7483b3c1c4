"""Composing cells into networks: ``rg.Sequential(rg.Embedding(V, E), cell, ..., rg.SoftmaxCrossEntropy(V))``.

Layers are named ``embed.``, ``layer0.``, ``layer1.``, ... (cells only, counted from 0) and
``head.``; so a 2-layer LSTM's recurrent weight is ``layer1.U.weight``. The network's inputs
are the node ``x`` (token ids of shape (T, S) when the first layer is an Embedding, else floats
of shape (T, S, input_size)) and, with a loss head, the targets ``y`` (token ids, (T, S)).
"""
from __future__ import annotations

from functools import cached_property

from .errors import GraphError
from .ir import FLOAT, INDEX, Graph, Init
from .passes.validate import validate
from .trace import Cell, Value, _ACTIVE, _Builder, linear


class Embedding:
    """Token ids -> vectors: a (vocab, dim) table ``embed.weight``, init N(0, 1) as nn.Embedding."""

    prefix = "embed."

    def __init__(self, vocab: int, dim: int):
        if vocab < 1 or dim < 1:
            raise GraphError(f"rg.Embedding({vocab}, {dim}): sizes must be positive")
        self.vocab, self.dim = vocab, dim

    def trace(self, b: _Builder, x: Value) -> Value:
        table = b.param("weight", (self.vocab, self.dim), Init("normal", 1.0))
        return b.add("embedding", [x], [table], name="embed.e")

    def __repr__(self):
        return f"Embedding({self.vocab}, {self.dim})"


class SoftmaxCrossEntropy:
    """Output layer and loss: logits = W h + b (vocab rows, nn.Linear init), per-column loss
    -log softmax(logits)[y] in nats (PyTorch's CrossEntropyLoss); the training loss is its
    mean over the T*S columns of a window."""

    prefix = "head."

    def __init__(self, vocab: int):
        if vocab < 2:
            raise GraphError(f"rg.SoftmaxCrossEntropy({vocab}): needs at least 2 classes")
        self.vocab = vocab

    def trace(self, b: _Builder, h: Value) -> tuple[Value, Value]:
        logits = linear(h, self.vocab, name="W")
        b.names[logits.id] = "head.logits"
        y = b.add("input", size=1, dtype=INDEX, name="y")
        loss = b.add("softmax_xent", [logits, y], name="head.loss")
        return logits, loss

    def __repr__(self):
        return f"SoftmaxCrossEntropy({self.vocab})"


class Sequential:
    """A stack of layers traced into one :class:`rnngraph.ir.Graph` (``.graph``).

    layers: optional Embedding first, then cells (``rg.cells.lstm(hidden=512)`` ...), then
    optionally a SoftmaxCrossEntropy head last. input_size is required when the first layer
    is a cell (float inputs of shape (T, S, input_size)).
    Raises GraphError for a misplaced layer, a missing input_size, or any error of the cells
    (named by node and op); warns UnusedWarning for unused params/inputs.
    """

    def __init__(self, *layers, input_size: int | None = None, name: str | None = None):
        if not layers:
            raise GraphError("rg.Sequential needs at least one layer")
        for k, layer in enumerate(layers):
            if isinstance(layer, Embedding) and k != 0:
                raise GraphError(f"layer {k}: an Embedding must be the first layer")
            if isinstance(layer, SoftmaxCrossEntropy) and k != len(layers) - 1:
                raise GraphError(f"layer {k}: a SoftmaxCrossEntropy head must be the last layer")
            if not isinstance(layer, (Embedding, SoftmaxCrossEntropy, Cell)):
                hint = " (did you forget to call the cell, e.g. lstm(hidden=64)?)" if callable(layer) else ""
                raise GraphError(f"layer {k}: {layer!r} is not a cell, rg.Embedding or rg.SoftmaxCrossEntropy{hint}")
        if not isinstance(layers[0], Embedding) and input_size is None:
            raise GraphError("rg.Sequential: the first layer is a cell, so give input_size=")
        self.layers = layers
        self.input_size = input_size
        self.name = name or "_".join(l.name for l in layers if isinstance(l, Cell)) or "net"

    @property
    def cells(self) -> list[Cell]:
        """The recurrent layers, in order."""
        return [l for l in self.layers if isinstance(l, Cell)]

    @property
    def has_loss(self) -> bool:
        """Whether the last layer is a loss head."""
        return isinstance(self.layers[-1], SoftmaxCrossEntropy)

    @cached_property
    def graph(self) -> Graph:
        """The validated network graph (traced once)."""
        b = _Builder(self.name)
        first_is_embedding = isinstance(self.layers[0], Embedding)
        _ACTIVE.append(b)
        try:
            x = b.add("input", size=1 if first_is_embedding else self.input_size,
                      dtype=INDEX if first_is_embedding else FLOAT, name="x")
            outputs, loss, k = [x], None, 0
            for layer in self.layers:
                if isinstance(layer, Cell):
                    b.prefix = f"layer{k}."
                    k += 1
                    x = layer.trace(b, x)
                    outputs = [x]
                    continue
                b.prefix, b.hidden = layer.prefix, None
                if isinstance(layer, SoftmaxCrossEntropy):
                    logits, loss = layer.trace(b, x)
                    outputs = [logits]
                else:
                    x = layer.trace(b, x)
                    outputs = [x]
                b.name_layer({})
        finally:
            _ACTIVE.pop()
        b.prefix = ""
        b.name_layer({})
        return validate(b.graph(outputs, loss))

    def __repr__(self):
        return "Sequential(" + ", ".join(map(repr, self.layers)) + ")"


def stacked(cell, layers: int, hidden: int, *, input_size: int | None = None, vocab: int | None = None,
            embed: int | None = None, name: str | None = None) -> Sequential:
    """``layers`` copies of ``cell(hidden=hidden)`` stacked; with ``vocab`` a language model
    (Embedding(vocab, embed or hidden) first, SoftmaxCrossEntropy(vocab) last), else float inputs
    of ``input_size`` (default: hidden). Raises GraphError for layers < 1."""
    if not isinstance(layers, int) or layers < 1:
        raise GraphError(f"layers must be a positive integer, got {layers!r}")
    cells = [cell(hidden=hidden) for _ in range(layers)]
    if vocab is not None:
        return Sequential(Embedding(vocab, embed or hidden), *cells, SoftmaxCrossEntropy(vocab), name=name)
    return Sequential(*cells, input_size=input_size or hidden, name=name)
