"""DWTA hashing (rnngraph/lsh/hashing.py): a hand-computed example on fixed bins, a loop
reference, densification, identical vectors always colliding, random pairs rarely, errors."""
import numpy as np
import pytest

from rnngraph.lsh import DWTAHash, LSHConfig, bucket_bits

X = np.array([[0.5, -1, 3, 2, 0, 7, 1, 4, 6, -2, 9, 8, 5, 0.1, -3, 2.5]])
#: table 0: hash 0 reads dims 0..7, hash 1 dims 15..8; table 1: an interleaving, then dim 4 eight times
BINS = np.array([[[0, 1, 2, 3, 4, 5, 6, 7], [15, 14, 13, 12, 11, 10, 9, 8]],
                 [[8, 0, 9, 1, 10, 2, 11, 3], [4] * 8]], dtype=np.int32)


def fixed(bins, dim, densify=False, probes=None):
    probes = np.zeros((bins.shape[0] * bins.shape[1], 0), np.int32) if probes is None else probes
    return DWTAHash(bins, dim, densify, np.asarray(probes, np.int32))


def test_hand_computed_buckets_on_fixed_bins():
    """Table 0: max 7 at position 5, max 9 at position 5 -> 5 << 3 | 5 = 45. Table 1: max 9 at
    position 4; a bin of eight equal entries -> the first position, 0 -> 4 << 3 | 0 = 32."""
    h = fixed(BINS, 16)
    assert h.bits == 3 and h.num_buckets == 64
    np.testing.assert_array_equal(h.codes(X), [[[5, 5], [4, 0]]])
    np.testing.assert_array_equal(h.hash(X), [[45, 32]])
    assert h.hash(X).dtype == np.int32


def reference_hash(bins, x):
    """DWTA by loops: per table, per hash, the first arg-max's position, most significant first."""
    out = np.zeros((len(x), len(bins)), dtype=np.int64)
    bits = (bins.shape[2] - 1).bit_length()
    for n, row in enumerate(x):
        for table, hashes in enumerate(bins):
            for dims in hashes:
                values = [row[d] for d in dims]
                out[n, table] = (out[n, table] << bits) | values.index(max(values))
    return out


def test_matches_a_loop_reference_on_drawn_bins():
    h = DWTAHash.draw(20, K=3, L=5, seed=7)
    x = np.floor(np.random.default_rng(1).standard_normal((6, 20)) * 4)   # whole numbers: ties
    np.testing.assert_array_equal(h.hash(x), reference_hash(h.bins, x))


def test_bins_are_disjoint_within_a_permutation_and_seeded():
    h = DWTAHash.draw(16, K=2, L=3, seed=3)
    flat = h.bins.ravel()
    assert sorted(flat[:16]) == list(range(16)) and sorted(flat[16:32]) == list(range(16))
    np.testing.assert_array_equal(h.bins, DWTAHash.draw(16, K=2, L=3, seed=3).bins)
    assert not np.array_equal(h.bins, DWTAHash.draw(16, K=2, L=3, seed=4).bins)


def test_densified_empty_bin_borrows_the_first_non_empty_probe():
    """Bins of 4: bin 0 all zero, bin 1 [1, 3, 2, 0] -> 1, bin 2 [0, 0, 0, 5] -> 3. Densified,
    bin 0 probes bin 1 first; plain, it is position 0. An all-zero vector: 0 everywhere."""
    bins = np.arange(12, dtype=np.int32).reshape(1, 3, 4)
    x = np.array([[0, 0, 0, 0, 1, 3, 2, 0, 0, 0, 0, 5.0]])
    probes = [[1, 2], [2, 0], [0, 1]]
    np.testing.assert_array_equal(fixed(bins, 12).codes(x), [[[0, 1, 3]]])
    np.testing.assert_array_equal(fixed(bins, 12, True, probes).codes(x), [[[1, 1, 3]]])
    np.testing.assert_array_equal(fixed(bins, 12, True, [[2, 1], [2, 0], [0, 1]]).codes(x), [[[3, 1, 3]]])
    np.testing.assert_array_equal(fixed(bins, 12, True, probes).codes(np.zeros((1, 12))), [[[0, 0, 0]]])
    drawn = DWTAHash.draw(12, K=3, L=2, bin_size=4, densify=True, max_probes=5, seed=0)
    assert drawn.probes.shape == (6, 5) and not (drawn.probes == np.arange(6)[:, None]).any()


@pytest.mark.parametrize("densify", [False, True])
def test_an_identical_query_and_weight_row_share_a_bucket_in_every_table(densify):
    h = DWTAHash.draw(32, K=4, L=30, seed=5, densify=densify)
    w = np.random.default_rng(2).standard_normal((50, 32))
    w[::3, :16] = 0.0                                   # half-empty rows: densification at work
    np.testing.assert_array_equal(h.hash(w.copy(), "query"), h.hash(w, "weight"))


def test_a_random_pair_rarely_shares_a_bucket():
    """Independent Gaussian vectors and disjoint bins: each hash collides with probability 1/8,
    a table (K = 3) with 8**-3 = 1/512, so a pair shares some table of L = 20 with probability
    at most 20/512 = 0.039. Measured over 300 x 300 pairs (not independent: each query is in 300): within 50% of
    both (seeds 11-15 gave 1.04-1.23x and 0.97-1.13x); a nearby pair (noise 0.1) collides about
    400x more often than a random one (the locality LSH relies on)."""
    K, L = 3, 20
    h = DWTAHash.draw(64, K=K, L=L, seed=11)
    rng = np.random.default_rng(12)
    q, w = rng.standard_normal((300, 64)), rng.standard_normal((300, 64))
    same = h.hash(q)[:, None, :] == h.hash(w)[None, :, :]       # (300, 300, L)
    p_table = 8.0 ** -K
    assert 0.5 * p_table < same.mean() < 1.5 * p_table
    assert same.any(axis=2).mean() < 1.5 * L * p_table
    near = h.hash(q) == h.hash(q + 0.1 * rng.standard_normal(q.shape))
    assert near.mean() > 50 * p_table


def test_bucket_bits_too_large_names_k_and_the_limit():
    assert bucket_bits(6, 8) == 18 and bucket_bits(10, 8) == 30 and bucket_bits(7, 16) == 28
    with pytest.raises(ValueError, match=r"K = 11 .*33-bit bucket id.*at most 31 bits: K <= 10"):
        bucket_bits(11, 8)
    with pytest.raises(ValueError, match="K = 11"):
        DWTAHash.draw(64, K=11, L=2)
    with pytest.raises(ValueError, match="K = 11"):
        LSHConfig(K=11)
    with pytest.raises(ValueError, match="bin_size must be at least 2"):
        bucket_bits(3, 1)


@pytest.mark.parametrize("x, message", [(np.zeros((2, 5)), r"query must have shape \(N, 16\), got \(2, 5\)"),
                                        (np.zeros(16), r"query must have shape"),
                                        (np.zeros((2, 16), dtype=np.int64), "query must be a float array"),
                                        (np.full((1, 16), np.nan), "query has non-finite entries")])
def test_bad_vectors_are_named(x, message):
    with pytest.raises(ValueError, match=message):
        fixed(BINS, 16).hash(x, "query")
