"""examples/extreme_classification.py: a stateless ReLU layer and an rg.LSHSoftmax head compiled with
window 1 as a standalone classifier, on a synthetic long-tailed set and on files in the Extreme
Classification Repository's format (CPU, small shapes)."""
import pytest

from rnngraph.data import synthetic_xc, write_xc
from script_modules import load_script

SMALL = ["--features", "300", "--labels", "1000", "--epochs", "3", "--hidden", "32", "--batch", "128",
         "--min-active", "50", "--L", "4", "--K", "2", "--device", "cpu", "--lr", "1e-2"]


def example():
    return load_script("examples/extreme_classification.py")


def test_both_heads_learn_past_the_most_frequent_label(capsys):
    """3,000 synthetic samples (Zipf 1.1 over 1,000 labels): always answering the most frequent
    label scores 0.303 on the held-out tenth; both heads, 3 epochs, score well above it."""
    result = example().main(["--samples", "3000", *SMALL])
    assert result["floor"] == pytest.approx(91 / 300)
    assert result["lsh"]["p_at_1"] > result["floor"] + 0.15 and result["dense"]["p_at_1"] > result["floor"] + 0.15
    assert result["lsh"]["device"] == result["dense"]["device"] == "cpu"
    out = capsys.readouterr().out
    assert "[LSH: K=2 L=4 tables, min active 50 of 1000 classes + the batch's labels]" in out  # the schedule


def test_files_in_the_xc_format_train_and_a_mismatched_test_file_is_named(tmp_path, capsys):
    data = synthetic_xc(600, 300, 1000, seed=1, label_skew=1.1).data
    write_xc(tmp_path / "train.txt", data)
    result = example().main(["--data", str(tmp_path / "train.txt"), *SMALL, "--epochs", "1"])
    assert 0 <= result["lsh"]["p_at_1"] <= 1 and "540 training and 60 held-out samples" in capsys.readouterr().out
    write_xc(tmp_path / "test.txt", synthetic_xc(50, 300, 1000, seed=2).data)  # a held-out file of the same shape
    example().main(["--data", str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt"), *SMALL,
                    "--epochs", "1"])
    assert "600 training and 50 held-out samples" in capsys.readouterr().out
    write_xc(tmp_path / "test.txt", synthetic_xc(50, 200, 1000, seed=2).data)
    with pytest.raises(SystemExit, match="--test: 200 features and 1,000 labels, but --data has 300 and 1,000"):
        example().main(["--data", str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt"), *SMALL])
