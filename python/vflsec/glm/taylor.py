"""Protocol "taylor": the HE-VFL message flow with the encryption taken out.

Runs :mod:`.he_vfl` exactly as ``paillier`` and ``ckks`` do (same batches,
Taylor-approximated residual, coordinator round trip, penalized step and
clipping), but every "ciphertext" is the plaintext float64 vector. It is NOT
private: it exists as a reference. Paillier decrypts to these values to about
1e-12 (fixed-point precision 2^-40; tested), so this protocol gives the
accuracy a Paillier run reaches at a tiny fraction of its cost -- which is how
the GLM benchmark reports HE accuracy on datasets where running Paillier to the
end would take hours (labelled as such, never as a Paillier measurement).

What a party receives is the values themselves, checked as any array from a
peer (:func:`vflsec.vfl.check_received_array`; :mod:`.he_vfl`): a float64
vector of the expected length, every value finite, never cast (an int, bool or
float32 vector, or a NaN, is refused naming its sender). The key holder
refuses a request that is no such vector, naming the requesting party. Without
DP no bound on the values is known (``job.k`` may be None, least-squares
targets are not bounded); "taylor_dp" (:mod:`.taylor_dp`) adds its bounds.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..he.scheme import KeyHolder, PartyScheme
from ..vfl.received import describe_payload
from . import he_vfl
from .registry import register_protocol

__all__ = ["PROTOCOL", "PlaintextKeyHolder", "PlaintextScheme"]


def _vector(data: Any, what: str) -> np.ndarray:
    """``data`` if it is a 1-d float64 array of finite values (what an honest peer sends); else ValueError."""
    if not isinstance(data, np.ndarray) or data.dtype != np.float64 or data.ndim != 1:
        raise ValueError(f"{what} must be a 1-d float64 array, got {describe_payload(data)} (no conversion is made)")
    finite = np.isfinite(data)
    if not finite.all():
        raise ValueError(f"{what} has {int(np.sum(~finite))} non-finite value(s) (first: {float(data[~finite][0])})")
    return data


class PlaintextScheme(PartyScheme):
    name = "taylor"

    def __init__(self, payload: Any, job):
        if payload != {"scheme": "taylor"}:
            raise ValueError(f"expected the plaintext reference's key payload, got {payload!r}")

    def plaintext_bound(self, tag: str) -> Optional[float]:
        """The bound on ``|value|`` an honest sender respects under ``tag`` (None: finite is all
        the protocol fixes); :mod:`.he_vfl` checks every received vector against it."""
        return None

    def encrypt(self, values: np.ndarray) -> np.ndarray:
        return np.array(values, dtype=np.float64)

    def encrypt_scalar_for_loss(self, value: float) -> np.ndarray:
        return np.array([value], dtype=np.float64)

    def dumps(self, enc: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(enc, dtype=np.float64)

    def loads(self, data: Any) -> np.ndarray:
        return _vector(data, "payload")

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def add_plain(self, enc: np.ndarray, values: np.ndarray) -> np.ndarray:
        return enc + values

    def mul_plain(self, enc: np.ndarray, values: np.ndarray) -> np.ndarray:
        return enc * values

    def masked_dot(self, enc: np.ndarray, X: np.ndarray, factor: float) -> Tuple[np.ndarray, Any]:
        return enc @ X, factor

    def unmask(self, reply: Any, state: Any, size: int) -> np.ndarray:
        values = _vector(reply, "gradient")
        if values.shape != (size,):
            raise ValueError(f"coordinator returned {values.shape[0]} values, expected {size}")
        return state * values

    def loss_term(self, enc_u: np.ndarray, coef: np.ndarray, enc_extra: np.ndarray) -> np.ndarray:
        return np.array([enc_u @ coef]) + enc_extra


class PlaintextKeyHolder(KeyHolder):
    name = "taylor"

    def __init__(self, job):
        pass

    def public_payload(self) -> Any:
        return {"scheme": "taylor"}

    def answer_gradient(self, data: Any, size: int) -> np.ndarray:
        values = _vector(data, "masked gradient")
        if values.shape != (size,):
            raise ValueError(f"{values.shape[0]} values, the party's gradient has {size}")
        return values

    def decrypt_loss(self, data: Any) -> float:
        values = _vector(data, "loss")
        if values.shape != (1,):
            raise ValueError(f"the loss must be one value, got shape {values.shape}")
        return float(values[0])


PROTOCOL = he_vfl.protocol_roles(PlaintextScheme, PlaintextKeyHolder)
register_protocol("taylor", PROTOCOL, replace=True, tags=he_vfl.TAGS, weight_refusal=None)
