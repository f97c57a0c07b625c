"""Homomorphic encryption for vertical federated learning.

``vflsec.he.paillier``: Paillier (python-paillier keys, gmpy2 arithmetic) with a
fixed-point encoding at one exponent, vector operations parallelized over
processes, and a byte format for the wire.

``vflsec.he.ckks``: CKKS (SEAL through TenSEAL): a key holder's secret
context, public contexts for the other parties (public key and the
power-of-two Galois keys only), batched encrypted vectors with a
diagonal-layout vector-matrix product, masking and noise flooding of returned
decryptions.
"""
from ._pool import get_num_processes, set_num_processes, shutdown_pool
from .ckks import (
    CKKSEncryptedVector,
    CKKSParameters,
    CKKSPublicContext,
    CKKSSecretContext,
    flooding_sigma,
)
from .paillier import (
    EncryptedVector,
    PaillierPrivateKey,
    PaillierPublicKey,
    RandomnessPool,
    WeakKeyWarning,
    check_key_bits,
    generate_keypair,
)

__all__ = [
    "CKKSEncryptedVector",
    "CKKSParameters",
    "CKKSPublicContext",
    "CKKSSecretContext",
    "EncryptedVector",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "RandomnessPool",
    "WeakKeyWarning",
    "check_key_bits",
    "flooding_sigma",
    "generate_keypair",
    "get_num_processes",
    "set_num_processes",
    "shutdown_pool",
]
