"""Bucket tables (rnngraph/lsh/tables.py) and the configuration (config.py): ring overwrite
against a one-insert-at-a-time reference, a build from weights, gather, G-SLIDE's defaults,
field errors and the rebuild clock."""
import numpy as np
import pytest

from rnngraph.lsh import BucketTables, DWTAHash, LSHConfig, RebuildClock


def test_a_full_bucket_overwrites_its_oldest_id():
    t = BucketTables(L=1, num_buckets=4, capacity=3)
    t.insert(np.arange(5), np.full((5, 1), 2))
    np.testing.assert_array_equal(t.buckets[0, 2], [3, 4, 2])        # 0 and 1 overwritten
    assert t.fill[0, 2] == 5 and t.fill.sum() == 5
    np.testing.assert_array_equal(t.bucket(0, 2), [3, 4, 2])
    t.insert([9], [[2]])                                              # slot 5 % 3 = 2: 2 goes
    np.testing.assert_array_equal(t.bucket(0, 2), [3, 4, 9])
    np.testing.assert_array_equal(t.bucket(0, 1), [])
    assert (t.buckets[0, [0, 1, 3]] == -1).all()
    t.clear()
    assert t.fill.sum() == 0 and (t.buckets == -1).all()


def test_batched_inserts_equal_one_at_a_time():
    """The vectorized insert equals a loop of G-SLIDE's atomicAdd-then-store, in id order."""
    rng = np.random.default_rng(0)
    t = BucketTables(L=3, num_buckets=5, capacity=4)
    buckets = np.full((3, 5, 4), -1)
    fill = np.zeros((3, 5), dtype=int)
    for call in range(3):
        ids = rng.integers(0, 1000, size=17)
        codes = rng.integers(0, 5, size=(17, 3))
        t.insert(ids, codes)
        for v, row in zip(ids, codes):
            for table, b in enumerate(row):
                buckets[table, b, fill[table, b] % 4] = v
                fill[table, b] += 1
    np.testing.assert_array_equal(t.buckets, buckets)
    np.testing.assert_array_equal(t.fill, fill)


def test_build_puts_every_row_in_its_bucket_and_gather_reads_them():
    h = DWTAHash.draw(24, K=2, L=6, seed=1)
    w = np.random.default_rng(2).standard_normal((40, 24))
    t = BucketTables(6, h.num_buckets, capacity=40)
    t.insert([7], np.zeros((1, 6), int))
    t.build(h, w)                                                    # clears first
    assert t.fill.sum() == 40 * 6
    codes = h.hash(w)
    for v in (0, 13, 39):
        assert all(v in t.bucket(table, codes[v, table]) for table in range(6))
    g = t.gather(codes[[5, 9]])
    assert len(g) == 2 and 5 in g[0] and 9 in g[1]
    np.testing.assert_array_equal(g.sizes, [t.fill[np.arange(6), codes[i]].sum() for i in (5, 9)])


def test_gather_reads_at_most_capacity_a_bucket():
    t = BucketTables(L=2, num_buckets=2, capacity=2)
    t.insert(np.arange(5), np.zeros((5, 2), int))
    g = t.gather([[0, 1], [1, 0]])
    np.testing.assert_array_equal(g.offsets, [0, 2, 4])
    np.testing.assert_array_equal(g[0], [4, 3])
    assert g.ids.dtype == np.int32 and g.offsets.dtype == np.int64


def test_table_errors_name_the_argument():
    t = BucketTables(L=2, num_buckets=4, capacity=2)
    with pytest.raises(ValueError, match=r"bucket_ids \(V, 2\)"):
        t.insert([1, 2], [[0], [1]])
    with pytest.raises(ValueError, match=r"bucket_ids must be in \[0, 4\)"):
        t.insert([1], [[0, 4]])
    with pytest.raises(ValueError, match=r"query_buckets must have shape \(N, 2\)"):
        t.gather([[0, 1, 2]])
    with pytest.raises(ValueError, match="capacity must be a positive integer"):
        BucketTables(2, 4, capacity=0)
    with pytest.raises(ValueError, match="the hasher has L = 3"):
        t.build(DWTAHash.draw(8, K=1, L=3, bin_size=4), np.zeros((2, 8)))


def test_config_has_g_slide_defaults():
    c = LSHConfig()
    assert (c.K, c.L, c.bin_size, c.capacity, c.threshold, c.min_active) == (6, 50, 8, 128, 1, 1500)
    assert (c.rebuild_every, c.redraw_every, c.densify, c.batch_labels) == (6400, 128_000, False, False)
    assert c.bits == 18 and c.table_bytes() == 4 * 50 * 2**18 * 129
    with pytest.raises(AttributeError):
        c.K = 5


@pytest.mark.parametrize("field, value, message", [
    ("capacity", 0, "LSHConfig.capacity must be a positive integer, got 0"),
    ("L", 2.5, "LSHConfig.L must be a positive integer, got 2.5"),
    ("rebuild_every", True, "LSHConfig.rebuild_every must be a positive integer"),
    ("min_active", -1, "LSHConfig.min_active must be a non-negative integer, got -1"),
    ("densify", 1, "LSHConfig.densify must be True or False"),
    ("batch_labels", "yes", "LSHConfig.batch_labels must be True or False, got 'yes'"),
    ("threshold", 51, r"LSHConfig.threshold \(51\) must be at most L \(50\)"),
    ("threshold", 0, "LSHConfig.threshold must be a positive integer")])
def test_config_errors_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        LSHConfig(**{field: value})


def test_config_takes_numpy_integers_as_python_ones():
    """Regression: min_active refused np.int64(5) ("must be a non-negative integer, got
    np.int64(5)") where K, L and the other counts took NumPy integers."""
    c = LSHConfig(K=np.int64(2), L=np.int32(4), min_active=np.int64(5), threshold=np.int64(4))
    assert (c.K, c.L, c.min_active, c.threshold) == (2, 4, 5, 4)
    assert all(type(v) is int for v in (c.K, c.L, c.min_active, c.threshold))



def test_rebuild_clock_counts_samples():
    """Batches of 256: a rebuild after the 25th (6,400 samples), a redraw after the 500th."""
    clock = RebuildClock(LSHConfig())
    due = [clock.after_batch(256) for _ in range(500)]
    assert [i + 1 for i, (rebuild, _) in enumerate(due) if rebuild][:3] == [25, 50, 75]
    assert [i + 1 for i, (_, redraw) in enumerate(due) if redraw] == [500]
    uneven = RebuildClock(LSHConfig(rebuild_every=10, redraw_every=30))
    assert [uneven.after_batch(n) for n in (6, 6, 6, 15)] == [(False, False), (True, False),
                                                              (False, False), (True, True)]
    with pytest.raises(ValueError, match="n .samples in the batch. must be a positive integer"):
        uneven.after_batch(0)
