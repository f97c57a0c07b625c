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

Missing values (NaN) are a bin of their own, as in scikit-learn and XGBoost:
a feature with ``k`` value bins codes NaN as ``k`` (:meth:`FeatureBins.missing_code`),
and a feature that had NaN among its training rows has that bin in its
histogram (``n_bins_ = k + 1``, ``has_missing_`` true), so a split learns which
child its missing values go to (:mod:`vflsec.trees.histogram`). The cuts are the
non-missing values'. Infinite values are refused.
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
    column = column[~np.isnan(column)]
    if column.size == 0:  # all missing: one value bin, never split on a value
        return np.zeros(0)
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
        feature ``j`` has ``len(thresholds_[j]) + 1`` value bins.
    has_missing_ : bool array, whether each feature had NaN among the rows it was fitted on.
    n_bins_ : int array, the bins of each feature's histogram: its value bins, and its
        missing-value bin where ``has_missing_``.
    """

    def __init__(self, max_bins: int = MAX_BINS):
        self.max_bins = max_bins

    def fit(self, X: Any) -> "FeatureBins":
        X = _check_rows(X, "X")
        max_bins = check_positive_int(self.max_bins, "max_bins", minimum=2)
        if max_bins > MAX_BINS:
            raise ValueError(f"max_bins must be <= {MAX_BINS} (one byte per code, the missing bin included), got "
                             f"{max_bins}")
        self.thresholds_: List[np.ndarray] = [_cuts(X[:, j], max_bins) for j in range(X.shape[1])]
        self.has_missing_ = np.isnan(X).any(axis=0)
        self.n_bins_ = np.array([len(t) + 1 + int(m) for t, m in zip(self.thresholds_, self.has_missing_)],
                                dtype=np.int64)
        self.n_features_in_ = X.shape[1]
        return self

    @classmethod
    def from_thresholds(cls, thresholds: List[np.ndarray], max_bins: int = MAX_BINS) -> "FeatureBins":
        """Bins fitted earlier, from their ``thresholds_`` (as a party's training output keeps
        them); no feature had a missing value."""
        bins = cls(max_bins)
        bins.thresholds_ = [np.asarray(t, dtype=np.float64) for t in thresholds]
        bins.has_missing_ = np.zeros(len(bins.thresholds_), dtype=bool)
        bins.n_bins_ = np.array([len(t) + 1 for t in bins.thresholds_], dtype=np.int64)
        bins.n_features_in_ = len(bins.thresholds_)
        return bins

    def missing_code(self, feature: int) -> int:
        """The code of a missing value of ``feature``: the one after its value bins."""
        return len(self.thresholds_[feature]) + 1

    def transform(self, X: Any) -> np.ndarray:
        """The codes of ``X``'s rows: uint8, ``(n, n_features)``, C order."""
        if not hasattr(self, "thresholds_"):
            raise NotFittedError("this FeatureBins is not fitted yet; call fit first")
        X = _check_rows(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the bins were fitted on {self.n_features_in_}")
        codes = np.empty(X.shape, dtype=np.uint8)
        for j, cuts in enumerate(self.thresholds_):
            column = X[:, j]
            codes[:, j] = np.where(np.isnan(column), len(cuts) + 1,
                                   np.searchsorted(cuts, column, side="left"))  # NaN: the missing code
        return codes

    def fit_transform(self, X: Any) -> np.ndarray:
        return self.fit(X).transform(X)

    def threshold(self, feature: int, code: int) -> float:
        """The value of the split "bin <= ``code``" of ``feature``: rows with
        ``x <= threshold`` go left."""
        return float(self.thresholds_[feature][code])


def _check_rows(X: Any, name: str) -> np.ndarray:
    X, _ = as_float_array(X, name, ndim=2, dtype=np.float64, check_finite=False)
    if X.shape[1] == 0:
        raise ValueError(f"{name} has no features")
    if np.isinf(X).any():
        row, column = (int(v[0]) for v in np.nonzero(np.isinf(X)))
        raise ValueError(f"{name} has an infinite value (first at row {row}, column {column}) -- NaN is a missing "
                         "value, an infinite one is not: clip or drop it first")
    return X
