"""Differential-privacy calibration for vertical GLMs (HDP-VFL).

* :mod:`.gaussian` -- Gaussian mechanism sigma: classic (Dwork & Roth) and
  analytic (Balle & Wang 2018), and the exact delta curve.
* :mod:`.sensitivity` -- HDP-VFL Lemma 3 / Lemma 4 sensitivities and the
  row-norm bound they assume (``clip_row_norms``, ``check_row_norms``).
* :mod:`.losses` -- GLM losses, their theta-derivatives and constants.
* :mod:`.mechanisms` -- the one home of every DP release: the catalogue of
  mechanisms (``MECHANISMS``), :class:`GaussianMechanism` and
  :class:`SubsampledGaussianMechanism` (sensitivity, neighbour relation,
  calibration, lattice release, reported guarantee).
* :mod:`.randomized_response` -- binary randomized response with a prior
  (RRWithPrior, Ghazi et al. 2021): pure epsilon label-DP.
* :mod:`.objective_perturbation` -- objective perturbation for L2-regularised
  GLMs (Kifer, Smith & Thakurta 2012, replace-one): minimum regulariser,
  calibration and guarantee.
* :mod:`.accountant` -- PLD and RDP accountants with an explicit neighbour
  relation (``replace_one``, the VFL default, or ``add_remove``), history,
  ``state_dict`` for checkpoints.
* :mod:`.delta_rule` -- the default delta ``min(1e-5, 1/(10 n))`` and the
  warning for a delta of at least ``1/n``.
* :mod:`.accounting` -- composed (epsilon, delta) over a run with the
  ``dp-accounting`` library (imported on use).
"""
from . import selection as selection  # private selection's accountant (Papernot & Steinke)
from .accountant import (
    DEFAULT_NEIGHBOURS,
    NEIGHBOUR_RELATIONS,
    PLDAccountant,
    PrivacyAccountant,
    PrivacySpent,
    RDPAccountant,
    make_accountant,
)
from .delta_rule import check_delta_for_rows, default_delta
from .gaussian import GAUSSIAN_METHODS, PrivacyWarning, gaussian_delta, gaussian_sigma
from .losses import LOSSES, LossConstants, loss_constants, loss_gradient, loss_value
from .mechanisms import MECHANISMS, GaussianMechanism, GaussianPart, SubsampledGaussianMechanism
from .randomized_response import RandomizedResponseMechanism
from .sensitivity import (
    ROW_NORM_TOLERANCE,
    HDPSensitivities,
    check_row_norms,
    clip_row_norms,
    hdp_max_lr,
    hdp_sensitivities,
)

__all__ = [
    "DEFAULT_NEIGHBOURS",
    "MECHANISMS",
    "NEIGHBOUR_RELATIONS",
    "GaussianMechanism",
    "GaussianPart",
    "PLDAccountant",
    "PrivacyAccountant",
    "PrivacySpent",
    "RDPAccountant",
    "RandomizedResponseMechanism",
    "SubsampledGaussianMechanism",
    "make_accountant",
    "GAUSSIAN_METHODS",
    "HDPSensitivities",
    "LOSSES",
    "LossConstants",
    "PrivacyWarning",
    "ROW_NORM_TOLERANCE",
    "check_delta_for_rows",
    "check_row_norms",
    "clip_row_norms",
    "default_delta",
    "gaussian_delta",
    "gaussian_sigma",
    "hdp_max_lr",
    "hdp_sensitivities",
    "loss_constants",
    "loss_gradient",
    "loss_value",
]
