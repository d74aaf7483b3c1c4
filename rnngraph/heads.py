"""Loss heads: the last layer of an ``rg.Sequential``, holding the output layer and the loss.

Each head traces its output (``head.logits``, ``head.out`` or the value it follows), a target
input ``y`` and a per-column loss node ``head.loss`` (an op of kind ``loss`` in
:mod:`rnngraph.ops`), and turns the targets a user passes to ``TrainingStep.train`` into the
per-column array fed as ``y`` (:meth:`Head.feed`). ``LSHSoftmax`` (rnngraph/lsh_head.py) is a
SoftmaxCrossEntropy trained over LSH active sets. The window's loss is the sum of
``head.loss`` over its T*S columns divided by the columns that count (PyTorch's
reduction="mean"; :func:`rnngraph.reference.loss_columns`):

=============================  ====================  ===========================  ==============
head                           targets to ``train``  fed as ``y``                 mean over
=============================  ====================  ===========================  ==============
SoftmaxCrossEntropy(V)         ids (T, S)            the same                     T*S columns
SoftmaxCrossEntropy(V, ii)     ids (T, S)            the same                     targets != ii
SoftmaxCrossEntropy(V, chunk=) ids (T, S)            the same                     as above
LSHSoftmax(V, config)          ids (T, S)            the same                     T*S columns
MSE() / MSE(n)                 floats (T, S, n)      the same                     T*S*n elements
SequenceClassifier(C)          labels (S,)           (T, S): the label at T-1,    S streams
                                                     NO_LABEL elsewhere
=============================  ====================  ===========================  ==============

``SoftmaxCrossEntropy(V, tie_weights=True)`` (dense or chunked) takes the same targets; its output
weight is the network's embedding table (:data:`EMBEDDING_TABLE`).
"""
from __future__ import annotations

from numbers import Integral

import numpy as np

from .errors import GraphError, ShapeError
from .ir import FLOAT, INDEX
from .lengths import zero_past_lengths
from .ops import IGNORE_INDEX_MIN
from .trace import Builder, Value, linear

#: The ignored target id of a SoftmaxCrossEntropy without ``ignore_index`` in the network's
#: variable-length graph (``Sequential.masked_graph``): the training step feeds it at padded
#: steps (rnngraph/step_lengths.py); never a class id.
PADDED_TARGET = IGNORE_INDEX_MIN

#: The table an ``rg.Embedding`` first layer declares (rnngraph/network.py): a head with
#: ``tie_weights=True`` reads it as its output weight.
EMBEDDING_TABLE = "embed.weight"

#: The target id SequenceClassifier feeds at the timesteps that carry no label (the loss's
#: ignore_index): every column but each stream's last adds nothing to the loss.
NO_LABEL = -1


def host_array(a) -> np.ndarray:
    """``a`` as a NumPy array (device arrays with ``__cuda_array_interface__`` are copied)."""
    if hasattr(a, "__cuda_array_interface__"):
        from numba import cuda
        return cuda.as_cuda_array(a).copy_to_host()
    return np.asarray(a)


def check_ignore_index(ignore_index, classes: int, call: str) -> None:
    """GraphError, one line starting ``{call}, ignore_index=...)``, unless ``ignore_index`` is None or
    an integer in [IGNORE_INDEX_MIN, classes) (PyTorch's ``ignore_index``: a class id such as a
    padding id, or a negative marker such as -100; int32 ids, so at least -2**31)."""
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, Integral)
                                     or not IGNORE_INDEX_MIN <= ignore_index < classes):
        raise GraphError(f"{call}, ignore_index={ignore_index!r}): ignore_index must be None or an integer in "
                         f"[{IGNORE_INDEX_MIN}, {classes}) (a class id such as a padding id, or a negative marker "
                         f"such as -100)")


def _describe(a) -> str:
    dtype = getattr(a, "dtype", None)
    return f"{dtype} array of shape {tuple(getattr(a, 'shape', np.shape(a)))}"


def _kind(a) -> str:
    """NumPy's dtype kind of ``a`` ('i', 'u', 'f', ...), device arrays included."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return np.dtype(cai["typestr"]).kind
    dtype = getattr(a, "dtype", None)
    try:
        return dtype.kind if isinstance(dtype, np.dtype) else np.asarray(a).dtype.kind
    except (TypeError, ValueError):
        return "O"


class Head:
    """A loss head (base class). ``trace(b, x) -> (output, loss)`` adds its nodes to a network
    under the prefix ``head.``; :meth:`feed` checks and converts the targets of a window."""

    prefix = "head."
    #: What ``train`` takes as targets, for error messages.
    targets_doc = ""
    #: Whether the output weight is the network's embedding table (SoftmaxCrossEntropy's option).
    tie_weights = False

    def trace(self, b: Builder, x: Value) -> tuple[Value, Value]:  # pragma: no cover - abstract
        raise NotImplementedError

    def feed(self, targets, window: int, streams: int, width: int):
        """The array fed as the graph input ``y`` (``width`` elements a column) for ``targets``
        (see the module table). Raises ShapeError naming ``targets`` for a wrong shape, dtype or
        value."""
        raise NotImplementedError  # pragma: no cover - abstract

    def blank(self, window: int, streams: int, width: int) -> np.ndarray:
        """A ``y`` to feed when a forward pass has no targets (its loss is not reported)."""
        raise NotImplementedError  # pragma: no cover - abstract


class SoftmaxCrossEntropy(Head):
    """Output layer and loss: logits = W h + b (vocab rows, nn.Linear init), per-column loss
    -log softmax(logits)[y] in nats (PyTorch's CrossEntropyLoss); the training loss is its
    mean over the T*S columns of a window.

    Targets: integer class ids of shape (T, S), each in [0, vocab) or equal to ``ignore_index``.
    ignore_index: None (default), or an integer in [-2**31, vocab): columns whose target equals it
    add nothing to the loss or its gradient, and the mean is over the other columns
    (CrossEntropyLoss(ignore_index=...)); a window whose targets are all ignored has loss 0 and
    gradient 0 (PyTorch: nan). A class id (0 for padding) or a negative marker such as -100
    (PyTorch's default) both work.

    chunk: None (default) computes the (T, S, vocab) logits as a value (``head.logits``, the
    network's output) and the loss from them. A positive integer computes the output layer and
    the loss together, ``chunk`` classes at a time (op ``chunked_softmax_xent``: the logits of
    one chunk, (T*S, chunk), then a running max and sum of exp, the online softmax of Milakov &
    Gimelshein 2018; the gradient in a second pass over the chunks), so the head needs memory
    O(T*S*chunk) instead of O(T*S*vocab); the last chunk is shorter where chunk does not divide
    vocab. Its values and gradients are the dense head's to floating-point error; its parameters are
    the same (``head.W.weight`` (vocab, n), ``head.W.bias`` (vocab,), same init), so
    parameters train with one and load into the other. With chunk the network's output is the
    value the head follows (T, S, n), not the logits: sample from the dense head. The choice is
    the user's, never automatic, because it changes the network's output.

    tie_weights: False (default), or True to tie the output layer's weight to the input
    embedding (Press & Wolf 2017, "Using the Output Embedding to Improve Language Models"; Inan
    et al. 2017; PyTorch's word_language_model ``--tied``: ``decoder.weight = encoder.weight``).
    The network's first layer must then be ``rg.Embedding(vocab, E)`` and the value the head
    follows must have width E: the (vocab, E) table ``embed.weight`` (:data:`EMBEDDING_TABLE`,
    its init N(0, 1) the Embedding's) is also the head's (vocab, E) weight, one parameter read by
    the embedding's gather and the head's GEMM, so its gradient is the sum of the two (the
    embedding's scatter-add and the head's ``G^T h``). The head keeps its own bias
    ``head.W.bias`` (vocab,) (nn.Linear's init) and has no ``head.W.weight``. Works with ``chunk``.

    Raises GraphError (naming the head and the value) for vocab < 2, a bad ignore_index, a
    chunk that is not None or a positive integer, or a tie_weights that is not a bool; when
    traced with tie_weights (rg.Sequential checks the first two when it is built), for a network
    without an Embedding first layer, an Embedding of another vocabulary, or an input width other
    than the embedding size (naming both sizes).
    """

    targets_doc = "class ids of shape (T, S)"

    def __init__(self, vocab: int, ignore_index: int | None = None, chunk: int | None = None,
                 tie_weights: bool = False):
        if isinstance(vocab, bool) or not isinstance(vocab, Integral) or vocab < 2:
            raise GraphError(f"rg.SoftmaxCrossEntropy({vocab!r}): needs an integer number of classes >= 2")
        check_ignore_index(ignore_index, vocab, f"rg.SoftmaxCrossEntropy({vocab}")
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, Integral) or chunk < 1):
            raise GraphError(f"rg.SoftmaxCrossEntropy({vocab}, chunk={chunk!r}): chunk must be None (the dense "
                             f"head) or a positive integer (classes per chunk)")
        if not isinstance(tie_weights, (bool, np.bool_)):
            raise GraphError(f"rg.SoftmaxCrossEntropy({vocab}, tie_weights={tie_weights!r}): tie_weights must be "
                             f"True or False")
        self.vocab = int(vocab)
        self.ignore_index = None if ignore_index is None else int(ignore_index)
        self.chunk = None if chunk is None else int(chunk)
        self.tie_weights = bool(tie_weights)

    def trace(self, b: Builder, h: Value) -> tuple[Value, Value]:
        if self.chunk is None and not self.tie_weights:
            logits = linear(h, self.vocab, name="W")
        else:
            init = b.default_init(h.size)  # linear()'s: the dense head's parameters, names and draws
            weight = self._tied_table(b, h) if self.tie_weights else b.param("W.weight", (self.vocab, h.size), init)
            params = [weight, b.param("W.bias", (self.vocab,), init)]
            if self.chunk is not None:
                return h, b.add("chunked_softmax_xent", [h, self._targets(b)], params,
                                attrs={**self._ignored(b), "chunk": self.chunk}, name="head.loss")
            logits = b.add("linear", [h], params, hint="W")
        b.names[logits.id] = "head.logits"
        return logits, b.add("softmax_xent", [logits, self._targets(b)], attrs=self._ignored(b), name="head.loss")

    def _tied_table(self, b: Builder, h: Value) -> str:
        """The embedding table as the output weight; GraphError naming the sizes unless it is
        (vocab, h.size)."""
        table = b.params.get(EMBEDDING_TABLE)
        if table is None:
            raise GraphError(f"rg.{self!r}: tie_weights needs an rg.Embedding as the network's first layer (its "
                             f"table {EMBEDDING_TABLE!r} is the output weight)")
        vocab, dim = table.shape
        if vocab != self.vocab:
            raise GraphError(f"rg.{self!r}: tie_weights needs the same vocabulary as the embedding, but "
                             f"{EMBEDDING_TABLE!r} has {vocab} rows, the head {self.vocab} classes")
        if dim != h.size:
            raise GraphError(f"rg.{self!r}: tie_weights needs the last layer's width equal to the embedding size, but "
                             f"{b.provisional(h.id)!r} has width {h.size} and {EMBEDDING_TABLE!r} is ({vocab}, "
                             f"{dim}): make the last cell's hidden size {dim} or the embedding size {h.size}")
        return EMBEDDING_TABLE

    @staticmethod
    def _targets(b: Builder) -> Value:
        return b.add("input", size=1, dtype=INDEX, name="y")

    def _ignored(self, b: Builder) -> dict:
        """The loss's ignore_index attribute: the head's, or in a masked graph the padded steps'."""
        ignore = self.ignore_index
        if ignore is None and b.length_masks is not None:
            ignore = PADDED_TARGET
        return {} if ignore is None else {"ignore_index": ignore}

    def feed(self, targets, window: int, streams: int, width: int = 1):
        shape = tuple(getattr(targets, "shape", np.shape(targets)))
        if shape != (window, streams) or _kind(targets) not in "iu":
            raise ShapeError(f"targets: expected integer class ids of shape (T, S) = {(window, streams)}, got "
                             f"{_describe(targets)}")
        return targets

    def blank(self, window: int, streams: int, width: int = 1) -> np.ndarray:
        return np.zeros((window, streams), np.int64)

    def __repr__(self):
        extra = "" if self.ignore_index is None else f", ignore_index={self.ignore_index}"
        extra += "" if self.chunk is None else f", chunk={self.chunk}"
        extra += ", tie_weights=True" if self.tie_weights else ""
        return f"SoftmaxCrossEntropy({self.vocab}{extra})"


class MSE(Head):
    """Mean squared error against float targets (PyTorch's nn.MSELoss(reduction="mean")): the
    training loss is the mean of (prediction - target)^2 over all T*S*n elements of a window.

    ``rg.MSE()`` compares the value it follows (width n: a cell's output, as ``nn.LSTM``'s
    output fed straight to ``nn.MSELoss``); ``rg.MSE(out_features)`` first projects it with a
    linear layer ``head.W`` (nn.Linear's init; output ``head.out``, n = out_features), like a
    Keras ``Dense(n)`` before ``loss="mse"``. Targets: floats of shape (T, S, n), fed as the
    graph input ``y`` (float, attribute ``target``: no gradient flows into it). In the
    network's variable-length graph ``head.out`` is zero past each stream's length, as the
    cells' outputs are (rnngraph/step_lengths.py).
    Raises GraphError for an out_features that is not a positive integer.
    """

    targets_doc = "floats of shape (T, S, n)"

    def __init__(self, out_features: int | None = None):
        if out_features is not None and (isinstance(out_features, bool) or not isinstance(out_features, Integral)
                                         or out_features < 1):
            raise GraphError(f"rg.MSE({out_features!r}): out_features must be None (compare the value the head "
                             f"follows) or a positive integer (project it to that width first)")
        self.out_features = None if out_features is None else int(out_features)

    def trace(self, b: Builder, x: Value) -> tuple[Value, Value]:
        if self.out_features is not None:
            x = linear(x, self.out_features, name="W")
            b.names[x.id] = "head.out"
            if b.length_masks is not None:  # a masked graph: 0 past each length, as the cells' outputs
                b.names[x.id] = "head.out_unmasked"
                x = zero_past_lengths(b, x, name="head.out")
        y = b.add("input", size=x.size, dtype=FLOAT, attrs={"target": True}, name="y")
        return x, b.add("mse", [x, y], name="head.loss")

    def feed(self, targets, window: int, streams: int, width: int):
        want = (window, streams, width)
        shape = tuple(getattr(targets, "shape", np.shape(targets)))
        if shape != want or _kind(targets) != "f":
            raise ShapeError(f"targets: expected floats of shape (T, S, n) = {want}, got {_describe(targets)}")
        return targets

    def blank(self, window: int, streams: int, width: int) -> np.ndarray:
        return np.zeros((window, streams, width), np.float32)

    def __repr__(self):
        return "MSE()" if self.out_features is None else f"MSE({self.out_features})"


class SequenceClassifier(Head):
    """One class per sequence: logits = W h + b (``classes`` rows, nn.Linear init) and softmax
    cross-entropy at the last timestep of each stream, mean over the S streams (PyTorch's
    CrossEntropyLoss on ``nn.Linear(lstm_out[-1])``).

    Targets: integer labels of shape (S,), each in [0, classes). They are fed as ``y`` of shape
    (T, S) holding the label at t = T-1 and :data:`NO_LABEL` (the loss's ignore_index)
    elsewhere, so the other timesteps add nothing; :meth:`feed`'s ``last`` (per-stream last
    timesteps) puts it at each stream's last valid step for ``train(..., lengths=)``
    (rnngraph/step_lengths.py). The logits (``head.logits``, (T, S, classes)) are computed at
    every timestep; the prediction is ``logits[T-1]`` (with lengths: ``logits[lengths[s] - 1,
    s]``). States carry from one ``train`` call to the next like any network's: call
    ``step.reset_state()`` between batches of independent sequences. Raises GraphError for classes < 2.
    """

    targets_doc = "class labels of shape (S,), one per stream"

    def __init__(self, classes: int):
        if isinstance(classes, bool) or not isinstance(classes, Integral) or classes < 2:
            raise GraphError(f"rg.SequenceClassifier({classes!r}): needs an integer number of classes >= 2")
        self.classes = int(classes)

    def trace(self, b: Builder, h: Value) -> tuple[Value, Value]:
        logits = linear(h, self.classes, name="W")
        b.names[logits.id] = "head.logits"
        y = b.add("input", size=1, dtype=INDEX, name="y")
        loss = b.add("softmax_xent", [logits, y], attrs={"ignore_index": NO_LABEL}, name="head.loss")
        return logits, loss

    def feed(self, targets, window: int, streams: int, width: int = 1, last=None) -> np.ndarray:
        """``y`` (T, S) int64: ``targets[s]`` at timestep ``last[s]`` (default T-1), NO_LABEL
        elsewhere. Raises ShapeError naming ``targets`` (shape, dtype, a label outside [0,
        classes)) or ``last`` (shape, a timestep outside [0, T))."""
        shape = tuple(getattr(targets, "shape", np.shape(targets)))
        if shape != (streams,) or _kind(targets) not in "iu":
            raise ShapeError(f"targets: expected integer class labels of shape (S,) = ({streams},), one per "
                             f"stream, got {_describe(targets)}")
        labels = host_array(targets).astype(np.int64)
        bad = labels[(labels < 0) | (labels >= self.classes)]
        if bad.size:
            raise ShapeError(f"targets: label {int(bad[0])} is outside [0, {self.classes})")
        last = np.full(streams, window - 1) if last is None else host_array(last)
        if last.shape != (streams,) or _kind(last) not in "iu" or ((last < 0) | (last >= window)).any():
            raise ShapeError(f"last: expected integer timesteps in [0, {window}) of shape ({streams},), got "
                             f"{_describe(last)}")
        y = np.full((window, streams), NO_LABEL, np.int64)
        y[last, np.arange(streams)] = labels
        return y

    def blank(self, window: int, streams: int, width: int = 1) -> np.ndarray:
        return np.full((window, streams), NO_LABEL, np.int64)

    def __repr__(self):
        return f"SequenceClassifier({self.classes})"
