"""The interface between an HE protocol and its encryption scheme.

A protocol with a key-holding coordinator (:mod:`vflsec.glm.he_vfl`: Hardy
et al.'s HE-VFL) runs the same message flow for every scheme and asks the
scheme for the cryptography only. Two roles:

* :class:`PartyScheme`: a data party's side, built from the key holder's
  public payload; it encrypts, adds, multiplies by its own plaintext
  features, masks what it sends for decryption and unmasks the answer.
* :class:`KeyHolder`: the coordinator's side; it makes the keys and answers
  decryption requests, refusing any that is not of the expected size and
  form (the protocol's threat model says which).

A scheme supplies a factory for each: ``make_scheme(public_payload, job)``
and ``make_key_holder(job)`` (:data:`SchemeFactory`, :data:`KeyHolderFactory`;
``job`` is the protocol's job description, opaque here). The schemes:
``vflsec.glm.paillier`` and ``vflsec.glm.ckks`` on the vectors of
:mod:`vflsec.he.paillier` and :mod:`vflsec.he.ckks`, and
``vflsec.glm.taylor``, the same flow in the clear. Ciphertexts are the
scheme's own objects (typed ``Any``); on the wire they are bytes (or, for the
plaintext reference, arrays).
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Dict, Iterable, Tuple, Union

import numpy as np

__all__ = ["KeyHolder", "KeyHolderFactory", "PartyScheme", "SchemeFactory"]


class PartyScheme(abc.ABC):
    """What a data party does with the key holder's public key.

    ``requires_unit_rows``: the scheme's value range assumes every row of a
    party's block has L2 norm <= 1 (checked before anything is sent).
    """

    name = "he"
    requires_unit_rows = False

    @abc.abstractmethod
    def encrypt(self, values: np.ndarray) -> Any:
        """Fresh encryption of a batch vector (the operand of :meth:`masked_dot`)."""

    @abc.abstractmethod
    def encrypt_scalar_for_loss(self, value: float) -> Any:
        """Fresh encryption of one value that adds to :meth:`loss_term` results."""

    @abc.abstractmethod
    def dumps(self, enc: Any) -> Union[bytes, np.ndarray]:
        """Serialize, re-randomizing anything that is not a fresh encryption."""

    @abc.abstractmethod
    def loads(self, data: Any) -> Any:
        """A ciphertext from its wire form (ValueError/TypeError for anything malformed)."""

    @abc.abstractmethod
    def add(self, a: Any, b: Any) -> Any:
        """Enc(a + b) from Enc(a) and Enc(b)."""

    @abc.abstractmethod
    def add_plain(self, enc: Any, values: np.ndarray) -> Any:
        """Enc(a + values), in a form the receiver of the result cannot undo
        to read ``values`` (CKKS adds a fresh encryption)."""

    @abc.abstractmethod
    def masked_dot(self, enc: Any, X: np.ndarray, factor: float) -> Tuple[Union[bytes, np.ndarray], Any]:
        """Bytes of Enc(factor * enc^T X + R) for the key holder, and the state
        :meth:`unmask` needs to remove R."""

    @abc.abstractmethod
    def unmask(self, reply: Any, state: Any, size: int) -> np.ndarray:
        """factor * enc^T X from the key holder's reply."""

    @abc.abstractmethod
    def loss_term(self, enc_u: Any, coef: np.ndarray, enc_extra: Any) -> Any:
        """Enc(coef^T u + extra)."""

    def prepare_fresh(self, sizes: Iterable[int]) -> None:  # noqa: B027 - a hint: ignoring it is correct
        """The sizes of the vectors this party will make fresh for sending, one per step in
        order (its encryption of a batch vector, or its re-randomization of a computed one
        in :meth:`dumps`): a scheme may make their randomness ahead of time. Nothing by default."""

    def info(self) -> Dict[str, Any]:
        return {"scheme": self.name}


class KeyHolder(abc.ABC):
    """The coordinator's side: key generation and decryption for others."""

    name = "he"

    @abc.abstractmethod
    def public_payload(self) -> Any:
        """The public key as a wire payload (bytes or a dict of bytes/ints)."""

    @abc.abstractmethod
    def answer_gradient(self, data: Any, size: int) -> Any:
        """Decrypt a masked gradient of exactly ``size`` values (ValueError
        for anything else: another length, level or layout); the wire
        payload to return."""

    @abc.abstractmethod
    def decrypt_loss(self, data: Any) -> float:
        """Decrypt the encrypted loss (one value; ValueError for anything else)."""

    def info(self) -> Dict[str, Any]:
        return {"scheme": self.name}


SchemeFactory = Callable[[Any, Any], PartyScheme]
"""``make_scheme(public_payload, job)``: a data party's scheme from the key holder's public payload."""

KeyHolderFactory = Callable[[Any], KeyHolder]
"""``make_key_holder(job)``: the coordinator's keys for a job."""
