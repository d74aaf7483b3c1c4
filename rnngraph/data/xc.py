"""Reader and writer of the Extreme Classification Repository's text format (the format
Amazon-670K and WikiLSHTC-325K ship in, and G-SLIDE's ``main.cu`` reads).

A header line ``num_samples num_features num_labels``, then one sample a line::

    l1,l2,... f:v f:v ...

labels (comma-separated, in [0, num_labels)) and features (``index:value``, indices in
[0, num_features)), separated by spaces. A sample may have no labels (the line starts with a
feature, after a space) or no features (only labels), or neither (a blank line); trailing
spaces and a Windows line end are ignored, as are blank lines after the header's number of
samples. Repeated
labels of a sample count once (kept sorted); a repeated feature index is an error.

    data = read_xc("amazon_train.txt")              # XCDataset, CSR-style arrays
    data.features(0)                                # (ids int32, values float32) of sample 0
    x = data.dense_features(slice(0, 256))          # (256, num_features) float32
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from .errors import CorpusError


@dataclass(frozen=True, eq=False)
class XCDataset:
    """Samples with sparse features and sets of labels, in CSR form.

    Attributes:
        source: the file read (or a description of a generated set).
        num_features: F, features are in [0, F). num_labels: C, labels are in [0, C).
        feature_offsets: (N+1,) int64; sample i's features are
            ``feature_ids[feature_offsets[i]:feature_offsets[i+1]]`` (int32) with
            ``feature_values`` (float32) alongside.
        label_offsets: (N+1,) int64; sample i's labels are ``label_ids[...]`` (int32, sorted, distinct).
    """

    source: str
    num_features: int
    num_labels: int
    feature_offsets: np.ndarray
    feature_ids: np.ndarray
    feature_values: np.ndarray
    label_offsets: np.ndarray
    label_ids: np.ndarray

    def __len__(self) -> int:
        return self.label_offsets.size - 1

    def features(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample ``i``'s (feature ids (k,) int32, values (k,) float32)."""
        lo, hi = self.feature_offsets[i], self.feature_offsets[i + 1]
        return self.feature_ids[lo:hi], self.feature_values[lo:hi]

    def labels(self, i: int) -> np.ndarray:
        """Sample ``i``'s labels, (m,) int32 sorted."""
        return self.label_ids[self.label_offsets[i]:self.label_offsets[i + 1]]

    def dense_features(self, rows=slice(None)) -> np.ndarray:
        """(n, num_features) float32, the features of ``rows`` (a slice or index array) as dense rows."""
        index = np.arange(len(self))[rows]
        out = np.zeros((index.size, self.num_features), dtype=np.float32)
        for r, i in enumerate(index):
            ids, values = self.features(i)
            out[r, ids] = values
        return out


def header(line: str, path) -> tuple[int, int, int]:
    """(num_samples, num_features, num_labels) of the header line; CorpusError naming the file."""
    parts = line.split()
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or values[0] < 0 or values[1] < 1 or values[2] < 1:
        raise CorpusError(f"{path}:1: the header must be 'num_samples num_features num_labels' "
                          f"(num_features, num_labels >= 1), got {line.strip()!r}")
    return values


def parse_line(line: str, where: str, num_features: int, num_labels: int):
    """(labels list, feature ids list, values list) of one sample line; CorpusError at ``where``."""
    tokens = line.split()
    labels = []
    if tokens and ":" not in tokens[0]:
        for text in tokens.pop(0).split(","):
            if not text.strip().lstrip("-").isdigit():
                raise CorpusError(f"{where}: malformed label {text!r} (labels are integers separated by commas)")
            label = int(text)
            if not 0 <= label < num_labels:
                raise CorpusError(f"{where}: label {label} is outside [0, {num_labels})")
            labels.append(label)
    ids, values = [], []
    for token in tokens:
        index, sep, value = token.partition(":")
        try:
            index, value = int(index), float(value)
        except ValueError:
            sep = ""
        if not sep or not math.isfinite(value):
            raise CorpusError(f"{where}: malformed feature {token!r} (expected index:value, a finite value)")
        if not 0 <= index < num_features:
            raise CorpusError(f"{where}: feature index {index} is outside [0, {num_features})")
        ids.append(index)
        values.append(value)
    if len(set(ids)) != len(ids):
        raise CorpusError(f"{where}: a feature index is repeated")
    return sorted(set(labels)), ids, values


def read_xc(path, max_samples: int | None = None) -> XCDataset:
    """Reads an XC-format file (module docstring), the first ``max_samples`` samples if given.

    Returns:
        :class:`XCDataset` (feature ids int32 in file order, values float32, labels int32).

    Raises:
        CorpusError: naming the file: missing or unreadable, a bad header; naming the file and
            line: a malformed label or feature, a label outside [0, num_labels), a feature index
            outside [0, num_features), a repeated feature; naming the file: a sample count
            different from the header's.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: cannot read the XC file: {e}") from None
    if not lines:
        raise CorpusError(f"{path}: empty file, expected a header 'num_samples num_features num_labels'")
    n, num_features, num_labels = header(lines[0], path)
    body = lines[1:]
    if len(body) > n and not any(line.strip() for line in body[n:]):
        body = body[:n]                  # blank lines after the last sample
    if len(body) != n:
        raise CorpusError(f"{path}: the header says {n} samples, the file has {len(body)} sample lines")
    body = body[:max_samples] if max_samples is not None else body
    label_lists, id_lists, value_lists = [], [], []
    for number, line in enumerate(body, start=2):
        labels, ids, values = parse_line(line.rstrip(), f"{path}:{number}", num_features, num_labels)
        label_lists.append(labels)
        id_lists.append(ids)
        value_lists.append(values)
    return from_lists(path, num_features, num_labels, label_lists, id_lists, value_lists)


def from_lists(source: str, num_features: int, num_labels: int, label_lists, id_lists, value_lists) -> XCDataset:
    """An :class:`XCDataset` from per-sample Python lists."""
    def offsets(lists):
        out = np.zeros(len(lists) + 1, dtype=np.int64)
        out[1:] = np.cumsum([len(x) for x in lists])
        return out

    def flat(lists, dtype):
        return np.fromiter((v for x in lists for v in x), dtype=dtype, count=sum(len(x) for x in lists))

    return XCDataset(source, num_features, num_labels, offsets(id_lists), flat(id_lists, np.int32),
                     flat(value_lists, np.float32), offsets(label_lists), flat(label_lists, np.int32))


def write_xc(path, data: XCDataset) -> None:
    """Writes ``data`` in the XC format (values with 9 significant digits: a float32 is read back exactly)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{len(data)} {data.num_features} {data.num_labels}\n")
        for i in range(len(data)):
            ids, values = data.features(i)
            labels = ",".join(str(v) for v in data.labels(i))
            feats = " ".join(f"{a}:{v:.9g}" for a, v in zip(ids.tolist(), values.tolist()))
            f.write(f"{labels} {feats}".rstrip() + "\n")    # no labels: the line starts with a space
