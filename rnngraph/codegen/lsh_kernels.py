"""The GPU side of the LSH index (rnngraph/lsh/): DWTA hashing, the bucket tables' fill and the
per-sample active sets, as numba.cuda kernels with host launchers.

The algorithm is G-SLIDE's (Pan et al., IEEE TPDS 2022; public code PanZaifeng/G-SLIDE, its
``init_hash_knl``, ``gather_buckets_knl`` and ``LSH::query_act_nodes``), written here from the
NumPy specification in rnngraph/lsh/ (hashing.py, tables.py, active.py), which the tests compare
these kernels with:

- :func:`dwta_hash`: the (N, L) int32 bucket ids of the rows of x (N, d) -- the layer's inputs
  (queries) or its weight rows (items) -- one thread a (row, table); a hash value is the
  position of the first maximum in its bin of ``bin_size`` dimensions (strict ``>``), the
  table's id the K values concatenated, the first the most significant: bit for bit
  :meth:`rnngraph.lsh.DWTAHash.hash` (``densify=False``, G-SLIDE's hashing; densified WTA is
  NumPy only and refused here).
- :func:`fill_tables`: inserts ids 0..V-1 under their (V, L) bucket ids into (L, buckets,
  capacity) int32 tables with (L, buckets) int32 fill counters, one ``atomicAdd`` an insert:
  slot ``fill % capacity``, so a full bucket overwrites its oldest ids. The atomics run in any
  order: the counters and, when no bucket overflows, each bucket's set of ids equal
  :class:`rnngraph.lsh.BucketTables`'; which ids survive in an over-full bucket may differ.
  Slots at or past a bucket's fill are never read and are not cleared.
- :func:`active_sets`: one block a sample gathers its L buckets into a per-sample open-addressing
  hash table in global memory (keys int32, counts int32; linear probing with ``atomicCAS``),
  counting how many of the sample's buckets hold each id; adds the sample's labels (counted
  as ``threshold``); a neuron is active when its count reaches ``threshold``; when fewer than
  ``min(min_active, V)`` are, it walks the padding permutation from a start drawn on the device
  (a 31-bit integer hash of the seed, the call counter and the sample) and adds the first
  neurons of the walk that are not active yet, a block of the walk at a time (a block-wide
  prefix count keeps the walk's order). A second kernel compacts each sample's active ids into
  ``ids[offsets[i]:offsets[i + 1]]`` (within a sample in no particular order) after a one-block
  scan of the sizes. The sets equal :func:`rnngraph.lsh.active_sets`' when no bucket overflows,
  but for the padding neurons (another start, so other neurons; their number is the same).

Arrays are numba device arrays (or ``__cuda_array_interface__`` objects); x float32, ids int32,
offsets int64. No launcher synchronises with the host or allocates unless it says so.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, int32

from .device import as_device, blocks, check, check_ragged, elementwise_threads, in_simulator, launch_stream
from .kernel_cache import cached

#: threads of the one-block-a-sample kernels (the simulator gets 8: each simulated thread costs)
SET_THREADS = 256
#: threads of the one-block offsets scan
SCAN_THREADS = 1024
_EMPTY = -1


def set_threads() -> int:
    """Threads of the active-set kernels: :data:`SET_THREADS`, 8 in the simulator."""
    return 8 if in_simulator() else SET_THREADS


# ---------------------------------------------------------------------------- hashing and tables
def _dwta_hash_kernel(x, bins, bits, out):
    """Thread (row r, table l) of the flat grid over N * L: out[r, l] = the K codes of table l
    concatenated, code k = position of the first maximum of x[r, bins[l, k, :]]."""
    t = cuda.grid(1)
    n_tables = bins.shape[0]
    if t < x.shape[0] * n_tables:
        r = t // n_tables
        l = t - r * n_tables
        code = 0
        for k in range(bins.shape[1]):
            best = x[r, bins[l, k, 0]]
            pos = 0
            for j in range(1, bins.shape[2]):
                v = x[r, bins[l, k, j]]
                if v > best:
                    best = v
                    pos = j
            code = (code << bits) | pos
        out[r, l] = code


def _zero_int_kernel(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 0


def _table_insert_kernel(codes, buckets, fill):
    """Thread (id v, table l) of the flat grid over V * L: takes slot fill[l, b] (atomically
    incremented) modulo the capacity of bucket b = codes[v, l] and writes v there."""
    t = cuda.grid(1)
    n_tables = codes.shape[1]
    if t < codes.shape[0] * n_tables:
        v = t // n_tables
        l = t - v * n_tables
        b = codes[v, l]
        slot = cuda.atomic.add(fill, (l, b), 1)
        buckets[l, b, slot % buckets.shape[2]] = v


dwta_hash_kernel = cached(cuda.jit(_dwta_hash_kernel))
zero_int_kernel = cached(cuda.jit(_zero_int_kernel))
table_insert_kernel = cached(cuda.jit(_table_insert_kernel))


def _codes_checked(name, x, bins, out, stream):
    x, bins, out = (as_device(a, stream) for a in (x, bins, out))
    check(f"{name} x", x, 2)
    check(f"{name} bins", bins, 3, (np.int32,))
    check(f"{name} out", out, 2, (np.int32,), shape=(x.shape[0], bins.shape[0]))
    return x, bins, out


def dwta_hash(x, bins, out, *, bits: int, stream=None):
    """The DWTA bucket ids of each row of ``x`` in each table, into ``out``.

    Args:
        x: (N, d) float32, the queries (the layer's inputs) or the items (its weight rows).
        bins: (L, K, bin_size) int32 dimensions in [0, d) (``DWTAHash.bins``).
        out: (N, L) int32, written: bucket ids in [0, 2**(K * bits)).
        bits: bits of one hash value, ceil(log2(bin_size)) (``DWTAHash.bits``).

    Returns ``out``. Raises ValueError naming the array on a wrong shape or dtype. A NaN entry
    never wins (the CPU refuses non-finite inputs; the device does not look).
    """
    x, bins, out = _codes_checked("dwta_hash", x, bins, out, stream)
    n = x.shape[0] * bins.shape[0]
    if n:
        t = elementwise_threads()
        dwta_hash_kernel[blocks(n, t), t, launch_stream(stream)](x, bins, np.int32(bits), out)
    return out


def zero_ints(x, stream=None):
    """``x[...] = 0`` for a C-contiguous int32 device array; returns x."""
    xf = x.reshape(x.size) if x.ndim != 1 else x
    if xf.size:
        t = elementwise_threads()
        zero_int_kernel[blocks(xf.size, t), t, launch_stream(stream)](xf)
    return x


def fill_tables(codes, buckets, fill, *, stream=None):
    """Empties the tables (their counters) and inserts id v under ``codes[v, l]`` in every table l.

    Args:
        codes: (V, L) int32 bucket ids of the weight rows (:func:`dwta_hash`), each in
            [0, buckets.shape[1]) (not checked on the device: hash with the tables' K and bits).
        buckets: (L, num_buckets, capacity) int32, written at the slots the inserts take.
        fill: (L, num_buckets) int32, set to the inserts into each bucket.

    Returns (buckets, fill). Raises ValueError naming the array on a wrong shape or dtype.
    """
    codes, buckets, fill = (as_device(a, stream) for a in (codes, buckets, fill))
    check("fill_tables buckets", buckets, 3, (np.int32,))
    check("fill_tables codes", codes, 2, (np.int32,), shape=(None, buckets.shape[0]))
    check("fill_tables fill", fill, 2, (np.int32,), shape=buckets.shape[:2])
    zero_ints(fill, stream)
    n = codes.shape[0] * codes.shape[1]
    if n:
        t = elementwise_threads()
        table_insert_kernel[blocks(n, t), t, launch_stream(stream)](codes, buckets, fill)
    return buckets, fill


# ---------------------------------------------------------------------------- active sets
@cuda.jit(device=True)
def _slot0(key, mask):
    """The first slot of ``key`` (a non-negative int32) in a table of mask + 1 slots: a
    multiplicative hash of its low 16 bits xor its high bits (no product exceeds 31 bits)."""
    return (((key & 0xFFFF) * 17881) ^ (key >> 13)) & mask


@cuda.jit(device=True)
def _hash_add(keys, counts, i, key, amount, mask):
    """Adds ``amount`` to ``key``'s count in sample i's table (claiming a slot with atomicCAS)."""
    s = _slot0(key, mask)
    while True:
        old = cuda.atomic.cas(keys, (i, s), _EMPTY, key)
        if old == _EMPTY or old == key:
            cuda.atomic.add(counts, (i, s), amount)
            return
        s = (s + 1) & mask


@cuda.jit(device=True)
def _hash_count(keys, counts, i, key, mask):
    """``key``'s count in sample i's table (0 when absent); read after a barrier."""
    s = _slot0(key, mask)
    while True:
        k = keys[i, s]
        if k == key:
            return counts[i, s]
        if k == _EMPTY:
            return 0
        s = (s + 1) & mask


@cuda.jit(device=True)
def _block_scan(v, sm):
    """(exclusive prefix sum of the int ``v`` over the block's threads, block total);
    blockDim.x a power of two, ``sm`` a shared int32 array of at least blockDim.x."""
    tid = cuda.threadIdx.x
    sm[tid] = v
    cuda.syncthreads()
    off = 1
    while off < cuda.blockDim.x:
        add = sm[tid - off] if tid >= off else 0
        cuda.syncthreads()
        sm[tid] += add
        cuda.syncthreads()
        off *= 2
    inclusive = sm[tid]
    total = sm[cuda.blockDim.x - 1]
    cuda.syncthreads()
    return inclusive - v, total


@cuda.jit(device=True)
def _mix31(x):
    """A 31-bit integer hash of the non-negative int64 ``x`` < 2**31 (LCG steps and xor-shifts,
    no intermediate above 62 bits)."""
    for _ in range(3):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        x ^= x >> 15
    return x


def _collect_kernel(codes, buckets, fill, label_ids, label_offsets, shared, threshold, want, pad_order, seed, counter,
                    keys, counts, sizes):
    """One block a sample i: counts its buckets' ids and its labels (all N samples' labels when
    ``shared`` is 1) in its hash table keys[i], counts[i] (cleared first), pads to ``want``
    active neurons from the walk of ``pad_order`` (its start drawn from ``seed + counter[0]`` and
    i), and writes the number of active neurons to sizes[i]."""
    sm = cuda.shared.array(SCAN_THREADS, int32)
    i = cuda.blockIdx.x
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    slots = keys.shape[1]
    mask = slots - 1
    for s in range(tid, slots, nt):
        keys[i, s] = _EMPTY
        counts[i, s] = 0
    cuda.syncthreads()
    cap = buckets.shape[2]
    for e in range(tid, codes.shape[1] * cap, nt):
        l = e // cap
        j = e - l * cap
        b = codes[i, l]
        if j < min(fill[l, b], cap):
            _hash_add(keys, counts, i, buckets[l, b, j], 1, mask)
    l0 = label_offsets[0] if shared else label_offsets[i]
    l1 = label_offsets[codes.shape[0]] if shared else label_offsets[i + 1]
    for e in range(l0 + tid, l1, nt):
        _hash_add(keys, counts, i, label_ids[e], threshold, mask)
    cuda.syncthreads()
    mine = 0
    for s in range(tid, slots, nt):
        if counts[i, s] >= threshold:
            mine += 1
    _, chosen = _block_scan(mine, sm)
    need = want - chosen
    taken = 0
    if need > 0:
        classes = pad_order.shape[0]
        start = _mix31((_mix31((seed + counter[0]) & 0x7FFFFFFF) + i) & 0x7FFFFFFF) % classes
        w0 = 0
        while taken < need and w0 < classes:   # uniform over the block: taken, w0 are block totals
            w = w0 + tid
            cand = pad_order[(start + w) % classes] if w < classes else _EMPTY
            free = 1 if cand != _EMPTY and _hash_count(keys, counts, i, cand, mask) < threshold else 0
            rank, found = _block_scan(free, sm)
            if free == 1 and taken + rank < need:
                _hash_add(keys, counts, i, cand, threshold, mask)
            cuda.syncthreads()
            taken += found
            w0 += nt
        taken = min(taken, need)
    if tid == 0:
        sizes[i] = chosen + taken


def _offsets_kernel(sizes, offsets):
    """One block: offsets[0] = 0, offsets[i + 1] = sizes[0] + ... + sizes[i] (int64)."""
    sm = cuda.shared.array(SCAN_THREADS, int32)
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    base = 0
    if tid == 0:
        offsets[0] = 0
    for c0 in range(0, sizes.shape[0], nt):
        v = sizes[c0 + tid] if c0 + tid < sizes.shape[0] else 0
        before, total = _block_scan(v, sm)
        if c0 + tid < sizes.shape[0]:
            offsets[c0 + tid + 1] = base + before + v
        base += total


def _compact_kernel(keys, counts, threshold, offsets, ids):
    """One block a sample i: writes its active ids (count >= threshold) to ids[offsets[i]:]."""
    at = cuda.shared.array(1, int32)
    i = cuda.blockIdx.x
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if tid == 0:
        at[0] = 0
    cuda.syncthreads()
    base = offsets[i]
    for s in range(tid, keys.shape[1], nt):
        if counts[i, s] >= threshold:
            ids[base + cuda.atomic.add(at, 0, 1)] = keys[i, s]


def _tick_kernel(counter):
    """counter[0] += 1 (one thread)."""
    counter[0] += 1


collect_kernel = cached(cuda.jit(_collect_kernel))
tick_kernel = cached(cuda.jit(_tick_kernel))
_ZERO_COUNTERS: dict = {}  # context -> an int64 (1,) zero the collect kernel reads when no counter is given


def _zero_counter():
    key = 0 if in_simulator() else id(cuda.current_context())
    if key not in _ZERO_COUNTERS:
        _ZERO_COUNTERS[key] = cuda.to_device(np.zeros(1, np.int64))
    return _ZERO_COUNTERS[key]


def tick(counter, *, stream=None):
    """Advances the (1,) int64 device ``counter`` by one, on the device (no host copy: a CUDA
    graph may hold it). Returns counter. ValueError naming it on a wrong shape or dtype."""
    counter = as_device(counter, stream)
    check("tick counter", counter, 1, (np.int64,), shape=(1,))
    tick_kernel[1, 1, launch_stream(stream)](counter)
    return counter
offsets_kernel = cached(cuda.jit(_offsets_kernel))
compact_kernel = cached(cuda.jit(_compact_kernel))


def set_bound(L: int, capacity: int, classes: int, min_active: int, max_labels: int) -> int:
    """The most active neurons a sample can have: min(classes, max(min_active, L * capacity +
    max_labels)) (its buckets' ids, its labels, or the padding's total). ``max_labels``: the most
    labels a sample's set receives (with ``batch_labels``, the batch's total)."""
    return int(min(classes, max(min_active, L * capacity + max_labels)))


def table_slots(L: int, capacity: int, classes: int, min_active: int, max_labels: int) -> int:
    """Slots of a sample's hash table: a power of two at least twice the most keys it may hold,
    the distinct class ids among L * capacity bucket ids, the labels and the padding, so at most
    ``classes`` (with ``batch_labels`` the labels are the batch's, and without the cap the table
    would grow with the batch at any number of classes); ``max_labels`` as :func:`set_bound`'s."""
    most = min(classes, L * capacity + max_labels + min_active)
    return 1 << max(4, int(2 * most - 1).bit_length())


def active_sets(codes, buckets, fill, label_ids, label_offsets, pad_order, keys, counts, sizes, offsets, ids, *,
                threshold: int = 1, min_active: int = 0, seed: int = 0, counter=None, batch_labels: bool = False,
                stream=None):
    """The active output neurons of N samples, in the compact (ids, offsets) layout.

    Args:
        codes: (N, L) int32 bucket ids of the samples' inputs (:func:`dwta_hash`).
        buckets, fill: the tables (:func:`fill_tables`): (L, num_buckets, capacity) and
            (L, num_buckets) int32.
        label_ids, label_offsets: the samples' labels in [0, V), (M,) int32 and (N+1,) int64
            (a :class:`rnngraph.lsh.Ragged`'s arrays; all offsets 0 for inference); not checked
            on the device.
        pad_order: (V,) int32, a permutation of range(V) (:func:`rnngraph.lsh.draw_pad_order`).
        keys, counts: (N, S) int32 scratch, S a power of two at least :func:`table_slots`.
        sizes: (N,) int32, written: each sample's active count.
        offsets: (N+1,) int64, written: the sets' bounds in ``ids``.
        ids: (N * bound,) int32 or longer, bound = :func:`set_bound`; written in
            ``ids[:offsets[N]]``.
        threshold: buckets of the sample a neuron must be in (labels always count).
        min_active: pad each set to ``min(min_active, V)``.
        seed: with the sample's index, draws its start in the padding walk (change it every
            call: the call counter, say).
        counter: None, or a (1,) int64 device array added to ``seed`` on the device: a count a
            kernel advances (:func:`tick`), so that a launch captured into a CUDA graph draws new
            starts at each replay.
        batch_labels: every sample's set holds all N samples' labels
            (``label_ids[label_offsets[0]:label_offsets[N]]``), not only its own; size ``keys``
            and ``ids`` with the batch's label count as ``max_labels``.

    Returns (ids, offsets). Raises ValueError naming the array on a wrong shape or dtype, or a
    scratch table whose size is not a power of two.
    """
    arrays = (codes, buckets, fill, label_ids, label_offsets, pad_order, keys, counts, sizes, offsets, ids)
    codes, buckets, fill, label_ids, label_offsets, pad_order, keys, counts, sizes, offsets, ids = (
        as_device(a, stream) for a in arrays)
    n = codes.shape[0]
    check("active_sets buckets", buckets, 3, (np.int32,))
    check("active_sets codes", codes, 2, (np.int32,), shape=(None, buckets.shape[0]))
    check("active_sets fill", fill, 2, (np.int32,), shape=buckets.shape[:2])
    check_ragged("active_sets label_", label_ids, label_offsets, n)
    check("active_sets pad_order", pad_order, 1, (np.int32,))
    check("active_sets keys", keys, 2, (np.int32,), shape=(n, None))
    check("active_sets counts", counts, 2, (np.int32,), shape=keys.shape)
    check("active_sets sizes", sizes, 1, (np.int32,), shape=(n,))
    check_ragged("active_sets ", ids, offsets, n)
    counter = _zero_counter() if counter is None else as_device(counter, stream)
    check("active_sets counter", counter, 1, (np.int64,), shape=(1,))
    if keys.shape[1] & (keys.shape[1] - 1) or keys.shape[1] < 2:
        raise ValueError(f"active_sets keys: the table size {keys.shape[1]} must be a power of two")
    want = min(int(min_active), pad_order.shape[0])
    s = launch_stream(stream)
    if n:
        t = set_threads()
        collect_kernel[n, t, s](codes, buckets, fill, label_ids, label_offsets, np.int32(bool(batch_labels)),
                                np.int32(threshold), np.int32(want), pad_order, np.int64(seed), counter, keys, counts,
                                sizes)
    offsets_kernel[1, 32 if in_simulator() else SCAN_THREADS, s](sizes, offsets)
    if n:
        compact_kernel[n, set_threads(), s](keys, counts, np.int32(threshold), offsets, ids)
    return ids, offsets


KERNELS = [
    (_dwta_hash_kernel, "void(float32[:, ::1], int32[:, :, ::1], int32, int32[:, ::1])"),
    (_zero_int_kernel, "void(int32[::1])"),
    (_table_insert_kernel, "void(int32[:, ::1], int32[:, :, ::1], int32[:, ::1])"),
    (_collect_kernel, "void(int32[:, ::1], int32[:, :, ::1], int32[:, ::1], int32[::1], int64[::1], int32, int32, int32, "
                      "int32[::1], int64, int64[::1], int32[:, ::1], int32[:, ::1], int32[::1])"),
    (_tick_kernel, "void(int64[::1])"),
    (_offsets_kernel, "void(int32[::1], int64[::1])"),
    (_compact_kernel, "void(int32[:, ::1], int32[:, ::1], int32, int64[::1], int32[::1])"),
]

__all__ = ["KERNELS", "active_sets", "dwta_hash", "fill_tables", "set_bound", "table_slots", "tick", "zero_ints"]
