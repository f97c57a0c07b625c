"""Privacy accounting: composed (epsilon, delta) of repeated Gaussian releases.

Thin functions over the accountants of :mod:`.accountant` (the one place that
composes): mechanisms state what they release; these turn it into a
whole-run guarantee with Google's ``dp-accounting`` library (PLD by default,
RDP on request), never a hand-written bound. Kept apart from the mechanisms,
as Opacus keeps its accountants apart from its optimizers.

Two release patterns cover vflsec's defenses:

* :func:`composed_gaussian` -- a Gaussian mechanism with noise multiplier
  ``sigma / Delta`` applied ``count`` times to the same individual
  (VFL-AFE / fixed-noise embeddings: each sample's embedding is released once
  per epoch, so ``count = epochs``; batches are disjoint within an epoch).
  ``Delta`` is the distance between neighbours' releases under the stated
  relation, so the relation does not change the curve.
* :func:`composed_subsampled_gaussian` -- DP-SGD: Poisson subsampling with
  rate ``q`` and a Gaussian of noise multiplier ``z = sigma / C`` (``C`` one
  record's contribution bound), composed over ``steps``; under replace-one
  (the VFL default) a neighbour moves a sampled sum by up to ``2C``.

:func:`noise_multiplier_for_epsilon` inverts either for a target epsilon with
the same accountant, so a calibration and the epsilon later reported for it
agree and never exceed the target.
"""
from __future__ import annotations

import functools
import math
from typing import Any

from .._arrays import check_positive_int, check_real
from .accountant import ACCOUNTANTS as _ACCOUNTANT_CLASSES
from .accountant import (
    DEFAULT_NEIGHBOURS,
    PLD_MIN_DELTA,
    PrivacySpent,
    Release,
    _check_delta,  # one home for the delta rule
    check_neighbours,
    make_accountant,
)

__all__ = [
    "ACCOUNTANTS",
    "PLD_MIN_DELTA",
    "PrivacySpent",
    "composed_gaussian",
    "composed_subsampled_gaussian",
    "noise_multiplier_for_epsilon",
]

ACCOUNTANTS = tuple(_ACCOUNTANT_CLASSES)
DEFAULT_ACCOUNTANT = "pld"

MIN_TOLERANCE = 1e-12
"""Smallest relative ``tolerance`` :func:`noise_multiplier_for_epsilon` accepts
(about 2^13 ulps: finer is below the accountants' own accuracy)."""

_MAX_BISECTIONS = 200


def _check_accountant(accountant: str) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return accountant


def _check_multiplier(noise_multiplier) -> float:
    return check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)


def _spent(release: Release, delta: float, accountant: str, neighbours: str) -> float:
    acc = make_accountant(accountant, neighbours=neighbours)
    acc.step(release)
    return acc.get_epsilon(delta)


def composed_gaussian(noise_multiplier: float, count: int, delta: float, *, accountant: str = DEFAULT_ACCOUNTANT,
                      coordinates: int = 1, neighbours: str = DEFAULT_NEIGHBOURS) -> PrivacySpent:
    """(epsilon, delta) of ``count`` Gaussian releases with std ``noise_multiplier *
    Delta`` about the same individual (``Delta`` measured under ``neighbours``).

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
    neighbours = check_neighbours(neighbours)
    coordinates = check_positive_int(coordinates, "coordinates")
    make_accountant(accountant).check_delta(delta)
    single = "pld" if delta >= PLD_MIN_DELTA else accountant
    once = _spent(Release(z, 1.0, coordinates, 1), delta, single, neighbours)
    total = once if count == 1 else _spent(Release(z, 1.0, coordinates, count), delta, accountant, neighbours)
    return PrivacySpent(total, delta, count, once, accountant, neighbours)


def composed_subsampled_gaussian(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                                 accountant: str = DEFAULT_ACCOUNTANT, coordinates: int = 1,
                                 neighbours: str = DEFAULT_NEIGHBOURS) -> PrivacySpent:
    """(epsilon, delta) of DP-SGD: ``steps`` Poisson-subsampled Gaussian releases
    of ``coordinates`` noise draws each, ``noise_multiplier = sigma / C`` for a
    contribution bound ``C`` (under replace-one a neighbour moves a sampled sum
    by up to ``2C``; RDP refuses that relation with subsampling)."""
    z = _check_multiplier(noise_multiplier)
    q = check_real(sampling_rate, "sampling_rate", low=0.0, low_inclusive=False, high=1.0)
    steps = check_positive_int(steps, "steps")
    delta = _check_delta(delta)
    accountant = _check_accountant(accountant)
    neighbours = check_neighbours(neighbours)
    coordinates = check_positive_int(coordinates, "coordinates")
    if q == 1.0:
        # Every record takes part: one Gaussian whose shift is the neighbours' distance (2C under replace-one).
        release = Release(z / (2.0 if neighbours == "replace_one" else 1.0), 1.0, coordinates, steps)
    else:
        release = Release(z, q, coordinates, steps)
    eps = _spent(release, delta, accountant, neighbours)
    return PrivacySpent(eps, delta, steps, None, accountant, neighbours)


def noise_multiplier_for_epsilon(epsilon: float, delta: float, *, count: int = 1, sampling_rate: float = 1.0,
                                 accountant: str = DEFAULT_ACCOUNTANT, tolerance: float = 1e-3,
                                 coordinates: int = 1, neighbours: str = DEFAULT_NEIGHBOURS,
                                 per_record: bool = False) -> float:
    """Smallest noise multiplier whose composed epsilon (``count`` releases of
    ``coordinates`` draws, Poisson rate ``sampling_rate``; 1.0 = no
    subsampling), as :func:`composed_gaussian` / :func:`composed_subsampled_gaussian`
    report it with the same ``accountant`` and ``neighbours``, is <= ``epsilon``.
    ``per_record``: the multiplier is ``sigma / C`` for a per-record
    contribution bound ``C`` (DP-SGD, :func:`composed_subsampled_gaussian`,
    at any rate); otherwise ``sigma / Delta`` with ``Delta`` the neighbours'
    distance (``sampling_rate`` must then be 1).

    ``tolerance`` (relative) must be at least ``MIN_TOLERANCE``; with the PLD
    accountant ``delta`` must be at least ``PLD_MIN_DELTA``. Results are cached
    (a pure function of its arguments; a search costs up to seconds)."""
    args = (epsilon, delta, count, sampling_rate, accountant, tolerance, coordinates, neighbours, per_record)
    try:
        hash(args)
    except TypeError:  # an unhashable argument: the checks below say what is wrong with it
        return _noise_multiplier_for_epsilon(*args)
    # The types are part of the key: True == 1 must not answer for a mistyped argument.
    return _cached_multiplier(args, tuple(type(a) for a in args))


@functools.lru_cache(maxsize=512)
def _cached_multiplier(args: Any, types: Any) -> float:
    return _noise_multiplier_for_epsilon(*args)


def _noise_multiplier_for_epsilon(epsilon: float, delta: float, count: int = 1, sampling_rate: float = 1.0,
                                 accountant: str = DEFAULT_ACCOUNTANT, tolerance: float = 1e-3,
                                 coordinates: int = 1, neighbours: str = DEFAULT_NEIGHBOURS,
                                 per_record: bool = False) -> float:
    """The search behind :func:`noise_multiplier_for_epsilon` (uncached)."""
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    delta = _check_delta(delta)
    count = check_positive_int(count, "count")
    q = check_real(sampling_rate, "sampling_rate", low=0.0, low_inclusive=False, high=1.0)
    accountant = _check_accountant(accountant)
    neighbours = check_neighbours(neighbours)
    make_accountant(accountant, neighbours=neighbours).check_delta(delta)
    tolerance = check_real(tolerance, "tolerance", low=0.0, low_inclusive=False)
    if tolerance < MIN_TOLERANCE:
        raise ValueError(f"tolerance must be >= {MIN_TOLERANCE:g} (relative width of the bisection), "
                         f"got {tolerance:g}")

    if not isinstance(per_record, bool):
        raise TypeError("per_record must be a bool")
    if not per_record and q != 1.0:
        raise ValueError("a subsampled release is calibrated per record (per_record=True): its multiplier is "
                         "sigma / C for the contribution bound C")

    def spent(z: float) -> float:
        if not per_record:
            eps = composed_gaussian(z, count, delta, accountant=accountant, coordinates=coordinates,
                                    neighbours=neighbours).epsilon
        else:
            eps = composed_subsampled_gaussian(z, q, count, delta, accountant=accountant, coordinates=coordinates,
                                               neighbours=neighbours).epsilon
        assert eps is not None  # composed Gaussians always have a guarantee
        return eps

    # Bracket by doubling / halving from 1: tiny multipliers make huge privacy
    # loss distributions, so the search never evaluates far below the answer.
    lo, hi = 0.5, 1.0
    if spent(hi) > epsilon:
        while spent(hi) > epsilon:
            lo, hi = hi, hi * 2.0
            if hi > 1e6:
                raise ValueError(f"no noise multiplier up to 1e6 reaches epsilon={epsilon} at delta={delta}")
    else:
        while spent(lo) <= epsilon:
            lo, hi = lo / 2.0, lo
            if lo < 1e-3:
                return hi
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
