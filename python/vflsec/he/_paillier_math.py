"""Paillier arithmetic on plain integers: the work units the process pool runs.

Everything here takes and returns Python ints (and lists of them) so it can be
shipped to worker processes without key objects. The generator is g = n + 1,
as in phe, so that g^m = 1 + n*m (mod n^2) and encryption costs one modular
exponentiation, r^n mod n^2, which dominates. gmpy2 does the arithmetic.
"""
from __future__ import annotations

import secrets
from functools import lru_cache
from typing import List, Sequence, Tuple

import gmpy2


def random_unit(n: int) -> int:
    """Uniform r in [1, n) coprime to n (a non-unit would reveal a factor of n)."""
    while True:
        r = secrets.randbelow(n - 1) + 1
        if gmpy2.gcd(r, n) == 1:
            return r


def encrypt_chunk(n: int, plaintexts: Sequence[int]) -> List[int]:
    """Encrypt integers already reduced modulo n."""
    nsquare = gmpy2.mpz(n) * n
    mpz_n = gmpy2.mpz(n)
    out = []
    for m in plaintexts:
        nude = (mpz_n * m + 1) % nsquare
        out.append(int(nude * gmpy2.powmod(random_unit(n), mpz_n, nsquare) % nsquare))
    return out


def obfuscate_chunk(n: int, ciphertexts: Sequence[int]) -> List[int]:
    """Re-randomize: multiply each ciphertext by a fresh r^n, which leaves the plaintext."""
    nsquare = gmpy2.mpz(n) * n
    mpz_n = gmpy2.mpz(n)
    return [int(gmpy2.mpz(c) * gmpy2.powmod(random_unit(n), mpz_n, nsquare) % nsquare) for c in ciphertexts]


def _signed_power(c, e: int, nsquare):
    """c^e mod n^2 for a signed exponent; a negative one goes through the inverse,
    which keeps the exponent as short as |e| instead of n - |e|."""
    if e >= 0:
        return gmpy2.powmod(c, e, nsquare)
    return gmpy2.powmod(gmpy2.invert(c, nsquare), -e, nsquare)


def mul_chunk(n: int, ciphertexts: Sequence[int], scalars: Sequence[int]) -> List[int]:
    """Elementwise Enc(a_i) -> Enc(a_i * s_i) for signed integer scalars s_i."""
    nsquare = gmpy2.mpz(n) * n
    return [int(_signed_power(gmpy2.mpz(c), s, nsquare)) for c, s in zip(ciphertexts, scalars)]


def dot_chunk(n: int, ciphertexts: Sequence[int], rows: Sequence[Sequence[int]]) -> Tuple[List[int], List[int]]:
    """Partial vector-matrix product over a block of rows.

    Returns, per column j, the product of c_i^{x_ij} over the positive x_ij and the
    product of c_i^{|x_ij|} over the negative ones; the caller multiplies the blocks
    together and divides once per column, so there is one modular inversion per
    column instead of one per negative entry.
    """
    nsquare = gmpy2.mpz(n) * n
    n_cols = len(rows[0]) if rows else 0
    positive = [gmpy2.mpz(1)] * n_cols
    negative = [gmpy2.mpz(1)] * n_cols
    for c, row in zip(ciphertexts, rows):
        c = gmpy2.mpz(c)
        for j, e in enumerate(row):
            if e > 0:
                positive[j] = positive[j] * gmpy2.powmod(c, e, nsquare) % nsquare
            elif e < 0:
                negative[j] = negative[j] * gmpy2.powmod(c, -e, nsquare) % nsquare
    return [int(v) for v in positive], [int(v) for v in negative]


@lru_cache(maxsize=8)
def _crt_constants(p: int, q: int):
    p, q = gmpy2.mpz(p), gmpy2.mpz(q)
    n = p * q
    g = n + 1
    psquare, qsquare = p * p, q * q
    hp = gmpy2.invert((gmpy2.powmod(g, p - 1, psquare) - 1) // p, p)
    hq = gmpy2.invert((gmpy2.powmod(g, q - 1, qsquare) - 1) // q, q)
    return p, q, psquare, qsquare, hp, hq, gmpy2.invert(p, q)


def decrypt_chunk(p: int, q: int, ciphertexts: Sequence[int]) -> List[int]:
    """Decrypt to integers in [0, n) with the Chinese remainder theorem (about 4x
    faster than working modulo n^2)."""
    p, q, psquare, qsquare, hp, hq, p_inverse = _crt_constants(p, q)
    out = []
    for c in ciphertexts:
        c = gmpy2.mpz(c)
        mp = (gmpy2.powmod(c, p - 1, psquare) - 1) // p * hp % p
        mq = (gmpy2.powmod(c, q - 1, qsquare) - 1) // q * hq % q
        out.append(int(mp + (mq - mp) * p_inverse % q * p))
    return out
