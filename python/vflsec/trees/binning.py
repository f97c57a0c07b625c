"""One party's features as bin codes: the thresholds it computes on its own rows and keeps.

Gradient boosting on histograms (XGBoost's ``hist``, LightGBM, scikit-learn's
``HistGradientBoostingClassifier``, SecureBoost) splits a feature only between
bins. Each party bins its own columns by their own quantiles
(:class:`FeatureBins`); a split is then "code <= b" of one of its features,
and only the owner can turn ``b`` into a value (its threshold stays in its
lookup table, :mod:`vflsec.trees.tree`).

The thresholds follow the usual rule: a column with at most ``max_bins``
distinct values gets one bin per value (cut halfway between neighbours);
otherwise the cuts are the column's ``max_bins``-quantiles (midpoint
interpolation), repeated cuts merged. Values equal to a cut go left
(``code = number of cuts < x``), so fitting scikit-learn's histogram booster
on the codes reproduces the binning exactly (its own binning of at most
``max_bins`` distinct integers is the identity): the centralized reference
of :mod:`vflsec.trees` uses that.
"""
from __future__ import annotations

from typing import Any, List

import numpy as np
from sklearn.exceptions import NotFittedError

from .._arrays import as_float_array, check_positive_int

__all__ = ["MAX_BINS", "FeatureBins"]

#: most bins per feature: codes are one byte
MAX_BINS = 255


def _cuts(column: np.ndarray, max_bins: int) -> np.ndarray:
    distinct = np.unique(column)
    if len(distinct) <= max_bins:
        return (distinct[:-1] + distinct[1:]) / 2.0
    percentiles = np.linspace(0.0, 100.0, max_bins + 1)[1:-1]
    return np.unique(np.percentile(column, percentiles, method="midpoint"))


class FeatureBins:
    """A party's bin thresholds, fitted on its own rows (scikit-learn's contract:
    parameters in ``__init__``, fitted attributes ending in ``_``).

    Parameters
    ----------
    max_bins : int in [2, 255]
        Most bins per feature.

    Attributes
    ----------
    thresholds_ : list of float64 arrays, one per feature: the cuts, ascending;
        feature ``j`` has ``len(thresholds_[j]) + 1`` bins.
    n_bins_ : int array, the bins of each feature.
    """

    def __init__(self, max_bins: int = MAX_BINS):
        self.max_bins = max_bins

    def fit(self, X: Any) -> "FeatureBins":
        X = _check_rows(X, "X")
        max_bins = check_positive_int(self.max_bins, "max_bins", minimum=2)
        if max_bins > MAX_BINS:
            raise ValueError(f"max_bins must be <= {MAX_BINS} (one byte per code), got {max_bins}")
        self.thresholds_: List[np.ndarray] = [_cuts(X[:, j], max_bins) for j in range(X.shape[1])]
        self.n_bins_ = np.array([len(t) + 1 for t in self.thresholds_], dtype=np.int64)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """The codes of ``X``'s rows: uint8, ``(n, n_features)``, C order."""
        if not hasattr(self, "thresholds_"):
            raise NotFittedError("this FeatureBins is not fitted yet; call fit first")
        X = _check_rows(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the bins were fitted on {self.n_features_in_}")
        codes = np.empty(X.shape, dtype=np.uint8)
        for j, cuts in enumerate(self.thresholds_):
            codes[:, j] = np.searchsorted(cuts, X[:, j], side="left")
        return codes

    def fit_transform(self, X: Any) -> np.ndarray:
        return self.fit(X).transform(X)

    def threshold(self, feature: int, code: int) -> float:
        """The value of the split "bin <= ``code``" of ``feature``: rows with
        ``x <= threshold`` go left."""
        return float(self.thresholds_[feature][code])


def _check_rows(X: Any, name: str) -> np.ndarray:
    X, _ = as_float_array(X, name, ndim=2, dtype=np.float64)
    if X.shape[1] == 0:
        raise ValueError(f"{name} has no features")
    return X
