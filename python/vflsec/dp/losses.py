"""GLM losses of HDP-VFL: values, derivatives in theta, and their constants.

Every loss is written ``l(theta, y)`` with ``theta = x w`` the natural
parameter (in vertical FL, the sum of every party's intermediate result).
``h(theta, y) = dl/dtheta`` is what the active party sends back (IR_A).

Constants (HDP-VFL, Sec. 4.2 and App. D) used by the sensitivity bounds:

``L``           Lipschitz constant of the loss in each party's weights; with
                ``||x^P|| <= 1`` this is a bound on ``|h|``.
``beta_theta``  smoothness in theta: ``|h(theta) - h(theta')| <= beta_theta |theta - theta'|``.
``beta_y``      Lipschitz constant of ``h`` in ``y``.
``k_y``         bound on ``|y|``.

For logistic, least squares and the L2-loss SVM the table below holds the
paper's values; the least-squares ones assume standardized targets and hold
"with high probability" (paper, App. D.1.1), not surely. Poisson constants
are derived here (see :func:`loss_constants`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from scipy.special import expit

from .._arrays import as_float_array, check_positive_int, check_real

__all__ = ["LOSSES", "LossConstants", "loss_constants", "loss_gradient", "loss_value"]

LOSSES = ("logistic", "least_squares", "svm", "poisson")


@dataclass(frozen=True)
class LossConstants:
    """Constants of a GLM loss entering HDP-VFL's Lemma 3 and Lemma 4.

    ``theta_bound``: when not None, the bounds hold only if the active party
    clips ``theta`` to ``[-theta_bound, theta_bound]`` before computing ``h``
    (pass it to :func:`loss_gradient`). ``y_max``: when not None, labels must
    lie in ``[0, y_max]``.
    """

    name: str
    L: float
    beta_theta: float
    beta_y: float
    k_y: float
    theta_bound: Optional[float] = None
    y_max: Optional[float] = None


_FIXED = {
    # name: (L, beta_theta, beta_y, k_y)  -- HDP-VFL Sec. 4.2 and App. D.1
    "logistic": (1.0, 0.25, 1.0, 1.0),
    "least_squares": (6.0, 2.0, 2.0, 3.0),
    "svm": (2.0, 2.0, 2.0, 1.0),
}


def _check_loss_name(loss: Any) -> str:
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a string, got {type(loss).__name__}")
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid losses: {', '.join(LOSSES)}")
    return loss


def loss_constants(loss: str, **params: Any) -> LossConstants:
    """Constants ``(L, beta_theta, beta_y, k_y)`` of a loss.

    ``"logistic"``, ``"least_squares"`` and ``"svm"`` take no parameters.

    ``"poisson"`` (canonical log link, ``b(theta) = exp(theta)``, ``a(phi) = 1``)
    requires ``k`` (the weight-norm bound of every party) and ``y_max`` (labels
    are counts in ``[0, y_max]``), and takes ``n_parties`` (default 2).

    Derivation for Poisson. ``theta_i = sum_P x_i^P w^P`` sums the IRs of all
    parties, each bounded by ``||x_i^P|| ||w^P|| <= k``, so the noise-free
    ``|theta| <= n_parties * k =: Theta``. The active party sees the *noisy*
    passive IRs, so ``theta`` is unbounded unless it is clipped: the protocol
    must clip ``theta`` to ``[-Theta, Theta]`` (``theta_bound``) before
    computing ``h``. Clipping is monotone and 1-Lipschitz, so ``h`` stays the
    derivative of a convex, smooth loss. Then, with ``h = exp(theta) - y``:

    * ``beta_theta = sup b'' = exp(Theta)``;
    * ``beta_y = 1 / a(phi) = 1``; ``k_y = y_max``;
    * ``L = sup |h| = max(exp(Theta), y_max)`` (both terms are non-negative).
      The paper's App. D.1.3 gives ``L = k_y / a(phi)``, which omits the
      ``b'(theta)`` term and understates ``|h|`` whenever ``exp(Theta) > y_max``;
      the bound used here is the sound one.
    """
    loss = _check_loss_name(loss)
    if loss in _FIXED:
        if params:
            raise TypeError(f"loss {loss!r} takes no parameters, got {sorted(params)}")
        return LossConstants(loss, *_FIXED[loss])
    allowed = {"k", "y_max", "n_parties"}
    unexpected = set(params) - allowed
    if unexpected:
        raise TypeError(f"unexpected parameter(s) {sorted(unexpected)} for loss 'poisson'; "
                        f"accepted: {sorted(allowed)}")
    for required in ("k", "y_max"):
        if params.get(required) is None:
            raise ValueError(f"loss 'poisson' requires the parameter {required!r}")
    k = check_real(params["k"], "k", low=0.0, low_inclusive=False)
    y_max = check_real(params["y_max"], "y_max", low=0.0, low_inclusive=False)
    n_parties = check_positive_int(params.get("n_parties", 2), "n_parties")
    theta_bound = n_parties * k
    if theta_bound > 700.0:
        raise ValueError(f"n_parties * k = {theta_bound} makes exp(theta) overflow; "
                         "the Poisson constants are not finite")
    b2 = math.exp(theta_bound)
    return LossConstants("poisson", max(b2, y_max), b2, 1.0, y_max,
                         theta_bound=theta_bound, y_max=y_max)


def _prepare(loss: Any, theta: Any, y: Any, theta_bound: Optional[float]):
    loss = _check_loss_name(loss)
    theta_arr, wrap = as_float_array(theta, "theta")
    y_arr, _ = as_float_array(y, "y", dtype=theta_arr.dtype)
    if y_arr.shape != theta_arr.shape:
        raise ValueError(f"y has shape {y_arr.shape} but theta has shape {theta_arr.shape}")
    if loss in ("logistic", "svm") and not np.all(np.abs(y_arr) == 1):
        raise ValueError(f"loss {loss!r} needs labels y in {{-1, +1}} "
                         "(map 0/1 labels with 2*y - 1)")
    if loss == "poisson" and np.any(y_arr < 0):
        raise ValueError("loss 'poisson' needs non-negative count labels y")
    if theta_bound is not None:
        theta_bound = check_real(theta_bound, "theta_bound", low=0.0, low_inclusive=False)
        theta_arr = np.clip(theta_arr, -theta_bound, theta_bound)
    return loss, theta_arr, y_arr, wrap


def loss_gradient(loss: str, theta: Any, y: Any, *, theta_bound: Optional[float] = None) -> Any:
    """``h(theta, y) = dl/dtheta`` elementwise (the active party's IR).

    logistic (y in {-1,+1}): ``-y / (1 + exp(y theta))``;
    least_squares: ``-2 (y - theta)``; svm (L2 loss, y in {-1,+1}):
    ``-2 y max(0, 1 - y theta)``; poisson: ``exp(theta) - y``.
    ``theta_bound`` clips theta first (required for Poisson's privacy
    constants; see :func:`loss_constants`). Returns theta's type and dtype.
    """
    loss, theta, y, wrap = _prepare(loss, theta, y, theta_bound)
    if loss == "logistic":
        # -y / (1 + e^{y theta}) = -y * sigmoid(-y theta); expit never overflows.
        out = -y * expit(-y * theta)
    elif loss == "least_squares":
        out = -2.0 * (y - theta)
    elif loss == "svm":
        out = -2.0 * y * np.maximum(0.0, 1.0 - y * theta)
    else:
        out = np.exp(theta) - y
    return wrap(np.ascontiguousarray(out, dtype=theta.dtype))


def loss_value(loss: str, theta: Any, y: Any, *, theta_bound: Optional[float] = None) -> Any:
    """Elementwise loss ``l(theta, y)``.

    logistic: ``log(1 + exp(-y theta))``; least_squares: ``(y - theta)^2``;
    svm: ``max(0, 1 - y theta)^2``; poisson (negative log-likelihood without
    the ``log y!`` term, which does not depend on theta): ``exp(theta) - y theta``.
    """
    loss, theta, y, wrap = _prepare(loss, theta, y, theta_bound)
    if loss == "logistic":
        out = np.logaddexp(0.0, -y * theta)
    elif loss == "least_squares":
        out = (y - theta) ** 2
    elif loss == "svm":
        out = np.maximum(0.0, 1.0 - y * theta) ** 2
    else:
        out = np.exp(theta) - y * theta
    return wrap(np.ascontiguousarray(out, dtype=theta.dtype))
