"""CKKS (SEAL through TenSEAL) contexts and encrypted real vectors for vertical GLM training.

Roles: the key holder (coordinator) keeps a :class:`CKKSSecretContext`; every
other party receives :meth:`CKKSSecretContext.public_context_bytes` -- the
public key and the Galois keys of the power-of-two rotations, never the secret
key -- and works with a :class:`CKKSPublicContext`.

Parameters
----------
Default ring degree N = 8192 (S = 4096 slots), coefficient modulus primes of
60, 40, 40, 60 bits (200 bits; the HE standard's 128-bit bound for N = 8192 is
218 bits), scale 2^40. Vectors are encrypted at the level of the first two
primes (the third, unused by the protocol, is dropped: a fresh ciphertext is a
third smaller on the wire) and the vector-matrix product spends the one
multiplicative level left (see :meth:`CKKSEncryptedVector.dot`). The product
ends at the last level, whose 60-bit modulus holds values of magnitude below
2^19 (:attr:`CKKSParameters.max_decrypted_magnitude`), which bounds the masks
(see below).

Vector-matrix product
---------------------
``Enc(r)^T X`` for a plaintext X of b rows and d columns (b up to S per
ciphertext, d of about 10 in vertical GLMs) uses the diagonal layout of
Halevi and Shoup (CRYPTO 2014) in its "hybrid" form for a wide matrix
(Juvekar et al., GAZELLE, USENIX Security 2018), with baby-step giant-step
(Halevi and Shoup, CRYPTO 2018): with m the next power of two >= d and
W = X^T zero-padded to m x S,

    z = sum_{k < m} diag_k * rot(r, k),   diag_k[i] = W[i mod m, (i + k) mod S],

then a rotate-and-sum with strides m, 2m, ..., S/2 leaves output j in every
slot i with i mod m = j (columns d..m-1 are zero). Cost per batch: m
plaintext products per input ciphertext, about 2 sqrt(m) rotations for the
diagonals and log2(S / m) for the sum -- 14 rotations for d = 10 and one
ciphertext, against d (log2 S + 1) = 130 for the per-column rotate-and-sum it
replaces (``_per_column_dot``, the baseline of ``vflsec bench he``). Every
rotation is by a power of two, so the key holder generates and sends only
the log2(S) = 12 Galois keys of the steps 1, 2, 4, ..., S/2
(:func:`galois_steps`; TenSEAL's default is 24 keys, both signs of every
power of two), in SEAL's seeded form (half the bytes of expanded keys): the
public context is 8.8 MB (8.4 MiB) with the public key, instead of the
33.9 MB (32.3 MiB) of a TenSEAL context with its default keys.

The product's layout is part of the wire format: a chunk of ``size`` values
with period ``period`` holds value j in every slot i with i mod period = j
(j < size) and zeros elsewhere; a batch vector has period S.

Precision and noise flooding
----------------------------
CKKS decryption is approximate. The vector-matrix product decrypts with an
absolute error of about 2^-19 (measured: 2^-20.7 to 2^-17.6 over three keys,
for outputs of magnitude 1 to 64 and d = 1, 10, 17; the per-column product it
replaced, which spent a second level on packing, had about 2^-18 at magnitude
1, growing as 2^-20 |output|). :data:`ERROR_BITS_ABOVE_SCALE` fixes the bound used here at
2^-(scale_bits - 24) = 2^-16, which holds with margin for outputs up to
about 8 in magnitude, the range the protocol uses (masks added afterwards as
fresh encryptions do not count). Returning exact decryptions to a party that knows
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

import struct
from typing import Any, List, Optional, Sequence

import numpy as np

from ._dependencies import CKKS_INSTALL, missing_dependency

try:
    import tenseal as ts
    from tenseal import sealapi
except ImportError as _exc:
    raise missing_dependency("CKKS (vflsec.he.ckks)", _exc, CKKS_INSTALL) from _exc

from .._arrays import as_float_array, check_positive_int
from ._ckks_diagonal import diagonal_product as _diagonal_product
from ._ckks_params import (
    DEFAULT_FLOODING_BITS,
    DEFAULT_MASK_BOUND,
    ERROR_BITS_ABOVE_SCALE,
    HE_STANDARD_MAX_COEFF_BITS,
    CKKSParameters,
    Layout,
    batch_layout,
    flooding_sigma,
    galois_steps,
    product_layout,
    secure_uniform,
)
from ._ckks_params import next_power_of_two as _next_power_of_two  # noqa: F401  (tests and bench use it)
from ._seal_io import seal_load as _seal_load
from ._seal_io import seal_to_bytes as _seal_to_bytes
from .vector import AbstractEncryptedVector

__all__ = [
    "DEFAULT_FLOODING_BITS", "DEFAULT_MASK_BOUND", "ERROR_BITS_ABOVE_SCALE", "HE_STANDARD_MAX_COEFF_BITS",
    "CKKSEncryptedVector", "CKKSParameters", "CKKSPublicContext", "CKKSSecretContext",
    "Layout", "batch_layout", "flooding_sigma", "galois_steps", "product_layout", "secure_uniform",
]

# Wire formats. A vector: magic, length, number of ciphertexts, then per
# ciphertext (values, period, byte count), then SEAL's serialized ciphertexts.
_HEADER = struct.Struct(">3sII")
_CHUNK = struct.Struct(">IIQ")
_MAGIC = b"CV2"
# A public context: magic, byte counts of the TenSEAL context (public key only)
# and of SEAL's Galois keys, then the two.
_PUBLIC_HEADER = struct.Struct(">4sQQ")
_PUBLIC_MAGIC = b"CKP2"

# -- contexts ---------------------------------------------------------------------

def _new_tenseal_context(params: CKKSParameters) -> ts.Context:
    """Keys and parameters; no Galois keys (see :meth:`CKKSSecretContext.public_context_bytes`)."""
    context = ts.context(
        ts.SCHEME_TYPE.CKKS,
        poly_modulus_degree=params.poly_modulus_degree,
        coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes),
    )
    context.global_scale = 2.0 ** params.scale_bits
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
    """What every party can do: encrypt, add, multiply by a plaintext matrix."""

    def __init__(self, context: ts.Context, params: CKKSParameters):
        self.tenseal = context
        self.params = params
        self.seal = context.seal_context().data
        self.scale = 2.0 ** params.scale_bits
        self._encoder = sealapi.CKKSEncoder(self.seal)
        self._encryptor = sealapi.Encryptor(self.seal, context.public_key().data)
        self._evaluator = sealapi.Evaluator(self.seal)
        # Levels by chain index: 0 is the last (first prime only); vectors are
        # encrypted at 1, the product's input level, whose rescale lands on 0.
        data = self.seal.last_context_data()
        self._levels = [data.parms_id()]
        while data.prev_context_data() is not None:
            data = data.prev_context_data()
            self._levels.append(data.parms_id())
        mid = self.seal.get_context_data(self._levels[1])
        self._rescale_prime = float(mid.parms().coeff_modulus()[-1].value())
        self._galois: Any = None

    @property
    def galois_keys(self) -> Any:
        """SEAL's Galois keys of :func:`galois_steps` (for the product's rotations)."""
        if self._galois is None:
            self._galois = self._load_galois_keys()
        return self._galois

    def _load_galois_keys(self) -> Any:
        raise NotImplementedError

    def level(self, ciphertext: Any) -> int:
        """Chain index of a ciphertext's level (0: the last)."""
        return int(self.seal.get_context_data(ciphertext.parms_id()).chain_index())

    def encrypt(self, values: Any, *, period: Optional[int] = None, full_slots: bool = True) -> "CKKSEncryptedVector":
        """Encrypt a real vector in ciphertexts of ``slot_count`` slots each.

        Every ciphertext is zero-padded to the full slot count (``full_slots``
        is accepted for compatibility and has no effect) and encrypted at the
        level the product starts from. ``period``: encrypt one ciphertext in
        a product's layout and at its (last) level instead -- the values, at
        most ``period`` of them, repeated every ``period`` slots; a power of
        two -- e.g. a value to add to a product.
        """
        arr, _ = as_float_array(values, "values", ndim=1, dtype=np.float64)
        slots = self.params.slot_count
        if period is None:
            layout = batch_layout(arr.shape[0], slots)
        else:
            period = check_positive_int(period, "period")
            if period > slots or period & (period - 1):
                raise ValueError(f"period must be a power of two <= {slots}, got {period}")
            if arr.shape[0] > period:
                raise ValueError(f"{arr.shape[0]} values do not fit a period of {period}")
            return self._encrypt_layout(arr, ((arr.shape[0], period),), [self._levels[0]])
        return self._encrypt_layout(arr, layout, [self._levels[1]] * len(layout))

    def _layout_blocks(self, arr: np.ndarray, layout: Layout) -> List[np.ndarray]:
        """Per ciphertext, its slots' values: the chunk's values, zero-padded to
        its period and repeated ``slot_count / period`` times."""
        slots = self.params.slot_count
        blocks, start = [], 0
        for size, period in layout:
            block = np.zeros(period)
            block[:size] = arr[start:start + size]
            start += size
            blocks.append(np.tile(block, slots // period))
        return blocks

    def _encode(self, slot_values: np.ndarray, parms_id: Any, scale: float) -> Any:
        plain = sealapi.Plaintext()
        self._encoder.encode(slot_values.tolist(), parms_id, scale, plain)
        return plain

    def _encrypt_layout(self, arr: np.ndarray, layout: Layout, levels: Sequence[Any]) -> "CKKSEncryptedVector":
        chunks = []
        for slot_values, parms_id in zip(self._layout_blocks(arr, layout), levels):
            ciphertext = sealapi.Ciphertext()
            self._encryptor.encrypt(self._encode(slot_values, parms_id, self.scale), ciphertext)
            chunks.append(ciphertext)
        return CKKSEncryptedVector(self, chunks, arr.shape[0], layout)

    def vector_from_bytes(self, data: Any) -> "CKKSEncryptedVector":
        return CKKSEncryptedVector.from_bytes(self, data)


def _expected_galois_elements(seal_context: Any, params: CKKSParameters) -> List[int]:
    tool = seal_context.key_context_data().galois_tool()
    return [int(e) for e in tool.get_elts_from_steps(list(galois_steps(params)))]


class CKKSPublicContext(_ContextBase):
    """A party's view: public key and the Galois keys of :func:`galois_steps`, no secret key."""

    def __init__(self, context: ts.Context, params: CKKSParameters, galois_keys: Any):
        super().__init__(context, params)
        self._galois = galois_keys

    @classmethod
    def from_bytes(cls, data: Any, params: Optional[CKKSParameters] = None) -> "CKKSPublicContext":
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _PUBLIC_HEADER.size or data[:4] != _PUBLIC_MAGIC:
            raise ValueError("not a serialized vflsec CKKS public context (expected the "
                             f"{_PUBLIC_MAGIC.decode()} format of CKKSSecretContext.public_context_bytes)")
        _magic, n_context, n_galois = _PUBLIC_HEADER.unpack_from(data)
        if _PUBLIC_HEADER.size + n_context + n_galois != len(data):
            raise ValueError("CKKS public context length does not match its header")
        offset = _PUBLIC_HEADER.size
        try:
            context = ts.context_from(data[offset:offset + n_context])
        except Exception as exc:  # TenSEAL raises several types on malformed input
            raise ValueError(f"not a serialized TenSEAL context: {exc}") from None
        if context.has_secret_key() or context.is_private():
            raise ValueError("the received CKKS context contains a secret key; only public contexts are accepted")
        if not context.has_public_key():
            raise ValueError("the received CKKS context lacks the public key")
        if context.has_galois_keys():
            raise ValueError("the received TenSEAL context carries its own Galois keys; only the "
                             "power-of-two rotation keys are sent, separately")
        params = params or CKKSParameters()
        _check_matches(context, params)
        seal = context.seal_context().data
        galois = sealapi.GaloisKeys()
        try:
            _seal_load(galois, seal, data[offset + n_context:])
        except Exception as exc:
            raise ValueError(f"malformed CKKS Galois keys: {exc}") from None
        expected = _expected_galois_elements(seal, params)
        if galois.size() != len(expected) or not all(galois.has_key(e) for e in expected):
            present = [s for s, e in zip(galois_steps(params), expected) if galois.has_key(e)]
            raise ValueError(
                f"the received CKKS context has {galois.size()} Galois keys, for the power-of-two steps {present} "
                f"and {galois.size() - len(present)} others; expected exactly the steps "
                f"{list(galois_steps(params))}"
            )
        return cls(context, params, galois)

    def _load_galois_keys(self) -> Any:  # pragma: no cover - set in __init__
        raise AssertionError("a public context is built with its Galois keys")


class CKKSSecretContext(_ContextBase):
    """The key holder's context: decrypts, and floods what it returns."""

    def __init__(self, params: Optional[CKKSParameters] = None):
        params = params or CKKSParameters()
        if not isinstance(params, CKKSParameters):
            raise TypeError(f"params must be CKKSParameters, got {type(params).__name__}")
        super().__init__(_new_tenseal_context(params), params)
        self._decryptor = sealapi.Decryptor(self.seal, self.tenseal.secret_key().data)
        self._public_bytes: Optional[bytes] = None

    def public_context_bytes(self) -> bytes:
        """Serialized public context: the TenSEAL context with the public key
        only, and the Galois keys of :func:`galois_steps` in SEAL's seeded form
        (half the size of expanded keys). Made once per context."""
        if self._public_bytes is None:
            tenseal_part = self.tenseal.serialize(
                save_public_key=True, save_secret_key=False, save_galois_keys=False, save_relin_keys=False
            )
            keygen = sealapi.KeyGenerator(self.seal, self.tenseal.secret_key().data)
            galois = _seal_to_bytes(keygen.create_galois_keys(_expected_galois_elements(self.seal, self.params)))
            self._public_bytes = (_PUBLIC_HEADER.pack(_PUBLIC_MAGIC, len(tenseal_part), len(galois))
                                  + tenseal_part + galois)
        return self._public_bytes

    def public_context(self) -> CKKSPublicContext:
        return CKKSPublicContext.from_bytes(self.public_context_bytes(), self.params)

    def _load_galois_keys(self) -> Any:
        return self.public_context().galois_keys

    def decrypt(self, vector: "CKKSEncryptedVector") -> np.ndarray:
        """Exact CKKS decryption. Never return this to another party: use
        :meth:`decrypt_flooded`."""
        if not isinstance(vector, CKKSEncryptedVector):
            raise TypeError(f"expected a CKKSEncryptedVector, got {type(vector).__name__}")
        values: List[float] = []
        for chunk, (size, _period) in zip(vector.chunks, vector.layout):
            plain = sealapi.Plaintext()
            self._decryptor.decrypt(chunk, plain)
            values.extend(self._encoder.decode_double(plain)[:size])
        return np.asarray(values, dtype=np.float64)

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


class CKKSEncryptedVector(AbstractEncryptedVector):
    """An encrypted real vector of any length: ``length`` values in one or more
    SEAL ciphertexts of ``slot_count`` slots, in ``layout`` (per ciphertext:
    values, period; see the module docstring). The constructor's default
    layout is a batch vector's. The contract of
    :class:`vflsec.he.vector.AbstractEncryptedVector`: a product with a
    plaintext (``*``, :meth:`mul_plain`, :meth:`mul_scalar`, :meth:`dot`)
    spends one level of the modulus chain, so it needs a vector above the
    last level (a fresh encryption or a sum of them); ``+`` aligns levels."""

    __slots__ = ("context", "chunks", "length", "layout")
    scheme = "ckks"

    def __init__(self, context: _ContextBase, chunks: List[Any], length: int, layout: Optional[Layout] = None):
        self.context = context
        self.chunks = list(chunks)
        self.length = int(length)
        slots = context.params.slot_count
        if layout is None:
            layout = batch_layout(self.length, slots)
        self.layout: Layout = tuple((int(size), int(period)) for size, period in layout)
        if len(self.layout) != len(self.chunks) or sum(size for size, _ in self.layout) != self.length:
            raise ValueError(f"a layout of {list(self.layout)} does not describe {self.length} values in "
                             f"{len(self.chunks)} ciphertexts")

    @property
    def size(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"CKKSEncryptedVector(length={self.length}, ciphertexts={len(self.chunks)})"

    def add(self, other: "CKKSEncryptedVector") -> "CKKSEncryptedVector":
        """Elementwise Enc(a) + Enc(b) in the same layout; the operand at the
        higher level drops to the other's."""
        if not isinstance(other, CKKSEncryptedVector):
            raise TypeError(f"expected a CKKSEncryptedVector, got {type(other).__name__}")
        if other.layout != self.layout:
            raise ValueError(f"vector layouts differ (lengths {self.length} and {other.length}, "
                             f"layouts {list(self.layout)} and {list(other.layout)})")
        ctx = self.context
        out = []
        for a, b in zip(self.chunks, other.chunks):
            # Same scale everywhere; the operand at the higher level drops to the lower one.
            if ctx.level(a) > ctx.level(b):
                a = self._switched(a, b.parms_id())
            elif ctx.level(b) > ctx.level(a):
                b = self._switched(b, a.parms_id())
            total = sealapi.Ciphertext()
            try:
                ctx._evaluator.add(a, b, total)
            except RuntimeError as exc:  # SEAL: "result ciphertext is transparent"
                raise ValueError(f"the sum would carry its values in the clear ({exc}): the operands differ "
                                 "by plaintext terms only (e.g. v - v.add_plain(x)); add a fresh encryption "
                                 "(add_fresh) to one of them") from None
            out.append(total)
        return CKKSEncryptedVector(ctx, out, self.length, self.layout)

    def _switched(self, ciphertext: Any, parms_id: Any) -> Any:
        out = sealapi.Ciphertext()
        self.context._evaluator.mod_switch_to(ciphertext, parms_id, out)
        return out

    def _checked_values(self, values: Any) -> np.ndarray:
        arr, _ = as_float_array(values, "values", ndim=1, dtype=np.float64)
        if arr.shape[0] != self.length:
            raise ValueError(f"expected {self.length} values, got {arr.shape[0]}")
        return arr

    def add_plain(self, values: Any) -> "CKKSEncryptedVector":
        """Elementwise Enc(a) + x, x encoded in this vector's layout, level and
        scale. The result is not re-randomized: whoever holds the ciphertext it
        was computed from can subtract it and read x; to send the result to
        such a party, use :meth:`add_fresh`."""
        arr = self._checked_values(values)
        ctx = self.context
        out = []
        for chunk, slot_values in zip(self.chunks, ctx._layout_blocks(arr, self.layout)):
            total = sealapi.Ciphertext()
            ctx._evaluator.add_plain(chunk, ctx._encode(slot_values, chunk.parms_id(), chunk.scale), total)
            out.append(total)
        return CKKSEncryptedVector(ctx, out, self.length, self.layout)

    def mul_plain(self, values: Any) -> "CKKSEncryptedVector":
        """Elementwise Enc(a_i) * x_i, one level lower (the product is rescaled
        by the level's last prime, so the scale stays 2^scale_bits). The vector
        must be above the last level. Range: |a_i x_i| must stay below
        :attr:`CKKSParameters.max_decrypted_magnitude` at the last level."""
        arr = self._checked_values(values)
        ctx = self.context
        if any(ctx.level(c) < 1 for c in self.chunks):
            raise ValueError("a product with a plaintext needs a vector above the last level (a fresh encryption "
                             "or a sum of them); this one is at the last level")
        out = []
        for chunk, slot_values, (size, period) in zip(self.chunks, ctx._layout_blocks(arr, self.layout),
                                                      self.layout):
            data = ctx.seal.get_context_data(chunk.parms_id())
            if not slot_values.any():
                # SEAL refuses a product with a zero plaintext (a transparent ciphertext): a fresh zero instead.
                lower = data.next_context_data().parms_id()
                out.append(ctx._encrypt_layout(np.zeros(size), ((size, period),), [lower]).chunks[0])
                continue
            prime = float(data.parms().coeff_modulus()[-1].value())
            term = sealapi.Ciphertext()
            ctx._evaluator.multiply_plain(chunk, ctx._encode(slot_values, chunk.parms_id(), prime), term)
            ctx._evaluator.rescale_to_next_inplace(term)
            out.append(term)
        return CKKSEncryptedVector(ctx, out, self.length, self.layout)

    def neg(self) -> "CKKSEncryptedVector":
        """Elementwise -Enc(a), same layout and level."""
        out = []
        for chunk in self.chunks:
            negated = sealapi.Ciphertext()
            self.context._evaluator.negate(chunk, negated)
            out.append(negated)
        return CKKSEncryptedVector(self.context, out, self.length, self.layout)

    def decrypt(self, secret: Any) -> np.ndarray:
        """Exact decryption with the key holder's :class:`CKKSSecretContext`
        (``secret.decrypt(self)``); what leaves the key holder goes through
        :meth:`CKKSSecretContext.decrypt_flooded` instead."""
        if not isinstance(secret, CKKSSecretContext):
            raise TypeError(f"decrypting needs the key holder's CKKSSecretContext, got {type(secret).__name__}")
        return secret.decrypt(self)

    def add_fresh(self, values: Any) -> "CKKSEncryptedVector":
        """``self + Enc(values)`` with a fresh encryption (in this vector's layout
        and level), which re-randomizes the result."""
        arr = self._checked_values(values)
        fresh = self.context._encrypt_layout(arr, self.layout, [c.parms_id() for c in self.chunks])
        return self + fresh

    def dot(self, matrix: Any) -> "CKKSEncryptedVector":
        """Vector-matrix product Enc(a)^T X for a real (length, p) matrix, in the
        layout :func:`product_layout` (one ciphertext per ``slot_count``
        columns), at the last level.

        Diagonal layout with baby-step giant-step (module docstring); every
        rotation is by a power of two. The vector must be a batch vector
        (period ``slot_count``) above the last level, e.g. a fresh encryption
        or a sum of them. Range: for every column j, sum_i |a_i X_ij| must stay
        below :attr:`CKKSParameters.max_decrypted_magnitude` (2^19 by default),
        or the result wraps around silently (its partial sums are held at the
        last level). Error: about 2^-19, below 2^-16 (module docstring).
        """
        X, _ = as_float_array(matrix, "matrix", ndim=2, dtype=np.float64)
        if X.shape[0] != self.length:
            raise ValueError(f"matrix must have {self.length} rows, got shape {X.shape}")
        ctx = self.context
        slots = ctx.params.slot_count
        if any(period != slots for _, period in self.layout):
            raise ValueError("dot needs a batch vector (one value per slot); this one holds a packed product")
        if any(ctx.level(c) < 1 for c in self.chunks):
            raise ValueError("dot needs a vector above the last level (a fresh encryption or a sum of them); "
                             "a product cannot be multiplied again")
        inputs = [self._switched(c, ctx._levels[1]) for c in self.chunks]
        offsets = np.cumsum([0] + [size for size, _ in self.layout])
        out = []
        for start in range(0, X.shape[1], slots):
            block = X[:, start:start + slots]
            out.append(_diagonal_product(ctx, inputs, [block[offsets[k]:offsets[k + 1]]
                                                       for k in range(len(inputs))]))
        return CKKSEncryptedVector(ctx, out, X.shape[1], product_layout(X.shape[1], slots))

    # -- wire form ---------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The CV2 wire form: header, per-ciphertext (values, period, bytes), SEAL's ciphertexts."""
        pieces = [_seal_to_bytes(chunk) for chunk in self.chunks]
        header = _HEADER.pack(_MAGIC, self.length, len(pieces))
        table = b"".join(_CHUNK.pack(size, period, len(piece)) for (size, period), piece in zip(self.layout, pieces))
        return header + table + b"".join(pieces)

    @classmethod
    def from_bytes(cls, key_or_context: Any, data: Any) -> "CKKSEncryptedVector":
        """Parse :meth:`to_bytes` output under a public or secret context,
        checking the header, the layout and every SEAL ciphertext."""
        if not isinstance(key_or_context, _ContextBase):
            raise TypeError(f"key_or_context must be a CKKSPublicContext or CKKSSecretContext, "
                            f"got {type(key_or_context).__name__}")
        context = key_or_context
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ValueError("encrypted CKKS vector bytes are shorter than the header")
        magic, length, count = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("not an encrypted CKKS vector (expected the CV2 format)")
        offset = _HEADER.size + _CHUNK.size * count
        if count == 0 or len(data) < offset:
            raise ValueError("truncated encrypted CKKS vector")
        slots = context.params.slot_count
        entries = [_CHUNK.unpack_from(data, _HEADER.size + _CHUNK.size * k) for k in range(count)]
        for size, period, _ in entries:
            if not 1 <= size <= period <= slots or period & (period - 1):
                raise ValueError(f"a ciphertext of {size} values with period {period}: expected "
                                 f"1 <= values <= period <= {slots}, the period a power of two")
        if sum(size for size, _, _ in entries) != length:
            raise ValueError(f"the ciphertexts hold {sum(size for size, _, _ in entries)} values, the header "
                             f"announces {length}")
        if offset + sum(n for _, _, n in entries) != len(data):
            raise ValueError("encrypted CKKS vector length does not match its header")
        chunks = []
        for _size, _period, n in entries:
            ciphertext = sealapi.Ciphertext()
            try:
                _seal_load(ciphertext, context.seal, data[offset:offset + n])
            except Exception as exc:
                raise ValueError(f"malformed CKKS ciphertext: {exc}") from None
            offset += n
            if ciphertext.size() != 2 or not ciphertext.is_ntt_form() or ciphertext.scale != context.scale:
                raise ValueError(f"a CKKS ciphertext of {ciphertext.size()} polynomials at scale "
                                 f"{ciphertext.scale:g}; expected 2 polynomials in NTT form at scale "
                                 f"2^{context.params.scale_bits}")
            chunks.append(ciphertext)
        return cls(context, chunks, length, tuple((size, period) for size, period, _ in entries))
