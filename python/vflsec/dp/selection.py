"""The accountant of private hyperparameter selection (Papernot & Steinke, ICLR 2022).

Private selection runs a random number K of training runs, each on a random
candidate and scored by a noisy validation count, and releases only the best
run. Its guarantee is not a composition over the K runs but a *repetition
theorem* over the Renyi-DP curve of one run; this module holds those
theorems (the product's only accountant besides :mod:`.accountant`, which
composes a known number of releases and has no notion of a random K):

* :class:`PoissonRepetitions` -- ``K ~ Poisson(mean)``, Theorem 6;
* :class:`TruncatedNegativeBinomialRepetitions` -- ``K`` from the truncated
  negative binomial, Theorem 2 (the geometric distribution of Liu & Talwar
  2019 is ``eta = 1``);
* :func:`selection_epsilon` -- (epsilon, order) at a delta for runs that are
  each a Gaussian mechanism with noise multiplier ``z`` (RDP ``l / (2 z^2)``,
  exact), through the repetition theorem and :func:`rdp_to_epsilon`;
  :func:`selection_privacy_spent` reports it as a :class:`PrivacySpent`.

The noisy score itself is the catalogue's ``"selection_score"``
(:data:`vflsec.dp.MECHANISMS`): a count of correct predictions, sensitivity 1
(one replaced row changes it by at most 1), released through the lattice by
a :class:`~vflsec.dp.GaussianMechanism` (:func:`score_mechanism`).

Caveat: the epsilon here is the ideal Gaussian's. The lattice release's
per-draw corrections (:mod:`.lattice`, ``2^-58`` per draw) are not added, as
the number of draws grows with the unbounded K.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

import numpy as np

from .._arrays import check_real
from .accountant import DEFAULT_NEIGHBOURS, PrivacySpent

__all__ = [
    "RDP_ORDERS",
    "REPETITIONS",
    "PoissonRepetitions",
    "TruncatedNegativeBinomialRepetitions",
    "check_repetitions",
    "gaussian_rdp",
    "rdp_to_epsilon",
    "repetition_theorem",
    "score_mechanism",
    "selection_epsilon",
    "selection_privacy_spent",
]

RDP_ORDERS = np.unique(np.concatenate([1.0 + np.logspace(-3, 0, 120), np.linspace(2.0, 100.0, 393),
                                       np.logspace(2.0, 5.0, 151)]))
"""Renyi orders searched when converting RDP to (epsilon, delta); any order is
valid, so the grid only affects how tight the reported value is."""

_HAT_ORDERS = np.concatenate([[1.0], np.logspace(0.0, 7.0, 1401)])
# Orders lambda-hat over which Theorem 2's free parameter is minimized.


def _check_delta(delta: Any) -> float:
    return check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)


def rdp_to_epsilon(orders: Any, rdp: Any, delta: float) -> Tuple[float, float]:
    """``(epsilon, order)``: the best (epsilon, delta) of an RDP curve,
    ``min_l rdp(l) + log((l-1)/l) - (log delta + log l) / (l - 1)``
    (Canonne, Kamath & Steinke 2020, Prop. 12; the conversion of
    ``dp_accounting``'s RDP accountant)."""
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    if orders.shape != rdp.shape or orders.ndim != 1 or orders.size == 0 or (orders <= 1).any():
        raise ValueError("orders and rdp must be 1-D of equal length with every order > 1")
    delta = _check_delta(delta)
    eps = rdp + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1.0)
    i = int(np.nanargmin(eps))
    return max(0.0, float(eps[i])), float(orders[i])


def gaussian_rdp(noise_multiplier: float) -> Callable[[np.ndarray], np.ndarray]:
    """RDP of the Gaussian mechanism with multiplier z: ``l / (2 z^2)`` (exact)."""
    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    return lambda orders: np.asarray(orders, dtype=np.float64) / (2.0 * z * z)


def _uniform(generator) -> float:
    return float(generator.random(1)[0])


@dataclass(frozen=True)
class PoissonRepetitions:
    """``K ~ Poisson(mean)`` runs (K = 0 releases nothing). Papernot & Steinke
    2022, Theorem 6: if each run is ``(l, eps(l))``-RDP and
    ``(eps_hat, delta_hat)``-DP with ``e^eps_hat <= 1 + 1/(l - 1)``, the
    selection is ``(l, eps(l) + mean * delta_hat + log(mean) / (l - 1))``-RDP.
    Here ``eps_hat = log(1 + 1/(l - 1))`` and ``delta_hat`` is the run's
    delta at it."""

    mean: float

    theorem = "Papernot & Steinke 2022, Theorem 6 (Poisson K)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_real(self.mean, "mean", low=0.0, low_inclusive=False))

    @property
    def expected(self) -> float:
        return self.mean

    def sample(self, generator) -> int:
        from scipy.stats import poisson

        return max(0, int(poisson.ppf(_uniform(generator), self.mean)))  # ppf(0) is -1

    def rdp(self, orders: np.ndarray, base_rdp: Callable, base_delta: Callable[[float], float]) -> np.ndarray:
        orders = np.asarray(orders, dtype=np.float64)
        delta_hat = np.array([base_delta(math.log1p(1.0 / (lam - 1.0))) for lam in orders])
        return base_rdp(orders) + self.mean * delta_hat + math.log(self.mean) / (orders - 1.0)


@dataclass(frozen=True)
class TruncatedNegativeBinomialRepetitions:
    """K from the truncated negative binomial ``D_{eta, gamma}`` on
    ``{1, 2, ...}``: ``P[K = k] ∝ (1 - gamma)^k prod_{l<k} (l + eta)/(l + 1)``
    (``eta = 1``: geometric, ``P[K = k] = gamma (1 - gamma)^(k-1)``;
    ``eta = 0``: logarithmic). Papernot & Steinke 2022, Theorem 2: if each
    run is ``(l, eps(l))``-RDP for all l, the selection is
    ``(l, eps')``-RDP with, for any ``l_hat >= 1``,
    ``eps' = eps(l) + (1 + eta)(1 - 1/l_hat) eps(l_hat)
    + (1 + eta) log(1/gamma) / l_hat + log(E[K]) / (l - 1)``
    (minimized here over a grid of ``l_hat``; every one is valid). For an
    eps0-DP run and l, l_hat -> inf this is ``(2 + eta) eps0``: 3 eps0 for
    the geometric (Liu & Talwar 2019), 2 eps0 for the logarithmic."""

    eta: float
    gamma: float

    theorem = "Papernot & Steinke 2022, Theorem 2 (truncated negative binomial K)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "eta", check_real(self.eta, "eta", low=-1.0, low_inclusive=False))
        object.__setattr__(self, "gamma", check_real(self.gamma, "gamma", low=0.0, low_inclusive=False,
                                                     high=1.0, high_inclusive=False))
        if self.expected > 1e7:
            raise ValueError(f"E[K] = {self.expected:.3g} runs is impractically large; raise gamma")

    @classmethod
    def geometric(cls, gamma: float) -> "TruncatedNegativeBinomialRepetitions":
        """``eta = 1``: stop after each run with probability gamma (E[K] = 1/gamma)."""
        return cls(1.0, gamma)

    @property
    def expected(self) -> float:
        eta, gamma = self.eta, self.gamma
        if eta == 0.0:
            return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
        return eta * (1.0 - gamma) / (gamma * (1.0 - gamma ** eta))

    def sample(self, generator) -> int:
        """Inverse CDF with ``P[K=1] = (1-gamma) eta / (gamma^-eta - 1)`` (or
        ``(1-gamma) / log(1/gamma)`` for eta = 0) and
        ``P[K=k+1] = P[K=k] (1-gamma)(k+eta)/(k+1)``."""
        eta, gamma = self.eta, self.gamma
        u = _uniform(generator)
        if eta == 0.0:
            p = (1.0 - gamma) / math.log(1.0 / gamma)
        else:
            p = (1.0 - gamma) * eta / math.expm1(-eta * math.log(gamma))
        k, cdf = 1, p
        while u >= cdf and p > 0.0:
            p *= (1.0 - gamma) * (k + eta) / (k + 1)
            k += 1
            cdf += p
        return k

    def rdp(self, orders: np.ndarray, base_rdp: Callable, base_delta: Optional[Callable] = None) -> np.ndarray:
        orders = np.asarray(orders, dtype=np.float64)
        c = 1.0 + self.eta
        hat = _HAT_ORDERS
        extra = np.min(c * (1.0 - 1.0 / hat) * base_rdp(hat) + c * math.log(1.0 / self.gamma) / hat)
        return base_rdp(orders) + extra + math.log(self.expected) / (orders - 1.0)


REPETITIONS = (PoissonRepetitions, TruncatedNegativeBinomialRepetitions)


def check_repetitions(repetitions: Any) -> Any:
    """``repetitions`` if it is one of :data:`REPETITIONS` (TypeError otherwise)."""
    if not isinstance(repetitions, REPETITIONS):
        raise TypeError("repetitions must be PoissonRepetitions or TruncatedNegativeBinomialRepetitions")
    return repetitions


def repetition_theorem(repetitions: Any) -> str:
    """The theorem that accounts for ``repetitions`` (for reports)."""
    return check_repetitions(repetitions).theorem


def selection_epsilon(noise_multiplier: float, repetitions: Any, delta: float) -> Tuple[float, float]:
    """``(epsilon, order)`` at ``delta`` of private selection over runs that
    are each a Gaussian mechanism with multiplier ``noise_multiplier`` on any
    record: the run's exact RDP ``l / (2 z^2)`` (and, for Poisson, its exact
    delta curve) through the repetition theorem, then :func:`rdp_to_epsilon`."""
    from .gaussian import gaussian_delta

    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    check_repetitions(repetitions)
    rdp = repetitions.rdp(RDP_ORDERS, gaussian_rdp(z), lambda eps: gaussian_delta(eps, z, 1.0))
    return rdp_to_epsilon(RDP_ORDERS, rdp, delta)


def selection_privacy_spent(noise_multiplier: float, repetitions: Any, delta: float, *,
                            neighbours: str = DEFAULT_NEIGHBOURS, caveat: Optional[str] = None) -> PrivacySpent:
    """:func:`selection_epsilon` as a :class:`PrivacySpent` (one release: the
    selected run; ``epsilon_per_release`` None, as a single run's cost is not
    what the theorem bounds). ``neighbours``: the relation the runs'
    multipliers are measured under."""
    from .accountant import check_neighbours

    eps, _ = selection_epsilon(noise_multiplier, repetitions, delta)
    return PrivacySpent(eps, float(delta), 1, None, f"rdp ({repetition_theorem(repetitions)})",
                        check_neighbours(neighbours), caveat)


def score_mechanism(noise_multiplier: float, *, neighbours: str = DEFAULT_NEIGHBOURS):
    """The ``"selection_score"`` mechanism: one run's count of correct validation
    predictions (sensitivity 1) with noise multiplier at least ``noise_multiplier``
    (sigma on the release's grid, rounded up)."""
    from .mechanisms import GaussianMechanism

    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    return GaussianMechanism.with_multiplier("selection_score", noise_multiplier=z, sensitivity=1.0,
                                             neighbours=neighbours)
