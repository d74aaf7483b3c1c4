"""``rg.LSHSoftmax``: the LSH-sparsified output layer as the loss head of an ``rg.Sequential``
(G-SLIDE, Pan et al., IEEE TPDS 2022; SLIDE, Chen et al., MLSys 2020), on both backends.

The head traces one loss node ``head.loss`` (op ``lsh_softmax_xent``, rnngraph/ops_lsh.py) with
the dense head's parameters ``head.W.weight`` (classes, n) and ``head.W.bias`` (classes,)
(nn.Linear's init, the same names and draws as ``rg.SoftmaxCrossEntropy(classes)``), so weights
move between the two heads. Evaluation is dense; training calls are sparse over each column's
LSH active set: on the NumPy backend rnngraph/lsh_train.py, on the CUDA backend
rnngraph/codegen/lsh_step.py (the same algorithm on the device, inside the step's CUDA graph).
"""
from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np

from .errors import GraphError
from .heads import SoftmaxCrossEntropy, check_ignore_index
from .lsh import LSHConfig
from .trace import Builder, Value

#: LSHSoftmax warns when its bucket tables take at least this many bytes and hold at least
#: OVERSIZED_TABLE_SLOTS slots a class in each table (each class sits in one bucket a table): the
#: default config (G-SLIDE's, 6.8 GB) on a small problem. Amazon-670K's shape at the defaults has
#: 50 slots a class and does not warn.
OVERSIZED_TABLE_BYTES = 1 << 30
OVERSIZED_TABLE_SLOTS = 256


class LSHSoftmax(SoftmaxCrossEntropy):
    """Output layer and softmax cross-entropy over ``classes`` output neurons, trained on each
    column's LSH active set only.

    Targets: integer class ids of shape (T, S), each in [0, classes) or equal to ``ignore_index``
    (one label a column); with ``train(..., lengths=)`` the padded steps add nothing, as for
    SoftmaxCrossEntropy.

    Training (``step.train`` of ``rg.compile(net, T, S)``, either backend): each of the T*S columns
    is a sample; its query is the head's input h (n,). Per call, the active set of each column is
    the union of its L buckets in the index of the head's current weight rows (DWTA hashing, K
    hashes a table over bins of ``config.bin_size``), its true label added (with
    ``config.batch_labels``, the labels of all the call's columns, or of the timestep's where the
    plan runs the loss once a timestep, as ``plan="naive"`` does), padded with random
    classes to ``min(config.min_active, classes)`` (rnngraph/lsh/active.py). The column's loss is
    -log of the softmax over its active set at its label; the gradients of h, and of the touched
    rows of W and b only: on the NumPy backend they are dense arrays (classes, n) and (classes,)
    with zeros at the untouched rows, so the optimizer (Adam's moments included) updates every
    row as it would for a zero gradient. The index is built from the weights at the first training
    call (and after ``step.set_parameters``), then rebuilt from the current weights every
    ``config.rebuild_every`` trained columns (samples), with new bins and a new padding order every
    ``config.redraw_every`` (the clock counts the columns that count in the loss, of finite calls).

    On the CUDA backend (``device="cuda"``, or ``"auto"`` with a GPU; rnngraph/codegen/lsh_step.py)
    the same happens on the device, within the step's captured CUDA graph: the queries (T*S, n)
    hashed, the active sets gathered (labels included, ignored columns without one), the sparse
    loss and its gradients -- h's (T*S, n) added to what BPTT reads, W's (classes, n) and b's
    (classes,) at the touched rows of the step's zeroed gradient arena -- then the step's finite
    check, clip and optimizer over every parameter as for any head (dense Adam over the arena, as
    here). The index lives on the device and is rebuilt between calls on the same clock; its draws
    (bins, padding order) are the NumPy index's for the seed, but the padding neurons are drawn on
    the device (other neurons, the same number). ``config.densify`` has no GPU kernel.

    Evaluation (``step.forward``, and any loss outside a training call, e.g. ``rg.Reference``):
    the dense softmax over all classes, as G-SLIDE evaluates P@1 densely (cuBLAS); the network's
    output is then the value the head follows, (T, S, n): :meth:`dense_logits` gives the logits.

    With every class active (``min_active >= classes``) the loss and the gradients are the dense
    head's to floating-point error.

    Args:
        classes: V >= 2, the output neurons.
        config: an :class:`rnngraph.lsh.LSHConfig`, or a dict of its fields (default: G-SLIDE's
            K = 6, L = 50, min active 1,500: tables of 6.8 GB; pass a small one for small
            problems; ``batch_labels=True`` adds the call's labels to every column's set).
        seed: seeds the hash functions, the padding order and draws (``np.random.default_rng``).
        ignore_index: None (default), or an integer in [-2**31, classes): as SoftmaxCrossEntropy's,
            columns whose target equals it add nothing to the loss or the gradients, the mean is
            over the other columns (0 when all are ignored), and the index's rebuild clock does
            not count them.

    Raises:
        GraphError naming the head: classes not an integer >= 2, config neither an LSHConfig nor a
        dict of valid fields (K * bits over 31: an int32 bucket id), seed not a non-negative
        integer, ignore_index neither None nor an integer in [-2**31, classes). An LSHConfig made
        apart raises ValueError naming the field when it is made. ``rg.compile(..., device="cuda")``
        raises GraphError naming the head for a config with ``densify=True``.

    Warns (UserWarning) when the config's bucket tables take 1 GiB or more and hold 256 or more
    slots a class in each table: the default config on a small problem (6.8 GB for 10 classes).

    Source: G-SLIDE (Pan et al., IEEE TPDS 2022; public code PanZaifeng/G-SLIDE).
    """

    targets_doc = "class ids of shape (T, S)"

    def __init__(self, classes: int, config: LSHConfig | None = None, seed: int = 0, ignore_index: int | None = None):
        if isinstance(classes, bool) or not isinstance(classes, Integral) or classes < 2:
            raise GraphError(f"rg.LSHSoftmax({classes!r}): needs an integer number of classes >= 2")
        if config is None or isinstance(config, dict):
            try:
                config = LSHConfig(**(config or {}))
            except (TypeError, ValueError) as e:
                raise GraphError(f"rg.LSHSoftmax({classes}, config={config!r}): {e}") from None
        if not isinstance(config, LSHConfig):
            raise GraphError(f"rg.LSHSoftmax({classes}, config={config!r}): config must be an rnngraph.lsh.LSHConfig "
                             f"or a dict of its fields")
        if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
            raise GraphError(f"rg.LSHSoftmax({classes}, seed={seed!r}): seed must be a non-negative integer")
        check_ignore_index(ignore_index, classes, f"rg.LSHSoftmax({classes}")
        super().__init__(classes, ignore_index)
        self.classes, self.config, self.seed = int(classes), config, int(seed)
        slots = (1 << config.bits) * config.capacity
        if config.table_bytes() >= OVERSIZED_TABLE_BYTES and slots >= OVERSIZED_TABLE_SLOTS * self.classes:
            warnings.warn(f"rg.LSHSoftmax({self.classes}): its bucket tables take {config.table_bytes() / 1e9:.1f} GB "
                          f"(K = {config.K}, L = {config.L}: {1 << config.bits:,} buckets of {config.capacity} a "
                          f"table) for {self.classes:,} classes, each table over {OVERSIZED_TABLE_SLOTS} slots a "
                          f"class; pass a smaller config (a smaller K, fewer tables L) for a problem of this size",
                          UserWarning, stacklevel=2)

    def trace(self, b: Builder, h: Value) -> tuple[Value, Value]:
        init = b.default_init(h.size)  # linear()'s: the dense head's parameters, names and draws
        params = [b.param("W.weight", (self.classes, h.size), init), b.param("W.bias", (self.classes,), init)]
        c = self.config
        attrs = {**self._ignored(b), "K": c.K, "L": c.L, "min_active": c.min_active}
        if c.batch_labels:
            attrs["batch_labels"] = True
        return h, b.add("lsh_softmax_xent", [h, self._targets(b)], params, attrs=attrs, name="head.loss")

    @staticmethod
    def dense_logits(h, parameters: dict) -> np.ndarray:
        """The dense logits ``h W^T + b`` (..., classes) of the head's input ``h`` (..., n), e.g.
        ``step.forward(x).outputs["layer0.h_next"]`` (the last cell's output: the head follows it)
        of a one-layer network, with ``parameters`` (``step.parameters``): what evaluation (P@1,
        sampling) reads; the result dtype of h and W. ValueError when ``h`` is the outputs' dict
        itself, naming its keys."""
        if isinstance(h, dict):
            raise ValueError(f"LSHSoftmax.dense_logits takes the head's input array, one of the outputs "
                             f"({', '.join(map(repr, h))}), not the dict of them")
        return np.asarray(h) @ parameters["head.W.weight"].T + parameters["head.W.bias"]

    def __repr__(self):
        c = self.config
        extra = "" if self.ignore_index is None else f", ignore_index={self.ignore_index}"
        extra += ", batch_labels=True" if c.batch_labels else ""
        return f"LSHSoftmax({self.classes}, K={c.K}, L={c.L}, min_active={c.min_active}{extra})"
