"""Objective perturbation for L2-regularised GLMs: its calibration and its guarantee.

The release (Chaudhuri, Monteleoni & Sarwate, JMLR 2011, Algorithm 2, for the
pure-DP version; Kifer, Smith & Thakurta, COLT 2012, Algorithm 1 and
Theorem 2, for the Gaussian (epsilon, delta) version used here)::

    theta_priv = argmin_theta  (1/n) sum_i phi(theta . z_i) + (lam / 2) ||theta||^2 + (1/n) b . theta,
    b ~ N(0, sigma^2 I_d),

on rows ``z_i`` (for logistic regression ``z_i = y_i x_i``, ``y_i = +-1``).

Preconditions (the theorem's; :meth:`ObjectivePerturbationMechanism.calibrated`
checks the ones that are numbers, the caller the ones that are data):

* (P1) the loss of one row is ``phi(theta . z)`` with ``phi`` convex and twice
  continuously differentiable: its gradient ``phi'(theta . z) z`` has norm at
  most ``zeta = sup|phi'| * max ||z||`` and its Hessian ``phi'' z z^T`` has
  rank <= 1 and eigenvalue at most ``lambda_H = sup phi'' * max ||z||^2``
  (logistic loss on rows ``||x|| <= 1``: ``zeta = 1``, ``lambda_H = 1/4``);
* (P2) ``lam > 0`` and at least :func:`minimum_lam` (below);
* (P3) neighbouring datasets have the same ``n`` rows and differ in one row
  (replace-one; ``add_remove`` is refused);
* (P4) the release is the exact minimiser (the caller solves the strongly
  convex problem to a gradient norm far below the noise; not covered by the
  proof: the ``caveat`` of :meth:`~ObjectivePerturbationMechanism.privacy_spent`).

Proof (KST's Theorem 2 argument, stated for replace-one and without its slack).
The minimiser satisfies ``b = b_D(theta) := -(sum_i grad l(theta; z_i) + n lam
theta)``, a bijection of R^d (strongly convex, C^2), so ``theta_priv`` has
density ``p_D(theta) = nu(b_D(theta)) det A_D(theta)`` with ``A_D = sum_i
Hess l(theta; z_i) + n lam I`` and ``nu`` the noise density. Let ``D'``
replace ``z_k`` by ``z'_k``.

* Jacobian: ``A_D = M + H``, ``A_D' = M + H'`` with ``M >= n lam I`` and
  ``H, H'`` PSD of rank <= 1 with eigenvalue <= ``lambda_H``, so ``det A_D /
  det A_D' <= det(M + H) / det M = 1 + tr(M^-1 H) <= 1 + lambda_H / (n lam)
  =: e^eps_J``.
* Noise: ``b_D'(theta) = b_D(theta) + s(theta)`` with ``s = grad l(theta; z_k)
  - grad l(theta; z'_k)``, which lies in ``V = span{z_k, z'_k}`` (dimension
  <= 2) and has norm <= ``2 zeta`` (the factor 2 of replace-one). Hence
  ``log nu(b_D) / nu(b_D') = (2 b . s + ||s||^2) / (2 sigma^2) <= 2 a t + 2
  a^2`` with ``a = zeta / sigma`` and ``t = ||P_V b|| / sigma``.

So the privacy loss ``L = log p_D / p_D'`` is at most ``eps_J + 2 a t + 2
a^2``, where for ``theta ~ p_D`` the vector ``b = b_D(theta)`` is exactly
``N(0, sigma^2 I)`` and ``t`` is chi-distributed with dim V <= 2 degrees of
freedom (chi_1 is stochastically below chi_2: ``2 Phi(-r) <= e^{-r^2/2}``).
The hockey-stick divergence ``delta(eps) = E_{p_D}[(1 - e^{eps - L})_+]`` is
increasing in ``L``, hence, with ``eps' = eps - eps_J``, in closed form::

    delta(eps) <= E_{t ~ chi_2}[(1 - e^{eps' - 2 a t - 2 a^2})_+]
               =  2 a sqrt(2 pi) e^eps' Phi(-(eps' + 2 a^2) / (2 a))      (eps' >= 2 a^2)
               =  1 - e^eps' (e^{-2 a^2} - 2 a sqrt(2 pi) Phi(-2 a))      (0 <= eps' < 2 a^2),

the same in the other direction by symmetry (:func:`objective_perturbation_delta`).
This is KST's split of epsilon between the Jacobian and the noise, with the
Jacobian factor computed exactly instead of bounded by ``1 + eps/2`` and the
noise term integrated instead of bounded by a Gaussian tail. KST's Theorem 2
(add/remove, one direction, ``Delta >= 2 lambda / eps``, ``beta = zeta^2 (8
log(2/delta) + 4 eps) / eps^2``) with ``zeta`` doubled for replace-one needs
19-43% more noise at delta 1e-5 (epsilon 10 to 0.1, the Jacobian at half of
it); a Gaussian mechanism with a fixed shift of ``2 zeta`` would need 10-16%
less (not valid here: the shift moves with theta).

(P2), the minimum regulariser: the Jacobian may take at most half the budget,
``eps_J <= eps / 2`` as in KST (there ``Delta >= 2 lambda / eps``, i.e.
``lam >= 2 lambda_H / (n eps)``); without linearising ``e^{eps/2}`` that is
``lam >= lambda_H / (n (e^{eps/2} - 1))``. A larger ``lam`` leaves the noise
``eps - eps_J > eps / 2``.

The noise is drawn by the product's one sampler, the lattice release of
:func:`vflsec.kernels.add_gaussian_noise` (ChaCha20; values on a grid of
spacing <= sigma 2^-20): the proof is for a continuous ``b``, so that, like
(P4), is named in the guarantee's caveat.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .._arrays import check_positive_int, check_real
from .accountant import DEFAULT_NEIGHBOURS, PrivacySpent, _check_delta, check_neighbours

__all__ = [
    "OBJECTIVE_PERTURBATION_CAVEAT",
    "ObjectivePerturbationMechanism",
    "jacobian_epsilon",
    "minimum_lam",
    "objective_perturbation_delta",
    "objective_perturbation_epsilon",
]

OBJECTIVE_PERTURBATION_CAVEAT = (
    "objective perturbation is proved for the exact minimiser and a continuous Gaussian b; the release is the "
    "solver's minimiser (gradient norm <= 1e-6 / n) with b from the lattice sampler (spacing <= sigma 2^-20)")
ACCOUNTANT_NAME = "objective_perturbation"  # PrivacySpent.accountant: the closed form above, not an accountant
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _check_constants(gradient_bound: Any, hessian_bound: Any) -> Tuple[float, float]:
    zeta = check_real(gradient_bound, "gradient_bound", low=0.0, low_inclusive=False)
    lam_h = check_real(hessian_bound, "hessian_bound", low=0.0)
    return zeta, lam_h


def jacobian_epsilon(n: int, lam: float, hessian_bound: float) -> float:
    """``eps_J = log(1 + lambda_H / (n lam))``: what the change of the Jacobian costs."""
    n = check_positive_int(n, "n")
    lam = check_real(lam, "lam", low=0.0, low_inclusive=False)
    return math.log1p(check_real(hessian_bound, "hessian_bound", low=0.0) / (n * lam))


def minimum_lam(epsilon: float, n: int, hessian_bound: float) -> float:
    """Smallest L2 strength (of ``(lam/2)||theta||^2`` beside the mean loss) for
    which the Jacobian takes at most half of ``epsilon``: ``lambda_H / (n
    (e^{eps/2} - 1))`` (KST's ``Delta >= 2 lambda / eps`` without linearising)."""
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    n = check_positive_int(n, "n")
    return check_real(hessian_bound, "hessian_bound", low=0.0) / (n * math.expm1(epsilon / 2.0))


def _log_delta(noise_epsilon: float, ratio: float) -> float:
    """log of the noise term's delta at ``eps' = noise_epsilon`` for ``a = zeta / sigma = ratio``."""
    a = ratio
    if noise_epsilon < 0.0:
        return 0.0
    if noise_epsilon >= 2.0 * a * a:
        from scipy.special import log_ndtr

        u = (noise_epsilon + 2.0 * a * a) / (2.0 * a)
        return math.log(2.0 * a) + _LOG_SQRT_2PI + noise_epsilon + float(log_ndtr(-u))
    from scipy.special import ndtr

    inner = math.exp(-2.0 * a * a) - 2.0 * a * math.sqrt(2.0 * math.pi) * float(ndtr(-2.0 * a))
    value = -math.expm1(noise_epsilon) * inner + (1.0 - inner)
    return math.log(min(1.0, max(value, 1e-300)))


def objective_perturbation_delta(epsilon: float, *, sigma: float, gradient_bound: float, jacobian: float) -> float:
    """The delta at ``epsilon`` of one release (module docstring): noise ``sigma``,
    per-row gradient bound ``zeta``, Jacobian cost ``eps_J = jacobian``; 1 for
    ``epsilon < eps_J``."""
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    zeta = check_real(gradient_bound, "gradient_bound", low=0.0, low_inclusive=False)
    return math.exp(_log_delta(epsilon - check_real(jacobian, "jacobian", low=0.0), zeta / sigma))


def objective_perturbation_epsilon(delta: float, *, sigma: float, gradient_bound: float, jacobian: float) -> float:
    """Smallest epsilon whose delta (:func:`objective_perturbation_delta`) is at most ``delta``."""
    from scipy.optimize import brentq

    delta = _check_delta(delta)
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    a = check_real(gradient_bound, "gradient_bound", low=0.0, low_inclusive=False) / sigma
    jacobian = check_real(jacobian, "jacobian", low=0.0)
    target = math.log(delta)
    if _log_delta(0.0, a) <= target:
        return jacobian

    def excess(noise_epsilon: float) -> float:  # decreasing in noise_epsilon
        return max(_log_delta(noise_epsilon, a), -1e6) - target

    hi = max(1.0, 4.0 * a * a)
    while excess(hi) > 0.0:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError(f"no epsilon reaches delta={delta:g} at sigma={sigma:g}")
    noise_epsilon = float(brentq(excess, 0.0, hi, xtol=1e-13, rtol=4.0 * np.finfo(float).eps, maxiter=500))
    while excess(noise_epsilon) > 0.0:  # the root on the side whose delta is at most the target
        noise_epsilon = noise_epsilon * (1.0 + 1e-13) + 1e-15
    return jacobian + noise_epsilon


def _calibrated_sigma(noise_epsilon: float, delta: float, zeta: float) -> float:
    """Smallest sigma (not yet on the lattice grid) whose noise term meets (noise_epsilon, delta)."""
    from scipy.optimize import brentq

    target = math.log(delta)

    def excess(log_sigma: float) -> float:  # decreasing in sigma
        return max(_log_delta(noise_epsilon, zeta / math.exp(log_sigma)), -1e6) - target

    lo = hi = math.log(zeta * 2.0 / noise_epsilon)
    while excess(lo) <= 0.0:
        lo -= 1.0
    while excess(hi) > 0.0:
        hi += 1.0
    log_sigma = float(brentq(excess, lo, hi, xtol=1e-14, maxiter=500))
    while excess(log_sigma) > 0.0:
        log_sigma += 1e-12
    return math.exp(log_sigma)


@dataclass(frozen=True)
class ObjectivePerturbationMechanism:
    """One objective-perturbation release (module docstring) of a ``coordinates``-dimensional
    model trained on ``n`` rows with L2 strength ``lam``; ``sigma`` the noise of ``b``
    (on the lattice release's grid)."""

    name: str
    sigma: float
    n: int
    lam: float
    coordinates: int
    gradient_bound: float
    hessian_bound: float
    neighbours: str = DEFAULT_NEIGHBOURS
    target: Optional[Tuple[float, float]] = None

    def __post_init__(self) -> None:
        from .mechanisms import mechanism_info

        mechanism_info(self.name)
        if check_neighbours(self.neighbours) != "replace_one":
            raise ValueError("objective perturbation is analysed for replace-one neighbours only (a neighbour keeps "
                             "n and changes one row); use neighbours='replace_one'")
        check_real(self.sigma, "sigma", low=0.0, low_inclusive=False)
        check_positive_int(self.n, "n")
        check_real(self.lam, "lam", low=0.0, low_inclusive=False)
        check_positive_int(self.coordinates, "coordinates")
        _check_constants(self.gradient_bound, self.hessian_bound)

    @classmethod
    def calibrated(cls, name: str, *, epsilon: float, delta: float, n: int, lam: float, coordinates: int,
                   gradient_bound: float, hessian_bound: float,
                   neighbours: str = DEFAULT_NEIGHBOURS) -> "ObjectivePerturbationMechanism":
        """The mechanism whose release is (``epsilon``, ``delta``)-DP: checks (P2)
        (``lam`` at least :func:`minimum_lam`) and (P3), then the smallest sigma
        on the lattice grid whose noise term meets ``epsilon - eps_J``."""
        from .lattice import sigma_for_multiplier

        epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
        delta = _check_delta(delta)
        n = check_positive_int(n, "n")
        lam = check_real(lam, "lam", low=0.0, low_inclusive=False)
        zeta, lam_h = _check_constants(gradient_bound, hessian_bound)
        floor = minimum_lam(epsilon, n, lam_h)
        if lam < floor * (1.0 - 1e-12):
            raise ValueError(
                f"objective perturbation at epsilon={epsilon:g} on n={n} rows needs lam >= {floor:.6g} (Kifer, Smith "
                f"& Thakurta 2012, Thm 2: the regulariser must absorb one row's Hessian, lambda_H / (n lam) <= "
                f"e^(epsilon/2) - 1), got lam={lam:g} -- pass lam >= {floor:.6g} (or None for that minimum), or a "
                "larger epsilon")
        jacobian = jacobian_epsilon(n, lam, lam_h)
        sigma = _calibrated_sigma(epsilon - jacobian, delta, zeta)
        sigma = sigma_for_multiplier(sigma / zeta, zeta)  # onto the release's grid, never below
        mechanism = cls(name, sigma, n, lam, check_positive_int(coordinates, "coordinates"), zeta, lam_h,
                        neighbours, (epsilon, delta))
        spent = mechanism.privacy_spent().epsilon
        if spent is None or not spent <= epsilon:  # pragma: no cover - excluded by the calibration's rounding
            raise ValueError(f"objective perturbation calibration exceeded epsilon={epsilon:g}: {spent}")
        return mechanism

    @property
    def jacobian_epsilon(self) -> float:
        """``eps_J``, the Jacobian's share of epsilon."""
        return jacobian_epsilon(self.n, self.lam, self.hessian_bound)

    def noise(self, *, generator: Any = None) -> np.ndarray:
        """``b``: ``coordinates`` draws of the lattice Gaussian with this ``sigma``
        (``generator``: a :class:`vflsec.kernels.NoiseGenerator`; None: OS entropy)."""
        from ..kernels import add_gaussian_noise

        return np.asarray(add_gaussian_noise(np.zeros(self.coordinates), self.sigma, generator=generator))

    def privacy_spent(self, delta: Optional[float] = None, *,
                      caveat: Optional[str] = OBJECTIVE_PERTURBATION_CAVEAT) -> PrivacySpent:
        """The guarantee of one release at ``delta`` (default: the calibration's)."""
        if delta is None:
            if self.target is None:
                raise TypeError(f"mechanism {self.name!r} was not calibrated to a delta: pass delta")
            delta = self.target[1]
        epsilon = objective_perturbation_epsilon(delta, sigma=self.sigma, gradient_bound=self.gradient_bound,
                                                 jacobian=self.jacobian_epsilon)
        return PrivacySpent(epsilon, float(delta), 1, epsilon, ACCOUNTANT_NAME, self.neighbours, caveat)
