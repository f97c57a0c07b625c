"""CKKS (TenSEAL) contexts and encrypted real vectors for vertical GLM training.

Roles: the key holder (coordinator) keeps a :class:`CKKSSecretContext`; every
other party receives :meth:`CKKSSecretContext.public_context_bytes` — public
key and Galois keys, never the secret key — and works with a
:class:`CKKSPublicContext`.

Parameters
----------
Default ring degree N = 8192 (4096 slots), coefficient modulus primes of
60, 40, 40, 60 bits (200 bits; the HE standard's 128-bit bound for N = 8192 is
218 bits), scale 2^40. The vector-matrix product uses both 40-bit levels: one
plaintext multiplication and a rotate-and-sum per column (``dot``), then one
multiplication by a one-hot mask to pack the columns into one ciphertext
(``pack_vectors``). After that the remaining 60-bit modulus holds values of
magnitude below about 2^20 (2^19 is safe), which bounds the masks (see below).

Precision and noise flooding
----------------------------
CKKS decryption is approximate. The packed vector-matrix product decrypts
with an absolute error of about 2^-18 for outputs of magnitude up to about 1
(measured: 2^-19.7 to 2^-17.7 depending on the key), growing roughly as
2^-20 |output| beyond that. :data:`ERROR_BITS_ABOVE_SCALE` fixes the bound
used here at 2^-(scale_bits - 24) = 2^-16, which holds with margin for
outputs up to about 8 in magnitude (masks added afterwards as fresh
encryptions do not count). Returning exact decryptions to a party that knows
the plaintext leaks this error, and through it the secret key (Li and
Micciancio, EUROCRYPT 2021). The key holder therefore adds Gaussian noise to
every value it returns, with standard deviation

    sigma = 2^flooding_bits * 2^-(scale_bits - 24)

i.e. ``flooding_bits`` above the error bound. The default ``flooding_bits = 6``
gives sigma = 2^-10 (about 1e-3) on each returned value; the "ckks" protocol
scales its gradients by 4 before decryption, so the cost on a gradient
coordinate is 2^-12 (about 2.4e-4). Two decryptions whose errors differ by
the bound are about 2^-7 apart in statistical distance per value, far from
the 2^-40-level guarantee of full IND-CPA-D security (which would need a
larger scale and N = 16384 to keep gradients usable). What the noise does
buy: in the coefficient domain it is about sigma * 2^scale_bits / sqrt(N) ~
2^23, so recovering the key from returned values is an LWE instance with that
error (q ~ 2^60, N = 8192) instead of a linear system.

Masks: a party hides a value v it sends for decryption by adding a fresh
encryption of R uniform on [-2^18, 2^18] (:data:`DEFAULT_MASK_BOUND`); the
key holder sees v + R, within statistical distance |v| / 2^19 of R's
distribution. This is statistical hiding whose strength depends on |v|,
weaker than Paillier's exact one-time pad in Z_n. The mask stays below the
~2^20 magnitude the last level holds. Adding a fresh encryption (not a
plaintext) also re-randomizes the ciphertext, so the receiver of a ciphertext
cannot subtract one it sent and read off the plaintext that was added.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np
import tenseal as ts

from .._arrays import as_float_array, check_positive_int

# Largest total coefficient modulus for 128-bit classical security with a
# ternary secret, Homomorphic Encryption Standard (2018), Table 1.
HE_STANDARD_MAX_COEFF_BITS = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}

ERROR_BITS_ABOVE_SCALE = 24
"""Bound on the absolute decryption error of the packed product (outputs up to ~8): 2^-(scale_bits - 24)."""

DEFAULT_FLOODING_BITS = 6
DEFAULT_MASK_BOUND = 2.0 ** 18

_HEADER = struct.Struct(">3sII")
_MAGIC = b"CV1"


@dataclass(frozen=True)
class CKKSParameters:
    """CKKS parameters, checked against the HE standard's 128-bit bounds."""

    poly_modulus_degree: int = 8192
    coeff_mod_bit_sizes: Tuple[int, ...] = (60, 40, 40, 60)
    scale_bits: int = 40

    def __post_init__(self) -> None:
        degree = self.poly_modulus_degree
        if degree not in HE_STANDARD_MAX_COEFF_BITS:
            raise ValueError(f"poly_modulus_degree must be one of {sorted(HE_STANDARD_MAX_COEFF_BITS)}, got {degree}")
        sizes = tuple(int(b) for b in self.coeff_mod_bit_sizes)
        object.__setattr__(self, "coeff_mod_bit_sizes", sizes)
        if len(sizes) < 4:
            raise ValueError("coeff_mod_bit_sizes needs at least 4 primes: the vector-matrix product uses two levels")
        if any(not 20 <= b <= 60 for b in sizes):
            raise ValueError(f"coeff_mod_bit_sizes entries must be in [20, 60], got {sizes}")
        total = sum(sizes)
        if total > HE_STANDARD_MAX_COEFF_BITS[degree]:
            raise ValueError(
                f"coefficient modulus of {total} bits exceeds the 128-bit security bound of "
                f"{HE_STANDARD_MAX_COEFF_BITS[degree]} bits for poly_modulus_degree={degree}"
            )
        scale_bits = check_positive_int(self.scale_bits, "scale_bits")
        if scale_bits > min(sizes[1:-1]) or scale_bits >= sizes[0]:
            raise ValueError(
                f"scale_bits={scale_bits} must not exceed the middle primes {sizes[1:-1]} and must be below "
                f"the first prime ({sizes[0]} bits)"
            )

    @property
    def slot_count(self) -> int:
        return self.poly_modulus_degree // 2

    @property
    def max_decrypted_magnitude(self) -> float:
        """Largest |value| the packed product decrypts correctly (first prime minus scale)."""
        return 2.0 ** (self.coeff_mod_bit_sizes[0] - self.scale_bits - 1)


def flooding_sigma(params: CKKSParameters, flooding_bits: int) -> float:
    """Standard deviation of the flooding noise: ``flooding_bits`` above the error bound."""
    flooding_bits = check_positive_int(flooding_bits, "flooding_bits", minimum=0)
    return 2.0 ** (flooding_bits + ERROR_BITS_ABOVE_SCALE - params.scale_bits)


def secure_uniform(size: int, bound: float) -> np.ndarray:
    """Uniform reals on [-bound, bound] from the operating system's CSPRNG."""
    size = check_positive_int(size, "size", minimum=0)
    raw = np.frombuffer(os.urandom(8 * size), dtype=np.uint64) if size else np.empty(0, np.uint64)
    unit = (raw >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return (2.0 * unit - 1.0) * float(bound)


def _new_tenseal_context(params: CKKSParameters) -> ts.Context:
    context = ts.context(
        ts.SCHEME_TYPE.CKKS,
        poly_modulus_degree=params.poly_modulus_degree,
        coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes),
    )
    context.global_scale = 2.0 ** params.scale_bits
    context.generate_galois_keys()
    return context


def _check_matches(context: ts.Context, params: CKKSParameters) -> None:
    """The received context must have the agreed parameters (a key holder must
    not be able to hand out a weaker ring or a different scale)."""
    key_data = context.seal_context().data.key_context_data()
    degree = key_data.parms().poly_modulus_degree()
    # The key level includes the special prime, i.e. the whole modulus chain.
    total_bits = key_data.total_coeff_modulus_bit_count()
    if degree != params.poly_modulus_degree or total_bits != sum(params.coeff_mod_bit_sizes):
        raise ValueError(
            f"the received CKKS context has poly_modulus_degree={degree} and a {total_bits}-bit modulus; "
            f"the job agreed on {params.poly_modulus_degree} and {sum(params.coeff_mod_bit_sizes)} bits"
        )
    if context.global_scale != 2.0 ** params.scale_bits:
        raise ValueError(f"the received CKKS context has scale {context.global_scale:g}, "
                         f"expected 2^{params.scale_bits}")


class _ContextBase:
    def __init__(self, context: ts.Context, params: CKKSParameters):
        self.tenseal = context
        self.params = params

    def encrypt(self, values: Any, *, full_slots: bool = False) -> "CKKSEncryptedVector":
        """Encrypt a real vector in ciphertexts of ``slot_count`` slots each.

        ``full_slots`` zero-pads every ciphertext to the full slot count, which
        :meth:`CKKSEncryptedVector.dot` needs (its rotate-and-sum runs over all
        slots, so the sum lands in every slot).
        """
        arr, _ = as_float_array(values, "values", ndim=1, dtype=np.float64)
        slots = self.params.slot_count
        chunks = []
        for start in range(0, max(arr.shape[0], 1), slots):
            piece = arr[start:start + slots]
            if full_slots and piece.shape[0] < slots:
                piece = np.concatenate([piece, np.zeros(slots - piece.shape[0])])
            chunks.append(ts.ckks_vector(self.tenseal, piece.tolist()))
        return CKKSEncryptedVector(self, chunks, arr.shape[0])

    def vector_from_bytes(self, data: Any) -> "CKKSEncryptedVector":
        return CKKSEncryptedVector.from_bytes(self, data)


class CKKSPublicContext(_ContextBase):
    """A party's view: public key and Galois keys, no secret key."""

    @classmethod
    def from_bytes(cls, data: Any, params: Optional[CKKSParameters] = None) -> "CKKSPublicContext":
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        try:
            context = ts.context_from(bytes(data))
        except Exception as exc:  # TenSEAL raises several types on malformed input
            raise ValueError(f"not a serialized TenSEAL context: {exc}") from None
        if context.has_secret_key() or context.is_private():
            raise ValueError("the received CKKS context contains a secret key; only public contexts are accepted")
        if not context.has_galois_keys():
            raise ValueError("the received CKKS context lacks the Galois keys the vector-matrix product needs")
        params = params or CKKSParameters()
        _check_matches(context, params)
        return cls(context, params)


class CKKSSecretContext(_ContextBase):
    """The key holder's context: decrypts, and floods what it returns."""

    def __init__(self, params: Optional[CKKSParameters] = None):
        params = params or CKKSParameters()
        if not isinstance(params, CKKSParameters):
            raise TypeError(f"params must be CKKSParameters, got {type(params).__name__}")
        super().__init__(_new_tenseal_context(params), params)

    def public_context_bytes(self) -> bytes:
        """Serialized public context (public and Galois keys; no secret key)."""
        return self.tenseal.serialize(
            save_public_key=True, save_secret_key=False, save_galois_keys=True, save_relin_keys=False
        )

    def public_context(self) -> CKKSPublicContext:
        return CKKSPublicContext.from_bytes(self.public_context_bytes(), self.params)

    def decrypt(self, vector: "CKKSEncryptedVector") -> np.ndarray:
        """Exact CKKS decryption. Never return this to another party: use
        :meth:`decrypt_flooded`."""
        if not isinstance(vector, CKKSEncryptedVector):
            raise TypeError(f"expected a CKKSEncryptedVector, got {type(vector).__name__}")
        values: List[float] = []
        for chunk in vector.chunks:
            chunk.link_context(self.tenseal)
            values.extend(chunk.decrypt())
        return np.asarray(values[:vector.length], dtype=np.float64)

    def decrypt_flooded(self, vector: "CKKSEncryptedVector", flooding_bits: Optional[int] = DEFAULT_FLOODING_BITS,
                        *, generator: Any = None) -> np.ndarray:
        """Decrypt and flood with N(0, sigma^2) noise, sigma = :func:`flooding_sigma`.

        The decryption is released by :func:`vflsec.kernels.add_gaussian_noise`
        (the lattice release): ``values + noise`` formed in floating point would
        keep the exact decryption's low-order bits readable in the sum's rounding,
        which is the error the flooding is there to hide.
        ``flooding_bits=None`` returns the exact decryption (insecure when the
        result leaves the key holder; for measuring the CKKS error only).
        ``generator``: a :class:`vflsec.kernels.NoiseGenerator` (None: the shared
        secure one; a seeded one for tests only).
        """
        values = self.decrypt(vector)
        if flooding_bits is None:
            return values
        from ..kernels import add_gaussian_noise

        return add_gaussian_noise(values, flooding_sigma(self.params, flooding_bits), generator=generator)


class CKKSEncryptedVector:
    """An encrypted real vector of any length: ``length`` values in one or more
    TenSEAL CKKSVectors of at most ``slot_count`` slots."""

    __slots__ = ("context", "chunks", "length")

    def __init__(self, context: _ContextBase, chunks: List[ts.CKKSVector], length: int):
        self.context = context
        self.chunks = chunks
        self.length = int(length)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"CKKSEncryptedVector(length={self.length}, ciphertexts={len(self.chunks)})"

    @property
    def full_slots(self) -> bool:
        slots = self.context.params.slot_count
        return all(chunk.size() == slots for chunk in self.chunks)

    def __add__(self, other: "CKKSEncryptedVector") -> "CKKSEncryptedVector":
        if not isinstance(other, CKKSEncryptedVector):
            raise TypeError(f"expected a CKKSEncryptedVector, got {type(other).__name__}")
        if other.length != self.length or [c.size() for c in other.chunks] != [c.size() for c in self.chunks]:
            raise ValueError(f"vector layouts differ (lengths {self.length} and {other.length})")
        return CKKSEncryptedVector(self.context, [a + b for a, b in zip(self.chunks, other.chunks)], self.length)

    def add_fresh(self, values: Any) -> "CKKSEncryptedVector":
        """``self + Enc(values)`` with a fresh encryption, which re-randomizes the result."""
        return self + self.context.encrypt(values, full_slots=self.full_slots)

    def dot(self, matrix: Any) -> "CKKSEncryptedVector":
        """Vector-matrix product Enc(a)^T X for a real (length, p) matrix, packed
        into ceil(p / slot_count) ciphertexts. Needs a ``full_slots`` vector."""
        X, _ = as_float_array(matrix, "matrix", ndim=2, dtype=np.float64)
        if X.shape[0] != self.length:
            raise ValueError(f"matrix must have {self.length} rows, got shape {X.shape}")
        if not self.full_slots:
            raise ValueError("dot needs a vector encrypted with full_slots=True")
        slots = self.context.params.slot_count
        n_cols = X.shape[1]
        columns: List[ts.CKKSVector] = []
        for j in range(n_cols):
            total = None
            for k, chunk in enumerate(self.chunks):
                block = np.zeros(slots)
                rows = X[k * slots:(k + 1) * slots, j]
                block[:rows.shape[0]] = rows
                term = chunk.dot(block.tolist())
                total = term if total is None else total + term
            columns.append(total)
        packed = [ts.CKKSVector.pack_vectors(columns[s:s + slots]) for s in range(0, n_cols, slots)]
        return CKKSEncryptedVector(self.context, packed, n_cols)

    # -- wire form ---------------------------------------------------------
    def to_bytes(self) -> bytes:
        pieces = [chunk.serialize() for chunk in self.chunks]
        sizes = struct.pack(f">{len(pieces)}Q", *(len(p) for p in pieces))
        return _HEADER.pack(_MAGIC, self.length, len(pieces)) + sizes + b"".join(pieces)

    @classmethod
    def from_bytes(cls, context: _ContextBase, data: Any) -> "CKKSEncryptedVector":
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ValueError("encrypted CKKS vector bytes are shorter than the header")
        magic, length, count = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("not an encrypted CKKS vector")
        offset = _HEADER.size + 8 * count
        if count == 0 or len(data) < offset:
            raise ValueError("truncated encrypted CKKS vector")
        sizes = struct.unpack_from(f">{count}Q", data, _HEADER.size)
        if offset + sum(sizes) != len(data):
            raise ValueError("encrypted CKKS vector length does not match its header")
        chunks = []
        for size in sizes:
            try:
                chunks.append(ts.ckks_vector_from(context.tenseal, data[offset:offset + size]))
            except Exception as exc:
                raise ValueError(f"malformed CKKS ciphertext: {exc}") from None
            offset += size
        if sum(c.size() for c in chunks) < length:
            raise ValueError(f"ciphertexts hold fewer than the {length} values the header announces")
        return cls(context, chunks, length)

