"""Protocol "paillier": HE-VFL (Hardy et al. 2017) with Paillier encryption.

The flow is :mod:`.he_vfl`'s; this module supplies the scheme. The
coordinator generates a ``job.key_bits`` key (>= 2048; 3072 = 128-bit
security is the default, 2048 warns) and sends the modulus. Values use the
fixed-point encoding of :mod:`vflsec.he.paillier` (2^-40 precision, one
exponent for every fresh ciphertext), so gradients match the plaintext
Taylor gradients to about 1e-12. Masks are uniform in Z_n, so the
coordinator learns nothing from what it decrypts; every ciphertext a party
sends, other than a fresh encryption, is re-randomized first. The key
holder decrypts a masked gradient only if it has the requesting party's
agreed block width (``job.widths``) and the product level (see
:mod:`.he_vfl`, threat model). Vector operations run on the executor of
:mod:`vflsec.he` (the local process pool by default, see ``vflsec.he.set_num_processes``;
or Ray). Through Ray the randomizers of the vector a party encrypts or re-randomizes at
each step are made there two steps ahead (:class:`vflsec.he.RandomnessStream`, refilled
after the step's product), so what is left on the step's path is one modular product per
value instead of a round trip.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Tuple

import numpy as np

from ..he import paillier as _paillier
from ..he.executor import executor_for
from ..he.scheme import KeyHolder, PartyScheme
from . import he_vfl
from .registry import register_protocol

__all__ = ["PROTOCOL", "PaillierKeyHolder", "PaillierScheme"]

# The masked gradient Enc(d^T X + R) and the loss are at level 2 (residual
# times an encoded plaintext); a weighted job's residual is one level deeper
# (times the encoded weights), and so is its gradient.
_PRODUCT_LEVEL = 2


def product_level(job) -> int:
    """The fixed-point level of a masked gradient of ``job``."""
    return _PRODUCT_LEVEL + (1 if getattr(job, "weighted", False) else 0)


class PaillierScheme(PartyScheme):
    name = "paillier"

    def __init__(self, payload: Any, job):
        self.public_key = _paillier.PaillierPublicKey.from_dict(payload)
        if self.public_key.key_bits != job.key_bits:
            raise ValueError(
                f"the coordinator's key has {self.public_key.key_bits} bits, the job agreed on {job.key_bits}"
            )
        self._fresh: Optional[_paillier.RandomnessStream] = None

    def prepare_fresh(self, sizes: Iterable[int]) -> None:
        # Where the executor's tasks cost a round trip (Ray), the randomizers of the vectors this
        # party encrypts or re-randomizes are made on it two steps ahead, refilled after each
        # step's product (masked_dot). On the local pool a round trip is cheap and the randomizer
        # chunks would wait in its queue before the next products: there, as before (measured:
        # a 4%-slower epoch with the stream there, about 5% faster through Ray).
        if executor_for(None)[0].ships_arguments:
            self._fresh = self.public_key.randomness_stream(sizes)

    def encrypt(self, values: np.ndarray):
        return self.public_key.encrypt(values, randomness=self._fresh)

    def encrypt_scalar_for_loss(self, value: float):
        pk = self.public_key
        return pk.encrypt_encoded(pk.encode([value], level=_PRODUCT_LEVEL), level=_PRODUCT_LEVEL)

    def dumps(self, enc) -> bytes:
        return enc.to_bytes(randomness=self._fresh)

    def loads(self, data: Any):
        return _paillier.EncryptedVector.from_bytes(self.public_key, data)

    def add(self, a, b):
        return a + b

    def add_plain(self, enc, values: np.ndarray):
        return enc.add_plain(values)

    def mul_plain(self, enc, values: np.ndarray):
        """Elementwise Enc(a_i x_i), one level deeper (a weighted job's residual, :mod:`.he_vfl`)."""
        return enc.mul_plain(values)

    def masked_dot(self, enc, X: np.ndarray, factor: float) -> Tuple[bytes, Any]:
        product = enc.dot(X)
        if self._fresh is not None:
            # The next steps' randomizers go to the workers after this product's tasks: they fill
            # the time the workers would wait while the key holder decrypts.
            self._fresh.refill()
        mask = self.public_key.random_mask(len(product))
        return product.add_encoded(mask).to_bytes(), (mask, product.level, factor)

    def unmask(self, reply: Any, state: Any, size: int) -> np.ndarray:
        mask, level, factor = state
        plaintexts = self.public_key.plaintexts_from_bytes(reply)
        if len(plaintexts) != size:
            raise ValueError(f"coordinator returned {len(plaintexts)} values, expected {size}")
        return factor * self.public_key.unmask(plaintexts, mask, level)

    def loss_term(self, enc_u, coef: np.ndarray, enc_extra):
        return enc_u.dot(coef[:, None]) + enc_extra

    def info(self) -> Dict[str, Any]:
        return {"scheme": self.name, "key_bits": self.public_key.key_bits}


class PaillierKeyHolder(KeyHolder):
    name = "paillier"

    def __init__(self, job):
        self.public_key, self.private_key = _paillier.generate_keypair(job.key_bits)
        self.gradient_level = product_level(job)

    def public_payload(self) -> Dict[str, Any]:
        return self.public_key.to_dict()

    def answer_gradient(self, data: Any, size: int) -> bytes:
        vector = _paillier.EncryptedVector.from_bytes(self.public_key, data)
        if len(vector) != size:
            raise ValueError(f"{len(vector)} ciphertexts, the party's gradient has {size} values")
        if vector.level != self.gradient_level:
            raise ValueError(f"masked gradient at fixed-point level {vector.level}, expected {self.gradient_level}")
        return self.public_key.plaintexts_to_bytes(self.private_key.decrypt_raw(vector))

    def decrypt_loss(self, data: Any) -> float:
        vector = _paillier.EncryptedVector.from_bytes(self.public_key, data)
        if len(vector) != 1 or vector.level != _PRODUCT_LEVEL:
            raise ValueError("the encrypted loss must be one value at the product level")
        return float(self.private_key.decrypt(vector)[0])

    def info(self) -> Dict[str, Any]:
        return {"scheme": self.name, "key_bits": self.public_key.key_bits}


def _check_job(job) -> None:
    # Only the key holder warns about a 2048-bit key (once per run).
    _paillier.check_key_bits(job.key_bits, warn=False)
    he_vfl.residual_model(job)
    he_vfl.encrypted_loss_enabled(job)  # a weighted job refuses the encrypted loss


PROTOCOL = he_vfl.protocol_roles(PaillierScheme, PaillierKeyHolder, _check_job)
register_protocol("paillier", PROTOCOL, replace=True, tags=he_vfl.TAGS, check=_check_job, weight_refusal=None)
