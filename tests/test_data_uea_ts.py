"""The UEA/UCR .ts reader: hand-written files, each malformed case, padding, and the real
JapaneseVowels where its files can be found without a download."""

import re

import numpy as np
import pytest

from rnngraph.data import (CorpusError, FetchError, TsDataset, japanese_vowels, pad_series,
                           read_ts)

UNIVARIATE = """\
# a comment, then a blank line

@problemName Toy
@timestamps FALSE
@missing false
@univariate true
@equalLength false
@classLabel true b a
@DATA
1.5,2,3:a
% another comment style
-4,5e-1:b
"""


def write(tmp_path, text, name="x.ts"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_univariate_values_lengths_and_labels_in_header_order(tmp_path):
    data = read_ts(write(tmp_path, UNIVARIATE))
    assert isinstance(data, TsDataset) and len(data) == 2
    assert data.problem_name == "Toy" and data.dims == 1
    np.testing.assert_array_equal(data.series[0], [[1.5], [2.0], [3.0]])
    np.testing.assert_array_equal(data.series[1], [[-4.0], [0.5]])
    assert data.series[0].dtype == np.float64
    assert data.lengths.dtype == np.int64 and data.lengths.tolist() == [3, 2]
    assert data.class_names == ("b", "a")           # header order, not sorted
    assert data.labels == ("a", "b")
    assert data.y.dtype == np.int64 and data.y.tolist() == [1, 0]
    assert data.targets is None


def test_multivariate_dimensions_are_columns(tmp_path):
    text = ("@problemName M\n@univariate false\n@dimensions 3\n@equalLength true\n"
            "@seriesLength 2\n@classLabel true 1 2\n@data\n"
            "1,2:10,20:100,200:2\n3,4:30,40:300,400:1\n")
    data = read_ts(write(tmp_path, text))
    assert data.dims == 3
    np.testing.assert_array_equal(data.series[0], [[1, 10, 100], [2, 20, 200]])
    np.testing.assert_array_equal(data.series[1], [[3, 30, 300], [4, 40, 400]])
    assert data.y.tolist() == [1, 0]


def test_dims_inferred_from_first_series_without_header(tmp_path):
    text = "@classLabel true x\n@data\n1:2:x\n3,4:5,6:x\n"
    data = read_ts(write(tmp_path, text))
    assert data.dims == 2 and data.lengths.tolist() == [1, 2]
    assert data.problem_name == ""


def test_unequal_lengths_pad_batch_and_time_major(tmp_path):
    text = ("@univariate false\n@dimensions 2\n@classLabel true 0 1\n@data\n"
            "1,2,3:4,5,6:0\n7:8:1\n9,10:11,12:0\n")
    data = read_ts(write(tmp_path, text))
    assert data.lengths.tolist() == [3, 1, 2]
    x = data.padded(fill=-1.0)
    assert x.shape == (3, 3, 2) and x.dtype == np.float64
    np.testing.assert_array_equal(x[1], [[7, 8], [-1, -1], [-1, -1]])
    tm, lengths = pad_series(data.series, dtype=np.float32, time_major=True, t_max=4)
    assert tm.shape == (4, 3, 2) and tm.dtype == np.float32 and tm.flags.c_contiguous
    np.testing.assert_array_equal(tm[:, 2, 1], [11, 12, 0, 0])
    np.testing.assert_array_equal(tm[:, 0, 0], [1, 2, 3, 0])
    assert lengths.dtype == np.int64 and lengths.tolist() == [3, 1, 2]


def test_missing_values_are_nan(tmp_path):
    text = "@missing true\n@classLabel true c\n@data\n1,?,3:?,5,6:c\n?,1:?,?:c\n"
    data = read_ts(write(tmp_path, text))
    np.testing.assert_array_equal(np.isnan(data.series[0]), [[0, 1], [1, 0], [0, 0]])
    assert data.series[0][2].tolist() == [3.0, 6.0] and data.series[0][0, 0] == 1.0
    np.testing.assert_array_equal(np.isnan(data.series[1]), [[1, 1], [0, 1]])
    assert data.series[1][1, 0] == 1.0


def test_regression_targets(tmp_path):
    text = "@problemName R\n@targetLabel true\n@data\n1,2:0.25\n3:-7e2\n"
    data = read_ts(write(tmp_path, text))
    assert data.labels is None and data.y is None and data.class_names == ()
    assert data.targets.dtype == np.float64 and data.targets.tolist() == [0.25, -700.0]


def test_unlabelled_file(tmp_path):
    data = read_ts(write(tmp_path, "@classLabel false\n@data\n1,2\n3\n"))
    assert data.labels is None and data.y is None and data.targets is None
    assert data.lengths.tolist() == [2, 1]


HEADER = "@problemName Bad\n@dimensions 2\n@classLabel true a b\n@data\n"
MALFORMED = [  # (file text, line the error names, how the message begins after it)
    (HEADER + "1,2:3,4:a\n1,2:a\n", 6, "1 dimension, expected 2 (as @dimensions on line 2"),
    ("@classLabel true a\n@data\n1:2:a\n1:a\n", 4,
     "1 dimension, expected 2 (as the first series, line 3"),
    ("@problemName X\n@frequency 3\n@data\n1:a\n", 2, "unknown header @frequency"),
    (HEADER + "1,2:3,4:c\n", 5, "label 'c' is not in @classLabel (a b)"),
    ("@problemName X\n# no data tag\n", 2, "no @data line"),
    (HEADER + "1,2:3:a\n", 5, "dimension 2 has 1 value but dimension 1 has 2"),
    (HEADER + "1,2:3,x:b\n", 5, "dimension 2, value 2: 'x' is not a number"),
    (HEADER + "1,2:3,:b\n", 5, "dimension 2, value 2: '' is not a number"),
    ("@seriesLength 3\n@classLabel true a\n@data\n1,2,3:a\n1,2:a\n", 5,
     "2 time steps, but @seriesLength on line 1 says 3"),
    ("@equalLength true\n@classLabel true a\n@data\n1,2:a\n1,2,3:a\n", 5,
     "3 time steps, but @equalLength true and the first series has 2"),
    ("@univariate maybe\n@data\n", 1, "@univariate takes true or false, not 'maybe'"),
    ("@dimensions two\n@data\n", 1, "@dimensions takes a positive integer, not 'two'"),
    (HEADER + "1:2:a\n@problemName Y\n", 6, "header line @problemName after @data"),
    ("@problemName X\n1,2\n@data\n", 2, "a data line before @data"),
    ("@univariate true\n@dimensions 2\n@data\n", 3, "@univariate true but @dimensions on line "
                                                    "2 says 2"),
    ("@timeStamps true\n@data\n", 1, "timestamped series (@timeStamps true) are not supported"),
    (HEADER, 4, "no series after @data"),
    ("@classLabel true a b a\n@data\n", 1, "@classLabel lists the label 'a' twice"),
    ("@classLabel true\n@data\n", 1, "@classLabel takes 'true' and the class labels"),
    (HEADER + "1,2\n", 5, "no ':' before the label"),
    (HEADER + "1:2:\n", 5, "empty label after the last ':'"),
    ("@targetLabel true\n@data\n1,2:big\n", 3, "target 'big' is not a number"),
    ("@targetLabel true\n@classLabel true a\n@data\n", 3, "both @classLabel true and "
                                                          "@targetLabel true"),
    ("@data extra\n", 1, "@data takes no value"),
    ("@dimensions 1\n@data\n1:2\n", 3, "2 dimensions, expected 1 (as @dimensions on line 1 "
                                       "says); a label without a @classLabel header?"),
    # a labelled series without its label (it read as the label '3.5,4.5' not in @classLabel)
    (HEADER + "1.5,2.5:3.5,4.5\n", 5, "no label after the series' 2 dimensions (the header says"),
    ("@classLabel true a\n@data\n1,2:3,4\n", 3, "label '3,4' is not in @classLabel (a) (numbers: is the "
                                                 "series' label missing?)"),
]


@pytest.mark.parametrize("text, line, message", MALFORMED,
                         ids=[re.sub(r"\W+", "_", m[2])[:40] for m in MALFORMED])
def test_malformed_file_error_names_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text, "bad.ts")
    with pytest.raises(CorpusError) as err:
        read_ts(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}")
    assert isinstance(err.value, ValueError)


def test_an_empty_file_names_no_line(tmp_path):
    path = write(tmp_path, "", "empty.ts")  # it was 'empty.ts:0: no @data line'
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path))}: empty file: not a \.ts file$"):
        read_ts(path)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(CorpusError, match=r"nope\.ts: no such file"):
        read_ts(tmp_path / "nope.ts")
    path = tmp_path / "latin1.ts"
    path.write_bytes(b"@problemName caf\xe9\n@data\n")
    with pytest.raises(CorpusError, match=r"latin1\.ts:1: not valid UTF-8"):
        read_ts(path)


def test_pad_series_rejects_bad_input():
    with pytest.raises(ValueError, match="no series to pad"):
        pad_series([])
    with pytest.raises(ValueError, match=r"different dims \[1, 2\]"):
        pad_series([np.zeros((3, 1)), np.zeros((2, 2))])
    with pytest.raises(ValueError, match=r"series 1 has shape \(1, 2, 3\)"):
        pad_series([np.zeros(3), np.zeros((1, 2, 3))])
    with pytest.raises(ValueError, match="t_max=2 is shorter than the longest series"):
        pad_series([np.zeros((3, 1))], t_max=2)
    x, lengths = pad_series([np.arange(3.0), np.arange(1.0)])   # 1-D means D = 1
    assert x.shape == (2, 3, 1) and x[0, :, 0].tolist() == [0, 1, 2] and lengths.tolist() == [3, 1]


def test_real_japanese_vowels():
    try:
        train, test = japanese_vowels(download=False)
    except FetchError as exc:
        pytest.skip(f"JapaneseVowels not available without a download: {exc}")
    assert (len(train), len(test)) == (270, 370)
    assert train.dims == test.dims == 12 and train.problem_name == "JapaneseVowels"
    lengths = np.concatenate([train.lengths, test.lengths])
    assert (lengths.min(), lengths.max()) == (7, 29)
    assert train.class_names == test.class_names == tuple("123456789")
    assert np.bincount(train.y, minlength=9).tolist() == [30] * 9
    assert np.bincount(test.y, minlength=9).tolist() == [31, 35, 88, 44, 29, 24, 40, 50, 29]
    assert not any(np.isnan(s).any() for s in train.series + test.series)
    first = train.series[0]               # the file's first line: dimension 1, then 2
    assert first.shape == (20, 12) and train.labels[0] == "1"
    assert first[0, 0] == 1.860936 and first[0, 1] == -0.207383 and first[1, 0] == 1.891651
