"""An LSH-sparsified softmax output layer on the GPU, standalone: its weights, Adam state, hash
tables and per-batch scratch on the device, trained a batch at a time (G-SLIDE's
``SoftmaxLayer`` with its ``LSH``; Pan et al., IEEE TPDS 2022; public code PanZaifeng/G-SLIDE).

Per training batch (:meth:`DeviceLSHLayer.train_batch`): hash the inputs (codegen/lsh_kernels.py),
gather their active sets with the labels and padding, the sparse softmax forward and backward
with gradients into the touched rows (codegen/lsh_sparse.py), Adam (on the touched rows, or
dense as G-SLIDE), then the rebuild clock of rnngraph/lsh/config.py: the tables refilled from the
current weights every ``rebuild_every`` samples, new bins and padding order every
``redraw_every``. Nothing synchronises with the host. Evaluation is dense (:meth:`dense_logits`,
cuBLAS where CuPy is present). The draws (bins, padding order) are NumPy's from the seed, as
rnngraph/lsh/index.py's; the padding starts come from the device.

A standalone layer (bench/lsh_gpu.py uses it); the ``rg.LSHSoftmax`` head of a compiled CUDA
training step runs the same kernels inside the step (codegen/lsh_step.py).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..errors import positive_int
from ..lsh import DWTAHash, LSHConfig, Ragged, RebuildClock, draw_pad_order
from . import lsh_kernels, lsh_sparse
from .device import as_device, launch_stream
from .gemm import add_bias, gemm
from .optim_kernels import adam_update, fill

ADAM_MODES = ("touched", "dense")


class DeviceLSHLayer:
    """The output layer ``softmax(W x + b)`` over ``classes`` neurons, trained on LSH active sets.

    Args:
        dim: d, the inputs' size (the queries). classes: V.
        config: an :class:`rnngraph.lsh.LSHConfig` (``densify`` must be False: G-SLIDE's hashing).
        seed: seeds the weights (nn.Linear's uniform init, unless ``weight`` is given), the bins
            and the padding order.
        lr, betas, eps: Adam's. adam: "touched" (the touched rows only, lazily) or "dense" (every
            row, as G-SLIDE).
        max_labels: the most labels a sample may carry (sizes the active-set scratch; with
            ``config.batch_labels`` a batch of n samples' sets get n * max_labels). Host labels
            are checked against it; device labels are not, and one more would overrun the
            scratch.
        weight, bias: initial (V, d) and (V,) float32 host arrays (default: drawn).

    Attributes: weight (V, d), bias (V,): float32 device arrays; clock: the RebuildClock; steps:
    Adam steps taken.

    Raises:
        ValueError naming the argument: dim, classes or max_labels not a positive integer,
        config.densify set, adam not in ("touched", "dense"), weight or bias of the wrong shape.
    """

    def __init__(self, dim: int, classes: int, config: LSHConfig, *, seed: int = 0, lr: float = 1e-3,
                 betas=(0.9, 0.999), eps: float = 1e-8, adam: str = "touched", max_labels: int = 8,
                 weight=None, bias=None, stream=None):
        self.dim, self.classes = positive_int(dim, "dim"), positive_int(classes, "classes")
        self.max_labels = positive_int(max_labels, "max_labels")
        if not isinstance(config, LSHConfig):
            raise ValueError(f"config must be an rnngraph.lsh.LSHConfig, got {config!r}")
        if config.densify:
            raise ValueError("config.densify: densified WTA hashing has no GPU kernel (G-SLIDE does not densify)")
        if adam not in ADAM_MODES:
            raise ValueError(f"adam must be one of {ADAM_MODES}, got {adam!r}")
        self.config, self.adam, self.lr, self.betas, self.eps = config, adam, float(lr), betas, float(eps)
        self.stream = stream
        self.rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(dim)
        if weight is None:
            weight = self.rng.uniform(-bound, bound, size=(classes, dim)).astype(np.float32)
        if bias is None:
            bias = self.rng.uniform(-bound, bound, size=classes).astype(np.float32)
        weight, bias = np.asarray(weight, np.float32), np.asarray(bias, np.float32)
        if weight.shape != (classes, dim) or bias.shape != (classes,):
            raise ValueError(f"weight and bias must have shapes ({classes}, {dim}) and ({classes},), got "
                             f"{weight.shape} and {bias.shape}")
        s = launch_stream(stream)
        z = lambda shape, dtype=np.float32: cuda.to_device(np.zeros(shape, dtype), stream=s)  # noqa: E731
        self.weight, self.bias = cuda.to_device(weight, stream=s), cuda.to_device(bias, stream=s)
        self.gw, self.mw, self.vw = z(weight.shape), z(weight.shape), z(weight.shape)
        self.gb, self.mb, self.vb = z(classes), z(classes), z(classes)
        self.mark, self.touched, self.n_touched = z(classes, np.int32), z(classes, np.int32), z(1, np.int32)
        self.hasher = self._draw_hasher()
        c = config
        self.buckets = cuda.device_array((c.L, self.hasher.num_buckets, c.capacity), np.int32, stream=s)
        self.fill = z((c.L, self.hasher.num_buckets), np.int32)
        self.item_codes = cuda.device_array((classes, c.L), np.int32, stream=s)
        self.bins = cuda.to_device(self.hasher.bins, stream=s)
        self.pad_order = cuda.to_device(draw_pad_order(classes, self.rng), stream=s)
        self.clock = RebuildClock(c)
        self.steps = 0
        self.calls = 0
        self._scratch: dict = {}
        self.rebuild()

    def _draw_hasher(self) -> DWTAHash:
        c = self.config
        return DWTAHash.draw(self.dim, c.K, c.L, bin_size=c.bin_size, seed=int(self.rng.integers(2**63)))

    # ------------------------------------------------------------------ the index
    def rebuild(self, redraw: bool = False) -> None:
        """Refills the tables from the current weights; with ``redraw``, new bins and a new
        padding order first (G-SLIDE's ``LSH::build(weights, reshuffle)``)."""
        s = launch_stream(self.stream)
        if redraw:
            self.hasher = self._draw_hasher()
            self.bins = cuda.to_device(self.hasher.bins, stream=s)
            self.pad_order = cuda.to_device(draw_pad_order(self.classes, self.rng), stream=s)
        lsh_kernels.dwta_hash(self.weight, self.bins, self.item_codes, bits=self.hasher.bits, stream=self.stream)
        lsh_kernels.fill_tables(self.item_codes, self.buckets, self.fill, stream=self.stream)

    def scratch(self, n: int) -> dict:
        """The per-batch device arrays for batches of ``n`` samples (made on first use)."""
        if n not in self._scratch:
            c, s = self.config, launch_stream(self.stream)
            labels = n * self.max_labels if c.batch_labels else self.max_labels
            slots = lsh_kernels.table_slots(c.L, c.capacity, self.classes, c.min_active, labels)
            bound = lsh_kernels.set_bound(c.L, c.capacity, self.classes, c.min_active, labels)
            self._scratch[n] = dict(
                codes=cuda.device_array((n, c.L), np.int32, stream=s),
                keys=cuda.device_array((n, slots), np.int32, stream=s),
                counts=cuda.device_array((n, slots), np.int32, stream=s),
                sizes=cuda.device_array(n, np.int32, stream=s), offsets=cuda.device_array(n + 1, np.int64, stream=s),
                ids=cuda.device_array(n * bound, np.int32, stream=s), z=cuda.device_array(n * bound, np.float32,
                                                                                        stream=s),
                loss=cuda.device_array(n, np.float32, stream=s), dx=cuda.device_array((n, self.dim), np.float32,
                                                                                      stream=s))
        return self._scratch[n]

    def _labels(self, labels, label_offsets, n: int):
        """Device (label ids, offsets) from a host Ragged or device arrays (offsets absolute)."""
        s = launch_stream(self.stream)
        if isinstance(labels, Ragged):
            if len(labels) != n:
                raise ValueError(f"labels has {len(labels)} samples, x {n}")
            labels.check_range(self.classes, "labels")
            if labels.sizes.size and labels.sizes.max() > self.max_labels:
                raise ValueError(f"labels: a sample has {labels.sizes.max()} labels, max_labels is {self.max_labels}")
            ids = labels.ids if labels.ids.size else np.zeros(1, np.int32)
            return cuda.to_device(ids, stream=s), cuda.to_device(labels.offsets, stream=s)
        if label_offsets is None:
            raise ValueError("label_offsets: give it with device label ids, or pass labels as a Ragged")
        return as_device(labels, self.stream), as_device(label_offsets, self.stream)

    def query(self, x, labels, label_offsets=None):
        """The active sets of the inputs ``x`` (N, d) float32 (device): (ids, offsets) device
        arrays, sample i's set ``ids[offsets[i]:offsets[i + 1]]``. ``labels``: a host
        :class:`Ragged` of N lists, or device label ids with ``label_offsets`` (N+1,) int64
        (absolute positions in the ids)."""
        x = as_device(x, self.stream)
        n = x.shape[0]
        sc = self.scratch(n)
        lab, lab_off = self._labels(labels, label_offsets, n)
        lsh_kernels.dwta_hash(x, self.bins, sc["codes"], bits=self.hasher.bits, stream=self.stream)
        self.calls += 1
        lsh_kernels.active_sets(sc["codes"], self.buckets, self.fill, lab, lab_off, self.pad_order, sc["keys"],
                                sc["counts"], sc["sizes"], sc["offsets"], sc["ids"], threshold=self.config.threshold,
                                min_active=self.config.min_active, seed=self.calls,
                                batch_labels=self.config.batch_labels, stream=self.stream)
        return sc["ids"], sc["offsets"], lab, lab_off

    # ------------------------------------------------------------------ training
    def train_batch(self, x, labels, label_offsets=None):
        """One training step on a batch: active sets, sparse softmax forward and backward, Adam,
        then a rebuild when the clock says so.

        Args:
            x: (N, d) float32 device array, the inputs. labels: as :meth:`query`.

        Returns (loss, dx): (N,) per-sample losses (their mean is the batch's) and the (N, d)
        input gradient of the mean loss, device arrays valid until the next call.

        Raises ValueError naming the argument on a wrong shape, a label out of range (host
        labels) or too many labels a sample.
        """
        x = as_device(x, self.stream)
        n = x.shape[0]
        ids, offsets, lab, lab_off = self.query(x, labels, label_offsets)
        sc = self.scratch(n)
        track = self.adam == "touched"
        if track:
            lsh_kernels.zero_ints(self.n_touched, self.stream)
        extra = dict(mark=self.mark, touched=self.touched, n_touched=self.n_touched) if track else {}
        lsh_sparse.sparse_xent(x, self.weight, self.bias, ids, offsets, lab, lab_off, sc["z"], sc["loss"],
                               scale=1.0 / max(n, 1), dx=sc["dx"], gw=self.gw, gb=self.gb, stream=self.stream, **extra)
        self.steps += 1
        b1, b2 = self.betas
        if track:
            lsh_sparse.touched_adam(self.weight, self.bias, self.gw, self.gb, self.mw, self.vw, self.mb, self.vb,
                                    self.touched, self.n_touched, self.mark, lr=self.lr, step=self.steps, beta1=b1,
                                    beta2=b2, eps=self.eps, stream=self.stream)
        else:
            for p, g, m, v in ((self.weight, self.gw, self.mw, self.vw), (self.bias, self.gb, self.mb, self.vb)):
                adam_update(p, g, m, v, self.lr, b1, b2, self.eps, self.steps, stream=self.stream)
                fill(g, 0.0, stream=self.stream)
        rebuild, redraw = self.clock.after_batch(max(n, 1))
        if rebuild:
            self.rebuild(redraw)
        return sc["loss"], sc["dx"]

    def dense_logits(self, x, out):
        """``out = x W^T + b`` for x (N, d) and out (N, V) float32 device arrays (evaluation, P@1);
        returns out."""
        gemm(as_device(x, self.stream), self.weight, as_device(out, self.stream), trans_b=True, stream=self.stream)
        add_bias(out, self.bias, stream=self.stream)
        return out
