"""Differential-privacy calibration for vertical GLMs (HDP-VFL).

* :mod:`.gaussian` -- Gaussian mechanism sigma: classic (Dwork & Roth) and
  analytic (Balle & Wang 2018), and the exact delta curve.
* :mod:`.sensitivity` -- HDP-VFL Lemma 3 / Lemma 4 sensitivities and the
  row-norm bound they assume (``clip_row_norms``, ``check_row_norms``).
* :mod:`.losses` -- GLM losses, their theta-derivatives and constants.
* :mod:`.accounting` -- composed (epsilon, delta) over a run with the
  ``dp-accounting`` library (imported on use: ``vflsec.dp.accounting``).
"""
from .gaussian import GAUSSIAN_METHODS, PrivacyWarning, gaussian_delta, gaussian_sigma
from .losses import LOSSES, LossConstants, loss_constants, loss_gradient, loss_value
from .sensitivity import (
    ROW_NORM_TOLERANCE,
    HDPSensitivities,
    check_row_norms,
    clip_row_norms,
    hdp_max_lr,
    hdp_sensitivities,
)

__all__ = [
    "GAUSSIAN_METHODS",
    "HDPSensitivities",
    "LOSSES",
    "LossConstants",
    "PrivacyWarning",
    "ROW_NORM_TOLERANCE",
    "check_row_norms",
    "clip_row_norms",
    "gaussian_delta",
    "gaussian_sigma",
    "hdp_max_lr",
    "hdp_sensitivities",
    "loss_constants",
    "loss_gradient",
    "loss_value",
]
