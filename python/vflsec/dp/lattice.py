"""What the lattice release costs in (epsilon, delta): the sampler's error and support.

Every DP release in vflsec goes through :func:`vflsec.kernels.add_gaussian_noise`,
which outputs ``g K`` with ``g = lattice_spacing(sigma) <= sigma 2^-20`` and
``K`` distributed as ``round(x / g + s N(0, 1))``, ``s = sigma / g`` (sigma on
the release's grid, :func:`vflsec.kernels.lattice_sigma`). That is
post-processing of the continuous Gaussian mechanism ``x + N(0, sigma^2)`` on
``x`` itself (the query is not rounded: the sampler draws the rounded
Gaussian centred at ``x / g``), so every guarantee of the continuous
mechanism holds with the query's own sensitivity ``Delta``, up to:

**Sampler error.** The C++ sampler's distribution Q differs from the exact
rounded Gaussian P by ``|ln Q(z)/P(z)| <= eta = 2^-58`` wherever Q > 0
(``PER_DRAW_LOG_RATIO``), and Q is supported within 130 s of the centre
(``SUPPORT_SIGMAS``; derivation in cpp/lattice_gaussian.hpp). For
neighbouring inputs x, x' and an event S, split S at A, the support of the
neighbour's output: on A the pointwise bounds give ``Q_x <= e^eta P_x`` and
``P_x' <= e^eta Q_x'``; off A the release of x lands where x' cannot, which
needs some coordinate's noise beyond ``130 s - |x_i - x'_i| / g``. With
``r = Delta / sigma`` that has probability at most ``Phi(-(130 - r - 1/s))``
per release (largest when one coordinate takes the whole shift). So if the
ideal mechanism is (epsilon, delta)-DP over ``k`` releases and ``D`` draws
in all, the implementation is

    (epsilon + 2 D eta,  e^{D eta} (delta + k Phi(-(129 - r))))-DP

(:func:`implemented_guarantee`). At D = 10^9 draws that is epsilon + 7e-9;
the support term is below 1e-300 for r <= 90, i.e. epsilon up to about 4000
at delta = 1e-5, and refused beyond.

The calibration (:func:`vflsec.dp.gaussian_sigma`) and the accountants
(:mod:`vflsec.dp.accounting`) apply both corrections, so the sigma they return
is the one the mechanism actually needs.
"""
from __future__ import annotations

import math
from typing import Tuple

from .._arrays import check_positive_int, check_real

__all__ = ["ideal_target", "implemented_guarantee", "lattice_noise_multiplier", "sigma_for_multiplier",
           "support_failure"]


def _constants() -> Tuple[float, float]:
    from ..kernels.noise import PER_DRAW_LOG_RATIO, SUPPORT_SIGMAS

    return PER_DRAW_LOG_RATIO, SUPPORT_SIGMAS


def lattice_noise_multiplier(sigma, sensitivity) -> float:
    """``sigma / Delta``: the release's noise multiplier (the query is not rounded,
    so no rounding term enters; sigma as the release uses it, on its grid)."""
    from ..kernels.noise import lattice_sigma

    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
    return lattice_sigma(sigma) / sensitivity


def support_failure(ratio) -> float:
    """Probability that one release's output falls where a neighbour's cannot:
    ``Phi(-(129 - r))`` for the shift ``r = Delta / sigma`` (module docstring; the
    1 covers the lattice step, ``1/s <= 2^-20``, with room to spare)."""
    from scipy.special import ndtr

    from ..kernels.noise import SUPPORT_SIGMAS

    ratio = check_real(ratio, "ratio", low=0.0)
    return float(ndtr(-(SUPPORT_SIGMAS - 1.0 - ratio)))


def implemented_guarantee(epsilon, delta, *, draws, ratio, releases=1) -> Tuple[float, float]:
    """(epsilon, delta) of the implementation when the ideal mechanism (continuous
    Gaussian on x) is (epsilon, delta)-DP over ``releases``
    releases of ``draws`` noise draws in all, each with shift ``ratio =
    Delta / sigma`` (the inverse of the noise multiplier)."""
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


def sigma_for_multiplier(noise_multiplier, sensitivity) -> float:
    """The smallest sigma on the release's grid (:func:`vflsec.kernels.lattice_sigma`)
    whose noise multiplier ``sigma / Delta`` is at least ``noise_multiplier``."""
    from ..kernels.noise import lattice_sigma

    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
    sigma = lattice_sigma(z * sensitivity)
    while sigma / sensitivity < z:  # float rounding only
        sigma = lattice_sigma(math.nextafter(sigma, math.inf))
    return sigma
