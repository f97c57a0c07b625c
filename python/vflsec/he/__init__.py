"""Homomorphic encryption for vertical federated learning.

``vflsec.he.paillier``: Paillier (python-paillier keys, gmpy2 arithmetic) with a
fixed-point encoding at one exponent, vector operations parallelized over
processes, and a byte format for the wire. Needs phe and gmpy2
(``pip install "vflsec[paillier]"``), not TenSEAL.

``vflsec.he.ckks``: CKKS (SEAL through TenSEAL): a key holder's secret
context, public contexts for the other parties (public key and the
power-of-two Galois keys only), batched encrypted vectors with a
diagonal-layout vector-matrix product, masking and noise flooding of returned
decryptions. Needs TenSEAL (``pip install "vflsec[he]"``); without it,
importing the module (or any CKKS name from here) raises ImportError saying so.

Both schemes' vectors share one base, :class:`vflsec.he.vector.AbstractEncryptedVector`
(``add``, ``add_plain``, ``mul_plain``, ``mul_scalar``, ``*`` by a scalar,
``dot``, ``decrypt``, ``size``, ``to_bytes`` / ``from_bytes(key_or_context, data)``).
:mod:`vflsec.he.scheme` holds the interface an HE protocol asks of a scheme
(a data party's :class:`~vflsec.he.scheme.PartyScheme`, the coordinator's
:class:`~vflsec.he.scheme.KeyHolder`).

Where the Paillier vector work runs (encryption, the encrypted products,
re-randomization) is the process's executor, :mod:`vflsec.he.executor`:
:class:`LocalPoolExecutor` (this machine's process pool, the default; its
size is ``set_num_processes``) or :class:`RayExecutor` (Ray tasks over row
shards on the party's own cluster, ``pip install "vflsec[ray]"``), chosen with
``set_executor`` / ``use_executor``. Decryption never leaves the key holder's
process and its local pool.

Each scheme is imported when first used: ``import vflsec.he`` loads neither
phe, gmpy2 nor TenSEAL, and the names below resolve on first access.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

from ._pool import get_num_processes, set_num_processes, shutdown_pool
from .executor import Executor, LocalPoolExecutor, get_executor, set_executor, use_executor
from .ray_executor import RayExecutor
from .scheme import KeyHolder, PartyScheme
from .vector import AbstractEncryptedVector

if TYPE_CHECKING:  # what the lazy names below resolve to
    from .ckks import (
        CKKSEncryptedVector,
        CKKSParameters,
        CKKSPublicContext,
        CKKSSecretContext,
        flooding_sigma,
    )
    from .paillier import (
        EncryptedVector,
        PaillierEncryptedVector,
        PaillierPrivateKey,
        PaillierPublicKey,
        RandomnessPool,
        RandomnessStream,
        WeakKeyWarning,
        check_key_bits,
        generate_keypair,
    )

_LAZY: Dict[str, str] = {
    **dict.fromkeys(("CKKSEncryptedVector", "CKKSParameters", "CKKSPublicContext", "CKKSSecretContext",
                     "flooding_sigma"), "ckks"),
    **dict.fromkeys(("EncryptedVector", "PaillierEncryptedVector", "PaillierPrivateKey", "PaillierPublicKey",
                     "RandomnessPool", "RandomnessStream", "WeakKeyWarning", "check_key_bits",
                     "generate_keypair"), "paillier"),
}

__all__ = [
    "AbstractEncryptedVector",
    "CKKSEncryptedVector",
    "CKKSParameters",
    "CKKSPublicContext",
    "CKKSSecretContext",
    "EncryptedVector",
    "Executor",
    "KeyHolder",
    "LocalPoolExecutor",
    "PaillierEncryptedVector",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "PartyScheme",
    "RandomnessPool",
    "RandomnessStream",
    "RayExecutor",
    "WeakKeyWarning",
    "check_key_bits",
    "flooding_sigma",
    "generate_keypair",
    "get_executor",
    "get_num_processes",
    "set_executor",
    "set_num_processes",
    "shutdown_pool",
    "use_executor",
]


def __getattr__(name: str) -> Any:
    if name in ("paillier", "ckks"):  # ``vflsec.he.paillier`` after a bare ``import vflsec.he``
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # ImportError (e.g. TenSEAL missing for a CKKS name) propagates with its install hint.
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
