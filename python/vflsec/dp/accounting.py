"""Privacy accounting: composed (epsilon, delta) of repeated Gaussian releases.

Mechanisms (noise on embeddings, DP-SGD on a bottom model) state what they
release; this module turns that into a whole-run guarantee with Google's
``dp-accounting`` library (RDP by default, PLD on request), never a
hand-written bound. Kept apart from the mechanisms, as Opacus keeps its
accountants apart from its optimizers.

Two release patterns cover vflsec's defenses:

* :func:`composed_gaussian` -- a Gaussian mechanism with noise multiplier
  ``sigma / sensitivity`` applied ``count`` times to the same individual
  (VFL-AFE / fixed-noise embeddings: each sample's embedding is released once
  per epoch, so ``count = epochs``; batches are disjoint within an epoch).
* :func:`composed_subsampled_gaussian` -- DP-SGD: Poisson subsampling with
  rate ``q`` and a Gaussian of noise multiplier ``z``, composed over ``steps``.

:func:`noise_multiplier_for_epsilon` inverts either for a target epsilon.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from .._arrays import check_positive_int, check_real

__all__ = [
    "ACCOUNTANTS",
    "PrivacySpent",
    "composed_gaussian",
    "composed_subsampled_gaussian",
    "noise_multiplier_for_epsilon",
]

ACCOUNTANTS = ("rdp", "pld")

PLD_MIN_DELTA = 1e-15
"""Smallest delta the ``"pld"`` accountant accepts: dp_accounting's privacy
loss distribution truncates its tails at about this mass, so it cannot
resolve a smaller delta (it returns inf, after a long computation, e.g. 25 s
at 1e-300). Use the ``"rdp"`` accountant for smaller deltas."""

MIN_TOLERANCE = 1e-12
"""Smallest relative ``tolerance`` :func:`noise_multiplier_for_epsilon` accepts
(about 2^13 ulps: finer is below the accountants' own accuracy)."""

_MAX_BISECTIONS = 200


@dataclass(frozen=True)
class PrivacySpent:
    """A guarantee: ``epsilon_per_release`` is what one release costs (the figure
    papers usually quote, ``None`` where a single release has no standalone
    meaning, as for one DP-SGD step); ``epsilon`` is the composed value over
    ``releases`` releases at the same ``delta``."""

    epsilon: float
    delta: float
    releases: int
    epsilon_per_release: Optional[float]
    accountant: str


def _dp_accounting():
    try:
        import dp_accounting
    except ImportError as exc:  # pragma: no cover - dependency declared in pyproject
        raise ImportError("privacy accounting needs the 'dp-accounting' package (pip install dp-accounting)") from exc
    return dp_accounting


def _check_accountant(accountant: str) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return accountant


def _new_accountant(name: str):
    dp = _dp_accounting()
    if name == "rdp":
        return dp.rdp.RdpAccountant()
    return dp.pld.PLDAccountant()


def _epsilon(event, delta: float, accountant: str, draws: int, releases: int, multiplier: float) -> float:
    """Epsilon at ``delta`` of the implementation: the ideal event's epsilon at a
    slightly smaller delta, plus the lattice release's corrections over
    ``draws`` noise draws in ``releases`` releases (:mod:`vflsec.dp.lattice`).
    ``inf`` when the corrections alone exceed half of delta (a noise
    multiplier far too small to mean anything), so searches stay monotone."""
    from .lattice import implemented_guarantee, support_failure

    support = releases * support_failure(1.0 / multiplier)
    slack = draws * _per_draw_log_ratio()
    ideal_delta = (delta * math.exp(-slack) - support) * (1.0 - 1e-9)
    if not ideal_delta > 0.5 * delta:
        return math.inf
    acc = _new_accountant(accountant)
    acc.compose(event)
    eps = float(acc.get_epsilon(ideal_delta))
    if not math.isfinite(eps):
        return math.inf
    eps_impl, delta_impl = implemented_guarantee(eps, ideal_delta, draws=draws, ratio=1.0 / multiplier,
                                                 releases=releases)
    if delta_impl > delta:  # pragma: no cover - excluded by the choice of ideal_delta
        return math.inf
    return eps_impl


def _per_draw_log_ratio() -> float:
    from ..kernels.noise import PER_DRAW_LOG_RATIO

    return PER_DRAW_LOG_RATIO


def _check_delta(delta) -> float:
    return check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)


def _check_accountant_delta(accountant: str, delta: float) -> None:
    if accountant == "pld" and delta < PLD_MIN_DELTA:
        raise ValueError(f"delta={delta:g} is below the PLD accountant's floor {PLD_MIN_DELTA:g} (its tail "
                         "truncation cannot resolve it); use accountant='rdp' for smaller deltas")


def _check_multiplier(noise_multiplier) -> float:
    return check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)


def composed_gaussian(noise_multiplier: float, count: int, delta: float, *, accountant: str = "rdp",
                      coordinates: int = 1) -> PrivacySpent:
    """(epsilon, delta) of ``count`` Gaussian releases with std ``noise_multiplier *
    sensitivity`` about the same individual.

    ``noise_multiplier`` is the lattice release's effective one
    (:func:`vflsec.dp.lattice.lattice_noise_multiplier`); ``coordinates`` is the
    number of noise draws per release, for the sampler's error bound.

    ``epsilon_per_release`` (and ``epsilon`` when ``count == 1``) comes from the
    PLD accountant whenever ``delta >= PLD_MIN_DELTA``, whatever ``accountant``
    composes: for one Gaussian release it is exact up to its (pessimistic)
    discretization, so a release calibrated to epsilon = 5 reports 5.00 where
    RDP's conversion would report about 5.8. ``accountant`` composes the
    ``count`` releases."""
    z = _check_multiplier(noise_multiplier)
    count = check_positive_int(count, "count")
    delta = _check_delta(delta)
    accountant = _check_accountant(accountant)
    _check_accountant_delta(accountant, delta)
    coordinates = check_positive_int(coordinates, "coordinates")
    dp = _dp_accounting()
    single = "pld" if delta >= PLD_MIN_DELTA else accountant
    once = _epsilon(dp.GaussianDpEvent(z), delta, single, coordinates, 1, z)
    total = once if count == 1 else _epsilon(dp.SelfComposedDpEvent(dp.GaussianDpEvent(z), count), delta, accountant,
                                             count * coordinates, count, z)
    return PrivacySpent(total, delta, count, once, accountant)


def composed_subsampled_gaussian(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                                 accountant: str = "rdp", coordinates: int = 1) -> PrivacySpent:
    """(epsilon, delta) of DP-SGD: ``steps`` Poisson-subsampled Gaussian releases
    of ``coordinates`` noise draws each (multiplier as in :func:`composed_gaussian`)."""
    z = _check_multiplier(noise_multiplier)
    q = check_real(sampling_rate, "sampling_rate", low=0.0, low_inclusive=False, high=1.0)
    steps = check_positive_int(steps, "steps")
    delta = _check_delta(delta)
    accountant = _check_accountant(accountant)
    _check_accountant_delta(accountant, delta)
    coordinates = check_positive_int(coordinates, "coordinates")
    dp = _dp_accounting()
    event = dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(q, dp.GaussianDpEvent(z)), steps)
    return PrivacySpent(_epsilon(event, delta, accountant, steps * coordinates, steps, z), delta, steps, None,
                        accountant)


def noise_multiplier_for_epsilon(epsilon: float, delta: float, *, count: int = 1, sampling_rate: float = 1.0,
                                 accountant: str = "rdp", tolerance: float = 1e-3, coordinates: int = 1) -> float:
    """Smallest noise multiplier whose composed epsilon (``count`` releases of
    ``coordinates`` draws, Poisson rate ``sampling_rate``; 1.0 = no
    subsampling) is <= ``epsilon``. Turn it into the release's sigma with
    :func:`vflsec.dp.lattice.sigma_for_multiplier`.

    ``tolerance`` (relative) must be at least ``MIN_TOLERANCE``; with the PLD
    accountant ``delta`` must be at least ``PLD_MIN_DELTA``."""
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    delta = _check_delta(delta)
    count = check_positive_int(count, "count")
    q = check_real(sampling_rate, "sampling_rate", low=0.0, low_inclusive=False, high=1.0)
    accountant = _check_accountant(accountant)
    _check_accountant_delta(accountant, delta)
    tolerance = check_real(tolerance, "tolerance", low=0.0, low_inclusive=False)
    if tolerance < MIN_TOLERANCE:
        raise ValueError(f"tolerance must be >= {MIN_TOLERANCE:g} (relative width of the bisection), "
                         f"got {tolerance:g}")

    def spent(z: float) -> float:
        if q == 1.0:
            return composed_gaussian(z, count, delta, accountant=accountant, coordinates=coordinates).epsilon
        return composed_subsampled_gaussian(z, q, count, delta, accountant=accountant,
                                            coordinates=coordinates).epsilon

    lo, hi = 1e-3, 1.0
    while spent(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier up to 1e6 reaches epsilon={epsilon} at delta={delta}")
    if spent(lo) <= epsilon:
        return lo
    # Bisection on a monotone curve; stop at a relative width of ``tolerance``.
    # Bounded: each step halves the log-width (at most log2(log(1e6/1e-3)/tolerance) ~ 45 steps).
    for _ in range(_MAX_BISECTIONS):
        if not (hi - lo) > tolerance * hi:
            break
        mid = math.sqrt(lo * hi)
        if spent(mid) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi
