"""Protocol "ckks": HE-VFL (Hardy et al. 2017) with CKKS (SEAL via TenSEAL).

The flow is :mod:`.he_vfl`'s; this module supplies the scheme. The
coordinator creates the CKKS keys and sends every party the public context
(public key and the Galois keys of the power-of-two rotations, no secret key;
:func:`vflsec.he.ckks.galois_steps`). A batch vector is one ciphertext per
4096 rows; the gradient is the vector-matrix product of
:class:`vflsec.he.ckks.CKKSEncryptedVector` (diagonal layout) with the
plaintext features scaled by 4 alpha / b, so the decrypted values are 4 times
the gradient. A party adds a fresh encryption of a mask uniform on
[-2^18, 2^18] before sending for decryption; the coordinator adds flooding
noise of ``vflsec.he.ckks.flooding_sigma`` (``flooding_bits`` above the CKKS
error bound) to everything it returns, and decrypts a masked gradient only in
the layout of a product with the requesting party's agreed block width
(``job.widths``; see :mod:`.he_vfl`, threat model). ``job.key_bits`` is not
used. Every party's rows must have L2 norm <= 1 (the estimator's default
``row_norm="clip"`` does this), which keeps the encrypted values inside
CKKS's range.

``job.options`` (all public): ``ckks_poly_modulus_degree`` (8192),
``ckks_coeff_mod_bit_sizes`` ((60, 40, 40, 60)), ``ckks_scale_bits`` (40),
``flooding_bits`` (6: noise sigma 2^-10 on returned values, 2^-12 on
gradients; the coordinator's setting), ``encrypted_loss`` (False here, unlike
"paillier"). With ``encrypted_loss=True`` (one passive party) the passive
party sends, every batch, a whole ciphertext (about 131 kB) holding the one
value c2 |u_B|^2 / n, and the active party's ``history["loss"]`` gets the
Taylor loss of every epoch (the coordinator's ``history["loss_encrypted_part"]``
its encrypted part). With the default no loss is computed or sent: the active
party's history has no ``"loss"`` entry and the coordinator's is empty.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..he import ckks as _ckks
from ..he.scheme import KeyHolder, PartyScheme
from . import he_vfl
from .registry import register_protocol

__all__ = ["CKKSKeyHolder", "CKKSScheme", "PROTOCOL", "ckks_parameters", "flooding_bits"]


def ckks_parameters(job) -> _ckks.CKKSParameters:
    options = job.options
    defaults = _ckks.CKKSParameters()
    return _ckks.CKKSParameters(
        poly_modulus_degree=options.get("ckks_poly_modulus_degree", defaults.poly_modulus_degree),
        coeff_mod_bit_sizes=tuple(options.get("ckks_coeff_mod_bit_sizes", defaults.coeff_mod_bit_sizes)),
        scale_bits=options.get("ckks_scale_bits", defaults.scale_bits),
    )


def flooding_bits(job) -> int:
    bits = job.options.get("flooding_bits", _ckks.DEFAULT_FLOODING_BITS)
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 0:
        raise ValueError(f"options['flooding_bits'] must be an int >= 0, got {bits!r}")
    return bits


# Gradients are decrypted as OUTPUT_SCALE * g: CKKS's absolute error floor
# (~2^-18) and the flooding noise then cost 1/OUTPUT_SCALE as much on g, while
# |OUTPUT_SCALE * g| stays within the range the error bound covers (~8).
OUTPUT_SCALE = 4.0


class CKKSScheme(PartyScheme):
    name = "ckks"
    # With |x_ij| <= 1 the packed, masked gradient stays far below the
    # 2^19 magnitude the last CKKS level can hold; beyond it decryption wraps
    # around silently.
    requires_unit_rows = True

    def __init__(self, payload: Any, job):
        self.context = _ckks.CKKSPublicContext.from_bytes(payload, ckks_parameters(job))

    def encrypt(self, values: np.ndarray):
        return self.context.encrypt(values)

    def encrypt_scalar_for_loss(self, value: float):
        # In the layout of a one-column product (every slot), so it adds to loss_term's result.
        return self.context.encrypt([value], period=1)

    def dumps(self, enc) -> bytes:
        return enc.to_bytes()

    def loads(self, data: Any):
        return self.context.vector_from_bytes(data)

    def add(self, a, b):
        return a + b

    def add_plain(self, enc, values: np.ndarray):
        # A fresh encryption, not a plaintext: the receiver of the result must
        # not be able to subtract the ciphertext it sent and read the values.
        return enc.add_fresh(values)

    def masked_dot(self, enc, X: np.ndarray, factor: float) -> Tuple[bytes, Any]:
        product = enc.dot(X * (factor * OUTPUT_SCALE))
        mask = _ckks.secure_uniform(X.shape[1], _ckks.DEFAULT_MASK_BOUND)
        return product.add_fresh(mask).to_bytes(), mask

    def unmask(self, reply: Any, state: Any, size: int) -> np.ndarray:
        values = np.asarray(reply, dtype=np.float64)
        if values.shape != (size,):
            raise ValueError(f"coordinator returned shape {values.shape}, expected ({size},)")
        return (values - state) / OUTPUT_SCALE

    def loss_term(self, enc_u, coef: np.ndarray, enc_extra):
        # Not masked: the loss is meant for the key holder (and returned to A).
        return enc_u.dot(coef[:, None]) + enc_extra

    def info(self) -> Dict[str, Any]:
        params = self.context.params
        return {"scheme": self.name, "poly_modulus_degree": params.poly_modulus_degree,
                "coeff_mod_bit_sizes": list(params.coeff_mod_bit_sizes), "scale_bits": params.scale_bits}


class CKKSKeyHolder(KeyHolder):
    name = "ckks"

    def __init__(self, job):
        self.secret = _ckks.CKKSSecretContext(ckks_parameters(job))
        self.flooding_bits = flooding_bits(job)

    def public_payload(self) -> bytes:
        return self.secret.public_context_bytes()

    def answer_gradient(self, data: Any, size: int) -> np.ndarray:
        vector = self.secret.vector_from_bytes(data)
        # The layout of a vector-matrix product of `size` columns: a batch
        # vector (e.g. another party's [[u]], one value per slot) is refused
        # whatever length its header claims.
        layout = _ckks.product_layout(size, self.secret.params.slot_count)
        if vector.length != size or vector.layout != layout:
            raise ValueError(f"a vector of length {vector.length} in the layout {list(vector.layout)} "
                             f"(values, period per ciphertext); the party's gradient is {size} values in "
                             f"{list(layout)}")
        return self.secret.decrypt_flooded(vector, self.flooding_bits)

    def decrypt_loss(self, data: Any) -> float:
        vector = self.secret.vector_from_bytes(data)
        if vector.length != 1 or vector.layout != ((1, 1),):
            raise ValueError("the encrypted loss must be one value in the layout of a one-column product")
        values = self.secret.decrypt_flooded(vector, self.flooding_bits)
        if values.shape != (1,):
            raise ValueError("the encrypted loss must be one value")
        return float(values[0])

    def info(self) -> Dict[str, Any]:
        return {"scheme": self.name, "flooding_bits": self.flooding_bits,
                "flooding_sigma": _ckks.flooding_sigma(self.secret.params, self.flooding_bits)}


def _check_job(job) -> None:
    ckks_parameters(job)
    flooding_bits(job)
    he_vfl.residual_model(job)


# Unlike "paillier", no per-batch scalar ciphertext unless the user asks for the loss.
PROTOCOL = he_vfl.protocol_roles(CKKSScheme, CKKSKeyHolder, _check_job, option_defaults={"encrypted_loss": False})
register_protocol("ckks", PROTOCOL, replace=True, tags=he_vfl.TAGS, check=_check_job,
                  weight_refusal="its CKKS parameters leave one multiplicative level, which the gradient's product "
                                 "with the features uses; weighting the encrypted residual would need a second")
