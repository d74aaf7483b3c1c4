"""LSH-sparsified output layers (G-SLIDE, Pan et al., IEEE TPDS 2022): the NumPy foundations.

What exists (NumPy, CPU; the specification the GPU kernels will be tested against):

- ``hashing.py``: :class:`DWTAHash`, winner-take-all hashing of queries (N, d) and weight rows
  (V, d) into (N, L) int32 bucket ids, L tables of K hashes over random bins of 8 dimensions,
  optional densification of all-zero bins; :func:`bucket_bits` (K * bits <= 31 or an error).
- ``config.py``: :class:`LSHConfig` (G-SLIDE's defaults: K = 6, L = 50, buckets of 128, a
  rebuild every 6,400 samples, new bins every 128,000, at least 1,500 active neurons; beyond
  G-SLIDE, ``batch_labels=True`` puts the batch's labels in every active set) and
  :class:`RebuildClock`.
- ``tables.py``: :class:`BucketTables`, (L, 2**(K*bits), capacity) int32 buckets with fill
  counters, filled in order and overwritten oldest-first (a ring), rebuilt from the weights.
- ``ragged.py``: :class:`Ragged`, compact per-sample id lists (ids int32, offsets int64 (N+1,)).
- ``active.py``: :func:`active_sets`, each sample's union of its buckets plus its labels, padded
  with random distinct neurons, as a :class:`Ragged`.
- ``sparse_layer.py``: :func:`sparse_softmax_xent`, softmax cross-entropy over the active sets,
  with the input gradient and the touched weight/bias rows' gradients.
- ``index.py``: :class:`LSHIndex`, one layer's hasher, tables, padding order and clock: build,
  query the active sets of a batch, rebuild (and redraw) after updates on G-SLIDE's schedule.

The Extreme Classification Repository's text format and a synthetic data set of its shape are in
``rnngraph.data`` (``read_xc``, ``synthetic_xc``).

The CUDA kernels are in ``rnngraph/codegen/`` (``lsh_kernels.py`` hashing, tables, active sets;
``lsh_sparse.py`` the sparse softmax and touched-row Adam; ``lsh_layer.py`` a standalone GPU
layer; ``lsh_step.py`` the ``rg.LSHSoftmax`` head (rnngraph/lsh_head.py) in the compiled CUDA
training step, which trains it as the NumPy backend does).
"""
from .active import active_sets, draw_pad_order
from .config import LSHConfig, RebuildClock
from .hashing import MAX_BUCKET_BITS, DWTAHash, bucket_bits
from .index import LSHIndex
from .ragged import Ragged
from .sparse_layer import SparseXent, active_logits, sparse_softmax_xent
from .tables import BucketTables

__all__ = [
    "BucketTables", "DWTAHash", "LSHConfig", "LSHIndex", "MAX_BUCKET_BITS", "Ragged", "RebuildClock", "SparseXent",
    "active_logits", "active_sets", "bucket_bits", "draw_pad_order", "sparse_softmax_xent",
]
