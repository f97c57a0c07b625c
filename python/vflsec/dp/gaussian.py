"""Gaussian mechanism calibration: the classic bound and the analytic (exact) one.

The classic calibration ``sigma = sqrt(2 ln(1.25/delta)) * Delta / epsilon``
(Dwork & Roth 2014, Thm A.1) is only proved for ``epsilon < 1``. The analytic
Gaussian mechanism (Balle & Wang, ICML 2018, Thm 8) inverts the exact privacy
curve of the Gaussian mechanism,

    delta(eps) = Phi(Delta/(2 sigma) - eps sigma/Delta)
                 - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta),

so it is valid for every ``epsilon > 0`` and never needs more noise than the
classic formula where that one is valid.

:func:`gaussian_delta` is the continuous mechanism's curve; :func:`gaussian_sigma`
returns the sigma for the mechanism vflsec actually runs (the lattice release
of :func:`vflsec.kernels.add_gaussian_noise`; corrections in :mod:`.lattice`).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from .._arrays import check_positive_int, check_real

__all__ = ["PrivacyWarning", "gaussian_delta", "gaussian_sigma", "GAUSSIAN_METHODS"]

GAUSSIAN_METHODS = ("analytic", "classic")


class PrivacyWarning(UserWarning):
    """A requested calibration does not carry the guarantee it suggests."""


def _check_epsilon(epsilon) -> float:
    return check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)


def _check_delta(delta) -> float:
    return check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)


def _check_sensitivity(sensitivity) -> float:
    return check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)


_QUADRATURE_BELOW = 0.1
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)
_GL_LOG_WEIGHTS = np.log(_GL_WEIGHTS)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log_delta(epsilon: float, ratio: float) -> float:
    """log of the exact delta of the Gaussian mechanism with Delta/sigma = ``ratio``.

    Both terms are handled in log space: ``e^eps Phi(b)`` overflows for large
    epsilon if formed directly, and for small delta both terms underflow.
    Returns -inf when delta is below what double precision can represent.
    """
    a = ratio / 2.0 - epsilon / ratio
    b = -ratio / 2.0 - epsilon / ratio
    log_first = float(log_ndtr(a))
    if ratio < _QUADRATURE_BELOW and epsilon < 4.0:
        # log Phi(a) - log Phi(b) is nearly epsilon here; formed as a difference
        # of two log_ndtr values it loses most of its digits (64x too small a
        # delta at epsilon 1e-12). Instead: log(1 + D / Phi(b)) with
        # D = int_b^a phi(x) dx by Gauss-Legendre over the short interval.
        mid, half = -epsilon / ratio, ratio / 2.0
        t = half * _GL_NODES
        # log phi(mid + t) - log phi(mid) = -t (2 mid + t) / 2, without cancellation.
        log_terms = -t * (2.0 * mid + t) / 2.0 + _GL_LOG_WEIGHTS
        top = float(log_terms.max())
        log_d = math.log(half) + (-mid * mid / 2.0 - _LOG_SQRT_2PI) + top + math.log(
            float(np.exp(log_terms - top).sum()))
        log_ratio = log_d - float(log_ndtr(b))
        gap = epsilon - float(np.logaddexp(0.0, log_ratio))
    else:
        log_second = epsilon + float(log_ndtr(b))
        gap = log_second - log_first  # <= 0 mathematically; the curve is a difference
    if not gap < 0.0:
        return -math.inf
    # log(Phi(a) - e^eps Phi(b)) = log Phi(a) + log(1 - exp(gap))
    return log_first + math.log(-math.expm1(gap))


def gaussian_delta(epsilon, sigma, sensitivity=1.0) -> float:
    """Exact delta at which the Gaussian mechanism N(0, sigma^2) is (epsilon, delta)-DP.

    ``sensitivity`` is the L2 sensitivity of the released quantity. This is
    the tight curve of Balle & Wang (2018), Thm 8.
    """
    epsilon = _check_epsilon(epsilon)
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    sensitivity = _check_sensitivity(sensitivity)
    ratio = sensitivity / sigma
    if not (0.0 < ratio < math.inf):
        raise ValueError(f"sensitivity / sigma = {sensitivity:g} / {sigma:g} is outside the float64 range")
    try:
        return math.exp(_log_delta(epsilon, ratio))
    except (ArithmeticError, RuntimeError) as exc:
        raise ValueError(f"gaussian_delta cannot be evaluated at epsilon={epsilon:g}, sigma={sigma:g}, "
                         f"sensitivity={sensitivity:g}: {exc}") from None


def gaussian_epsilon_of_ratio(ratio: float, delta: float) -> float:
    """Smallest epsilon at which the Gaussian mechanism with Delta/sigma = ``ratio`` is
    (epsilon, ``delta``)-DP, on the exact curve (Balle & Wang 2018, Thm 8); 0 where
    ``delta`` is already reached at epsilon 0. Gaussians compose into one Gaussian
    (ratios add in squares), so this is also the exact epsilon of a composition."""
    ratio = check_real(ratio, "ratio", low=0.0, low_inclusive=False)
    delta = _check_delta(delta)
    target = math.log(delta)
    if _log_delta(0.0, ratio) <= target:
        return 0.0

    def excess(epsilon: float) -> float:  # decreasing in epsilon
        return max(_log_delta(epsilon, ratio), -1e6) - target

    hi = max(1.0, ratio * ratio)
    for _ in range(200):
        if excess(hi) < 0.0:
            break
        hi *= 2.0
    else:  # pragma: no cover - unreachable for a finite ratio
        raise ValueError(f"could not bracket the Gaussian epsilon at ratio {ratio:g}, delta {delta:g}")
    epsilon = float(brentq(excess, 0.0, hi, xtol=1e-13, rtol=4.0 * np.finfo(float).eps, maxiter=500))
    while excess(epsilon) > 0.0:  # the root to the side that keeps delta at most the target
        epsilon = epsilon * (1.0 + 1e-13) + 1e-15
    return epsilon


def _analytic_ratio(epsilon: float, delta: float) -> float:
    """Largest Delta/sigma whose exact delta at ``epsilon`` is at most ``delta``.

    delta(eps, ratio) increases monotonically from 0 to 1 with the ratio, so a
    bracketing root find on ``log delta`` over ``log ratio`` (both well scaled
    across the whole range of epsilon and delta) converges reliably.
    """
    target = math.log(delta)

    def excess(log_ratio: float) -> float:
        log_delta = _log_delta(epsilon, math.exp(log_ratio))
        # -inf (delta lost to rounding) becomes a finite stand-in so brentq's
        # interpolation stays defined; the target log(delta) is always > -746.
        return max(log_delta, -1e6) - target

    # Start from the classic calibration; it is the right order of magnitude.
    start = math.log(epsilon / math.sqrt(2.0 * math.log(1.25 / delta)))
    lo = hi = start
    step = 1.0
    for _ in range(200):
        if excess(lo) < 0.0:
            break
        lo -= step
        step *= 1.5
    else:  # pragma: no cover - unreachable for valid epsilon/delta
        raise ValueError("could not bracket the analytic Gaussian sigma from below")
    step = 1.0
    for _ in range(200):
        if excess(hi) > 0.0:
            break
        hi += step
        step *= 1.5
    else:  # pragma: no cover
        raise ValueError("could not bracket the analytic Gaussian sigma from above")
    root = brentq(excess, lo, hi, xtol=1e-15, rtol=4.0 * np.finfo(float).eps, maxiter=500)
    return math.exp(root)


def gaussian_sigma(epsilon, delta, sensitivity=1.0, *, method="analytic", coordinates=1) -> float:
    """Noise standard deviation for an (epsilon, delta) Gaussian mechanism, as
    vflsec releases it (:func:`vflsec.kernels.add_gaussian_noise`).

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    sensitivity : float > 0
        L2 sensitivity of the released vector.
    method : {"analytic", "classic"}
        ``"analytic"`` (default): the smallest sigma meeting the exact privacy
        curve (Balle & Wang 2018), valid for every epsilon > 0.
        ``"classic"``: ``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon``
        (Dwork & Roth, Thm A.1), as used by the HDP-VFL paper. It is proved only
        for epsilon < 1; for epsilon >= 1 a :class:`PrivacyWarning` is emitted.
    coordinates : int >= 1
        How many noise draws one release makes (its vector length): the
        sampler's per-draw error bound is counted over them
        (:mod:`vflsec.dp.lattice`). The release does not round the query, so
        no rounding term enters the sensitivity. The returned sigma is on the release's
        grid (:func:`vflsec.kernels.lattice_sigma`): at most 0.39% above the
        continuous mechanism's.
    """
    from ..kernels.noise import lattice_sigma
    from .lattice import ideal_target, sigma_for_multiplier

    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    sensitivity = _check_sensitivity(sensitivity)
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, got {type(method).__name__}")
    if method not in GAUSSIAN_METHODS:
        raise ValueError(f"method must be one of {GAUSSIAN_METHODS}, got {method!r}")
    coordinates = check_positive_int(coordinates, "coordinates")
    # Two passes: the shift r = Delta / sigma enters the support term;
    # take it from a first calibration, with a margin for the second's change.
    first_target = ideal_target(epsilon, delta, draws=coordinates)
    if method == "analytic":
        first = _analytic_ratio(*first_target)
    else:
        first = first_target[0] / math.sqrt(2.0 * math.log(1.25 / first_target[1]))
    eps_ideal, delta_ideal = ideal_target(epsilon, delta, draws=coordinates, ratio=1.01 * first)
    if method == "classic":
        if epsilon >= 1.0:
            warnings.warn(
                f"the classic Gaussian mechanism calibration is only a valid (epsilon, delta) "
                f"guarantee for epsilon < 1 (got epsilon={epsilon}); use method='analytic'",
                PrivacyWarning,
                stacklevel=2,
            )
        per_unit = math.sqrt(2.0 * math.log(1.25 / delta_ideal)) / eps_ideal
    else:
        # The support term is below double precision unless epsilon is in the
        # thousands: then the targets are unchanged and the root is reused.
        same = (eps_ideal, delta_ideal) == first_target
        per_unit = 1.0 / (first if same else _analytic_ratio(eps_ideal, delta_ideal))
    if not (0.0 < per_unit < math.inf) or not (0.0 < per_unit * sensitivity < math.inf):
        raise ValueError(f"the {method} Gaussian sigma for epsilon={epsilon:g}, delta={delta:g}, "
                         f"sensitivity={sensitivity:g} is outside the float64 range (0 or inf)")
    sigma = sigma_for_multiplier(per_unit, sensitivity)
    if not (0.0 < sigma < math.inf):
        raise ValueError(f"the {method} Gaussian sigma for epsilon={epsilon:g}, delta={delta:g}, "
                         f"sensitivity={sensitivity:g} is outside the float64 range (got {sigma})")
    if method == "classic":
        return sigma
    # sigma is on the release's grid (vflsec.kernels.lattice_sigma). The root
    # is exact only up to rounding; step up the grid until the delta evaluated
    # from the returned value (as gaussian_delta computes it) does not exceed
    # the ideal target, so the guarantee holds as stated.
    # The evaluation's relative error is below 1e-9 (checked against 80-digit
    # arithmetic in the tests), so the margin keeps the exact delta below the
    # target.
    for _ in range(100_000):
        if math.exp(_log_delta(eps_ideal, sensitivity / sigma)) <= delta_ideal * (1.0 - 1e-7):
            return sigma
        sigma = lattice_sigma(math.nextafter(sigma, math.inf))
    raise ValueError(  # pragma: no cover - evaluation error is far below this
        f"analytic Gaussian calibration did not converge for epsilon={epsilon}, delta={delta}")
