"""Active sets (rnngraph/lsh/active.py): the buckets' union plus the labels, de-duplicated,
sorted, padded with distinct random neurons to the minimum; the threshold; errors."""
import numpy as np
import pytest

from rnngraph.lsh import BucketTables, DWTAHash, Ragged, active_sets, draw_pad_order

V = 30


def tables():
    """Two tables of 4 buckets: bucket 0 of both holds 1, 2, 3 (and 5 in table 1)."""
    t = BucketTables(L=2, num_buckets=4, capacity=8)
    t.insert([1, 2, 3], np.zeros((3, 2), int))
    t.insert([5], [[1, 0]])
    t.insert([7, 8], [[2, 3], [2, 3]])
    return t


def sets(query, labels=None, min_active=0, seed=0, threshold=1, t=None, batch_labels=False):
    rng = np.random.default_rng(seed)
    return active_sets(t or tables(), query, classes=V, min_active=min_active,
                       pad_order=draw_pad_order(V, rng), rng=rng, labels=labels, threshold=threshold,
                       batch_labels=batch_labels)


def test_union_of_the_buckets_plus_the_labels_de_duplicated_and_sorted():
    labels = Ragged.from_lists([[29, 2], [], [4]])
    a = sets([[0, 0], [2, 3], [3, 1]], labels)
    assert a.ids.dtype == np.int32 and a.offsets.dtype == np.int64
    assert [a[i].tolist() for i in range(3)] == [[1, 2, 3, 5, 29], [7, 8], [4]]


def test_padded_to_the_minimum_with_distinct_neurons_labels_kept():
    labels = Ragged.from_lists([[29], [], [0, 4]])
    a = sets([[0, 0], [2, 3], [3, 1]], labels, min_active=12)
    for i, must in enumerate([[1, 2, 3, 5, 29], [7, 8], [0, 4]]):
        row = a[i]
        assert len(row) == 12 and len(np.unique(row)) == 12 and (np.diff(row) > 0).all()
        assert set(must) <= set(row.tolist()) and row.max() < V
    np.testing.assert_array_equal(a.ids, sets([[0, 0], [2, 3], [3, 1]], labels, min_active=12).ids)   # seeded
    assert not np.array_equal(a.ids, sets([[0, 0], [2, 3], [3, 1]], labels, min_active=12, seed=1).ids)
    everything = sets([[0, 0]], min_active=V + 5)                      # capped at V: all neurons
    np.testing.assert_array_equal(everything[0], np.arange(V))


def test_batch_labels_join_every_set_and_count_toward_the_minimum():
    labels = Ragged.from_lists([[29, 2], [], [4]])
    a = sets([[0, 0], [2, 3], [3, 1]], labels, batch_labels=True)
    assert [a[i].tolist() for i in range(3)] == [[1, 2, 3, 4, 5, 29], [2, 4, 7, 8, 29], [2, 4, 29]]
    padded = sets([[0, 0], [2, 3], [3, 1]], labels, min_active=6, batch_labels=True)
    assert [len(padded[i]) for i in range(3)] == [6, 6, 6]        # the batch's labels fill the minimum first
    assert set(a[1].tolist()) <= set(padded[1].tolist())
    inference = sets([[0, 0], [2, 3]], batch_labels=True)            # no labels: nothing to share
    assert [inference[i].tolist() for i in range(2)] == [[1, 2, 3, 5], [7, 8]]


def test_threshold_keeps_neurons_in_enough_buckets():
    """Query (0, 0) reads 1, 2, 3 twice and 5 once; with threshold 2, 5 is not active."""
    assert sets([[0, 0]], threshold=2)[0].tolist() == [1, 2, 3]
    assert sets([[0, 0]], Ragged.from_lists([[5]]), threshold=2)[0].tolist() == [1, 2, 3, 5]


def test_active_set_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"labels: id 30 of sample 1 is outside \[0, 30\)"):
        sets([[0, 0], [1, 1]], Ragged.from_lists([[3], [30]]))
    with pytest.raises(ValueError, match="labels has 1 samples, query_buckets 2"):
        sets([[0, 0], [1, 1]], Ragged.from_lists([[3]]))
    with pytest.raises(ValueError, match=r"pad_order must be a permutation of range\(30\)"):
        active_sets(tables(), [[0, 0]], classes=V, min_active=3, pad_order=np.zeros(V, np.int32),
                    rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="offsets must start at 0"):
        Ragged.of([1, 2], [0, 3], "labels")


def test_a_query_equal_to_a_weight_row_activates_its_neuron():
    """Hash, build, query end to end: the neuron whose weight row is the query is always active
    (it shares every bucket), with buckets large enough to hold every row."""
    h = DWTAHash.draw(16, K=2, L=4, seed=3)
    w = np.random.default_rng(4).standard_normal((V, 16))
    t = BucketTables(4, h.num_buckets, capacity=V)
    t.build(h, w)
    a = sets(h.hash(w[[3, 17]]), t=t)
    assert 3 in a[0] and 17 in a[1]
