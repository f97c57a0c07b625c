"""The default delta rule and the warning for a delta too large for the rows."""
import warnings

import pytest

from vflsec.dp import PrivacyWarning, check_delta_for_rows, default_delta


def test_default_delta_is_capped_and_shrinks_with_n():
    assert default_delta(1) == 1e-5 and default_delta(10_000) == 1e-5
    assert default_delta(100_000) == pytest.approx(1e-6) and default_delta(10**7) == pytest.approx(1e-8)
    for n in (1, 455, 26_048, 10**6):
        assert default_delta(n) < 1 / n


def test_a_delta_of_one_over_n_or_more_warns_and_a_smaller_one_does_not():
    with pytest.warns(PrivacyWarning, match=r"delta=0.01 is at least 1/n = 0.0022 for n=455"):
        assert check_delta_for_rows(0.01, 455) == 0.01
    with pytest.warns(PrivacyWarning):
        check_delta_for_rows(1 / 455, 455)  # exactly 1/n
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_delta_for_rows(0.9 / 455, 455)


def test_bad_n_is_refused():
    with pytest.raises(ValueError):
        default_delta(0)
    with pytest.raises(TypeError):
        default_delta(2.5)
