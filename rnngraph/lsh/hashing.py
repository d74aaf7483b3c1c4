"""Winner-take-all (DWTA) hashing of vectors into bucket ids, L tables of K hash functions.

One hash function is a *bin* of ``bin_size`` (8) input dimensions; its value is the position
(0..7, ``bits`` = 3 bits) of the largest of the vector's entries at those dimensions, the first
one on a tie (Yagnik et al. 2011, "The power of comparative reasoning": WTA hashing with a window
of 8). A table's bucket id is its K values concatenated, the first the most significant::

    bucket = sum_j code_j << ((K - 1 - j) * bits),       0 <= bucket < 2**(K * bits)

The bins are drawn as G-SLIDE (Pan et al., IEEE TPDS 2022) and SLIDE (Chen et al., MLSys 2020)
draw them: enough seeded random permutations of ``range(dim)`` concatenated and cut into
``L * K`` bins of ``bin_size``, so the bins of one permutation are disjoint (a bin repeats a
dimension only when ``dim < bin_size``). The same function hashes a batch of queries (the
layer's input vectors, (N, d)) and the items (the output neurons' weight rows, (V, d)).

Empty bins. G-SLIDE hashes dense vectors and does *not* densify: its arg-max starts from
``-FLT_MAX`` with a strict ``>``, so a bin whose entries are all equal (all zero, as after a
ReLU) hashes to position 0; that is ``densify=False`` here, the default. SLIDE's CPU code hashes
sparse vectors with *densified* WTA (Chen & Shrivastava, "Densified winner take all (WTA)
hashing for sparse datasets", UAI 2018): a bin with no non-zero entry borrows the value of another
bin, the first non-empty one of a seeded random probe sequence of that bin (at most
``max_probes``; 0 when all probes are empty too). ``densify=True`` does that, with "empty" read
as "all of the bin's entries are exactly 0".

Two deliberate differences from G-SLIDE's code: its shift per hash is ``(int)logf(bin_size)`` =
2 bits for bins of 8 (the natural log), so the 3-bit values of neighbouring hashes overlap and
distinct code tuples share buckets (9,556 buckets a table for K = 6); here the shift is the
exact ``bits`` = ceil(log2(bin_size)), so a table has ``2**(K * bits)`` buckets (262,144 for
K = 6). And the draws here are NumPy ``Generator`` draws from a seed, not thrust's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import positive_int

#: a bucket id is an int32: at most this many bits
MAX_BUCKET_BITS = 31


def bucket_bits(K: int, bin_size: int) -> int:
    """``K * ceil(log2(bin_size))``, the bits of a bucket id.

    Raises:
        ValueError: naming K and bin_size when K or bin_size is not a positive integer,
            bin_size < 2, or the bits exceed :data:`MAX_BUCKET_BITS` (31, an int32 bucket id).
    """
    K, bin_size = positive_int(K, "K"), positive_int(bin_size, "bin_size")
    if bin_size < 2:
        raise ValueError(f"bin_size must be at least 2 (a bin's arg-max picks one of its entries), got {bin_size}")
    bits = K * (bin_size - 1).bit_length()
    if bits > MAX_BUCKET_BITS:
        raise ValueError(f"K = {K} hashes of {(bin_size - 1).bit_length()} bits (bin_size {bin_size}) make a "
                         f"{bits}-bit bucket id; an int32 bucket id holds at most {MAX_BUCKET_BITS} bits: "
                         f"K <= {MAX_BUCKET_BITS // (bin_size - 1).bit_length()}")
    return bits


def draw_bins(dim: int, K: int, L: int, bin_size: int, rng: np.random.Generator) -> np.ndarray:
    """(L, K, bin_size) int32 dimensions in [0, dim): concatenated permutations of range(dim), cut
    into bins (G-SLIDE's ``shuffle_bins``, SLIDE's ``DensifiedWtaHash``)."""
    total = L * K * bin_size
    perms = [rng.permutation(dim) for _ in range(-(-total // dim))]
    return np.concatenate(perms)[:total].reshape(L, K, bin_size).astype(np.int32)


def draw_probes(num_bins: int, max_probes: int, rng: np.random.Generator) -> np.ndarray:
    """(num_bins, max_probes) int32: for each bin, the other bins it borrows from in order when
    it is empty (densified WTA); an empty array when there is no other bin."""
    if num_bins < 2:
        return np.zeros((num_bins, 0), dtype=np.int32)
    other = rng.integers(0, num_bins - 1, size=(num_bins, max_probes))
    return (other + (other >= np.arange(num_bins)[:, None])).astype(np.int32)   # skip the bin itself


@dataclass(frozen=True, eq=False)
class DWTAHash:
    """L tables of K winner-take-all hash functions over vectors of ``dim`` entries.

    Attributes:
        bins: (L, K, bin_size) int32, each hash function's input dimensions.
        dim: the vectors' length d.
        densify: whether an all-zero bin borrows another's value (Chen & Shrivastava 2018).
        probes: (L*K, max_probes) int32, each bin's probe sequence (used when ``densify``).

    Build one with :meth:`draw`.
    """

    bins: np.ndarray
    dim: int
    densify: bool
    probes: np.ndarray

    @classmethod
    def draw(cls, dim: int, K: int, L: int, *, bin_size: int = 8, seed: int = 0, densify: bool = False,
             max_probes: int = 100) -> DWTAHash:
        """Bins (and probe sequences) drawn from ``np.random.default_rng(seed)``.

        Raises:
            ValueError: naming the argument: dim, K, L, bin_size or max_probes not a positive
                integer, bin_size < 2, or K * bits > 31 (see :func:`bucket_bits`).
        """
        dim, L = positive_int(dim, "dim"), positive_int(L, "L")
        max_probes = positive_int(max_probes, "max_probes")
        bucket_bits(K, bin_size)
        rng = np.random.default_rng(seed)
        bins = draw_bins(dim, K, L, bin_size, rng)
        return cls(bins, dim, bool(densify), draw_probes(L * K, max_probes, rng))

    @property
    def L(self) -> int:
        return self.bins.shape[0]

    @property
    def K(self) -> int:
        return self.bins.shape[1]

    @property
    def bin_size(self) -> int:
        return self.bins.shape[2]

    @property
    def bits(self) -> int:
        """Bits of one hash value: ceil(log2(bin_size))."""
        return (self.bin_size - 1).bit_length()

    @property
    def num_buckets(self) -> int:
        """Buckets a table: 2**(K * bits)."""
        return 1 << (self.K * self.bits)

    def codes(self, x, what: str = "x") -> np.ndarray:
        """(N, L, K) int32: each hash function's value (the winner's position in its bin) for
        each row of ``x`` (N, dim), after densification when ``densify``.

        Raises:
            ValueError: naming ``what``, when x is not a finite 2-D array of ``dim`` columns.
        """
        x = self.checked(x, what)
        windows = x[:, self.bins]                                     # (N, L, K, bin_size)
        codes = windows.argmax(axis=-1).astype(np.int32)              # first maximum on ties
        if self.densify and self.probes.shape[1]:
            codes = self.densified(codes.reshape(len(x), -1),
                                   ~windows.any(axis=-1).reshape(len(x), -1)).reshape(codes.shape)
        return codes

    def densified(self, codes: np.ndarray, empty: np.ndarray) -> np.ndarray:
        """(N, L*K) codes where each empty bin holds the code of the first non-empty bin of its
        probe sequence (0 when every probe is empty too)."""
        codes = np.where(empty, 0, codes)
        pending = empty.copy()
        for c in range(self.probes.shape[1]):
            if not pending.any():
                break
            probe = self.probes[:, c]                                 # (L*K,)
            found = pending & ~empty[:, probe]
            codes = np.where(found, codes[:, probe], codes)
            pending &= ~found
        return codes

    def hash(self, x, what: str = "x", chunk: int = 4096) -> np.ndarray:
        """(N, L) int32 bucket ids of the rows of ``x`` (N, dim) in each table, ``chunk`` rows
        at a time (a (chunk, L, K, bin_size) temporary).

        Raises:
            ValueError: naming ``what``, as :meth:`codes`.
        """
        x = self.checked(x, what)
        shifts = ((self.K - 1 - np.arange(self.K)) * self.bits).astype(np.int32)
        out = np.empty((len(x), self.L), dtype=np.int32)
        for start in range(0, len(x), chunk):
            out[start:start + chunk] = (self.codes(x[start:start + chunk], what) << shifts).sum(axis=-1)
        return out

    def checked(self, x, what: str) -> np.ndarray:
        """``x`` as a 2-D float array of ``dim`` columns; ValueError naming ``what`` otherwise."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"{what} must have shape (N, {self.dim}), got {x.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise ValueError(f"{what} must be a float array, got dtype {x.dtype}")
        if not np.isfinite(x).all():
            raise ValueError(f"{what} has non-finite entries (NaN or inf): a winner cannot be chosen")
        return x
