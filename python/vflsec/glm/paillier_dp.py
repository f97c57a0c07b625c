"""Protocol "paillier_dp": protocol "paillier" with DP noise on every decrypted gradient.

The flow, the noise, the sensitivity and the guarantee are :mod:`.he_dp`'s;
this module supplies Paillier's side of them:

* the key holder decrypts ``x_P + R_P`` at the product's fixed-point level
  (2^-80), rounds it to the noise lattice ``g Z`` (``g = 2^e``, a whole number
  of fixed-point steps) in exact integer arithmetic and adds ``g Z_P``, the
  lattice noise of the job's mechanism; the party removes ``R_P`` modulo n;
* a party's mask is uniform on ``[0, 2^(key_bits - 8))`` (not all of Z_n, as
  in "paillier"): the masked value is then an integer without wrap-around
  modulo n, whose rounding to the lattice is the rounding of ``x_P`` shifted
  by the mask. The job is refused unless the largest possible ``|x_P|`` stays
  2^128 below the mask's range (statistical hiding from the key holder);
* the sensitivity counts the fixed-point rounding of every encrypted value and
  feature (2^-41 each): the decrypted value is ``X~^T r~`` of the rounded ones.

Bounds on receipt (:mod:`.he_dp`, "Bounds on receipt"): the key holder answers
a request only if every masked value, as a signed integer in fixed point
2^-80, lies in ``[-X, 2^(key_bits - 8) + X)``, the mask's range widened by the
largest honest gradient ``X = 2^80 (2b rho R) (1 + RECEIPT_SLACK)``
(:meth:`vflsec.glm.he_dp.ReceiptBounds.request`); a data party keeps its
unmasked gradient only with ``|g_j| <= (alpha / b) (|S| rho R + (SUPPORT_SIGMAS
+ 1) lattice_sigma(sigma))`` (:meth:`~vflsec.glm.he_dp.ReceiptBounds.gradient`).
"""
from __future__ import annotations

import math
import secrets
from typing import Any, Dict, Tuple

import numpy as np

from ..dp.sensitivity import ROW_NORM_TOLERANCE
from ..he import paillier as _paillier
from . import he_dp
from .paillier import PaillierKeyHolder, PaillierScheme
from .paillier import _check_job as _check_paillier_job

__all__ = ["PROTOCOL", "PaillierDPKeyHolder", "PaillierDPScheme", "mask_bits", "noise_units"]

# Fixed-point fractional bits of a decrypted gradient (the product level 2).
_PRODUCT_BITS = 2 * _paillier.SCALE_BITS
# The mask's range below the modulus, and how far the largest gradient must stay below that range.
_MASK_MARGIN_BITS = 8
STATISTICAL_BITS = 128


def mask_bits(key_bits: int) -> int:
    """A party's mask is uniform on ``[0, 2^mask_bits)``."""
    return int(key_bits) - _MASK_MARGIN_BITS


def noise_units(job: Any) -> he_dp.DecryptedUnits:
    """The key holder decrypts ``X~^T r~`` (scale 1) of features and residuals rounded to 2^-40."""
    return he_dp.DecryptedUnits(scale=1.0, encoding_error=2.0 ** -(_paillier.SCALE_BITS + 1))


def _check_job(job: Any) -> None:
    _check_paillier_job(job)
    # |x_j| <= |S| max|X_ij| max|r_i| with |S| < 2b rows; in fixed point 2^80 times that.
    largest = 2 * job.batch_size * (1.0 + ROW_NORM_TOLERANCE) * he_dp.residual_bound(job)
    if math.log2(largest) + _PRODUCT_BITS > mask_bits(job.key_bits) - STATISTICAL_BITS:
        raise ValueError(f"protocol 'paillier_dp': a gradient of up to {largest:.3g} does not stay "
                         f"2^{STATISTICAL_BITS} below the mask's range with a {job.key_bits}-bit key; use a smaller "
                         "batch or k")


class PaillierDPScheme(PaillierScheme):
    """A data party's Paillier side: the residual bound checked on what it
    encrypts or adds, masks bounded for the key holder's lattice rounding."""

    name = "paillier_dp"
    requires_unit_rows = True

    def __init__(self, payload: Any, job: Any):
        super().__init__(payload, job)
        self._check = he_dp.ResidualCheck(job)
        self._mask_bits = mask_bits(self.public_key.key_bits)
        self._info = he_dp.dp_info(job, noise_units(job))
        self._bounds = he_dp.ReceiptBounds(job, noise_units(job))

    def check_gradient(self, values: np.ndarray, rows: int, receiver: str) -> None:
        self._bounds.check_gradient(values, rows, receiver)

    def encrypt(self, values: np.ndarray):
        return super().encrypt(self._check.scores(values))

    def add_plain(self, enc, values: np.ndarray):
        return super().add_plain(enc, self._check.active_part(values))

    def masked_dot(self, enc, X: np.ndarray, factor: float) -> Tuple[bytes, Any]:
        product = enc.dot(X)
        mask = [secrets.randbelow(1 << self._mask_bits) for _ in range(len(product))]
        return product.add_encoded(mask).to_bytes(), (mask, product.level, factor)

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._info}


class PaillierDPKeyHolder(PaillierKeyHolder):
    """The key holder: Paillier's decryption, then the lattice rounding and noise
    of :class:`vflsec.glm.he_dp.GradientNoise` in fixed-point integers."""

    name = "paillier_dp"

    def __init__(self, job: Any):
        super().__init__(job)
        self._noise = he_dp.GradientNoise(job, noise_units(job))
        # An honest masked value: a mask in [0, 2^mask_bits) plus a gradient |x| <= largest, in fixed point.
        self._bounds = he_dp.ReceiptBounds(job, noise_units(job))
        largest = math.ceil(math.ldexp(self._bounds.request(), _PRODUCT_BITS))
        self._range = (-largest, (1 << mask_bits(self.public_key.key_bits)) + largest)
        self._step = 0
        if self._noise.spacing is not None:
            exponent = math.frexp(self._noise.spacing)[1] - 1  # spacing = 2^exponent
            if math.ldexp(1.0, exponent) != self._noise.spacing or exponent + _PRODUCT_BITS < 0:
                raise ValueError(f"the noise lattice step {self._noise.spacing!r} is not a power of two of at least "
                                 f"2^-{_PRODUCT_BITS} (the fixed point of a decrypted gradient)")
            self._step = 1 << (exponent + _PRODUCT_BITS)

    def answer_gradient(self, data: Any, size: int) -> bytes:
        # The length and level checks and the decryption are the parent's.
        plaintexts = self.public_key.plaintexts_from_bytes(super().answer_gradient(data, size))
        n, (low, high) = self.public_key.n, self._range
        signed = [value - n if value > n // 2 else value for value in plaintexts]
        for value in signed:
            if not low <= value < high:
                raise ValueError(self._bounds.request_refusal(
                    f"a masked value of {'-' if value < 0 else ''}2^{math.log2(abs(value) or 1):.1f} (fixed point "
                    f"2^-{_PRODUCT_BITS}) outside [-2^{math.log2(-low):.1f}, 2^{mask_bits(self.public_key.key_bits)} "
                    f"+ 2^{math.log2(-low):.1f}), the range of an honest request (its mask plus the largest gradient)"))
        if not self._noise.active:
            return self.public_key.plaintexts_to_bytes(plaintexts)
        step, out = self._step, []
        for value, z in zip(signed, self._noise.steps(size)):
            nearest = (2 * value + step) // (2 * step)  # round(value / step), exact
            out.append((nearest + int(z)) * step % n)
        return self.public_key.plaintexts_to_bytes(out)

    def info(self) -> Dict[str, Any]:
        return {**super().info(), **self._noise.info()}


PROTOCOL = he_dp.register_dp_protocol("paillier_dp", PaillierDPScheme, PaillierDPKeyHolder, noise_units,
                                      _check_job)
