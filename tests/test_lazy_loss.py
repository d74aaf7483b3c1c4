"""LazyLoss (rnngraph/lazy_loss.py): computed once, on first read, and usable wherever a float is --
arithmetic both ways, comparisons, formatting, pytest.approx, NumPy and math; an error of the
computation is kept and raised at every read."""
import math

import numpy as np
import pytest

from rnngraph.lazy_loss import LazyLoss


def test_read_once_and_behaves_as_a_float():
    calls = []
    loss = LazyLoss(lambda: calls.append(1) or 2.5)
    assert not loss.ready and "on the GPU" in repr(loss)
    assert loss + 1 == 3.5 and 1 - loss == -1.5 and loss * 2 == 5.0 and 5 / loss == 2.0 and loss ** 2 == 6.25
    assert loss > 2 and loss <= 2.5 and loss != 3 and loss == LazyLoss(lambda: 2.5)
    assert f"{loss:.2f}" == "2.50" and str(loss) == "2.5" and repr(loss) == "2.5"
    assert loss == pytest.approx(2.5) and pytest.approx(2.5) == loss
    assert np.isfinite(loss) and np.asarray(loss).dtype == np.float64 and math.isfinite(loss)
    assert sum([loss, loss]) / 2 == 2.5 and round(loss) == 2 and int(loss) == 2 and -loss == -2.5
    assert calls == [1] and loss.ready


def test_pytest_approx_compares_and_reports_two_lazy_losses():
    """pytest.approx of a LazyLoss honours the tolerance, and its failure report shows the value
    (it read ``.imag``, which numbers.Real promises: a failing comparison hid both values)."""
    near, far = LazyLoss(lambda: 0.25 + 1e-9), LazyLoss(lambda: 0.2501)
    assert LazyLoss(lambda: 0.25) == pytest.approx(near, abs=1e-6)
    assert LazyLoss(lambda: 0.25) != pytest.approx(far, abs=1e-6)
    assert repr(pytest.approx(far, abs=1e-6)) == "0.2501 ± 1.0e-06"
    assert far.real == 0.2501 and far.imag == 0.0 and far.conjugate() == 0.2501


def test_an_error_is_kept_and_raised_at_every_read():
    def bad():
        raise FloatingPointError("training call after step 3: not finite")
    loss = LazyLoss(bad)
    for _ in range(2):
        with pytest.raises(FloatingPointError, match="after step 3"):
            float(loss)
    with pytest.raises(FloatingPointError):
        loss + 1
