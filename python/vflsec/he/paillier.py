"""Paillier encryption of real vectors with a fixed-point encoding, parallel
vector operations and a byte format for the wire.

Keys come from ``phe`` (python-paillier, backed by gmpy2); the vector operations
work on the raw integers in chunks, on this process's executor
(:mod:`vflsec.he.executor`: the local process pool of ``vflsec.he._pool`` by
default, or a Ray cluster). Only public values go to the executor;
decryption stays in the key holder's process and its local pool.

Fixed-point encoding
--------------------
A real x is stored as the integer round(x * 2^40) modulo n: precision 2^-40
(about 9.1e-13), phe exponent -10 in phe's base 16. Every fresh ciphertext uses
this one exponent ("level 1"), so ciphertexts add without
``decrease_exponent_to``. Multiplying a level-k ciphertext by an encoded
plaintext gives level k+1, scale 2^(40(k+1)); the Hardy et al. gradient is
level 2 (residual times feature). Decoding is signed: integers above n/2 are
negative. Encoding accepts |x| * 2^(40 k) <= n/3 (phe's ``max_int``); for
2048-bit keys that is |x| < 2^1965 at level 2, so the range only matters for
results of many chained products, which the caller must keep below n/2.

Wire format of an encrypted vector: ``b"PV1"``, exponent (int16), count
(uint32), ciphertext length L (uint32), then ``count`` ciphertexts as L-byte
big-endian integers, L = ceil(2 * key_bits / 8) because c < n^2. Vectors are
re-randomized (multiplied by a fresh r^n) before they are serialized unless
they come straight from encryption, so a party never sends a ciphertext whose
randomness another party can relate to one it sent.

Fast encryption and its security argument
------------------------------------------
Keys made by :func:`generate_keypair` have p = q = 3 (mod 4) and
gcd(p - 1, q - 1) = 2 (an "admissible" modulus, as DJN and HEU's ZPaillier
require) and carry ``hs = (-x^2)^n mod n^2`` for a random unit x. Encryption
and re-randomization then use ``hs^alpha`` with alpha uniform of ceil(k/2)
bits (k = bits of n) in place of ``r^n`` (Damgard, Jurik & Nielsen, "A
generalization of Paillier's public-key system with applications to
electronic voting", IJIS 2010, Sec. 4.2). Security rests on DCR (as plain
Paillier) plus the indistinguishability of ``h^alpha`` for a half-length
alpha from ``h^r`` for a full-length one in the group of Jacobi symbol 1,
which holds if factoring n is hard (Hastad, Schrift & Shamir, "The discrete
logarithm modulo a composite hides O(n) bits", JCSS 1993); the best known
direct attack on the short exponent (Pollard's lambda) costs 2^(k/4) group
operations: 2^512 at 2048 bits, 2^768 at 3072, far above the 112 / 128-bit
security the modulus itself gives (NIST SP 800-57). ``hs^alpha`` is computed
from a fixed-base table of 8-bit digits built once per key and process: one
modular product per digit. Where the CPU has AVX-512 IFMA the C++ core does
it (cpp/paillier_fixed_base.cpp: Montgomery products in radix 2^52, eight
values per instruction; table 20 MB and ~25 ms at 2048 bits, 45 MB and
~75 ms at 3072): per CPU-second 7-8x gmpy2's rate and 6x HEU ZPaillier's
at 2048 and 3072 bits (one run, one machine). Elsewhere gmpy2 does it (16 MB
and ~0.15 s at 2048 bits; 38 MB at 3072). Both draw alpha from ``secrets``
and give the same ciphertext for the same alpha. No GMP is linked (so the
wheel bundles none): Montgomery products built from GMP's public mpn
functions took 3.0-3.3 us mod a 4096-bit n^2, against 3.6 us for gmpy2's
``a * b % m`` and 0.4 us per product in the IFMA kernel. A key without
``hs`` (a bare ``phe`` key, ``PaillierPublicKey(n)``) uses the classic
``r^n``; both produce ordinary Paillier ciphertexts that ``phe`` decrypts.

Masks for decryption by a third party are uniform in Z_n: Enc(g) * Enc(R)
decrypts to g + R mod n, which is uniform whatever g is (a one-time pad), so
the key holder learns nothing about g.
"""
from __future__ import annotations

import secrets
import struct
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from ._dependencies import PAILLIER_INSTALL, missing_dependency

try:
    import gmpy2
    import phe
except ImportError as _exc:
    raise missing_dependency("Paillier (vflsec.he.paillier)", _exc, PAILLIER_INSTALL) from _exc

from .._arrays import as_float_array, check_positive_int
from . import _paillier_math as _pm
from ._paillier_randomness import RandomnessPool, RandomnessStream
from ._pool import chunk_bounds
from .executor import even_bounds, executor_for, run_chunks, split_work
from .vector import AbstractEncryptedVector

SCALE_BITS = 40
"""Fractional bits of the fixed-point encoding (precision 2^-40)."""

PHE_EXPONENT = -10
"""The same encoding as a phe exponent: phe's base is 16 and 16^-10 = 2^-40."""

DEFAULT_KEY_BITS = 3072
"""Modulus size for 128-bit security (NIST SP 800-57 Part 1, Table 2)."""

MIN_KEY_BITS = 2048

Randomness = Union[RandomnessPool, RandomnessStream]
"""Randomizers computed ahead of time that encryption and re-randomization take from."""

_HEADER = struct.Struct(">3shII")
_MAGIC = b"PV1"

# Below this many items a pool round trip costs more than it saves.
_MIN_CHUNK_EXP = 4       # chunk of full-size exponentiations (encrypt, obfuscate, decrypt)
_MIN_CHUNK_MUL = 64      # chunk of short-exponent products


class WeakKeyWarning(UserWarning):
    """A key below 128-bit security was requested (allowed for comparisons)."""


def check_key_bits(key_bits: Any, *, warn: bool = True) -> int:
    """Validate a Paillier modulus size: >= 2048 bits; below 3072 warns (unless ``warn=False``)."""
    key_bits = check_positive_int(key_bits, "key_bits")
    if key_bits < MIN_KEY_BITS:
        raise ValueError(
            f"key_bits={key_bits} is insecure; Paillier keys need at least {MIN_KEY_BITS} bits "
            f"({DEFAULT_KEY_BITS} for 128-bit security)"
        )
    if warn and key_bits < DEFAULT_KEY_BITS:
        warnings.warn(
            f"key_bits={key_bits} gives about 112-bit security; use {DEFAULT_KEY_BITS} for 128-bit "
            "(smaller keys are allowed to compare with FATE and the HDP-VFL paper)",
            WeakKeyWarning,
            stacklevel=3,
        )
    return key_bits


def _level_scale(level: int) -> int:
    return 1 << (SCALE_BITS * level)


def _check_level(level: Any) -> int:
    return check_positive_int(level, "level")


class PaillierPublicKey:
    """Public key: encryption and the encoding. ``phe`` is the python-paillier key."""

    __slots__ = ("n", "nsquare", "key_bits", "ciphertext_bytes", "plaintext_bytes", "max_int", "phe", "hs")

    def __init__(self, n: int, hs: Optional[int] = None):
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if n.bit_length() < MIN_KEY_BITS or n % 2 == 0:
            raise ValueError(f"n must be an odd modulus of at least {MIN_KEY_BITS} bits")
        if hs is not None:
            if not isinstance(hs, int) or isinstance(hs, bool) or not 1 < hs < n * n or gmpy2.gcd(hs, n) != 1:
                raise ValueError("hs must be a unit modulo n^2 (the DJN fixed base)")
        self.hs = hs
        self.n = n
        self.nsquare = n * n
        self.key_bits = n.bit_length()
        self.ciphertext_bytes = -(-2 * self.key_bits // 8)
        self.plaintext_bytes = -(-self.key_bits // 8)
        self.max_int = n // 3 - 1
        self.phe = phe.PaillierPublicKey(n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaillierPublicKey) and other.n == self.n

    def __hash__(self) -> int:
        return hash(self.n)

    def __repr__(self) -> str:
        return f"PaillierPublicKey(key_bits={self.key_bits})"

    # -- wire form ---------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        payload = {"scheme": "paillier", "n": self.n.to_bytes(self.plaintext_bytes, "big")}
        if self.hs is not None:
            payload["hs"] = self.hs.to_bytes(self.ciphertext_bytes, "big")
        return payload

    @classmethod
    def from_dict(cls, payload: Any) -> "PaillierPublicKey":
        if not isinstance(payload, dict) or payload.get("scheme") != "paillier":
            raise ValueError("not a Paillier public key payload")
        n_bytes = payload.get("n")
        if not isinstance(n_bytes, (bytes, bytearray)):
            raise ValueError("Paillier public key payload lacks the modulus bytes")
        hs_bytes = payload.get("hs")
        if hs_bytes is not None and not isinstance(hs_bytes, (bytes, bytearray)):
            raise ValueError("Paillier public key payload has a malformed fixed base")
        return cls(int.from_bytes(n_bytes, "big"), None if hs_bytes is None else int.from_bytes(hs_bytes, "big"))

    # -- encoding ----------------------------------------------------------
    def encode_signed(self, values: Any, level: int = 1, name: str = "values") -> np.ndarray:
        """Fixed-point integers round(x * 2^(40 level)) as an object array, unreduced."""
        level = _check_level(level)
        arr, _ = as_float_array(values, name, allow_empty=True)
        with np.errstate(over="ignore"):
            scaled = np.rint(arr.astype(np.float64) * float(_level_scale(level)))
        if not np.all(np.isfinite(scaled)):
            raise ValueError(f"{name} is too large for the fixed-point encoding at level {level}")
        # Floats of magnitude >= 2^52 are integers, so int() is exact.
        # cast: a ufunc applied to an array returns an array (the stubs also allow a scalar).
        ints = (cast(np.ndarray, np.frompyfunc(int, 1, 1)(scaled)) if scaled.size
                else np.empty(scaled.shape, dtype=object))
        if ints.size and max(abs(int(ints.max())), abs(int(ints.min()))) > self.max_int:
            raise ValueError(f"{name} exceeds the plaintext range of a {self.key_bits}-bit key at level {level}")
        return ints.astype(object)

    def encode(self, values: Any, level: int = 1, name: str = "values") -> List[int]:
        """Fixed-point plaintexts of a 1-D vector, reduced modulo n."""
        ints = self.encode_signed(values, level, name)
        if ints.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {ints.shape}")
        n = self.n
        return [int(v) % n for v in ints]

    def decode(self, plaintexts: Sequence[int], level: int = 1) -> np.ndarray:
        """Signed fixed-point decoding of integers in [0, n) to float64."""
        level = _check_level(level)
        scale = _level_scale(level)
        n, half = self.n, self.n // 2
        # int / int is correctly rounded, unlike float(int) / scale for huge ints.
        return np.array([(m - n if m > half else m) / scale for m in plaintexts], dtype=np.float64)

    # -- encryption --------------------------------------------------------
    def encrypt(self, values: Any, *, processes: Optional[int] = None,
                randomness: Optional[Randomness] = None) -> "PaillierEncryptedVector":
        """Encrypt a 1-D real vector at level 1 (fresh randomness for every entry).

        ``randomness``: a pool from :meth:`precompute_randomness` or a stream from
        :meth:`randomness_stream`; its values are used (and removed) instead of
        computing randomizers now, which leaves one modular product per value online.
        """
        return self.encrypt_encoded(self.encode(values), level=1, processes=processes, randomness=randomness)

    def encrypt_encoded(self, plaintexts: Sequence[int], level: int = 1, *,
                        processes: Optional[int] = None,
                        randomness: Optional[Randomness] = None) -> "PaillierEncryptedVector":
        plaintexts = [int(m) % self.n for m in plaintexts]
        if randomness is not None:
            cts = _pm.encrypt_with(self.n, plaintexts, randomness.take(self, len(plaintexts)))
        else:
            cts = _parallel_list(_pm.encrypt_chunk, self, plaintexts, processes, _MIN_CHUNK_EXP)
        return PaillierEncryptedVector(self, cts, level=level, rerandomized=True)

    def precompute_randomness(self, count: int, *, processes: Optional[int] = None) -> "RandomnessPool":
        """``count`` encryption randomizers computed now (offline), for
        ``encrypt(..., randomness=pool)`` later: the expensive part of an
        encryption (h_s^alpha, or r^n for a key without h_s) moved ahead of time."""
        count = check_positive_int(count, "count", minimum=0)
        return RandomnessPool(self, _parallel_list(_pm.randomizers_chunk, self, [0] * count, processes,
                                                   _MIN_CHUNK_EXP))

    def randomness_stream(self, counts: Any, *, ahead: int = 2,
                          processes: Optional[int] = None) -> RandomnessStream:
        """The randomizers of a planned sequence of requests of ``counts`` values each
        (encryptions or re-randomizations, in order), made on the executor in the
        background, ``ahead`` requests ahead (:class:`RandomnessStream`)."""
        return RandomnessStream(self, counts, ahead=ahead, processes=processes)

    def random_mask(self, size: int) -> List[int]:
        """Uniform integers in [0, n): additive masks that hide a plaintext perfectly."""
        size = check_positive_int(size, "size", minimum=0)
        return [secrets.randbelow(self.n) for _ in range(size)]

    def unmask(self, masked: Sequence[int], mask: Sequence[int], level: int) -> np.ndarray:
        """Decode ``masked - mask`` (mod n): the plaintext behind a masked decryption."""
        if len(masked) != len(mask):
            raise ValueError(f"masked has {len(masked)} entries but mask has {len(mask)}")
        n = self.n
        return self.decode([(a - r) % n for a, r in zip(masked, mask)], level)

    # -- raw plaintexts on the wire ----------------------------------------
    def plaintexts_to_bytes(self, plaintexts: Sequence[int]) -> bytes:
        """Integers in [0, n) as fixed-length big-endian bytes (what a key holder returns)."""
        size = self.plaintext_bytes
        return b"".join(int(m).to_bytes(size, "big") for m in plaintexts)

    def plaintexts_from_bytes(self, data: Any) -> List[int]:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        size = self.plaintext_bytes
        if len(data) % size:
            raise ValueError(f"plaintext bytes length {len(data)} is not a multiple of {size}")
        out = [int.from_bytes(data[i:i + size], "big") for i in range(0, len(data), size)]
        if any(m >= self.n for m in out):
            raise ValueError("plaintext out of range [0, n)")
        return out


class PaillierPrivateKey:
    """Private key (the factors of n); ``phe`` is the python-paillier key."""

    __slots__ = ("public_key", "p", "q", "phe")

    def __init__(self, public_key: PaillierPublicKey, p: int, q: int):
        if p * q != public_key.n:
            raise ValueError("p * q does not equal the public modulus")
        self.public_key = public_key
        self.p, self.q = (p, q) if p < q else (q, p)
        self.phe = phe.PaillierPrivateKey(public_key.phe, self.p, self.q)

    def __repr__(self) -> str:
        return f"PaillierPrivateKey(key_bits={self.public_key.key_bits})"

    def decrypt_raw(self, vector: "PaillierEncryptedVector", *, processes: Optional[int] = None) -> List[int]:
        """Plaintext integers in [0, n), not decoded (masked values stay masked)."""
        if vector.public_key != self.public_key:
            raise ValueError("vector was encrypted under a different public key")
        # The chunks carry p and q: this process or its local pool only, whatever the executor.
        executor, workers = executor_for(processes, holds_secret=True)
        cts = vector.ciphertexts
        bounds = chunk_bounds(len(cts), workers, _MIN_CHUNK_EXP)
        parts = run_chunks(executor, _pm.decrypt_chunk, [(self.p, self.q, cts[a:b]) for a, b in bounds])
        return [m for part in parts for m in part]

    def decrypt(self, vector: "PaillierEncryptedVector", *, processes: Optional[int] = None) -> np.ndarray:
        """Decrypt and decode to float64 at the vector's level."""
        return self.public_key.decode(self.decrypt_raw(vector, processes=processes), vector.level)


def _blum_prime(bits: int) -> int:
    """A random ``bits``-bit prime p = 3 (mod 4) with its top two bits set (so a
    product of two has exactly 2 * bits bits)."""
    while True:
        candidate = secrets.randbits(bits) | (3 << (bits - 2)) | 3
        p = int(gmpy2.next_prime(candidate))
        if p % 4 == 3 and p.bit_length() == bits and gmpy2.is_prime(p, 64):
            return p


def generate_keypair(key_bits: int = DEFAULT_KEY_BITS) -> Tuple[PaillierPublicKey, PaillierPrivateKey]:
    """New Paillier key pair with an admissible modulus and a DJN fixed base (module
    docstring). key_bits >= 2048 and even; 2048 <= key_bits < 3072 warns."""
    key_bits = check_key_bits(key_bits)
    if key_bits % 2:
        raise ValueError(f"key_bits must be even, got {key_bits}")
    half = key_bits // 2
    while True:
        p, q = _blum_prime(half), _blum_prime(half)
        # gcd(p-1, q-1) = 2, and |p - q| > 2^(half - 100) against Fermat
        # factoring (the FIPS 186-4 bound for RSA primes).
        if gmpy2.gcd(p - 1, q - 1) == 2 and abs(p - q).bit_length() > half - 100:
            break
    n = p * q
    x = _pm.random_unit(n)
    hs = int(gmpy2.powmod((-x * x) % n, n, n * n))
    public_key = PaillierPublicKey(n, hs)
    return public_key, PaillierPrivateKey(public_key, p, q)


def _parallel_list(func, key: PaillierPublicKey, items: List[int], processes: Optional[int],
                   min_chunk: int) -> List[int]:
    executor, bounds = split_work(processes, len(items), min_chunk)
    parts = run_chunks(executor, func, [(key.n, items[a:b], key.hs) for a, b in bounds])
    return [v for part in parts for v in part]


def _dot_grid(rows: int, width: int, workers: int) -> Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]:
    """Row shards and column groups of a vector-matrix product for ``workers`` tasks at
    once: columns first (a row shard's multi-exponentiation gets cheaper per row the more
    rows it has: 1.17 s for 5000 rows x 10 columns in one block, 1.28 s in two row shards,
    1.40 s in four, here), one group per worker when there are enough columns, else one
    column per group and the rows split so that every worker has a block (shards of at
    least ``_MIN_CHUNK_MUL`` rows)."""
    if width >= workers:
        return [(0, rows)], even_bounds(width, workers)
    shards = max(1, min(workers // width, rows // _MIN_CHUNK_MUL))
    return even_bounds(rows, shards), even_bounds(width, width)


class PaillierEncryptedVector(AbstractEncryptedVector):
    """A vector of Paillier ciphertexts sharing one fixed-point level
    (the contract of :class:`vflsec.he.vector.AbstractEncryptedVector`).

    ``level``: the values are stored at scale 2^(40 level); a fresh
    encryption is at level 1 and every product with a plaintext (``*``,
    :meth:`mul_plain`, :meth:`mul_scalar`, :meth:`dot`) adds one. ``+`` needs
    equal levels. ``rerandomized`` is True when every ciphertext carries
    randomness nobody else has seen (fresh encryption or :meth:`obfuscate`);
    homomorphic results are not, and :meth:`to_bytes` re-randomizes them first.
    """

    __slots__ = ("public_key", "ciphertexts", "level", "rerandomized")
    scheme = "paillier"

    def __init__(self, public_key: PaillierPublicKey, ciphertexts: List[int], level: int = 1,
                 rerandomized: bool = False):
        self.public_key = public_key
        self.ciphertexts = list(ciphertexts)
        self.level = _check_level(level)
        self.rerandomized = bool(rerandomized)

    @property
    def size(self) -> int:
        return len(self.ciphertexts)

    def __repr__(self) -> str:
        return f"PaillierEncryptedVector(size={len(self)}, level={self.level}, key_bits={self.public_key.key_bits})"

    @property
    def exponent(self) -> int:
        """phe exponent of the entries (base 16)."""
        return PHE_EXPONENT * self.level

    def _same_shape(self, other: "PaillierEncryptedVector") -> None:
        if not isinstance(other, PaillierEncryptedVector):
            raise TypeError(f"expected a PaillierEncryptedVector, got {type(other).__name__}")
        if other.public_key != self.public_key:
            raise ValueError("vectors are encrypted under different public keys")
        if len(other) != len(self):
            raise ValueError(f"vector sizes differ: {len(self)} and {len(other)}")
        if other.level != self.level:
            raise ValueError(f"fixed-point levels differ: {self.level} and {other.level} (each product with "
                             "a plaintext adds a level; add_plain adds a plaintext at any level)")

    def add(self, other: "PaillierEncryptedVector") -> "PaillierEncryptedVector":
        """Elementwise Enc(a) + Enc(b) (same key, size and level)."""
        self._same_shape(other)
        nsq = gmpy2.mpz(self.public_key.nsquare)  # gmpy2 products: ~8x faster than Python ints at 4096 bits
        return PaillierEncryptedVector(self.public_key,
                               [int(gmpy2.mpz(a) * b % nsq) for a, b in zip(self.ciphertexts, other.ciphertexts)],
                               self.level)

    def add_plain(self, values: Any) -> "PaillierEncryptedVector":
        """Elementwise Enc(a) + x for a real vector x, encoded at this vector's level."""
        return self.add_encoded(self.public_key.encode(values, self.level))

    def neg(self) -> "PaillierEncryptedVector":
        """Elementwise Enc(-a): the inverse of each ciphertext modulo n^2, same level."""
        nsq = gmpy2.mpz(self.public_key.nsquare)
        try:
            inverses = [int(gmpy2.invert(c, nsq)) for c in self.ciphertexts]
        except ZeroDivisionError:  # a value sharing a factor with n: not a Paillier ciphertext
            raise ValueError("a ciphertext is not invertible modulo n^2 (not a valid Paillier ciphertext)") from None
        return PaillierEncryptedVector(self.public_key, inverses, self.level)

    def add_encoded(self, plaintexts: Sequence[int]) -> "PaillierEncryptedVector":
        """Elementwise Enc(a) + m for integers m (taken modulo n), e.g. masks."""
        if len(plaintexts) != len(self):
            raise ValueError(f"plaintext has {len(plaintexts)} entries, vector has {len(self)}")
        n, nsq = gmpy2.mpz(self.public_key.n), gmpy2.mpz(self.public_key.nsquare)
        # Enc(m) with randomness 1 is 1 + n m; the sum needs no exponentiation.
        cts = [int(gmpy2.mpz(c) * ((n * (int(m) % n) + 1) % nsq) % nsq) for c, m in zip(self.ciphertexts, plaintexts)]
        return PaillierEncryptedVector(self.public_key, cts, self.level)

    def mul_plain(self, values: Any, *, processes: Optional[int] = None) -> "PaillierEncryptedVector":
        """Elementwise Enc(a_i) * x_i; the result is one level deeper."""
        scalars = self.public_key.encode_signed(values, 1, "values")
        if scalars.ndim != 1 or scalars.shape[0] != len(self):
            raise ValueError(f"values must have shape ({len(self)},), got {scalars.shape}")
        cts, scalars = self.ciphertexts, scalars.tolist()
        executor, bounds = split_work(processes, len(cts), _MIN_CHUNK_MUL)
        parts = run_chunks(executor, _pm.mul_chunk,
                           [(self.public_key.n, cts[a:b], scalars[a:b]) for a, b in bounds])
        return PaillierEncryptedVector(self.public_key, [c for part in parts for c in part], self.level + 1)

    def dot(self, matrix: Any, *, processes: Optional[int] = None) -> "PaillierEncryptedVector":
        """Vector-matrix product Enc(a)^T X for a real (size, p) matrix; one level deeper."""
        encoded = self.public_key.encode_signed(matrix, 1, "matrix")
        if encoded.ndim != 2 or encoded.shape[0] != len(self):
            raise ValueError(f"matrix must have shape ({len(self)}, p), got {encoded.shape}")
        executor, workers = executor_for(processes)
        columns = encoded.T.tolist()
        n = self.public_key.n
        if executor.ships_arguments and len(self) > 1:
            return PaillierEncryptedVector(self.public_key, self._dot_blocks(executor, workers, columns),
                                           self.level + 1)
        # One Pippenger multi-exponentiation per column over all rows (the
        # bucket method gains with the number of bases), columns split among
        # the workers; one column per chunk at most, so a 10-column product
        # keeps every worker busy.
        bounds = chunk_bounds(len(columns), workers, 1)
        parts = run_chunks(executor, _pm.dot_columns_chunk,
                           [(n, self.ciphertexts, columns[a:b]) for a, b in bounds])
        return PaillierEncryptedVector(self.public_key, [c for part in parts for c in part], self.level + 1)

    def _dot_blocks(self, executor: Any, workers: int, columns: List[List[int]]) -> List[int]:
        """``dot`` on an executor whose tasks' arguments travel: one task per block of
        rows and columns (:func:`_dot_grid`), each block's product a Pippenger
        multi-exponentiation per column; a column's row shards multiply together
        (prod_i c_i^x_ij over all rows is the same residue mod n^2 in any grouping).
        Tasks of one row shard get the same list object, which the executor ships
        once (``RayExecutor`` stores it once in the object store)."""
        n, cts = self.public_key.n, self.ciphertexts
        if not columns:
            return []
        if len(cts) * len(columns) < executor.task_items(_MIN_CHUNK_MUL):
            return _pm.dot_columns_chunk(n, cts, columns)
        row_bounds, column_bounds = _dot_grid(len(cts), len(columns), workers)
        shards = [cts if (a, b) == (0, len(cts)) else cts[a:b] for a, b in row_bounds]
        parts = run_chunks(executor, _pm.dot_columns_chunk,
                           [(n, shard, [column[a:b] for column in columns[c:d]])
                            for (a, b), shard in zip(row_bounds, shards) for c, d in column_bounds])
        groups = len(column_bounds)
        return [value for j in range(groups)
                for value in _pm.multiply_shards(n, parts[j::groups])]

    def sum(self) -> "PaillierEncryptedVector":
        """Enc(sum_i a_i) as a one-entry vector."""
        nsq = gmpy2.mpz(self.public_key.nsquare)
        total = gmpy2.mpz(1)
        for c in self.ciphertexts:
            total = total * c % nsq
        return PaillierEncryptedVector(self.public_key, [int(total)], self.level)

    def obfuscate(self, *, processes: Optional[int] = None,
                  randomness: Optional[Randomness] = None) -> "PaillierEncryptedVector":
        """Same plaintexts under fresh randomness (one randomizer per entry; ``randomness``:
        taken from a pool or stream, which leaves one modular product per entry)."""
        if randomness is not None:
            cts = _pm.rerandomize_with(self.public_key.n, self.ciphertexts,
                                       randomness.take(self.public_key, len(self.ciphertexts)))
        else:
            cts = _parallel_list(_pm.obfuscate_chunk, self.public_key, self.ciphertexts, processes, _MIN_CHUNK_EXP)
        return PaillierEncryptedVector(self.public_key, cts, self.level, rerandomized=True)

    # -- wire form ---------------------------------------------------------
    def decrypt(self, secret: Any, *, processes: Optional[int] = None) -> np.ndarray:
        """The values as float64 (``secret.decrypt(self)``)."""
        if not isinstance(secret, PaillierPrivateKey):
            raise TypeError(f"decrypting needs a PaillierPrivateKey, got {type(secret).__name__}")
        return secret.decrypt(self, processes=processes)

    def to_bytes(self, *, processes: Optional[int] = None,
                 randomness: Optional[Randomness] = None) -> bytes:
        """Serialize, re-randomizing first unless the ciphertexts are already fresh
        (``randomness``: as :meth:`obfuscate` takes it)."""
        vector = self if self.rerandomized else self.obfuscate(processes=processes, randomness=randomness)
        size = self.public_key.ciphertext_bytes
        header = _HEADER.pack(_MAGIC, vector.exponent, len(vector), size)
        return header + b"".join(c.to_bytes(size, "big") for c in vector.ciphertexts)

    @classmethod
    def from_bytes(cls, key_or_context: Any, data: Any) -> "PaillierEncryptedVector":
        """Parse :meth:`to_bytes` output under a public (or private) key, checking
        sizes, level and ciphertext range.

        The result is not marked re-randomized: the sender knows its randomness.
        """
        public_key = key_or_context.public_key if isinstance(key_or_context, PaillierPrivateKey) \
            else key_or_context
        if not isinstance(public_key, PaillierPublicKey):
            raise TypeError(f"key_or_context must be a PaillierPublicKey (or PaillierPrivateKey), "
                            f"got {type(public_key).__name__}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ValueError("encrypted vector bytes are shorter than the header")
        magic, exponent, count, size = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("not an encrypted Paillier vector")
        if size != public_key.ciphertext_bytes:
            raise ValueError(f"ciphertext length {size} does not match a {public_key.key_bits}-bit key")
        if exponent >= 0 or exponent % PHE_EXPONENT:
            raise ValueError(f"exponent {exponent} is not a multiple of {PHE_EXPONENT}")
        if len(data) != _HEADER.size + count * size:
            raise ValueError(f"expected {count} ciphertexts of {size} bytes, got {len(data) - _HEADER.size} bytes")
        body = memoryview(data)[_HEADER.size:]
        nsq = public_key.nsquare
        cts = [int.from_bytes(body[i * size:(i + 1) * size], "big") for i in range(count)]
        if any(not 0 < c < nsq for c in cts):
            raise ValueError("ciphertext out of range (0, n^2)")
        return cls(public_key, cts, level=exponent // PHE_EXPONENT)

    def to_phe(self) -> List[phe.EncryptedNumber]:
        """The same ciphertexts as python-paillier EncryptedNumbers (same exponent)."""
        pk = self.public_key.phe
        return [phe.EncryptedNumber(pk, c, self.exponent) for c in self.ciphertexts]



EncryptedVector = PaillierEncryptedVector
"""The name of :class:`PaillierEncryptedVector` before CKKS shared its base (kept working)."""
