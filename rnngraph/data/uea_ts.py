"""Reader for the ``.ts`` files of the UEA/UCR time-series archive (any data set in it).

A ``.ts`` file is a header, ``@data``, then one series a line::

    # comment lines start with '#' (or '%'); blank lines are skipped
    @problemName JapaneseVowels
    @timeStamps false
    @missing false
    @univariate false
    @dimensions 12
    @equalLength false
    @classLabel true 1 2 3 4 5 6 7 8 9
    @data
    1.86,1.89,1.93:-0.20,-0.19,-0.23: ... :3

Header keys are case-insensitive (``@timestamps`` and ``@timeStamps`` both occur); a value
``true``/``false`` is too. Known keys: ``@problemName NAME``, ``@timeStamps``, ``@missing``,
``@univariate``, ``@equalLength``, ``@targetLabel`` (booleans), ``@dimensions D``,
``@seriesLength T``, ``@classLabel true L1 L2 ...`` or ``@classLabel false``, ``@data``.

Each data line holds a series' dimensions separated by ``:``, each a comma-separated list of
numbers (``?`` is a missing value, read as NaN), all dimensions of a series the same length;
then, with ``@classLabel true``, a class label (one of the header's labels, compared as
strings), or with ``@targetLabel true`` a number (a regression target). Series may differ in
length unless ``@equalLength true``. Timestamped series (``@timeStamps true``) are refused.

    data = read_ts("JapaneseVowels_TRAIN.ts")
    x, lengths = pad_series(data.series, time_major=True)   # (T_max, N, D), (N,) int64
    data.y                                                  # (N,) int64 class indices
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import counted
from .errors import CorpusError

_BOOLEAN_KEYS = ("timestamps", "missing", "univariate", "equallength", "targetlabel")
_INT_KEYS = ("dimensions", "serieslength")
_KEYS = ("problemname", "classlabel", "data") + _BOOLEAN_KEYS + _INT_KEYS
_SPELLING = {"problemname": "problemName", "timestamps": "timeStamps", "equallength":
             "equalLength", "targetlabel": "targetLabel", "serieslength": "seriesLength",
             "classlabel": "classLabel"}


@dataclass(frozen=True, eq=False)
class TsDataset:
    """The contents of one ``.ts`` file.

    Attributes:
        path: the file read.
        problem_name: the ``@problemName`` value ("" if the header has none).
        series: N float64 arrays, series i of shape (lengths[i], dims).
        lengths: (N,) int64, each series' number of time steps (>= 1).
        dims: D, the number of dimensions (channels) of every series.
        class_names: the ``@classLabel`` labels in header order; () when there are none.
        labels: N label strings as the data lines give them, or None when unlabelled or
            a regression file.
        y: (N,) int64 index of each label in ``class_names``, or None where ``labels`` is.
        targets: (N,) float64 regression targets (``@targetLabel true``), else None.
    """

    path: str
    problem_name: str
    series: list
    lengths: np.ndarray
    dims: int
    class_names: tuple
    labels: tuple | None
    y: np.ndarray | None
    targets: np.ndarray | None

    def __len__(self) -> int:
        return len(self.series)

    def padded(self, fill: float = 0.0, dtype=np.float64, time_major: bool = False) -> np.ndarray:
        """The series padded with ``fill`` after their ends: (N, T_max, D), or (T_max, N, D)
        with ``time_major=True`` (rnngraph's layout). See :func:`pad_series`."""
        return pad_series(self.series, fill=fill, dtype=dtype, time_major=time_major)[0]


def pad_series(series, fill: float = 0.0, dtype=np.float64, time_major: bool = False,
               t_max: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Stack series of different lengths into one array, padding after each series' end.

    Args:
        series: a non-empty sequence of arrays of shape (length_i, D), one D for all
            (a 1-D array is read as D = 1).
        fill: the value of the padded steps (missing values already in the series stay NaN).
        dtype: the float dtype of the result.
        time_major: False gives (N, T, D); True gives (T, N, D), the (T, S, ...) layout of
            rnngraph's inputs.
        t_max: T, at least the longest length; default the longest length.
    Returns:
        (x, lengths): x as above, lengths (N,) int64.
    Raises:
        ValueError: no series, a series that is not 1-D or 2-D, differing D, or t_max
            shorter than a series.
    """
    arrays = [np.asarray(s) for s in series]
    if not arrays:
        raise ValueError("pad_series: no series to pad")
    arrays = [a[:, None] if a.ndim == 1 else a for a in arrays]
    bad = [i for i, a in enumerate(arrays) if a.ndim != 2]
    if bad:
        raise ValueError(f"pad_series: series {bad[0]} has shape {arrays[bad[0]].shape}; "
                         "expected (length, dims)")
    dims = {a.shape[1] for a in arrays}
    if len(dims) > 1:
        raise ValueError(f"pad_series: the series have different dims {sorted(dims)}")
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    longest = int(lengths.max())
    if t_max is None:
        t_max = longest
    elif t_max < longest:
        raise ValueError(f"pad_series: t_max={t_max} is shorter than the longest series "
                         f"({longest} steps)")
    x = np.full((len(arrays), t_max, dims.pop()), fill, dtype=dtype)
    for i, a in enumerate(arrays):
        x[i, :a.shape[0]] = a
    return (np.ascontiguousarray(x.transpose(1, 0, 2)) if time_major else x), lengths


def read_ts(path: str | os.PathLike) -> TsDataset:
    """Read a ``.ts`` file (the format is in the module docstring).

    Returns:
        a :class:`TsDataset`.
    Raises:
        CorpusError: the file is missing or not UTF-8, or is malformed; the message starts
            ``PATH:LINE:`` and says what is wrong (an unknown or malformed header, no
            ``@data``, a series with the wrong number of dimensions, dimensions of unequal
            length, a value that is not a number, a label not in ``@classLabel``, ...).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CorpusError(f"{path}: no such file")
    reader = _Reader(path)
    lineno = 0
    try:
        with open(path, encoding="utf-8-sig") as f:
            for lineno, line in enumerate(f, 1):
                reader.line(lineno, line.strip())
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}:{lineno + 1}: not valid UTF-8 ({exc.reason})") from exc
    return reader.finish(lineno)


class _Reader:
    """The state of one file's parse: the header read so far, then the series."""

    def __init__(self, path: str):
        self.path = path
        self.header: dict = {}
        self.in_data = False
        self.dims: int | None = None
        self.dims_from = ""
        self.series: list = []
        self.labels: list = []

    def fail(self, lineno: int, message: str):
        """CorpusError ``PATH:LINE: message`` (``PATH: message`` for line 0: an empty file)."""
        raise CorpusError(f"{self.path}:{lineno}: {message}" if lineno else f"{self.path}: {message}")

    def line(self, lineno: int, line: str) -> None:
        if not line or line[0] in "#%":
            return
        if line[0] == "@":
            if self.in_data:
                self.fail(lineno, f"header line {line.split()[0]} after @data")
            self._header(lineno, line.split())
        elif not self.in_data:
            self.fail(lineno, "a data line before @data")
        else:
            self._data(lineno, line)

    # ---- header ------------------------------------------------------------------------
    def _header(self, lineno: int, tokens: list) -> None:
        key, values = tokens[0][1:].lower(), tokens[1:]
        if key not in _KEYS:
            known = ", ".join("@" + _SPELLING.get(k, k) for k in _KEYS)
            self.fail(lineno, f"unknown header {tokens[0]} (known: {known})")
        name = "@" + _SPELLING.get(key, key)
        if key == "data":
            if values:
                self.fail(lineno, "@data takes no value")
            self._start_data(lineno)
        elif key == "problemname":
            if not values:
                self.fail(lineno, "@problemName needs a name")
            self.header[key] = " ".join(values)
        elif key in _BOOLEAN_KEYS:
            if len(values) != 1 or values[0].lower() not in ("true", "false"):
                self.fail(lineno, f"{name} takes true or false, not {' '.join(values)!r}")
            self.header[key] = values[0].lower() == "true"
        elif key in _INT_KEYS:
            if len(values) != 1 or not values[0].isdigit() or int(values[0]) < 1:
                self.fail(lineno, f"{name} takes a positive integer, not {' '.join(values)!r}")
            self.header[key] = (int(values[0]), lineno)
        else:
            self._class_label(lineno, values)
        if key == "timestamps" and self.header[key]:
            self.fail(lineno, "timestamped series (@timeStamps true) are not supported")

    def _class_label(self, lineno: int, values: list) -> None:
        flag = values[0].lower() if values else ""
        if flag not in ("true", "false") or (flag == "true") != (len(values) > 1):
            self.fail(lineno, "@classLabel takes 'true' and the class labels, or 'false'")
        labels = tuple(values[1:])
        if len(set(labels)) != len(labels):
            dup = next(v for v in labels if labels.count(v) > 1)
            self.fail(lineno, f"@classLabel lists the label {dup!r} twice")
        self.header["classlabel"] = labels

    def _start_data(self, lineno: int) -> None:
        h = self.header
        if h.get("classlabel") and h.get("targetlabel"):
            self.fail(lineno, "both @classLabel true and @targetLabel true: a file has one kind "
                              "of label")
        if "dimensions" in h:
            self.dims, at = h["dimensions"]
            self.dims_from = f"@dimensions on line {at}"
        if h.get("univariate"):
            if self.dims not in (None, 1):
                self.fail(lineno, f"@univariate true but {self.dims_from} says {self.dims}")
            self.dims, self.dims_from = 1, "@univariate true"
        self.in_data = True

    # ---- data --------------------------------------------------------------------------
    def _data(self, lineno: int, line: str) -> None:
        fields = line.split(":")
        h = self.header
        if h.get("classlabel") or h.get("targetlabel"):
            if len(fields) < 2:
                self.fail(lineno, "no ':' before the label (the header says the series are "
                                  "labelled)")
            if self.dims is not None and len(fields) == self.dims and "," in fields[-1]:
                self.fail(lineno, f"no label after the series' {counted(self.dims, 'dimension')} (the "
                                  f"header says the series are labelled)")
            self.labels.append(self._label(lineno, fields.pop().strip()))
        if self.dims is None:
            self.dims, self.dims_from = len(fields), f"the first series, line {lineno}"
        elif len(fields) != self.dims:
            hint = ("" if "classlabel" in h or "targetlabel" in h
                    else "; a label without a @classLabel header?")
            self.fail(lineno, f"{counted(len(fields), 'dimension')}, expected {self.dims} (as "
                              f"{self.dims_from} says){hint}")
        columns = [self._numbers(lineno, k, f) for k, f in enumerate(fields)]
        length = len(columns[0])
        for k, c in enumerate(columns[1:], 1):
            if len(c) != length:
                self.fail(lineno, f"dimension {k + 1} has {counted(len(c), 'value')} but "
                                  f"dimension 1 has {length}: a series' dimensions must have "
                                  "one length")
        self._check_equal_length(lineno, length)
        self.series.append(np.stack(columns, axis=1))

    def _numbers(self, lineno: int, k: int, text: str) -> np.ndarray:
        tokens = text.split(",")
        try:
            return np.array([t.replace("?", "nan") for t in tokens], dtype=np.float64)
        except ValueError:
            j = next(j for j, t in enumerate(tokens) if not _is_number(t.replace("?", "nan")))
            self.fail(lineno, f"dimension {k + 1}, value {j + 1}: {tokens[j].strip()!r} is not a "
                              "number ('?' marks a missing value)")

    def _check_equal_length(self, lineno: int, length: int) -> None:
        h = self.header
        if "serieslength" in h and length != h["serieslength"][0]:
            self.fail(lineno, f"{counted(length, 'time step')}, but @seriesLength on line "
                              f"{h['serieslength'][1]} says {h['serieslength'][0]}")
        if h.get("equallength") and self.series and length != len(self.series[0]):
            self.fail(lineno, f"{counted(length, 'time step')}, but @equalLength true and the first "
                              f"series has {len(self.series[0])}")

    def _label(self, lineno: int, text: str):
        if not text:
            self.fail(lineno, "empty label after the last ':'")
        if self.header.get("targetlabel"):
            if not _is_number(text):
                self.fail(lineno, f"target {text!r} is not a number (@targetLabel true)")
            return float(text)
        names = self.header["classlabel"]
        if text not in names:
            hint = " (numbers: is the series' label missing?)" if "," in text and _is_number(text.split(",")[0]) else ""
            self.fail(lineno, f"label {text!r} is not in @classLabel ({' '.join(names)}){hint}")
        return text

    def finish(self, last_line: int) -> TsDataset:
        if not self.in_data:
            self.fail(last_line, "no @data line: not a .ts file, or its header is incomplete" if last_line else
                      "empty file: not a .ts file")
        if not self.series:
            self.fail(last_line, "no series after @data")
        h = self.header
        classes = h.get("classlabel") or ()
        index = {name: i for i, name in enumerate(classes)}
        labelled = bool(classes) and not h.get("targetlabel")
        return TsDataset(
            path=self.path, problem_name=h.get("problemname", ""), series=self.series,
            lengths=np.array([len(s) for s in self.series], dtype=np.int64), dims=self.dims,
            class_names=classes, labels=tuple(self.labels) if labelled else None,
            y=np.array([index[v] for v in self.labels], dtype=np.int64) if labelled else None,
            targets=np.array(self.labels, dtype=np.float64) if h.get("targetlabel") else None)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
