"""Protocol "ckks_dp": protocol "ckks" with DP noise on every decrypted gradient.

The flow, the noise, the sensitivity and the guarantee are :mod:`.he_dp`'s;
this module supplies CKKS's side of them. The key holder decrypts with the
flooding of "ckks" (the security argument of :mod:`vflsec.he.ckks` stays as
it is), rounds the flooded value to the noise lattice and adds the lattice
noise of the job's mechanism (:meth:`vflsec.glm.he_dp.GradientNoise.release`).
The decrypted values are ``OUTPUT_SCALE alpha / b`` times ``X^T (theta + s)``;
the sensitivity adds, per value, twice CKKS's decryption error bound
``2^-(scale_bits - 24)`` (:data:`vflsec.he.ckks.ERROR_BITS_ABOVE_SCALE`: a
measured bound, not a proved one, which the reported guarantee names) and the
flooding lattice's step. Masks are those of "ckks".

Bounds on receipt (:mod:`.he_dp`, "Bounds on receipt"; ``rho = 1 +
ROW_NORM_TOLERANCE``, ``e`` the value error of :func:`noise_units`, ``F =
(SUPPORT_SIGMAS + 1) lattice_sigma(sigma_flood)`` the flooding's support): the
key holder answers a request only if every flooded value has ``|v| <= 2^18 +
OUTPUT_SCALE (alpha / b) 2b rho R + e + F`` (the mask bound
:data:`vflsec.he.ckks.DEFAULT_MASK_BOUND` plus the largest honest packed
gradient over ``|S| < 2b`` rows), refusing another naming the requesting
party; a data party keeps its unmasked gradient only with ``|g_j| <= (alpha /
b) |S| rho R + (e + F + (SUPPORT_SIGMAS + 1) lattice_sigma(sigma)) /
OUTPUT_SCALE``.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..he import ckks as _ckks
from ..kernels.noise import lattice_spacing
from . import he_dp, he_vfl
from .ckks import OUTPUT_SCALE, CKKSKeyHolder, CKKSScheme, ckks_parameters, flooding_bits
from .ckks import _check_job as _check_ckks_job

__all__ = ["PROTOCOL", "CKKSDPKeyHolder", "CKKSDPScheme", "noise_units", "receipt_bounds"]


def noise_units(job: Any) -> he_dp.DecryptedUnits:
    """``OUTPUT_SCALE alpha / b`` times ``X^T r``, each value within CKKS's error bound
    plus half a flooding lattice step of the exact one."""
    params = ckks_parameters(job)
    error_bits = params.scale_bits - _ckks.ERROR_BITS_ABOVE_SCALE
    flooding_step = lattice_spacing(_ckks.flooding_sigma(params, flooding_bits(job)))
    alpha = he_vfl.residual_model(job).alpha
    return he_dp.DecryptedUnits(
        scale=OUTPUT_SCALE * alpha / job.batch_size, value_error=2.0 ** -error_bits + flooding_step / 2.0,
        caveat=f"CKKS decryption errors beyond 2^-{error_bits} (the bound of vflsec.he.ckks is measured, not proved)")


def receipt_bounds(job: Any) -> he_dp.ReceiptBounds:
    """The job's bounds on receipt in CKKS's units, the key holder's flooding included."""
    return he_dp.ReceiptBounds(job, noise_units(job), _ckks.flooding_sigma(ckks_parameters(job), flooding_bits(job)))


class CKKSDPScheme(CKKSScheme):
    """A data party's CKKS side: the residual bound checked on what it encrypts or adds."""

    name = "ckks_dp"

    def __init__(self, payload: Any, job: Any):
        super().__init__(payload, job)
        self._check = he_dp.ResidualCheck(job)
        self._info = he_dp.dp_info(job, noise_units(job))
        self._bounds = receipt_bounds(job)

    def check_gradient(self, values: np.ndarray, rows: int, receiver: str) -> None:
        self._bounds.check_gradient(values, rows, receiver)

    def encrypt(self, values: np.ndarray):
        return super().encrypt(self._check.scores(values))

    def add_plain(self, enc, values: np.ndarray):
        return super().add_plain(enc, self._check.active_part(values))

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._info}


class CKKSDPKeyHolder(CKKSKeyHolder):
    """The key holder: CKKS's flooded decryption, then the DP lattice release."""

    name = "ckks_dp"

    def __init__(self, job: Any):
        super().__init__(job)
        self._noise = he_dp.GradientNoise(job, noise_units(job))
        self._bounds = receipt_bounds(job)

    def answer_gradient(self, data: Any, size: int) -> np.ndarray:
        values = super().answer_gradient(data, size)  # the layout checks and the flooded decryption
        largest = float(np.max(np.abs(values))) if values.size else 0.0
        bound = _ckks.DEFAULT_MASK_BOUND + self._bounds.request()
        if largest > bound:
            raise ValueError(self._bounds.request_refusal(
                f"a masked value of {largest:.6g}, beyond the bound {bound:.6g} of an honest request (the mask's "
                f"{_ckks.DEFAULT_MASK_BOUND:g} plus the largest gradient and the flooding)"))
        return self._noise.release(values) if self._noise.active else values

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._noise.info()}


PROTOCOL = he_dp.register_dp_protocol("ckks_dp", CKKSDPScheme, CKKSDPKeyHolder, noise_units, _check_ckks_job)
