"""L2 sensitivities of HDP-VFL's intermediate-result sequences (Lemma 3 and 4).

Each bound covers the *whole* training sequence of IRs a party releases
(``T = epochs * batches_per_epoch`` steps of ``batch_size`` values), so one
Gaussian mechanism with that sensitivity gives one (epsilon, delta) for all
of training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Union

from .._arrays import check_positive_int, check_real
from .losses import LossConstants, loss_constants

__all__ = ["HDPSensitivities", "hdp_sensitivities"]


@dataclass(frozen=True)
class HDPSensitivities:
    """``active``: Lemma 4 (active party's IR_A sequence);
    ``passive``: Lemma 3 (a passive party's IR_B sequence)."""

    active: float
    passive: float
    constants: LossConstants
    lr: float
    epochs: int
    steps: int
    batch_size: int
    k: float


def _passive_sensitivity(L: float, lr: float, epochs: int, steps: int, batch_size: int, k: float) -> float:
    """Lemma 3: sqrt(4 L^2 e^2 T eta^2 / b + 8 k L e^2 eta / b + 4 k^2 e)."""
    e, T, b, eta = epochs, steps, batch_size, lr
    return math.sqrt(4 * L**2 * e**2 * T * eta**2 / b + 8 * k * L * e**2 * eta / b + 4 * k**2 * e)


def _active_sensitivity(c: LossConstants, lr: float, epochs: int, steps: int, batch_size: int, k: float) -> float:
    """Lemma 4: sqrt(4 bt^2 L^2 e^2 T eta^2 / b + 8 (bt k + by ky) bt L e^2 eta / b
    + 4 (bt k + by ky)^2 e)."""
    e, T, b, eta = epochs, steps, batch_size, lr
    bt, L = c.beta_theta, c.L
    jump = bt * k + c.beta_y * c.k_y
    return math.sqrt(4 * bt**2 * L**2 * e**2 * T * eta**2 / b
                     + 8 * jump * bt * L * e**2 * eta / b
                     + 4 * jump**2 * e)


def hdp_sensitivities(
    *,
    loss: Union[str, LossConstants],
    lr: float,
    epochs: int,
    steps: int,
    batch_size: int,
    k: float,
    y_max: Optional[float] = None,
    n_parties: int = 2,
) -> HDPSensitivities:
    """Sensitivities of the active (Lemma 4) and passive (Lemma 3) IR sequences.

    Parameters
    ----------
    loss : str or LossConstants
        ``"logistic"``, ``"least_squares"``, ``"svm"``, ``"poisson"``, or
        precomputed constants from :func:`loss_constants`.
    lr : learning rate eta > 0.
    epochs : e >= 1.
    steps : T, total number of steps (``epochs * batches_per_epoch``); must be
        a positive multiple of ``epochs``.
    batch_size : b >= 1.
    k : weight-norm clipping bound > 0 (every party's ``||w^P|| <= k``).
    y_max, n_parties : Poisson only (see :func:`loss_constants`); ``k`` is
        reused as the Poisson weight bound.

    The proofs (Lemma 2, after Hardt et al. 2016) need a non-expansive
    gradient step, ``lr <= 2 / beta_theta`` (``beta_theta`` bounds the
    smoothness in each party's weights since ``||x^P|| <= 1``); a larger
    ``lr`` is refused because the bounds would not hold. With an L2 penalty
    ``lam`` the exact condition is ``lr <= 2 / (beta_theta + lam)``; callers
    using one must check that themselves.
    """
    lr = check_real(lr, "lr", low=0.0, low_inclusive=False)
    epochs = check_positive_int(epochs, "epochs")
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    k = check_real(k, "k", low=0.0, low_inclusive=False)
    if steps % epochs != 0:
        raise ValueError(f"steps (T = epochs * batches per epoch) must be a multiple of "
                         f"epochs={epochs}, got steps={steps}")
    if isinstance(loss, LossConstants):
        if y_max is not None:
            raise ValueError("y_max is only used with a loss name, not with LossConstants")
        constants = loss
    elif isinstance(loss, str) and loss == "poisson":
        constants = loss_constants("poisson", k=k, y_max=y_max, n_parties=n_parties)
    else:
        if y_max is not None:
            raise ValueError(f"y_max applies to the 'poisson' loss only, got loss={loss!r}")
        constants = loss_constants(loss)
    if lr > 2.0 / constants.beta_theta:
        raise ValueError(
            f"lr={lr} exceeds 2 / beta_theta = {2.0 / constants.beta_theta:g} for loss "
            f"{constants.name!r}; the HDP-VFL sensitivity bounds assume a non-expansive "
            "gradient step and do not hold")
    return HDPSensitivities(
        active=_active_sensitivity(constants, lr, epochs, steps, batch_size, k),
        passive=_passive_sensitivity(constants.L, lr, epochs, steps, batch_size, k),
        constants=constants, lr=lr, epochs=epochs, steps=steps, batch_size=batch_size, k=k,
    )
