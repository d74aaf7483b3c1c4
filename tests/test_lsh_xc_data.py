"""The Extreme Classification Repository's text format (rnngraph/data/xc.py) on a fixture with
its edge cases, each malformed case's error (file and line), writing then reading back; the
synthetic generator (xc_synthetic.py): seeded, its labels recoverable from its prototypes, and its
label_skew (uniform at 0, bit for bit; a Zipf law above; bad values named)."""
import numpy as np
import pytest

from rnngraph.data import CorpusError, read_xc, synthetic_xc, write_xc

FIXTURE = (
    "6 10 5\n"
    "0,3 1:0.5 7:2   \n"           # trailing spaces
    " 2:1.5 9:-1e-1\n"             # no labels
    "4,1,4\n"                      # no features; a repeated label
    "\n"                           # neither
    "2 0:3\r\n"                    # a Windows line end
    "1   5:1\n"                    # several spaces
    "\n\n"                         # blank lines after the last sample
)


def write(tmp_path, text, name="xc.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_reads_the_edge_cases_into_csr_arrays(tmp_path):
    data = read_xc(write(tmp_path, FIXTURE))
    assert (len(data), data.num_features, data.num_labels) == (6, 10, 5)
    assert [data.labels(i).tolist() for i in range(6)] == [[0, 3], [], [1, 4], [], [2], [1]]
    assert [data.features(i)[0].tolist() for i in range(6)] == [[1, 7], [2, 9], [], [], [0], [5]]
    np.testing.assert_allclose(data.features(1)[1], [1.5, -0.1])
    assert data.feature_offsets.tolist() == [0, 2, 4, 4, 4, 5, 6] and data.label_offsets[-1] == 6
    assert (data.feature_ids.dtype, data.feature_values.dtype, data.label_ids.dtype) == (np.int32, np.float32, np.int32)
    assert data.feature_offsets.dtype == data.label_offsets.dtype == np.int64
    dense = data.dense_features(slice(0, 2))
    assert dense.shape == (2, 10) and dense.dtype == np.float32 and dense[0, 7] == 2 and dense[1, 2] == 1.5
    np.testing.assert_allclose(dense.sum(axis=1), [2.5, 1.4], rtol=1e-6)
    assert len(read_xc(write(tmp_path, FIXTURE), max_samples=2)) == 2


@pytest.mark.parametrize("text, message", [
    ("2 10 5\n0 1:1\n3,x 2:1\n", r"xc.txt:3: malformed label 'x'"),
    ("2 10 5\n0 1:1\n3, 2:1\n", r"xc.txt:3: malformed label ''"),
    ("1 10 5\n0 1:1 2-3\n", r"xc.txt:2: malformed feature '2-3'"),
    ("1 10 5\n0 1:abc\n", r"xc.txt:2: malformed feature '1:abc'"),
    ("1 10 5\n0 1:nan\n", r"xc.txt:2: malformed feature '1:nan'"),
    ("2 10 5\n0 1:1\n5 2:1\n", r"xc.txt:3: label 5 is outside \[0, 5\)"),
    ("1 10 5\n-1 2:1\n", r"xc.txt:2: label -1 is outside \[0, 5\)"),
    ("1 10 5\n0 10:1\n", r"xc.txt:2: feature index 10 is outside \[0, 10\)"),
    ("1 10 5\n0 1:1 1:2\n", r"xc.txt:2: a feature index is repeated"),
    ("3 10 5\n0 1:1\n", r"xc.txt: the header says 3 samples, the file has 1 sample lines"),
    ("10 5\n0 1:1\n", r"xc.txt:1: the header must be 'num_samples num_features num_labels'"),
    ("1 10 0\n0 1:1\n", r"xc.txt:1: the header must be"),
    ("", r"xc.txt: empty file"),
])
def test_malformed_files_name_the_file_and_line(tmp_path, text, message):
    with pytest.raises(CorpusError, match=message):
        read_xc(write(tmp_path, text))


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(CorpusError, match="nope.txt: cannot read the XC file"):
        read_xc(tmp_path / "nope.txt")


def test_write_then_read_gives_back_a_synthetic_set(tmp_path):
    data = synthetic_xc(40, 30, 12, seed=3).data
    write_xc(tmp_path / "s.txt", data)
    back = read_xc(tmp_path / "s.txt")
    for name in ("feature_offsets", "feature_ids", "feature_values", "label_offsets", "label_ids"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name), err_msg=name)
    fixture = read_xc(write(tmp_path, FIXTURE))
    write_xc(tmp_path / "f.txt", fixture)                       # samples with no labels, no features
    np.testing.assert_array_equal(read_xc(tmp_path / "f.txt").label_offsets, fixture.label_offsets)


def test_the_generator_is_seeded_and_has_its_shape():
    a, b, c = (synthetic_xc(200, 300, 50, seed=s) for s in (7, 7, 8))
    for name in ("feature_offsets", "feature_ids", "feature_values", "label_ids"):
        np.testing.assert_array_equal(getattr(a.data, name), getattr(b.data, name))
    assert not np.array_equal(a.data.feature_ids, c.data.feature_ids)
    d = a.data
    sizes = np.diff(d.label_offsets)
    assert (d.num_features, d.num_labels, len(d)) == (300, 50, 200) and sizes.min() >= 1 and sizes.max() <= 3
    for i in range(len(d)):
        ids = d.features(i)[0]
        assert (np.diff(ids) > 0).all() and ids.max() < 300 and (d.features(i)[1] >= 0).all()
    with pytest.raises(ValueError, match="prototype_features .20. must be at most num_features .10."):
        synthetic_xc(5, 10, 3, prototype_features=20)
    with pytest.raises(ValueError, match="num_labels must be a positive integer"):
        synthetic_xc(5, 10, 0)


def test_label_skew_0_is_the_uniform_draw_bit_for_bit():
    """``label_skew=0`` gives the generator's set without the argument, and that set is still the
    one drawn before the argument existed (its first labels and value sum, pinned)."""
    a, b = synthetic_xc(30, 40, 20, seed=5).data, synthetic_xc(30, 40, 20, seed=5, label_skew=0.0).data
    for name in ("feature_offsets", "feature_ids", "feature_values", "label_offsets", "label_ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.label_ids[:12].tolist() == [7, 9, 19, 4, 2, 9, 17, 12, 15, 8, 15, 6]
    assert a.label_offsets[:6].tolist() == [0, 2, 3, 4, 7, 9]
    assert a.feature_values.astype(np.float64).sum() == pytest.approx(489.4778859221842, rel=1e-12)


def test_label_skew_makes_the_label_counts_a_zipf_law():
    """label_skew 1.1 over 1,000 labels: the most frequent label about 160 times the mean count
    (uniform: about 2), the top 50 sorted counts on a log-log line of slope about -1.1 (measured
    -1.06 to -1.08 for seeds 0 to 3: repeats within a sample count once, flattening the top), and
    the frequent labels a seeded permutation, not the low ids."""
    skewed = [np.bincount(synthetic_xc(4000, 50, 1000, seed=s, label_skew=1.1).data.label_ids, minlength=1000)
              for s in (0, 1)]
    uniform = np.bincount(synthetic_xc(4000, 50, 1000, seed=0).data.label_ids, minlength=1000)
    assert uniform.max() < 4 * uniform.mean()
    for counts in skewed:
        assert counts.max() > 100 * counts.mean()
        top = np.sort(counts)[::-1][:50]
        slope = np.polyfit(np.log(np.arange(1, 51)), np.log(top), 1)[0]
        assert -1.2 < slope < -0.95, slope
    assert skewed[0].argmax() != skewed[1].argmax() and skewed[0].argmax() != 0


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), "1", True])
def test_a_bad_label_skew_is_named(bad):
    with pytest.raises(ValueError, match="label_skew must be a finite number >= 0"):
        synthetic_xc(5, 10, 3, prototype_features=4, label_skew=bad)


def test_labels_are_recoverable_by_the_nearest_prototype_far_above_chance():
    """The label of the largest cosine with a sample ranks one of its labels first: measured
    P@1 0.90 here (2,000 samples, 1,000 features, 2,000 labels); chance 0.001."""
    s = synthetic_xc(2000, 1000, 2000, seed=1)
    protos = s.dense_prototypes()
    protos /= np.linalg.norm(protos, axis=1, keepdims=True)
    top = (s.data.dense_features() @ protos.T).argmax(axis=1)
    p_at_1 = np.mean([top[i] in s.data.labels(i) for i in range(len(s.data))])
    chance = np.diff(s.data.label_offsets).mean() / 2000
    assert p_at_1 > 0.8 and chance < 0.002
