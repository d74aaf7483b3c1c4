"""Composing cells into networks: ``rg.Sequential(rg.Embedding(V, E), cell, ..., rg.SoftmaxCrossEntropy(V))``.

Layers are named ``embed.``, ``layer0.``, ``layer1.``, ... (cells only, counted from 0),
``drop0.``, ``drop1.``, ... (Dropout layers with p > 0, counted from 0 on their own) and
``head.``; so a 2-layer LSTM's recurrent weight is ``layer1.U.weight``. The network's inputs
are the node ``x`` (token ids of shape (T, S) when the first layer is an Embedding, else floats
of shape (T, S, input_size)), one dropout mask ``dropK.mask`` per Dropout layer with p > 0
(floats of shape (T, S, width); :class:`rnngraph.runtime.TrainingStep` feeds them) and, with a
loss head (:mod:`rnngraph.heads`: SoftmaxCrossEntropy, MSE, SequenceClassifier), the targets
``y`` (token ids (T, S), or floats (T, S, n) for MSE).
"""
from __future__ import annotations

from functools import cached_property
from numbers import Real

from .bidirectional import Bidirectional
from .errors import GraphError, positive_int
from .heads import EMBEDDING_TABLE, MSE, Head, SequenceClassifier, SoftmaxCrossEntropy
from .ir import FLOAT, INDEX, Graph, Init
from .masks import draw_mask, mask_inputs, mask_seed  # re-exported (__all__)
from .passes.validate import validate
from .trace import Builder, Cell, Value, tracing

__all__ = ["Dropout", "Embedding", "MSE", "Head", "SequenceClassifier", "Sequential", "SoftmaxCrossEntropy",
           "draw_mask", "mask_inputs", "mask_seed", "stacked"]


class Embedding:
    """Token ids -> vectors: a (vocab, dim) table ``embed.weight``, init N(0, 1) as nn.Embedding.
    GraphError naming ``vocab`` or ``dim`` unless each is a positive integer."""

    prefix = "embed."

    def __init__(self, vocab: int, dim: int):
        self.vocab = positive_int(vocab, f"rg.Embedding({vocab!r}, {dim!r}): vocab", GraphError)
        self.dim = positive_int(dim, f"rg.Embedding({vocab!r}, {dim!r}): dim", GraphError)

    def trace(self, b: Builder, x: Value) -> Value:
        table = b.param("weight", (self.vocab, self.dim), Init("normal", 1.0))  # EMBEDDING_TABLE
        return b.add("embedding", [x], [table], name="embed.e")

    def __repr__(self):
        return f"Embedding({self.vocab}, {self.dim})"


class Dropout:
    """Inverted dropout on the value passing between two layers (Zaremba et al. 2014, "Recurrent
    Neural Network Regularization": dropout on the non-recurrent connections only; PyTorch's
    nn.Dropout convention).

    Traced as a graph input ``dropK.mask`` (float, the width of the value it drops, attribute
    ``dropout=p``) and a pointwise ``dropK.out = mul(value, dropK.mask)``. The mask is data, not
    randomness inside the graph: :meth:`rnngraph.runtime.TrainingStep.train` feeds fresh masks
    of shape (T, S, width) in the step's dtype whose elements are 0 with probability p and
    1/(1-p) otherwise (so the expected value is unchanged), and ``forward`` (evaluation,
    sampling) feeds ones: no dropout at inference, like PyTorch's ``model.eval()``.
    ``rg.Reference`` takes the masks as ordinary inputs. With p == 0 the layer adds nothing (the
    graph is that of the network without it).

    Allowed anywhere in rg.Sequential after the first layer and before a loss head. Raises
    GraphError unless p is a number in [0, 1).
    """

    prefix = "drop"  # Sequential numbers them: drop0., drop1., ...

    def __init__(self, p: float = 0.5):
        if isinstance(p, bool) or not isinstance(p, Real) or not 0.0 <= float(p) < 1.0:
            raise GraphError(f"rg.Dropout({p!r}): p must be a number in [0, 1) (the probability of "
                             f"zeroing an element)")
        self.p = float(p)

    def trace(self, b: Builder, x: Value) -> Value:
        if self.p == 0.0:
            return x
        mask = b.add("input", size=x.size, dtype=FLOAT, attrs={"dropout": self.p}, name=f"{b.prefix}mask")
        return b.add("mul", [x, mask], name=f"{b.prefix}out")

    def __repr__(self):
        return f"Dropout({self.p!r})"


class Sequential:
    """A stack of layers traced into one :class:`rnngraph.ir.Graph` (``.graph``).

    layers: optional Embedding first, then cells (``rg.cells.lstm(hidden=512)`` ...) or one
    ``rg.Bidirectional(cell)`` (the only recurrent layer, no head: its graph input is (T, S,
    2 * input_size), see rnngraph/bidirectional.py), then optionally a loss head last (rg.SoftmaxCrossEntropy, rg.MSE, rg.SequenceClassifier);
    ``rg.Dropout(p)`` anywhere after the first layer and before the head. input_size is
    required when the first layer is a cell (float inputs of shape (T, S, input_size)).
    A ``SoftmaxCrossEntropy(V, tie_weights=True)`` head reads the first layer's
    ``rg.Embedding(V, E)`` table as its output weight (see rnngraph/heads.py).
    Raises GraphError for a misplaced layer, a missing input_size or one that is not a positive
    integer, a tied head without an Embedding first layer or with another vocabulary (here), or
    (when traced) the last layer's width other than E, or any error of the cells (named by node
    and op); warns UnusedWarning for unused params/inputs.
    """

    def __init__(self, *layers, input_size: int | None = None, name: str | None = None):
        if not layers:
            raise GraphError("rg.Sequential needs at least one layer")
        for k, layer in enumerate(layers):
            if isinstance(layer, Dropout) and k == 0:
                raise GraphError(f"layer {k}: a Dropout cannot be the first layer (it drops the output of "
                                 f"the layer before it)")
            if isinstance(layer, Dropout) and any(isinstance(l, Head) for l in layers[:k]):
                raise GraphError(f"layer {k}: a Dropout cannot follow the loss head (put it before the head)")
        for k, layer in enumerate(layers):
            if isinstance(layer, Embedding) and k != 0:
                raise GraphError(f"layer {k}: an Embedding must be the first layer")
            if isinstance(layer, Head) and k != len(layers) - 1:
                raise GraphError(f"layer {k}: the {type(layer).__name__} head must be the last layer")
            if not isinstance(layer, (Embedding, Head, Cell, Dropout, Bidirectional)):
                hint = " (did you forget to call the cell, e.g. lstm(hidden=64)?)" if callable(layer) else ""
                raise GraphError(f"layer {k}: {layer!r} is not a cell, rg.Embedding, rg.Dropout or a loss head "
                                 f"(rg.SoftmaxCrossEntropy, rg.MSE, rg.SequenceClassifier){hint}")
        if any(isinstance(l, Bidirectional) for l in layers) and (
                sum(isinstance(l, (Cell, Bidirectional)) for l in layers) > 1 or isinstance(layers[0], Embedding)):
            raise GraphError("an rg.Bidirectional layer must be the network's only recurrent layer, on float inputs: "
                             "its reverse direction's time order is reversed, so nothing before or after it in the "
                             "graph lines up with it (stack bidirectional layers with rnngraph.torch.RNN("
                             "bidirectional=True), one graph per layer)")
        if any(isinstance(l, Bidirectional) for l in layers) and isinstance(layers[-1], Head):
            raise GraphError("a loss head cannot follow rg.Bidirectional: the second half of its output is in reversed "
                             "time, and rg.compile's training step carries states into the next window, which a "
                             "reverse direction has no use for; compile it with rg.compile_rnn (or use rnngraph.torch.RNN("
                             "bidirectional=True)) and apply the loss yourself")
        head = layers[-1]
        if isinstance(head, Head) and head.tie_weights:
            if not isinstance(layers[0], Embedding):
                raise GraphError(f"rg.{head!r}: tie_weights needs an rg.Embedding as the first layer (its table "
                                 f"{EMBEDDING_TABLE} is the output weight); this network starts with {layers[0]!r}")
            if layers[0].vocab != head.vocab:
                raise GraphError(f"rg.{head!r}: tie_weights needs the embedding's vocabulary, but "
                                 f"rg.{layers[0]!r} has {layers[0].vocab} tokens and the head {head.vocab} classes")
        if not isinstance(layers[0], Embedding):
            if input_size is None:
                raise GraphError("rg.Sequential: the first layer is a cell, so give input_size=")
            input_size = positive_int(input_size, "rg.Sequential: input_size", GraphError)
        self.layers = layers
        self.input_size = input_size
        self.name = name or "_".join(l.name for l in layers if isinstance(l, (Cell, Bidirectional))) or "net"

    @property
    def cells(self) -> list[Cell]:
        """The recurrent layers, in order."""
        return [l for l in self.layers if isinstance(l, Cell)] + [l.cell for l in self.layers
                                                                   if isinstance(l, Bidirectional)]

    @property
    def has_loss(self) -> bool:
        """Whether the last layer is a loss head."""
        return isinstance(self.layers[-1], Head)

    @property
    def head(self) -> Head | None:
        """The loss head (the last layer), or None."""
        return self.layers[-1] if self.has_loss else None

    @cached_property
    def graph(self) -> Graph:
        """The validated network graph (traced once)."""
        return self._trace(lengths=False)

    @cached_property
    def masked_graph(self) -> Graph:
        """The graph for variable-length sequences (traced once, on first use): every cell's
        states held and outputs zeroed past each stream's length, through the mask inputs
        ``lengths.mask<size>`` (rnngraph/lengths.py). Same parameters as :attr:`graph`. Raises
        GraphError for a cell with a state read more than one step back."""
        return self._trace(lengths=True)

    def _trace(self, lengths: bool) -> Graph:
        b = Builder(self.name)
        if lengths:
            b.length_masks = {}
        first_is_embedding = isinstance(self.layers[0], Embedding)
        with tracing(b):
            doubled = any(isinstance(l, Bidirectional) for l in self.layers)  # [x, x reversed]
            x = b.add("input", size=1 if first_is_embedding else self.input_size * (1 + doubled),
                      dtype=INDEX if first_is_embedding else FLOAT, name="x")
            outputs, loss, k, j = [x], None, 0, 0
            for layer in self.layers:
                if isinstance(layer, Cell):
                    b.prefix = f"layer{k}."
                    k += 1
                    x = layer.trace(b, x)
                    outputs = [x]
                    continue
                if isinstance(layer, Bidirectional):
                    x = layer.trace(b, x, k)
                    k += 1
                    outputs = [x]
                    continue
                b.prefix, b.hidden = layer.prefix, None
                if isinstance(layer, Dropout):
                    if layer.p == 0.0:
                        continue  # nothing at all: not even a name
                    b.prefix = f"drop{j}."
                    j += 1
                if isinstance(layer, Head):
                    logits, loss = layer.trace(b, x)
                    outputs = [logits]
                else:
                    x = layer.trace(b, x)
                    outputs = [x]
                b.name_layer({})
        b.prefix = ""
        b.name_layer({})
        return validate(b.graph(outputs, loss))

    def __repr__(self):
        return "Sequential(" + ", ".join(map(repr, self.layers)) + ")"


def stacked(cell, layers: int, hidden: int, *, input_size: int | None = None, vocab: int | None = None,
            embed: int | None = None, name: str | None = None, dropout: float = 0.0,
            tie_weights: bool = False) -> Sequential:
    """``layers`` copies of ``cell(hidden=hidden)`` stacked; with ``vocab`` a language model
    (Embedding(vocab, embed or hidden) first, SoftmaxCrossEntropy(vocab) last), else float inputs
    of ``input_size`` (default: hidden).

    dropout: p of an ``rg.Dropout(p)`` between consecutive cells (like
    ``nn.LSTM(dropout=p)``); a language model (``vocab`` given) also gets one after the
    Embedding and one after the last cell, before the head: Zaremba et al. 2014's placement,
    dropout on the input of every recurrent layer and of the softmax, never on the recurrent
    connections. So a 2-layer LM is Embedding, Dropout, cell, Dropout, cell, Dropout, head
    (``drop0.`` .. ``drop2.``). 0 (the default) adds nothing.
    tie_weights: a language model's head is ``SoftmaxCrossEntropy(vocab, tie_weights=True)``, its
    output weight the embedding table (Press & Wolf 2017; PyTorch's word_language_model
    ``RNNModel(..., tie_weights=True)``), which needs ``embed`` None or equal to ``hidden``.
    Raises GraphError for layers, hidden, input_size, vocab or embed that is not a positive
    integer (None for the last three: their defaults), dropout outside [0, 1), or tie_weights
    without vocab or with an embed other than hidden (naming both)."""
    layers = positive_int(layers, "rg.stacked: layers", GraphError)
    try:
        drop = Dropout(dropout)  # checks p
    except GraphError as exc:
        raise GraphError(f"rg.stacked(dropout={dropout!r}): {exc}") from None
    cells = [cell(hidden=hidden) for _ in range(layers)]
    body: list = []
    for c in cells:
        if drop.p > 0 and (body or vocab is not None):
            body.append(drop)
        body.append(c)
    if tie_weights and vocab is None:
        raise GraphError("rg.stacked(tie_weights=True): ties the output layer to the embedding, so it needs vocab=")
    if vocab is not None:
        tail = [drop] if drop.p > 0 else []
        dim = hidden if embed is None else positive_int(embed, "rg.stacked: embed", GraphError)
        if tie_weights and dim != hidden:
            raise GraphError(f"rg.stacked(tie_weights=True): the tied table is the embedding and the output weight, "
                             f"so embed ({dim}) must equal hidden ({hidden})")
        head = SoftmaxCrossEntropy(vocab, tie_weights=tie_weights)
        return Sequential(Embedding(vocab, dim), *body, *tail, head, name=name)
    return Sequential(*body, input_size=hidden if input_size is None else input_size, name=name)
