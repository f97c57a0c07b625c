"""What a privacy audit concludes from a distinguisher's scores on two neighbouring inputs.

Given the scores of ``n0`` runs of a mechanism on input D0 and ``n1`` runs on its
neighbour D1 (larger score: "looks like D1"):

* :func:`epsilon_lower_bound` -- the empirical epsilon lower bound at ``delta``
  (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). Each world's runs are
  split in two parts. On the first a threshold (and which side of it
  says D1) is chosen; on the second the test's false-positive and
  false-negative rates get one-sided Clopper-Pearson upper bounds at
  ``confidence`` each. An (epsilon, delta)-DP mechanism satisfies
  ``FPR e^eps + FNR >= 1 - delta`` and ``FNR e^eps + FPR >= 1 - delta`` for
  every test, so

      eps_lb = max(log((1 - delta - FNR_ub) / FPR_ub), log((1 - delta - FPR_ub) / FNR_ub))

  is a lower bound on the mechanism's epsilon holding with probability at
  least ``2 confidence - 1`` (both bounds hold). Choosing the threshold on
  other runs keeps the evaluation honest (a quarter of the runs choose,
  ``SELECTION_FRACTION``; three quarters evaluate).
* :func:`fit_gaussian_dp` -- a fitted epsilon: the scores treated as Gaussian
  with a common spread give Gaussian DP's ``mu = (mean1 - mean0) / sd`` with
  an approximate 95% interval (the standardized mean difference's standard
  error); ``epsilon(mu, delta)`` from the exact Gaussian curve. For a linear
  statistic of a Gaussian release this is the mechanism's true curve; for
  anything else it is a point estimate only.
* :func:`fit_discrete_dp` -- the fitted epsilon of a release with few output
  values (randomized response, pure DP): the largest absolute log ratio of an
  output's frequencies in the two worlds, with the interval the two-sided 95%
  Clopper-Pearson intervals of those frequencies give. A Gaussian fit has no
  meaning there (its delta-0 epsilon is infinite).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

__all__ = ["DiscreteDPFit", "EpsilonLowerBound", "GaussianDPFit", "clopper_pearson_upper", "epsilon_for_mu",
           "epsilon_lower_bound", "fit_discrete_dp", "fit_gaussian_dp"]

DEFAULT_CONFIDENCE = 0.975
SELECTION_FRACTION = 0.25
"""Share of each world's runs used to choose the threshold; the rest evaluate it
(a one-dimensional threshold needs few runs to choose, the bound many to certify)."""
_THRESHOLDS = 400


def clopper_pearson_upper(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate after ``k`` of ``n``."""
    from scipy.stats import beta

    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if k == n:
        return 1.0
    return float(beta.ppf(confidence, k + 1, n - k))


def _scores(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size < 4:
        raise ValueError(f"{name} needs at least 4 runs, got {a.size}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds NaN or infinite scores")
    return a


def _bound_epsilon(fp: np.ndarray, fn: np.ndarray, n0: int, n1: int, delta: float, confidence: float) -> np.ndarray:
    """The lower bound each threshold would give with these counts (Clopper-Pearson upper
    bounds on both rates); choosing by it, not by the plug-in rates, keeps the choice away
    from thresholds whose few counts only look extreme."""
    from scipy.stats import beta

    fpr = np.where(fp >= n0, 1.0, beta.ppf(confidence, fp + 1, np.maximum(n0 - fp, 1)))
    fnr = np.where(fn >= n1, 1.0, beta.ppf(confidence, fn + 1, np.maximum(n1 - fn, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fnr, 1e-300) / fpr)
        b = np.log(np.maximum(1.0 - delta - fpr, 1e-300) / fnr)
    return np.maximum(a, b)


def _rates(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Counts of "says D1" (score > threshold) on D0 runs, and of "says D0" on D1 runs."""
    s0, s1 = np.sort(s0), np.sort(s1)
    fp = s0.size - np.searchsorted(s0, thresholds, side="right")
    fn = np.searchsorted(s1, thresholds, side="right")
    return fp.astype(np.float64), fn.astype(np.float64)


@dataclass(frozen=True)
class EpsilonLowerBound:
    """Result of :func:`epsilon_lower_bound`: ``epsilon`` (>= 0) and the test behind it."""

    epsilon: float
    threshold: float
    flipped: bool            # True: "says D1" means score <= threshold
    false_positive_rate: float
    false_negative_rate: float
    fpr_upper: float
    fnr_upper: float
    evaluated_runs: Tuple[int, int]
    confidence: float


def epsilon_lower_bound(scores0, scores1, delta: float, *, confidence: float = DEFAULT_CONFIDENCE,
                        rng: Optional[np.random.Generator] = None) -> EpsilonLowerBound:
    """Empirical epsilon lower bound at ``delta`` from the scores of runs on D0 and D1
    (module docstring); ``rng`` shuffles the runs before they are halved."""
    s0, s1 = _scores(scores0, "scores0"), _scores(scores1, "scores1")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    s0, s1 = rng.permutation(s0), rng.permutation(s1)
    h0, h1 = int(s0.size * SELECTION_FRACTION), int(s1.size * SELECTION_FRACTION)
    pick0, eval0, pick1, eval1 = s0[:h0], s0[h0:], s1[:h1], s1[h1:]
    pooled = np.concatenate([pick0, pick1])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, _THRESHOLDS)))
    best = (-math.inf, 0.0, False)
    for flipped in (False, True):
        a0, a1 = (-pick0, -pick1) if flipped else (pick0, pick1)
        ts = -thresholds if flipped else thresholds
        fp, fn = _rates(a0, a1, ts)
        eps = _bound_epsilon(fp, fn, pick0.size, pick1.size, delta, confidence)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(thresholds[i]), flipped)
    _, threshold, flipped = best
    a0, a1, t = (-eval0, -eval1, -threshold) if flipped else (eval0, eval1, threshold)
    n_fp = int(np.count_nonzero(a0 > t))
    n_fn = int(np.count_nonzero(a1 <= t))
    fpr_ub = clopper_pearson_upper(n_fp, a0.size, confidence)
    fnr_ub = clopper_pearson_upper(n_fn, a1.size, confidence)
    candidates = []
    for num, den in ((1.0 - delta - fnr_ub, fpr_ub), (1.0 - delta - fpr_ub, fnr_ub)):
        if num > 0.0 and den > 0.0:
            candidates.append(math.log(num / den))
    eps_lb = max([0.0, *candidates])
    return EpsilonLowerBound(eps_lb, threshold, flipped, n_fp / a0.size, n_fn / a1.size, fpr_ub, fnr_ub,
                             (int(a0.size), int(a1.size)), confidence)


def epsilon_for_mu(mu: float, delta: float) -> float:
    """Smallest epsilon at which a ``mu``-Gaussian-DP mechanism is (epsilon, delta)-DP
    (0 when its delta at epsilon 0 is already below ``delta``)."""
    from scipy.optimize import brentq

    from ..dp import gaussian_delta

    mu = abs(float(mu))
    if mu == 0.0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf

    def excess(eps: float) -> float:
        return gaussian_delta(eps, 1.0, mu) - delta if eps > 0 else _delta_at_zero(mu) - delta

    if excess(0.0) <= 0.0:
        return 0.0
    hi = max(1.0, mu * mu)
    while excess(hi) > 0.0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(brentq(excess, 0.0, hi, xtol=1e-10, rtol=1e-10))


def _delta_at_zero(mu: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(mu / 2.0) - ndtr(-mu / 2.0))


@dataclass(frozen=True)
class GaussianDPFit:
    """``mu`` with an approximate 95% interval and the epsilons at ``delta`` they give."""

    mu: float
    mu_low: float
    mu_high: float
    epsilon: float
    epsilon_low: float
    epsilon_high: float


def fit_gaussian_dp(scores0, scores1, delta: float) -> GaussianDPFit:
    """Gaussian DP fitted to the two worlds' scores (module docstring)."""
    s0, s1 = _scores(scores0, "scores0"), _scores(scores1, "scores1")
    n0, n1 = s0.size, s1.size
    pooled_var = ((n0 - 1) * s0.var(ddof=1) + (n1 - 1) * s1.var(ddof=1)) / (n0 + n1 - 2)
    if not pooled_var > 0.0:
        gap = abs(float(s1.mean() - s0.mean()))
        value = math.inf if gap > 0 else 0.0
        return GaussianDPFit(value, value, value, epsilon_for_mu(value, delta), epsilon_for_mu(value, delta),
                             epsilon_for_mu(value, delta))
    mu = abs(float(s1.mean() - s0.mean())) / math.sqrt(pooled_var)
    se = math.sqrt((n0 + n1) / (n0 * n1) + mu * mu / (2.0 * (n0 + n1)))
    low, high = max(0.0, mu - 1.96 * se), mu + 1.96 * se
    return GaussianDPFit(mu, low, high, epsilon_for_mu(mu, delta), epsilon_for_mu(low, delta),
                         epsilon_for_mu(high, delta))


#: most distinct output values :func:`fit_discrete_dp` accepts (beyond, frequencies are too thin to fit)
MAX_DISCRETE_VALUES = 16


@dataclass(frozen=True)
class DiscreteDPFit:
    """The fitted epsilon of a discrete release (:func:`fit_discrete_dp`) with its 95% interval;
    ``values``: the distinct outputs seen."""

    epsilon: float
    epsilon_low: float
    epsilon_high: float
    values: int


def _two_sided(k: int, n: int) -> Tuple[float, float]:
    """The two-sided 95% Clopper-Pearson interval of a rate after ``k`` of ``n``."""
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def _log_ratio(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return math.inf if a == 0.0 or b == 0.0 else abs(math.log(a / b))


def fit_discrete_dp(scores0, scores1) -> DiscreteDPFit:
    """The largest ``|log(P1(v) / P0(v))|`` over the output values ``v`` (module docstring)."""
    s0, s1 = _scores(scores0, "scores0"), _scores(scores1, "scores1")
    values = np.unique(np.concatenate([s0, s1]))
    if values.size > MAX_DISCRETE_VALUES:
        raise ValueError(f"a discrete fit needs at most {MAX_DISCRETE_VALUES} distinct scores, got {values.size}")
    point, low, high = 0.0, 0.0, 0.0
    for v in values:
        k0, k1 = int(np.count_nonzero(s0 == v)), int(np.count_nonzero(s1 == v))
        (lo0, hi0), (lo1, hi1) = _two_sided(k0, s0.size), _two_sided(k1, s1.size)
        point = max(point, _log_ratio(k1 / s1.size, k0 / s0.size))
        # The interval's low end: the smallest ratio the intervals allow (0 where they overlap).
        if lo1 > hi0:
            low = max(low, math.log(lo1 / hi0))
        elif lo0 > hi1:
            low = max(low, math.log(lo0 / hi1))
        high = max(high, _log_ratio(hi1, lo0) if hi1 >= lo0 else 0.0, _log_ratio(hi0, lo1) if hi0 >= lo1 else 0.0)
    return DiscreteDPFit(point, low, high, int(values.size))
