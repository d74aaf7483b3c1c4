"""The LSH index kernels (rnngraph/codegen/lsh_kernels.py) against the NumPy specification
(rnngraph/lsh/): DWTA hashing bit for bit, the tables' counters and bucket sets, the active sets
(the same set when no bucket overflows; padding's count and distinctness, not its ids). Tiny
shapes in numba's simulator on machines without a GPU; the same tests in the GPU tier."""
import os

import numpy as np
import pytest
from numba import cuda

from rnngraph.codegen import lsh_kernels as K
from rnngraph.lsh import BucketTables, DWTAHash, Ragged, active_sets, draw_pad_order

pytestmark = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else [pytest.mark.gpu]

D, C = 16, 64


def hashed(x, hasher):
    out = cuda.to_device(np.zeros((len(x), hasher.L), np.int32))
    K.dwta_hash(cuda.to_device(x.astype(np.float32)), cuda.to_device(hasher.bins), out, bits=hasher.bits)
    return out.copy_to_host()


def test_hashing_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(0)
    hasher = DWTAHash.draw(D, K=2, L=3, seed=1)
    x = rng.normal(size=(4, D)).astype(np.float32)
    x[1, :] = 0.0                      # ties everywhere: the first position wins
    x[2, ::2] = x[2, 1::2]             # pairwise ties
    np.testing.assert_array_equal(hashed(x, hasher), hasher.hash(x))


def test_hashing_with_bins_of_four_and_three_hashes():
    rng = np.random.default_rng(1)
    hasher = DWTAHash.draw(D, K=3, L=2, bin_size=4, seed=2)
    w = rng.normal(size=(10, D)).astype(np.float32)
    np.testing.assert_array_equal(hashed(w, hasher), hasher.hash(w))


def build(hasher, weight, capacity):
    codes = hashed(weight, hasher)
    buckets = cuda.to_device(np.full((hasher.L, hasher.num_buckets, capacity), 7, np.int32))  # junk: never read
    fill = cuda.to_device(np.full((hasher.L, hasher.num_buckets), 5, np.int32))               # reset by the fill
    K.fill_tables(cuda.to_device(codes), buckets, fill)
    return codes, buckets.copy_to_host(), fill.copy_to_host()


def test_table_fill_counts_and_sets():
    rng = np.random.default_rng(2)
    hasher = DWTAHash.draw(D, K=2, L=3, bin_size=4, seed=3)     # 16 buckets a table
    weight = rng.normal(size=(C, D)).astype(np.float32)
    ref = BucketTables(hasher.L, hasher.num_buckets, capacity=3)
    ref.build(hasher, weight)
    _, buckets, fill = build(hasher, weight, capacity=3)
    np.testing.assert_array_equal(fill, ref.fill)
    assert (fill > 3).any()                                      # some buckets overflow
    for l in range(hasher.L):
        for b in range(hasher.num_buckets):
            got = buckets[l, b, :min(fill[l, b], 3)]
            assert len(set(got)) == len(got)
            members = np.flatnonzero(hasher.hash(weight)[:, l] == b)
            assert set(got) <= set(members)                    # survivors of any order
            if fill[l, b] <= 3:
                assert sorted(got) == sorted(ref.bucket(l, b))


def device_sets(hasher, buckets, fill, x, labels, pad_order, *, min_active, threshold=1, seed=0, max_labels=2,
                batch_labels=False, before=()):
    """The device's active sets; ``before``: label ids placed ahead of the batch's in the device
    array, its offsets shifted past them (absolute positions, as a slice of a whole split's)."""
    codes = hashed(x, hasher)
    n = len(x)
    slots = K.table_slots(hasher.L, buckets.shape[2], len(pad_order), min_active, max_labels)
    bound = K.set_bound(hasher.L, buckets.shape[2], len(pad_order), min_active, max_labels)
    ids = cuda.to_device(np.full(n * bound, -5, np.int32))
    offsets = cuda.to_device(np.zeros(n + 1, np.int64))
    lab_ids = np.r_[np.asarray(before, np.int32), labels.ids].astype(np.int32)
    lab_ids = lab_ids if lab_ids.size else np.zeros(1, np.int32)
    K.active_sets(cuda.to_device(codes), cuda.to_device(buckets), cuda.to_device(fill), cuda.to_device(lab_ids),
                  cuda.to_device(labels.offsets + len(before)), cuda.to_device(pad_order),
                  cuda.device_array((n, slots), np.int32), cuda.device_array((n, slots), np.int32),
                  cuda.device_array(n, np.int32), offsets, ids, threshold=threshold, min_active=min_active, seed=seed,
                  batch_labels=batch_labels)
    offsets = offsets.copy_to_host()
    return Ragged.of(ids.copy_to_host()[:offsets[-1]], offsets), codes


@pytest.mark.parametrize("threshold, batch_labels", [(1, False), (2, False), (2, True)])
def test_active_sets_without_padding_equal_numpy(threshold, batch_labels):
    rng = np.random.default_rng(3)
    hasher = DWTAHash.draw(D, K=2, L=3, bin_size=4, seed=4)
    weight = rng.normal(size=(C, D)).astype(np.float32)
    _, buckets, fill = build(hasher, weight, capacity=16)
    assert fill.max() <= 16                                       # no overflow: sets are exact
    ref = BucketTables(hasher.L, hasher.num_buckets, capacity=16)
    ref.build(hasher, weight)
    x = rng.normal(size=(3, D)).astype(np.float32)
    labels = Ragged.from_lists([[5, 60], [], [0]])
    pad = draw_pad_order(C, rng)
    got, codes = device_sets(hasher, buckets, fill, x, labels, pad, min_active=0, threshold=threshold,
                             max_labels=3 if batch_labels else 2, batch_labels=batch_labels,
                             before=[7, 33, 41] if batch_labels else [])   # not the batch's: never active
    want = active_sets(ref, codes, classes=C, min_active=0, pad_order=pad, rng=rng, labels=labels,
                       threshold=threshold, batch_labels=batch_labels)
    for i in range(3):
        assert sorted(got[i]) == list(want[i])
        assert {0, 5, 60} <= set(got[i]) or not batch_labels


def test_active_sets_pad_to_the_minimum_with_distinct_neurons():
    rng = np.random.default_rng(5)
    hasher = DWTAHash.draw(D, K=2, L=2, bin_size=4, seed=6)
    weight = rng.normal(size=(C, D)).astype(np.float32)
    _, buckets, fill = build(hasher, weight, capacity=8)
    ref = BucketTables(hasher.L, hasher.num_buckets, capacity=8)
    ref.build(hasher, weight)
    x = rng.normal(size=(4, D)).astype(np.float32)
    labels = Ragged.from_lists([[1], [2, 3], [], [63]])
    pad = draw_pad_order(C, rng)
    got, codes = device_sets(hasher, buckets, fill, x, labels, pad, min_active=20, seed=11)
    unpadded = active_sets(ref, codes, classes=C, min_active=0, pad_order=pad, rng=rng, labels=labels)
    for i in range(4):
        ids = got[i]
        assert len(set(ids)) == len(ids) == max(20, unpadded[i].size)
        assert set(unpadded[i]) <= set(ids) and ((0 <= ids) & (ids < C)).all()
    everything, _ = device_sets(hasher, buckets, fill, x, labels, pad, min_active=1000, seed=12)
    for i in range(4):                                            # capped at the classes
        assert sorted(everything[i]) == list(range(C))
