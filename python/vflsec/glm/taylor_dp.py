"""Protocol "taylor_dp": the flow of "paillier_dp" / "ckks_dp" with the encryption taken out.

Runs :mod:`.he_dp` exactly as the HE-DP protocols do (same batches, Taylor
residual, the key holder's noise from the same mechanism, the same residual
checks), but every "ciphertext" is the plaintext vector, as in "taylor". A
reference for the accuracy the HE-DP protocols reach at a fraction of their
cost: it is NOT private against the parties (each sees the residuals and the
partial scores in the clear; the key holder the gradients); its reported
guarantee covers the trained weights only. The decrypted values are
``X^T (theta + s)`` in float64; the sensitivity adds a generous bound on their
rounding error.

Bounds on receipt (:mod:`.he_dp`, "Bounds on receipt"; ``rho = 1 +
ROW_NORM_TOLERANCE``, each bound times ``1 + RECEIPT_SLACK``): the active party
takes a passive party's partial scores only with ``|u_P| <= rho k`` (the weight
clip's tolerance included), a passive party the residual only with ``|r_i| <=
R`` (:func:`vflsec.glm.he_dp.residual_bound`); the key holder answers a request
only with ``|x_j| <= 2b rho R`` plus the float64 rounding of :func:`noise_units`
(``x_j = sum_{i in S} X_ij r_i`` over ``|S| < 2b`` rows: its noise is
calibrated for no more), refusing another naming the requesting party; a data
party keeps its gradient only with ``|g_j| <= (alpha / b) (|S| rho R + rounding
+ (SUPPORT_SIGMAS + 1) lattice_sigma(sigma))``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..dp.sensitivity import ROW_NORM_TOLERANCE
from . import he_dp, he_vfl
from .taylor import PlaintextKeyHolder, PlaintextScheme

__all__ = ["PROTOCOL", "TaylorDPKeyHolder", "TaylorDPScheme", "noise_units"]

_UNIT_ROUNDOFF = 2.0 ** -53


def noise_units(job: Any) -> he_dp.DecryptedUnits:
    """``X^T r`` (scale 1), each value within ``3 gamma_M |S| R`` of the exact one:
    float64 sums of at most ``M`` terms (``gamma_M = M u / (1 - M u)``) over ``|S| < 2b``
    rows of features <= 1 and residuals <= R (:func:`vflsec.glm.he_dp.residual_bound`)."""
    widths = [he_vfl.agreed_width(job, party) for party in job.data_parties]
    terms = 2 * job.batch_size + max(widths) + len(widths) + 2
    gamma = terms * _UNIT_ROUNDOFF / (1.0 - terms * _UNIT_ROUNDOFF)
    rows = 2 * job.batch_size * (1.0 + ROW_NORM_TOLERANCE)
    return he_dp.DecryptedUnits(
        scale=1.0, value_error=3.0 * gamma * rows * he_dp.residual_bound(job),
        caveat="a plaintext reference: every party sees the residuals and partial scores in the clear, so only the "
               "trained weights are covered")


class TaylorDPScheme(PlaintextScheme):
    name = "taylor_dp"
    requires_unit_rows = True

    def __init__(self, payload: Any, job: Any):
        super().__init__(payload, job)
        self._check = he_dp.ResidualCheck(job)
        self._info = he_dp.dp_info(job, noise_units(job))
        self._bounds = he_dp.ReceiptBounds(job, noise_units(job))

    def plaintext_bound(self, tag: str) -> Optional[float]:
        return {he_vfl.TAG_U_PASSIVE: self._bounds.score, he_vfl.TAG_RESIDUAL: self._bounds.residual}.get(tag)

    def check_gradient(self, values: np.ndarray, rows: int, receiver: str) -> None:
        self._bounds.check_gradient(values, rows, receiver)

    def encrypt(self, values: np.ndarray) -> np.ndarray:
        return super().encrypt(self._check.scores(values))

    def add_plain(self, enc: np.ndarray, values: np.ndarray) -> np.ndarray:
        return super().add_plain(enc, self._check.active_part(values))

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._info}


class TaylorDPKeyHolder(PlaintextKeyHolder):
    name = "taylor_dp"

    def __init__(self, job: Any):
        super().__init__(job)
        self._noise = he_dp.GradientNoise(job, noise_units(job))
        self._bounds = he_dp.ReceiptBounds(job, noise_units(job))

    def answer_gradient(self, data: Any, size: int) -> np.ndarray:
        values = super().answer_gradient(data, size)
        largest, bound = (float(np.max(np.abs(values))) if values.size else 0.0), self._bounds.request()
        if largest > bound:  # the noise is calibrated for no more
            raise ValueError(self._bounds.request_refusal(
                f"a requested value of {largest:.6g}, beyond the bound {bound:.6g} of an honest request (2b rows "
                "of features <= 1 times residuals <= R)"))
        return self._noise.release(values) if self._noise.active else values

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._noise.info()}


PROTOCOL = he_dp.register_dp_protocol("taylor_dp", TaylorDPScheme, TaylorDPKeyHolder, noise_units)
