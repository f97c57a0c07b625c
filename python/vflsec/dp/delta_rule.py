"""One default delta for every DP estimator, and the warning when a delta is too large for n.

A delta of 1/n or more allows a mechanism that publishes one whole row outright with
probability delta per row: the guarantee then says little. The convention (Dwork & Roth
2014, Sec. 2.3; Opacus' examples) is delta well below 1/n. vflsec's default is
``min(1e-5, 1 / (10 n))`` for ``n`` training rows (:func:`default_delta`), used by every
estimator whose ``delta`` is left at None; an explicit ``delta >= 1 / n`` is honoured but
warned about (:func:`check_delta_for_rows`, a :class:`~vflsec.dp.gaussian.PrivacyWarning`).
"""
from __future__ import annotations

import warnings

from .._arrays import check_positive_int
from .gaussian import PrivacyWarning

__all__ = ["DEFAULT_DELTA_CAP", "check_delta_for_rows", "default_delta"]

DEFAULT_DELTA_CAP = 1e-5
"""The largest default delta, whatever the number of rows."""


def default_delta(n: int) -> float:
    """``min(1e-5, 1 / (10 n))``: the delta an estimator uses for ``n`` training rows when none is given."""
    n = check_positive_int(n, "n")
    return min(DEFAULT_DELTA_CAP, 1.0 / (10.0 * n))


def check_delta_for_rows(delta: float, n: int, *, who: str = "delta") -> float:
    """``delta`` unchanged; a PrivacyWarning when it is at least ``1 / n`` (``n`` training rows)."""
    n = check_positive_int(n, "n")
    if float(delta) >= 1.0 / n:
        warnings.warn(f"{who}={delta:g} is at least 1/n = {1.0 / n:.3g} for n={n} rows: a mechanism may then "
                      f"publish whole rows with that probability; use delta < 1/n (the default is "
                      f"min(1e-5, 1/(10 n)) = {default_delta(n):.3g})", PrivacyWarning, stacklevel=3)
    return float(delta)
