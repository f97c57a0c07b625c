"""L2 sensitivities of HDP-VFL's intermediate-result sequences (Lemma 3 and 4),
corrected for P coupled parties, and the learning-rate limit they need.

Each bound covers the *whole* training sequence of IRs a party releases
(``T = epochs * batches_per_epoch`` steps of ``batch_size`` values), so one
Gaussian mechanism with that sensitivity gives one (epsilon, delta) for all
of training.

Derivation (what a reviewer should check)
-----------------------------------------
Notation: P data parties (active + passives), each row split as
``x_i = (x_i^1, ..., x_i^P)`` with ``||x_i^p|| <= 1`` (enforced by the
protocol), so ``||x_i|| <= rho := sqrt(P)``; joint weights
``w = (w^1, ..., w^P)``; ``theta_i = x_i . w``; loss ``l(theta, y)`` convex in
theta, ``|h| <= L`` and ``0 <= h' <= beta_theta`` for ``h = dl/dtheta``;
per-party clip ``||w^p|| <= k``.

1. *The step is non-expansive in the joint weights.* Without noise one step
   of Algorithm 1 for all parties together is
   ``w <- Proj_K(Pen(w, g))`` with ``g = (1/b) sum_{j in s} h(x_j . w, y_j) x_j``,
   the gradient of ``F(w) = (1/b) sum_j l(x_j . w, y_j)``. Its Hessian is
   ``(1/b) sum_j h'(theta_j) x_j x_j^T``, whose largest eigenvalue is at most
   ``beta_theta * max_j ||x_j||^2 <= P * beta_theta`` (at most b rows in a
   batch, each ``||x_j||^2 <= P``, and this is attained: all rows equal with
   ``||x^p|| = 1`` and ``theta = 0``). A gradient step on a convex
   ``beta``-smooth function is non-expansive iff ``lr <= 2 / beta`` (Hardt,
   Recht & Singer 2016, Lemma 3.7). Hence, per penalty:

   * L2 (``w - lr (g + lam w)``, a gradient step on ``F + lam/2 |w|^2``):
     ``lr <= 2 / (P beta_theta + lam)``;
   * L1 / elastic net (a gradient step on F followed by a proximal map,
     which is non-expansive): ``lr <= 2 / (P beta_theta)``.

   ``Proj_K`` (per-party norm clip) is the projection onto a product of balls,
   a convex set, hence non-expansive. The paper states the condition per party
   (``lr <= 2 / (beta_theta + lam)``, 7.97 for the logistic loss), but the
   parties' steps are coupled through ``theta``: for two parties and
   ``lr`` in (3.99, 7.97] the joint step expands distances by up to
   ``|1 - lr * 2 beta_theta|`` per step (``tests/glm/test_hdp_bound.py`` builds
   such a pair of datasets; the IR distance then exceeds the paper's bound
   many times over).
2. *Weight divergence.* Neighbouring datasets differ in one row i (the
   active party's ``(x_i^A, y_i)``, or one passive party's ``x_i^B``). In a
   step whose batch holds row i, write the step as the shared-rows map
   (non-expansive by 1.) minus ``(lr / b)(grad l_i(w) - grad l'_i(w'))``,
   whose norm is at most ``(lr / b)(|h| ||x_i|| + |h'| ||x'_i||) <= 2 lr L rho / b``.
   Row i is in exactly one batch per epoch, so
   ``||w_t - w'_t|| <= D := 2 lr L rho e / b`` for every t. The paper's Lemma 2
   has ``rho = 1``: it bounds one party's weights as if the others were fixed,
   but the other parties' weights move too (they see the changed row's IRs),
   and the joint norm is what step 1 controls.
3. *Lemma 3 (passive party B).* Unchanged rows:
   ``|x_j^B . (w^B - w'^B)| <= ||w - w'|| <= D``; the changed row at its ``e``
   visits: ``<= D + 2k``. Summing squares over the ``T b`` released entries:
   ``Delta_B^2 <= T b D^2 + e (4 k D + 4 k^2)``
   ``= 4 L^2 rho^2 e^2 T lr^2 / b + 8 k L rho e^2 lr / b + 4 k^2 e``.
4. *Lemma 4 (active party A).* ``|h(theta) - h(theta')| <= beta_theta |x_j . (w - w')|
   <= beta_theta rho D`` for unchanged rows; the changed row adds
   ``J = 2 (beta_theta k + beta_y k_y)`` (its own features move theta by at
   most 2k, its label moves h by at most ``2 beta_y k_y``). Summing:
   ``Delta_A^2 <= T b (beta_theta rho D)^2 + e (2 beta_theta rho D J + J^2)``
   ``= 4 bt^2 rho^4 L^2 e^2 T lr^2 / b + 8 (bt k + by ky) bt rho^2 L e^2 lr / b
   + 4 (bt k + by ky)^2 e``.

With ``rho = 1`` (one party) these are the paper's Lemma 3 and 4.

5. *The released sequence is adaptive* (each party's later IRs depend on the
   noisy IRs it received), so the whole-sequence Gaussian mechanism is
   justified by adaptive composition of Gaussian mechanisms (Dong, Roth & Su
   2019, Thm. 3.2: composing mechanisms that are each ``mu_t``-GDP given the
   past is ``sqrt(sum mu_t^2)``-GDP), which needs each step's sensitivity
   *given the released past* to be bounded uniformly. Conditioned on the
   transcript, the other parties' states are identical in both worlds, and
   the releasing party's own recursion is covered by 1.-4. One more
   condition is needed for that: a passive party's gradient uses the
   *noisy* ``Sec[IR_A]``, which is unbounded; the protocol therefore clips
   every received ``Sec[IR_A]`` entry to ``[-L, L]`` (post-processing of a
   released value), so the changed row moves ``w^B`` by at most
   ``2 lr L / b`` per visit, within 2.
6. *|h| <= L must hold surely.* For the logistic loss it does; for the
   L2-loss SVM (``|h| <= 2 (1 + P k)``) and least squares it does not, so
   the active party clips ``h`` to ``[-L, L]``. A clipped derivative of a
   convex loss is the derivative of a Huberized convex loss with the same
   ``beta_theta``, so 1. still applies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from .._arrays import check_positive_int, check_real
from .losses import LossConstants, loss_constants

__all__ = [
    "HDPSensitivities",
    "PENALTIES",
    "ROW_NORM_TOLERANCE",
    "check_row_norms",
    "clip_row_norms",
    "hdp_max_lr",
    "hdp_sensitivities",
]

PENALTIES = ("l2", "l1", "elasticnet")

# Rows scaled to unit norm in floating point may exceed 1 by a few ulps.
ROW_NORM_TOLERANCE = 1e-9

# Float rounding in the projection could leave a norm at radius + 1 ulp.
_NORM_SAFETY = 1.0 + 8.0 * np.finfo(np.float64).eps


# Rows walked in chunks of about 1 MB of float64 (check_row_norms, and the callers of
# row_chunk): no temporary the size of the whole block, and few enough calls to cost nothing.
_CHUNK_BYTES = 1 << 20


def _row_norms(X: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def row_chunk(width: int) -> int:
    """Rows of ``width`` float64 columns in one chunk of about 1 MB (at least 1)."""
    return max(1, _CHUNK_BYTES // (8 * max(1, int(width))))


def clip_row_norms(X: np.ndarray, radius: float = 1.0, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Project every row onto the L2 ball of ``radius``: ``x / max(1, ||x|| / radius)``
    (the bound ``||x_i|| <= 1`` the sensitivities above assume, and the
    encrypted schemes' value range).

    ``out``: where the projected rows go, an array of ``X``'s shape: ``X``
    itself (in place), or a view such as the first columns of a wider block;
    None (the default) gives a new array. Each row's result is the same bit
    for bit wherever it is written (a row's norm depends on its values only)."""
    norms = _row_norms(X)
    if radius != 1.0:
        norms = norms * (_NORM_SAFETY / radius)
    return np.divide(X, np.maximum(1.0, norms)[:, None], out=out)


def check_row_norms(X: Any, *, radius: float = 1.0, what: str = "this protocol",
                    party: Optional[str] = None, reason: str = "",
                    remedy: str = "Scale rows first") -> None:
    """ValueError unless every row of ``X`` has L2 norm <= ``radius`` (up to
    :data:`ROW_NORM_TOLERANCE`). The message names ``what`` needs the bound,
    ``reason`` (appended after "for every row"), the offending ``party`` and
    the ``remedy``.

    ``X``: a 2-D array, or anything whose row slices ``X[a:b]`` are 2-D arrays
    and that has a ``shape`` (:class:`vflsec.glm.design_rows.DesignedRows`,
    whose rows are built per slice); the rows are read in chunks of about
    1 MB, so no temporary the size of ``X`` is made."""
    if not hasattr(X, "shape"):
        X = np.asarray(X, dtype=np.float64)
    n, width = X.shape
    step = row_chunk(width)
    # np.max of the chunks' maxima: a NaN norm propagates as it did through one max over all rows.
    maxima = [_row_norms(X[start:start + step]).max() for start in range(0, n, step)]
    worst = float(np.max(maxima)) if maxima else 0.0
    if worst > radius + ROW_NORM_TOLERANCE:
        where = f"party {party!r} has a row of norm" if party is not None else "a row has norm"
        raise ValueError(
            f"{what} needs ||x_i||_2 <= {radius:g} for every row{reason}; {where} "
            f"{worst:.6g}. {remedy} (e.g. VerticalLogisticRegression(row_norm='clip'))"
        )


@dataclass(frozen=True)
class HDPSensitivities:
    """``active``: Lemma 4 (active party's IR_A sequence);
    ``passive``: Lemma 3 (a passive party's IR_B sequence); both for
    ``n_parties`` coupled data parties (see the module docstring)."""

    active: float
    passive: float
    constants: LossConstants
    lr: float
    epochs: int
    steps: int
    batch_size: int
    k: float
    n_parties: int = 2
    max_lr: float = math.inf


def hdp_max_lr(constants: LossConstants, *, n_parties: int, penalty: str = "l2", lam: float = 0.0) -> float:
    """Largest learning rate for which one joint step of ``n_parties`` data
    parties is non-expansive: ``2 / (P beta_theta + lam)`` with the L2
    penalty, ``2 / (P beta_theta)`` with L1 / elastic net (module docstring,
    step 1)."""
    if not isinstance(constants, LossConstants):
        raise TypeError(f"constants must be LossConstants, got {type(constants).__name__}")
    n_parties = check_positive_int(n_parties, "n_parties", minimum=2)
    if penalty not in PENALTIES:
        raise ValueError(f"penalty must be one of {PENALTIES}, got {penalty!r}")
    lam = check_real(lam, "lam", low=0.0)
    curvature = n_parties * constants.beta_theta + (lam if penalty == "l2" else 0.0)
    return 2.0 / curvature


def _passive_sensitivity(L: float, lr: float, epochs: int, steps: int, batch_size: int, k: float,
                         rho: float) -> float:
    """Lemma 3 for P parties (rho = sqrt(P)):
    sqrt(4 L^2 rho^2 e^2 T eta^2 / b + 8 k L rho e^2 eta / b + 4 k^2 e)."""
    e, T, b, eta = epochs, steps, batch_size, lr
    Lr = L * rho
    return math.sqrt(4 * Lr**2 * e**2 * T * eta**2 / b + 8 * k * Lr * e**2 * eta / b + 4 * k**2 * e)


def _active_sensitivity(c: LossConstants, lr: float, epochs: int, steps: int, batch_size: int, k: float,
                        rho: float) -> float:
    """Lemma 4 for P parties (rho = sqrt(P)):
    sqrt(4 bt^2 rho^4 L^2 e^2 T eta^2 / b + 8 (bt k + by ky) bt rho^2 L e^2 eta / b
    + 4 (bt k + by ky)^2 e)."""
    e, T, b, eta = epochs, steps, batch_size, lr
    btr, L = c.beta_theta * rho * rho, c.L
    jump = c.beta_theta * k + c.beta_y * c.k_y
    return math.sqrt(4 * btr**2 * L**2 * e**2 * T * eta**2 / b
                     + 8 * jump * btr * L * e**2 * eta / b
                     + 4 * jump**2 * e)


def hdp_sensitivities(
    *,
    loss: Union[str, LossConstants],
    lr: float,
    epochs: int,
    steps: int,
    batch_size: int,
    k: float,
    n_parties: int,
    penalty: str = "l2",
    lam: float = 0.0,
    y_max: Optional[float] = None,
) -> HDPSensitivities:
    """Sensitivities of the active (Lemma 4) and passive (Lemma 3) IR sequences.

    Parameters
    ----------
    loss : str or LossConstants
        ``"logistic"``, ``"least_squares"``, ``"svm"``, ``"poisson"``, or
        precomputed constants from :func:`loss_constants`.
    lr : learning rate eta > 0; refused above :func:`hdp_max_lr` (the bounds
        assume a non-expansive joint step and do not hold beyond it).
    epochs : e >= 1.
    steps : T, total number of steps (``epochs * batches_per_epoch``); must be
        a positive multiple of ``epochs``.
    batch_size : b >= 1.
    k : weight-norm clipping bound > 0 (every party's ``||w^P|| <= k``).
    n_parties : number of data parties P >= 2 (active + passives); required
        because the coupled parties' joint step and joint row norm
        (``sqrt(P)``) enter both the lr limit and the bounds.
    penalty, lam : the update rule and its strength (the L2 penalty adds
        ``lam`` to the curvature in the lr limit).
    y_max : Poisson only (see :func:`loss_constants`); ``k`` is reused as the
        Poisson weight bound.
    """
    lr = check_real(lr, "lr", low=0.0, low_inclusive=False)
    epochs = check_positive_int(epochs, "epochs")
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    k = check_real(k, "k", low=0.0, low_inclusive=False)
    n_parties = check_positive_int(n_parties, "n_parties", minimum=2)
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
    max_lr = hdp_max_lr(constants, n_parties=n_parties, penalty=penalty, lam=lam)
    if lr > max_lr:
        lam_part = f" + lam={lam:g}" if penalty == "l2" and lam > 0 else ""
        raise ValueError(
            f"lr={lr} exceeds 2 / (n_parties * beta_theta{lam_part}) = {max_lr:.6g} for loss "
            f"{constants.name!r} with {n_parties} parties and penalty {penalty!r}: the joint "
            "gradient step of the coupled parties is then not non-expansive and the HDP-VFL "
            f"sensitivity bounds do not hold; use lr <= {max_lr:.6g}")
    rho = math.sqrt(n_parties)
    try:
        active = _active_sensitivity(constants, lr, epochs, steps, batch_size, k, rho)
        passive = _passive_sensitivity(constants.L, lr, epochs, steps, batch_size, k, rho)
    except OverflowError:
        active = passive = math.inf
    if not (math.isfinite(active) and math.isfinite(passive)):
        raise ValueError(f"the HDP sensitivities overflow float64 for k={k}, lr={lr}, epochs={epochs}, "
                         f"steps={steps}: out of range (use a smaller k or lr)")
    if not (active > 0.0 and passive > 0.0):
        # A zero sensitivity would calibrate zero noise: refuse instead.
        raise ValueError(f"the HDP sensitivities underflow to 0 in float64 for k={k}, lr={lr}: out of "
                         "range (use a larger k or lr)")
    return HDPSensitivities(
        active=active,
        passive=passive,
        constants=constants, lr=lr, epochs=epochs, steps=steps, batch_size=batch_size, k=k,
        n_parties=n_parties, max_lr=max_lr,
    )
