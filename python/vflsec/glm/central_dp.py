"""Central-DP logistic regression: the ceiling a vertical DP protocol is measured against.

:class:`CentralDPLogisticRegression` trains one logistic regression on the
*joined* features (every party's columns in one place, as a trusted curator
would hold them) with a standard (epsilon, delta)-DP algorithm, under the
same neighbour relation as the vertical DP rows (replace one row: the rows
are fixed by PSI, a neighbour changes one row's values). No VFL protocol
with the same guarantee can be expected to beat it; the gap between it and
non-private training is what differential privacy itself costs.

Rows. Every row is projected onto the unit ball by the estimator itself,
``x <- x / max(1, ||x|| / r)``, a per-row, data-independent map (applied
again at prediction; :class:`vflsec.glm.model.GLMDesign` with the joined
features as one block). The intercept is a constant column ``c =
intercept_scaling`` appended after projecting the features onto radius ``r =
sqrt(1 - c^2)``, so it lies inside the bound ``||x|| <= 1`` every method
relies on; its weight is an ordinary, regularised coordinate (``intercept_ =
c w_c``). The bound is checked before any release (:data:`ROW_BOUND`: 1 up
to the projection's rounding).

Methods (each release is a mechanism of :data:`vflsec.dp.MECHANISMS`):

* ``"dp_sgd"`` (Abadi et al. 2016): per step, each row is sampled
  independently with probability ``q`` (Poisson), its gradient
  ``phi'(theta . z) z`` (``z = y x``, ``y = +-1``) clipped to norm ``C``, the
  sum released by :class:`vflsec.dp.SubsampledGaussianMechanism`
  ("central_dp_sgd": noise ``N(0, (z_mult C)^2 I)``, a replaced row moves a
  sampled sum by up to ``2C``), divided by the expected batch ``q n``, plus
  ``lam theta``; plain SGD or heavy-ball momentum. The multiplier is the
  smallest whose ``ceil(epochs / q)`` steps are (epsilon, delta)-DP by PLD
  accounting of every step (dp-accounting). The sampling and the noise are
  secret (both from the noise generator).
* ``"output_perturbation"`` (Chaudhuri, Monteleoni & Sarwate, JMLR 2011,
  Thm 6 / Cor. 8, with Gaussian noise): the exact minimiser of ``J(theta) =
  mean_i phi(theta . z_i) + (lam/2)||theta||^2``, whose L2 sensitivity under
  replace-one is ``2 zeta / (n lam)`` when ``|phi'| <= 1`` and ``||z|| <=
  zeta`` (strong convexity ``lam``; the factor 2: the changed row's gradient
  can flip). The solver stops at ``||grad J|| <= tau = 1e-6 zeta / n``, and
  ``||theta_hat - theta*|| <= tau / lam``, so the released sensitivity is
  ``2 zeta (1 + 1e-6) / (n lam)``, data-independent; then
  :class:`vflsec.dp.GaussianMechanism` ("central_output_perturbation").
* ``"objective_perturbation"`` (Kifer, Smith & Thakurta, COLT 2012, Thm 2,
  the (epsilon, delta) version; Chaudhuri et al. 2011, Alg. 2, the pure one):
  the minimiser of ``J(theta) + b . theta / n``, ``b`` Gaussian, with ``lam``
  at least the theorem's minimum ``lambda_H / (n (e^{eps/2} - 1))``
  (``lambda_H = 1/4``: the logistic loss' curvature on unit rows); every
  precondition, the replace-one analysis and the (epsilon, delta) split
  between the Jacobian and the noise are in
  :mod:`vflsec.dp.objective_perturbation`
  ("central_objective_perturbation"). Its guarantee carries a caveat: the
  proof is for the exact minimiser and a continuous ``b``.

Both perturbation methods solve the strongly convex problem with scipy's
L-BFGS, then Newton steps down to the tolerance ``tau`` (refused if not met).

scikit-learn: a classifier (``ClassifierMixin``); ``X`` may be a DataFrame
(``feature_names_in_``) or a list of per-party blocks, joined; ``fit``
refuses ``sample_weight`` (:mod:`vflsec.glm.checks`); ``save(path)`` /
``load(path)`` keep a fitted model as JSON (:mod:`vflsec.glm.persistence`).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Sequence, Tuple

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from .._arrays import check_positive_int, check_real
from ..dp.accountant import _check_delta, check_neighbours
from ..dp.sensitivity import ROW_NORM_TOLERANCE
from .checks import refuse_sample_weight, resolve_delta, warn_single_class
from .model import DEFAULT_INTERCEPT_SCALING, GLMDesign, LabelEncoding
from .party_input import join_blocks, read_table_for
from .persistence import load_model, save_model

__all__ = [
    "GRADIENT_TOLERANCE",
    "METHODS",
    "ROW_BOUND",
    "CentralDPLogisticRegression",
    "clipped_gradient_sum",
    "dp_sgd_mechanism",
    "erm_gradient",
    "erm_hessian",
    "objective_perturbation_mechanism",
    "output_perturbation_mechanism",
    "release_dp_sgd",
    "release_objective_perturbation",
    "release_output_perturbation",
    "solve_erm",
]

METHODS = ("dp_sgd", "objective_perturbation", "output_perturbation")
ROW_BOUND = 1.0 + ROW_NORM_TOLERANCE
"""Largest row norm a release accepts (the projection's rounding included): the ``zeta`` of the bounds."""
GRADIENT_BOUND = ROW_BOUND  # |phi'| <= 1 for the logistic loss
HESSIAN_BOUND = ROW_BOUND ** 2 / 4.0  # phi'' <= 1/4
GRADIENT_TOLERANCE = 1e-6
"""The solver stops at ``||grad J|| <= GRADIENT_TOLERANCE * zeta / n`` (relative to one row's share)."""
OUTPUT_LAM_SCALE = 50.0
"""Output perturbation's ``lam`` when not given is ``OUTPUT_LAM_SCALE / (n epsilon)`` (public
quantities): its noise on theta is ``2 z / (n lam)`` per coordinate with ``z`` about 4 to 5 over
epsilon at delta 1e-5, so this keeps it near 0.2 whatever ``n`` and ``epsilon``. Measured on Breast (455
rows) and a 25,000-row synthetic set it is within a few points of the best ``lam`` of a grid at
epsilon 0.1, 1 and 10; a tuned run should still select it."""
_NEWTON_STEPS = 50
_LBFGS_TOLERANCE = 1e-7


# -- the regularised logistic ERM ------------------------------------------------------------------
def _sigmoid(m: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(m)


def erm_gradient(theta: np.ndarray, Z: np.ndarray, lam: float, linear: Optional[np.ndarray] = None
                 ) -> Tuple[float, np.ndarray]:
    """``(J, grad J)`` at ``theta`` for ``J = mean_i phi(theta . z_i) + (lam/2)||theta||^2
    (+ linear . theta / n)``, ``phi(m) = log(1 + e^-m)``, rows ``z_i = y_i x_i``."""
    n = Z.shape[0]
    m = Z @ theta
    value = float(np.mean(np.logaddexp(0.0, -m))) + 0.5 * lam * float(theta @ theta)
    grad = -(Z.T @ _sigmoid(-m)) / n + lam * theta
    if linear is not None:
        value += float(linear @ theta) / n
        grad = grad + linear / n
    return value, grad


def erm_hessian(theta: np.ndarray, Z: np.ndarray, lam: float) -> np.ndarray:
    """``Hess J = (1/n) sum_i phi''(theta . z_i) z_i z_i^T + lam I`` (the linear term adds none)."""
    n, d = Z.shape
    m = Z @ theta
    curvature = _sigmoid(m) * _sigmoid(-m)
    return (Z.T * curvature) @ Z / n + lam * np.eye(d)


def solve_erm(Z: np.ndarray, lam: float, linear: Optional[np.ndarray] = None) -> np.ndarray:
    """The minimiser of :func:`erm_gradient`'s ``J`` to ``||grad J|| <= GRADIENT_TOLERANCE
    * ROW_BOUND / n``: scipy L-BFGS, then Newton steps (``J`` is ``lam``-strongly
    convex, so ``||theta - theta*|| <= ||grad J|| / lam``). RuntimeError if the
    tolerance is not reached."""
    from scipy.optimize import minimize

    n, d = Z.shape
    tolerance = GRADIENT_TOLERANCE * ROW_BOUND / n
    # L-BFGS to where Newton converges quadratically (a coarser gradient), Newton for the last digits.
    result = minimize(erm_gradient, np.zeros(d), args=(Z, lam, linear), jac=True, method="L-BFGS-B",
                      options={"maxiter": 10_000, "gtol": max(tolerance, _LBFGS_TOLERANCE), "ftol": 0.0})
    theta = np.asarray(result.x, dtype=np.float64)
    for _ in range(_NEWTON_STEPS):
        value, grad = erm_gradient(theta, Z, lam, linear)
        grad_norm = float(np.linalg.norm(grad))
        if grad_norm <= tolerance:
            return theta
        step = np.linalg.solve(erm_hessian(theta, Z, lam), grad)
        t = 1.0  # backtracking: a full Newton step is taken near the minimiser
        while t > 1e-10:
            trial_value, trial_grad = erm_gradient(theta - t * step, Z, lam, linear)
            # Near the minimiser J's decrease is below its rounding: the gradient norm decides there.
            if trial_value < value or float(np.linalg.norm(trial_grad)) < grad_norm:
                break
            t *= 0.5
        theta = theta - t * step
    norm = float(np.linalg.norm(erm_gradient(theta, Z, lam, linear)[1]))
    if norm <= tolerance:
        return theta
    raise RuntimeError(f"the regularised logistic regression did not converge to gradient norm {tolerance:.3g} "
                       f"(reached {norm:.3g}); the sensitivity bound needs the minimiser -- increase lam")


# -- the three releases (the estimator's fit and the audit run these) --------------------------------
def clipped_gradient_sum(Z: np.ndarray, theta: np.ndarray, clip: float) -> np.ndarray:
    """``sum_i clip_C(phi'(theta . z_i) z_i)`` over the rows ``Z``: each row's logistic-loss
    gradient scaled to norm at most ``clip`` (the sum a DP-SGD step releases)."""
    m = Z @ theta
    slope = -_sigmoid(-m)  # phi'(m)
    norms = np.abs(slope) * np.sqrt(np.einsum("ij,ij->i", Z, Z))
    scale = np.minimum(1.0, clip / np.maximum(norms, 1e-300))
    return Z.T @ (slope * scale)


def dp_sgd_mechanism(*, epsilon: float, delta: float, n: int, sampling_rate: float, epochs: int,
                     coordinates: int, neighbours: str = "replace_one") -> Any:
    """The "central_dp_sgd" mechanism: ``ceil(epochs / q)`` steps at Poisson rate ``q``
    calibrated (PLD) to (``epsilon``, ``delta``) under ``neighbours``."""
    from ..dp.mechanisms import SubsampledGaussianMechanism

    steps = max(1, math.ceil(epochs / sampling_rate - 1e-9))  # 10 epochs at q = 0.1 are 100 steps, not 101
    return SubsampledGaussianMechanism.calibrated("central_dp_sgd", epsilon=epsilon, delta=delta,
                                                  sampling_rate=sampling_rate, steps=steps,
                                                  coordinates=coordinates, neighbours=neighbours)


def release_dp_sgd(Z: np.ndarray, mechanism: Any, *, clip: float, lr: float, momentum: float, lam: float,
                   generator: Any) -> np.ndarray:
    """DP-SGD on the signed rows ``Z`` (module docstring): ``mechanism.steps`` steps, each on
    a Poisson sample drawn from ``generator`` (secret, like the noise); the last iterate."""
    n, d = Z.shape
    q = mechanism.sampling_rate
    theta, velocity = np.zeros(d), np.zeros(d)
    for _ in range(mechanism.steps):
        sampled = np.flatnonzero(generator.random(n) < q) if q < 1.0 else np.arange(n)
        total = clipped_gradient_sum(Z[sampled], theta, clip)
        released = np.asarray(mechanism.release(total, clip=clip, generator=generator), dtype=np.float64)
        velocity = momentum * velocity + released / (q * n) + lam * theta
        theta = theta - lr * velocity
    return theta


def output_perturbation_mechanism(*, epsilon: float, delta: float, n: int, lam: float, coordinates: int) -> Any:
    """The "central_output_perturbation" mechanism: L2 sensitivity ``2 zeta (1 + tau') / (n lam)``."""
    from ..dp.mechanisms import GaussianMechanism

    sensitivity = 2.0 * GRADIENT_BOUND * (1.0 + GRADIENT_TOLERANCE) / (n * lam)
    return GaussianMechanism.calibrated("central_output_perturbation", epsilon=epsilon, delta=delta,
                                        sensitivity=sensitivity, coordinates=coordinates)


def release_output_perturbation(Z: np.ndarray, lam: float, mechanism: Any, *, generator: Any) -> np.ndarray:
    """The regularised minimiser on ``Z`` through ``mechanism``'s lattice Gaussian release."""
    return np.asarray(mechanism.release(solve_erm(Z, lam), generator=generator), dtype=np.float64)


def objective_perturbation_mechanism(*, epsilon: float, delta: float, n: int, lam: float, coordinates: int) -> Any:
    """The "central_objective_perturbation" mechanism (refuses ``lam`` below the theorem's minimum)."""
    from ..dp.objective_perturbation import ObjectivePerturbationMechanism

    return ObjectivePerturbationMechanism.calibrated(
        "central_objective_perturbation", epsilon=epsilon, delta=delta, n=n, lam=lam, coordinates=coordinates,
        gradient_bound=GRADIENT_BOUND, hessian_bound=HESSIAN_BOUND)


def release_objective_perturbation(Z: np.ndarray, lam: float, mechanism: Any, *, generator: Any) -> np.ndarray:
    """The minimiser of ``J + b . theta / n`` with ``b`` drawn by ``mechanism``."""
    return solve_erm(Z, lam, linear=mechanism.noise(generator=generator))


# -- the estimator ---------------------------------------------------------------------------------
def _noise_generator(noise_seed: Any):
    from ..kernels import NoiseGenerator

    if noise_seed is None:
        return NoiseGenerator()  # OS-entropy CSPRNG
    if isinstance(noise_seed, bool) or not isinstance(noise_seed, numbers.Integral) or noise_seed < 0:
        raise TypeError(f"noise_seed must be None or a non-negative int, got {noise_seed!r}")
    return NoiseGenerator(f"vflsec.central_dp/{int(noise_seed)}".encode())


class CentralDPLogisticRegression(ClassifierMixin, BaseEstimator):
    """(epsilon, delta)-DP logistic regression on the joined features: the central-DP
    ceiling of the vertical DP protocols (module docstring).

    Parameters
    ----------
    method : "dp_sgd" (default), "objective_perturbation" or "output_perturbation".
    epsilon, delta : the guarantee of the whole fit (one release of the model:
        for DP-SGD every step together), keyword-only; ``epsilon > 0``,
        ``0 < delta < 1``. ``delta`` None (the default) is
        ``vflsec.dp.default_delta(n) = min(1e-5, 1/(10 n))`` for ``n``
        training rows (``delta_``); an explicit delta of at least ``1/n`` is
        used with a ``vflsec.dp.PrivacyWarning``.
    lam : strength of ``(lam/2)||theta||^2`` beside the mean loss (intercept
        weight included). None: dp_sgd 0; output_perturbation
        ``OUTPUT_LAM_SCALE / (n epsilon)`` (:data:`OUTPUT_LAM_SCALE`);
        objective_perturbation the theorem's minimum ``lambda_H / (n
        (e^{eps/2} - 1))`` (a smaller one is refused).
    clip, lr, epochs, batch_size, momentum : DP-SGD: the per-row gradient
        bound ``C``, the step size, the epochs (``ceil(epochs / q)`` steps),
        the expected batch (rows, int, or a fraction of the rows in (0, 1]:
        the Poisson rate ``q``) and the heavy-ball momentum (0: plain SGD).
        The defaults are :class:`~vflsec.glm.VerticalLogisticRegression`'s
        (lr 2.5, 10 epochs, batches of 1/16: 160 steps).
    neighbours : "replace_one" (default, as the vertical protocols) or
        "add_remove" (dp_sgd only: the relation of Opacus and most central-DP
        libraries).
    fit_intercept, intercept_scaling : the constant column ``c`` inside the row
        bound (module docstring).
    noise_seed : None (default): sampling and noise from the OS-entropy
        ChaCha20 generator; an int: a reproducible stream (experiments and
        tests only: whoever knows it knows the noise; never saved). There is
        no public randomness, hence no ``seed`` or ``random_state``.

    Attributes
    ----------
    coef_ : 1-D array, the weights of the joined features as given (columns in
        order; a list of party blocks is joined left to right).
    intercept_ : float, ``c * w_c`` (0.0 without an intercept).
    classes_ : the two labels (``classes_[1]`` is the positive class).
    n_features_in_ : number of joined feature columns.
    feature_names_in_ : their names, when ``X`` was a DataFrame (or blocks of
        DataFrames) with string column names; prediction then selects
        DataFrame columns by name.
    delta_ : the delta of the guarantee (``default_delta(n)`` when ``delta`` is None).
    lam_ : the L2 strength used.
    mechanism_ : the release's mechanism (``vflsec.dp`` object, its name in ``MECHANISMS``).
    privacy_spent_ : :class:`vflsec.dp.PrivacySpent` of the fit, never above ``epsilon``.
    steps_ : DP-SGD steps (1 for the perturbation methods).
    design_ : the row projection and intercept (:class:`vflsec.glm.model.GLMDesign`).

    A fitted model that predicts one class for every training row warns
    (``vflsec.dp.PrivacyWarning``): its noise has drowned the signal.
    """

    def __init__(self, method: str = "dp_sgd", *, epsilon: float = 1.0, delta: Optional[float] = None,
                 lam: Optional[float] = None, clip: float = 1.0, lr: float = 2.5, epochs: int = 10,
                 batch_size: Any = 1 / 16, momentum: float = 0.0, neighbours: str = "replace_one",
                 fit_intercept: bool = True, intercept_scaling: float = DEFAULT_INTERCEPT_SCALING,
                 noise_seed: Optional[int] = None):
        self.method = method
        self.epsilon = epsilon
        self.delta = delta
        self.lam = lam
        self.clip = clip
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.momentum = momentum
        self.neighbours = neighbours
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.noise_seed = noise_seed

    # -- input ---------------------------------------------------------------------------------
    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False)
        if self.delta is not None:
            _check_delta(self.delta)
        if check_neighbours(self.neighbours) != "replace_one" and self.method != "dp_sgd":
            raise ValueError(f"{self.method} is analysed for replace-one neighbours only (the vertical protocols' "
                             "relation); neighbours='add_remove' is for dp_sgd")
        if self.lam is not None:
            check_real(self.lam, "lam", low=0.0, low_inclusive=self.method == "dp_sgd")
        if self.method == "dp_sgd":
            check_real(self.clip, "clip", low=0.0, low_inclusive=False)
            check_real(self.lr, "lr", low=0.0, low_inclusive=False)
            check_positive_int(self.epochs, "epochs")
            check_real(self.momentum, "momentum", low=0.0, high=1.0, high_inclusive=False)

    def _sampling_rate(self, n: int) -> float:
        """Poisson rate ``q``: an int batch is expected rows (capped at ``n``), a float a fraction."""
        b = self.batch_size
        if isinstance(b, numbers.Real) and not isinstance(b, (bool, numbers.Integral)):
            return check_real(b, "batch_size", low=0.0, low_inclusive=False, high=1.0)
        return min(check_positive_int(b, "batch_size"), n) / n

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "CentralDPLogisticRegression":
        """Train on rows ``X`` (2-D array or DataFrame, or a list of per-party blocks, joined) and
        labels ``y`` (two classes). ``sample_weight`` must be None."""
        refuse_sample_weight(sample_weight, type(self).__name__)
        self._check_params()
        design = GLMDesign(loss="logistic", fit_intercept=self.fit_intercept,
                           intercept_scaling=self.intercept_scaling, row_norm="clip")
        features, names = join_blocks(X)
        labels = LabelEncoding.fit("logistic", y)
        signed = labels.encode(y)
        if signed.shape[0] != features.shape[0]:
            raise ValueError(f"y has {signed.shape[0]} entries, X has {features.shape[0]} rows")
        block = design.block(features, "active")
        widest = float(np.max(np.linalg.norm(block, axis=1), initial=0.0))
        if widest > ROW_BOUND:  # pragma: no cover - the projection guarantees it; every bound relies on it
            raise RuntimeError(f"a projected row has norm {widest!r} > {ROW_BOUND!r}: no bound of this model holds")
        Z = block * signed[:, None]
        n, d = Z.shape
        delta = resolve_delta(self.delta, n, warn=True)
        generator = _noise_generator(self.noise_seed)
        if self.method == "dp_sgd":
            lam = 0.0 if self.lam is None else float(self.lam)
            mechanism: Any = dp_sgd_mechanism(epsilon=self.epsilon, delta=delta, n=n,
                                              sampling_rate=self._sampling_rate(n), epochs=self.epochs,
                                              coordinates=d, neighbours=self.neighbours)
            theta = release_dp_sgd(Z, mechanism, clip=float(self.clip), lr=float(self.lr),
                                   momentum=float(self.momentum), lam=lam, generator=generator)
            steps = mechanism.steps
        elif self.method == "output_perturbation":
            lam = OUTPUT_LAM_SCALE / (n * float(self.epsilon)) if self.lam is None else float(self.lam)
            mechanism = output_perturbation_mechanism(epsilon=self.epsilon, delta=delta, n=n, lam=lam,
                                                      coordinates=d)
            theta = release_output_perturbation(Z, lam, mechanism, generator=generator)
            steps = 1
        else:
            from ..dp.objective_perturbation import minimum_lam

            lam = minimum_lam(self.epsilon, n, HESSIAN_BOUND) if self.lam is None else float(self.lam)
            mechanism = objective_perturbation_mechanism(epsilon=self.epsilon, delta=delta, n=n, lam=lam,
                                                         coordinates=d)
            theta = release_objective_perturbation(Z, lam, mechanism, generator=generator)
            steps = 1
        spent = mechanism.privacy_spent()
        if spent.epsilon is None or not spent.epsilon <= float(self.epsilon):  # pragma: no cover - calibration bug
            raise RuntimeError(f"the {self.method} calibration reports {spent}, above epsilon={self.epsilon}")
        coef, intercept = design.split_coef(theta, "active")
        self.coef_ = coef
        self.intercept_ = float(intercept) if intercept is not None else 0.0
        self.classes_ = labels.classes
        self.labels_ = labels
        self.design_ = design
        self.n_features_in_ = features.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.delta_ = delta
        self.lam_ = lam
        self.mechanism_ = mechanism
        self.privacy_spent_ = spent
        self.steps_ = steps
        warn_single_class(labels.predict(block @ theta), f"{type(self).__name__}({self.method!r})", self.epsilon)
        return self

    # -- prediction ----------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def decision_function(self, X: Any) -> np.ndarray:
        """``theta = x . w + intercept_`` on the rows as the fitted design projects them."""
        self._check_fitted()
        features = read_table_for(X, self.n_features_in_, feature_names=getattr(self, "feature_names_in_", None),
                                  who=type(self).__name__)
        return self.design_.decision_function([features], [self.coef_], self.intercept_)

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[P(classes_[0]), P(classes_[1])]`` per row."""
        p1 = _sigmoid(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the decision function is positive."""
        theta = self.decision_function(X)  # checks the model is fitted
        return self.labels_.predict(theta)

    def score(self, X: Any, y: Any, sample_weight: Optional[Sequence[float]] = None) -> float:
        """Accuracy (``sample_weight``: optional row weights, as scikit-learn's)."""
        from sklearn.metrics import accuracy_score

        return float(accuracy_score(np.asarray(y), self.predict(X), sample_weight=sample_weight))

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write the fitted model to ``path`` as JSON (0600, atomic; no pickle): the parameters,
        the weights, the design, the classes, ``privacy_spent_`` (:mod:`vflsec.glm.persistence`).
        Not saved: the noise seed (saved as None) and ``mechanism_``."""
        self._check_fitted()
        save_model(self, path)

    @classmethod
    def load(cls, path: Any) -> "CentralDPLogisticRegression":
        """A model written by :meth:`save`; it predicts exactly as the saved one (no ``mechanism_``)."""
        return load_model(cls, path)
