"""examples/japanese_vowels.py's flags: values that would train nothing or fail deep inside torch are
usage errors naming the flag (a regression: --epochs 0 printed a test accuracy of an untrained
model, --hidden 0 and --lr -1 ended in tracebacks)."""
import pytest

from script_modules import load_script


def example():
    return load_script("examples/japanese_vowels.py")


@pytest.mark.parametrize("flag, value, said", [
    ("--epochs", "0", "argument --epochs: must be a positive integer, got '0'"),
    ("--epochs", "-1", "argument --epochs: must be a positive integer, got '-1'"),
    ("--hidden", "0", "argument --hidden: must be a positive integer, got '0'"),
    ("--lr", "-1", "argument --lr: must be a positive number, got '-1'"),
    ("--lr", "nan", "argument --lr: must be a positive number, got 'nan'"),
    ("--val", "1", "argument --val: must be a number in [0, 1), got '1'"),
])
def test_flags_out_of_range_are_usage_errors(capsys, flag, value, said):
    with pytest.raises(SystemExit) as exc:
        example().main([flag, value, "--device", "cpu"])
    assert exc.value.code == 2 and said in capsys.readouterr().err
