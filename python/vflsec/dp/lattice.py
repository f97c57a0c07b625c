"""What the lattice release costs in (epsilon, delta): rounding and sampler error.

Every DP release in vflsec goes through :func:`vflsec.kernels.add_gaussian_noise`,
which outputs ``g (rint(x / g) + Z)`` with ``g = lattice_spacing(sigma) <=
sigma 2^-20`` and ``Z`` the continuous Gaussian N(0, (sigma/g)^2) rounded to
the integers (see that function). Two facts turn the continuous mechanism's
guarantee into the implementation's:

1. **Rounding the query.** The release is post-processing of the continuous
   Gaussian mechanism applied to ``rint(x / g) g``. Rounding moves each
   coordinate by at most ``g / 2``, so two neighbouring inputs whose L2
   distance is at most ``Delta`` round to points at most ``Delta + g sqrt(d)``
   apart, ``d`` the number of coordinates that can differ. The effective noise
   multiplier is ``sigma / (Delta + g sqrt(d))`` (:func:`lattice_noise_multiplier`).

2. **Sampler error.** The C++ sampler's distribution Q differs from the exact
   rounded Gaussian P by ``|ln Q(z)/P(z)| <= eta = 2^-58`` wherever Q > 0
   (``PER_DRAW_LOG_RATIO``), and Q is supported on ``|z| < 130 s``
   (``SUPPORT_SIGMAS``; derivation in cpp/lattice_gaussian.hpp). For
   neighbouring inputs x, x' and an event S, split S at A, the support of the
   neighbour's output: on A the pointwise bounds give ``Q_x <= e^eta P_x`` and
   ``P_x' <= e^eta Q_x'``, and off A the release of x lands where x' cannot,
   which needs some coordinate's noise beyond ``130 s - |x_i - x'_i|``. With
   ``r = Delta_eff / sigma`` that has probability at most
   ``e^{D eta} (Phi(-(130 - r)) + d Phi(-130))``, largest when one coordinate
   takes the whole shift. So if the ideal mechanism is (epsilon, delta)-DP
   over ``k`` releases and ``D`` draws in all, the implementation is

       (epsilon + 2 D eta,  e^{D eta} (delta + k Phi(-(130 - r))))-DP

   (:func:`implemented_guarantee`; ``Phi(-130)`` underflows to 0). At
   D = 10^9 draws that is epsilon + 7e-9; the support term is below 1e-300
   for r <= 90, i.e. epsilon up to about 4000 at delta = 1e-5.

The calibration (:func:`vflsec.dp.gaussian_sigma`) and the accountants
(:mod:`vflsec.dp.accounting`) apply both corrections, so the sigma they return
is the one the mechanism actually needs.
"""
from __future__ import annotations

import math
from typing import Tuple

from .._arrays import check_positive_int, check_real

__all__ = ["ideal_target", "implemented_guarantee", "lattice_noise_multiplier", "lattice_sensitivity",
           "sigma_for_multiplier", "support_failure"]


def _constants() -> Tuple[float, float]:
    from ..kernels.noise import PER_DRAW_LOG_RATIO, SUPPORT_SIGMAS

    return PER_DRAW_LOG_RATIO, SUPPORT_SIGMAS


def lattice_sensitivity(sensitivity, sigma, *, coordinates) -> float:
    """L2 sensitivity of the lattice-rounded query: ``Delta + g sqrt(d)``, ``g = lattice_spacing(sigma)``."""
    from ..kernels.noise import lattice_spacing

    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
    d = check_positive_int(coordinates, "coordinates")
    return sensitivity + lattice_spacing(sigma) * math.sqrt(d)


def lattice_noise_multiplier(sigma, sensitivity, *, coordinates) -> float:
    """``sigma / (Delta + g sqrt(d))``: the noise multiplier the lattice release really has."""
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    return sigma / lattice_sensitivity(sensitivity, sigma, coordinates=coordinates)


def support_failure(ratio) -> float:
    """Probability that one release's output falls where a neighbour's cannot:
    ``Phi(-(130 - r))`` for the shift ``r = Delta_eff / sigma`` (module docstring)."""
    from scipy.special import ndtr

    from ..kernels.noise import SUPPORT_SIGMAS

    ratio = check_real(ratio, "ratio", low=0.0)
    return float(ndtr(-(SUPPORT_SIGMAS - ratio)))


def implemented_guarantee(epsilon, delta, *, draws, ratio, releases=1) -> Tuple[float, float]:
    """(epsilon, delta) of the implementation when the ideal mechanism (continuous
    Gaussian on the rounded query) is (epsilon, delta)-DP over ``releases``
    releases of ``draws`` noise draws in all, each with shift ``ratio =
    Delta_eff / sigma`` (the inverse of the noise multiplier)."""
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    delta = check_real(delta, "delta", low=0.0, high=1.0)
    draws = check_positive_int(draws, "draws")
    releases = check_positive_int(releases, "releases")
    eta, _ = _constants()
    slack = draws * eta
    return epsilon + 2.0 * slack, min(1.0, math.exp(slack) * (delta + releases * support_failure(ratio)))


def ideal_target(epsilon, delta, *, draws, ratio=0.0, releases=1) -> Tuple[float, float]:
    """The (epsilon, delta) to calibrate the ideal mechanism at so that the
    implementation is (``epsilon``, ``delta``)-DP (inverse of
    :func:`implemented_guarantee`; ``ratio`` an upper bound on the shift).

    Raises ValueError when the sampler's error or support alone would use up
    more than half the budget (absurd draw counts, or epsilon in the thousands).
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    delta = check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)
    draws = check_positive_int(draws, "draws")
    releases = check_positive_int(releases, "releases")
    eta, _ = _constants()
    slack = draws * eta
    eps_ideal = epsilon - 2.0 * slack
    support = releases * support_failure(ratio)
    delta_ideal = delta * math.exp(-slack) - support
    if not (eps_ideal > 0.5 * epsilon and delta_ideal > 0.5 * delta):
        raise ValueError(f"(epsilon={epsilon}, delta={delta}) cannot be met by the lattice release over {draws} "
                         f"noise draws (shift {ratio:.3g} sigma): the sampler's error bound or its finite support "
                         "(130 sigma) alone would use up the budget")
    return eps_ideal, delta_ideal


def sigma_for_multiplier(noise_multiplier, sensitivity, *, coordinates) -> float:
    """The smallest sigma on the release's grid (:func:`vflsec.kernels.lattice_sigma`)
    whose lattice noise multiplier (:func:`lattice_noise_multiplier`) is at
    least ``noise_multiplier``: from the least fixed point of
    ``sigma = z (Delta + g(sigma) sqrt(d))``. ``g`` is a step function of sigma
    (a power of two), so iterating from ``z Delta`` climbs to it in a few steps.
    ValueError when rounding would more than double sigma."""
    from ..kernels.noise import lattice_sigma, lattice_spacing

    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
    d = check_positive_int(coordinates, "coordinates")
    root = math.sqrt(d)
    if z * root * 2.0**-20 >= 0.5:
        raise ValueError(f"noise multiplier {z} over {d} coordinates: rounding to the lattice would more "
                         "than double sigma (release fewer coordinates per call)")
    sigma = z * sensitivity
    for _ in range(200):
        target = z * (sensitivity + lattice_spacing(sigma) * root)
        if target <= sigma:
            break
        sigma = target
    # Onto the release's sigma grid (lattice_sigma rounds up); step up the grid
    # in the rare case that rounding doubled the spacing past the target.
    sigma = lattice_sigma(sigma)
    while lattice_noise_multiplier(sigma, sensitivity, coordinates=d) < z:
        sigma = lattice_sigma(math.nextafter(sigma, math.inf))
    return sigma
