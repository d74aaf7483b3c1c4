"""``rg.LSHSoftmax`` in the compiled CUDA training step (codegen/step.py's ``CudaBackend``): the
head's LSH index on the device and the sparse training loss that stands in for the dense
``lsh_softmax_xent`` launchers during a training call (G-SLIDE, Pan et al., IEEE TPDS 2022;
public code PanZaifeng/G-SLIDE; rnngraph/lsh_train.py is the NumPy backend's same step).

A training call, per loss launch over N = T*S columns (or S, where a plan runs the loss per
timestep), on the step's stream and inside the step's CUDA graph (codegen/graphs.py's Replay):

    forward   labels of the columns from the targets (none where ignore_index)   lsh_head_kernels
              DWTA codes of the head's inputs h (N, n), the call counter + 1     lsh_kernels
              active sets: the buckets' union, the label, padding to min_active   lsh_kernels
              per-column loss -log softmax over the set at the label             lsh_sparse
    backward  gh += sum dz W[a] (BPTT goes on from it), gW, gb at touched rows   lsh_head_kernels

The gradients land in the step's gradient arena (zeroed each call), so the step's finite check,
clipping and optimizer run over every parameter as for any head: dense Adam (or SGD) over the
arena, as the NumPy backend's optimizer over its dense gradients with zeros at untouched rows
(Adam's moments of an untouched row decay and move it, as in G-SLIDE's dense Adam). These
launches allocate nothing and copy nothing from the host after the first call (their scratch is
made then, before the graph is captured from the second call on), and the padding's draws come
from a counter advanced on the device, so the captured graph holds them.

Between calls, outside the graph, before the next call's replay: the index is built from the
current weights at the first training call and after ``step.set_parameters`` (``stale``), then
rebuilt every ``config.rebuild_every`` counted columns of finite calls (new bins and padding
order every ``config.redraw_every``: drawn on the host from the head's seed, copied into the
same device arrays), as rnngraph/lsh/index.py's clock. The draws (bins, padding order) are the
NumPy index's for the same seed, so with ``min_active = 0`` and buckets that do not overflow the
active sets are the NumPy backend's; the padding differs (drawn on the device).

Evaluation (``step.forward``) runs the op's dense launchers (codegen/losses.py): no override.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError

from ..errors import GraphError
from ..lsh import DWTAHash, RebuildClock, draw_pad_order
from ..memory import NotEnoughMemory, format_bytes
from . import lsh_head_kernels, lsh_kernels, lsh_sparse


#: CUDA_ERROR_OUT_OF_MEMORY, the driver's code for an allocation the GPU cannot give
OUT_OF_MEMORY = 2


class DeviceLSHIndex:
    """An output layer's LSH index on the device: DWTA bins, bucket tables, padding order, the
    padding's call counter and the rebuild clock, for ``classes`` weight rows of ``dim`` floats.

    Draws (``np.random.default_rng(seed)``): the hash functions, then the padding order, as
    :class:`rnngraph.lsh.LSHIndex` draws them. Attributes: buckets (L, num_buckets, capacity)
    and fill (L, num_buckets) int32, bins int32, pad_order (classes,) int32, counter (1,) int64,
    clock; rebuilds and redraws: how many happened (the build at the first call counts as one).
    """

    def __init__(self, config, dim: int, classes: int, seed: int, stream):
        self.config, self.dim, self.classes, self.stream = config, dim, classes, stream
        self.rng = np.random.default_rng(seed)
        self.hasher = self._draw_hasher()
        c = config
        self.buckets = cuda.device_array((c.L, self.hasher.num_buckets, c.capacity), np.int32, stream=stream)
        self.fill = cuda.to_device(np.zeros((c.L, self.hasher.num_buckets), np.int32), stream=stream)
        self.item_codes = cuda.device_array((classes, c.L), np.int32, stream=stream)
        self.bins = cuda.to_device(self.hasher.bins, stream=stream)
        self.pad_order = cuda.to_device(draw_pad_order(classes, self.rng), stream=stream)
        self.counter = cuda.to_device(np.zeros(1, np.int64), stream=stream)
        self.clock = RebuildClock(config)
        self.rebuilds = self.redraws = 0

    def _draw_hasher(self) -> DWTAHash:
        c = self.config
        return DWTAHash.draw(self.dim, c.K, c.L, bin_size=c.bin_size, densify=False, max_probes=c.max_probes,
                             seed=int(self.rng.integers(2**63)))

    def rebuild(self, weight, redraw: bool = False) -> None:
        """Refills the tables from ``weight`` (classes, dim) float32 (device); with ``redraw``,
        new bins and padding order first, copied into the same device arrays (a captured graph
        that reads them stays valid)."""
        if redraw:
            self.hasher = self._draw_hasher()
            self.bins.copy_to_device(self.hasher.bins, stream=self.stream)
            self.pad_order.copy_to_device(draw_pad_order(self.classes, self.rng), stream=self.stream)
            self.redraws += 1
        lsh_kernels.dwta_hash(weight, self.bins, self.item_codes, bits=self.hasher.bits, stream=self.stream)
        lsh_kernels.fill_tables(self.item_codes, self.buckets, self.fill, stream=self.stream)
        self.rebuilds += 1


class DeviceLSHHead:
    """The CUDA training side of one ``rg.LSHSoftmax`` head of a TrainingStep (module docstring),
    shared by the step's backends of every (T, S).

    head: the :class:`rnngraph.lsh_head.LSHSoftmax`; graph: the network's graph (its loss node
    names W (classes, n) and b (classes,)). Attributes: index (a :class:`DeviceLSHIndex`, made
    at the first training call), stale (rebuild before the next call).

    Raises GraphError naming the head when its config asks for densified hashing (NumPy only).
    """

    def __init__(self, head, graph):
        if head.config.densify:
            raise GraphError(f"{head!r}: config.densify (densified WTA hashing) has no GPU kernel (G-SLIDE does "
                             f"not densify); compile with device='cpu' or densify=False")
        node = graph.by_name[graph.loss]
        self.head, self.loss, (self.weight, self.bias) = head, node.name, node.params
        self.classes, self.dim = graph.param_by_name[self.weight].shape
        self.index: DeviceLSHIndex | None = None
        self.stale = True
        self._pending = 0  # the counted columns of the last call, once settled finite
        self._scratch: dict = {}  # (columns, k) -> the k-th forward launch's arrays of a call
        self._launched = 0  # forward launches of the loss so far in this call
        self._open: list = []  # their scratch keys, the backward's (last in, first out)

    # ------------------------------------------------------------------ between calls
    def before_call(self, backend) -> None:
        """Before a training call of ``backend`` (a CudaBackend; its previous call settled):
        the clock counts the previous call's columns if it was finite and rebuilds when due,
        then a stale index is rebuilt; all enqueued on the backend's stream."""
        weight = backend.buf.P[self.weight]
        if self.index is None:
            self.index = DeviceLSHIndex(self.head.config, self.dim, self.classes, self.head.seed, backend.stream)
        pending, self._pending = self._pending, 0
        rebuild, redraw = self.index.clock.after_batch(pending) if pending else (False, False)
        if rebuild or self.stale:
            self.index.rebuild(weight, redraw)
        self.stale = False

    def counting(self, columns: int, on_finish):
        """``on_finish`` of a training call of ``columns`` counted columns, which also tells the
        clock (at the next :meth:`before_call`) once the call is known finite."""
        def finished(loss, finite, grad_norm):
            if finite and columns:
                self._pending = columns
            return on_finish(loss, finite, grad_norm)
        return finished

    @contextmanager
    def training(self, program):
        """Within the block, ``program``'s launches of the head's loss are the sparse ones."""
        overrides = program.lib.loss_overrides
        overrides[self.loss] = (self._forward, self._backward)
        self._launched, self._open = 0, []
        try:
            yield
        finally:
            del overrides[self.loss]

    # ------------------------------------------------------------------ the launches
    def _scratch_for(self, call, key) -> dict:
        """The device arrays of the loss launch ``key`` (made on first use: the first call, before
        any capture; a call's launches come in the same order every time)."""
        if key not in self._scratch:
            c, n, s = self.head.config, call.loss.shape[0], call.stream
            labels = max(n, 1) if c.batch_labels else 1   # a column has one label (none when ignored)
            slots = lsh_kernels.table_slots(c.L, c.capacity, self.classes, c.min_active, labels)
            bound = lsh_kernels.set_bound(c.L, c.capacity, self.classes, c.min_active, labels)
            layout = self._layout(n, c.L, slots, bound)
            try:
                self._scratch[key] = self._allocate(layout, s)
            except CudaAPIError as exc:
                if getattr(exc, "code", None) != OUT_OF_MEMORY and "OUT_OF_MEMORY" not in str(exc):
                    raise
                need = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in layout.values())
                advice = (f"with batch_labels=True every column's set holds all {n:,} labels of the call, so "
                          f"this grows with (T * S)**2: use LSHConfig(batch_labels=False) or fewer columns a call"
                          if c.batch_labels else "use fewer columns a call (T * S) or a smaller config (L, capacity)")
                raise NotEnoughMemory(f"{self.head!r}: the active sets of {n:,} columns need about "
                                      f"{format_bytes(need)} of GPU scratch, more than the GPU could give "
                                      f"({exc}); {advice}") from None
        return self._scratch[key]

    @staticmethod
    def _layout(n: int, L: int, slots: int, bound: int) -> dict:
        """The device arrays of one loss launch's active sets over ``n`` columns, name -> (shape,
        dtype): (n, L) bucket codes, hash tables of ``slots`` a column, sets of at most ``bound``
        ids a column (lsh_kernels.table_slots, set_bound)."""
        return dict(labels=(max(n, 1), np.int32), label_offsets=(n + 1, np.int64), codes=((n, L), np.int32),
                    keys=((n, slots), np.int32), counts=((n, slots), np.int32), sizes=(n, np.int32),
                    offsets=(n + 1, np.int64), ids=(max(n * bound, 1), np.int32), p=(max(n * bound, 1), np.float32))

    @staticmethod
    def _allocate(layout: dict, s) -> dict:
        """The device arrays of ``layout`` (:meth:`_layout`'s) on stream ``s``. Raises numba's
        CudaAPIError where the GPU cannot give them."""
        return {name: cuda.device_array(shape, dtype, stream=s) for name, (shape, dtype) in layout.items()}

    def _forward(self, call) -> None:
        (h, targets), (weight, bias), st = call.args, call.params, call.stream
        key = (call.loss.shape[0], self._launched)  # a plan with the loss per timestep launches T of them
        self._launched += 1
        self._open.append(key)
        sc, idx, c = self._scratch_for(call, key), self.index, self.head.config
        # the node's own ignore_index: a variable-length call's graph ignores its padded steps' id
        lsh_head_kernels.column_labels(targets, sc["labels"], sc["label_offsets"],
                                       ignore_index=call.attrs.get("ignore_index"), stream=st)
        lsh_kernels.dwta_hash(h, idx.bins, sc["codes"], bits=idx.hasher.bits, stream=st)
        lsh_kernels.tick(idx.counter, stream=st)
        lsh_kernels.active_sets(sc["codes"], idx.buckets, idx.fill, sc["labels"], sc["label_offsets"], idx.pad_order,
                                sc["keys"], sc["counts"], sc["sizes"], sc["offsets"], sc["ids"],
                                threshold=c.threshold, min_active=c.min_active, seed=self.head.seed,
                                counter=idx.counter, batch_labels=c.batch_labels, stream=st)
        lsh_sparse.sparse_xent(h, weight, bias, sc["ids"], sc["offsets"], sc["labels"], sc["label_offsets"], sc["p"],
                               call.loss, stream=st)

    def _backward(self, call) -> None:
        (h, _), (weight, _) = call.args, call.params
        sc, gh = self._scratch_for(call, self._open.pop()), call.gargs[0]
        if gh is None:
            raise GraphError(f"{self.head!r}: its input {call.args[0].shape} has no gradient buffer")
        lsh_head_kernels.sparse_xent_backward(h, weight, sc["ids"], sc["offsets"], sc["labels"], sc["label_offsets"],
                                              sc["p"], call.gloss, gh, *call.gparams, stream=call.stream)


__all__ = ["DeviceLSHHead", "DeviceLSHIndex"]
