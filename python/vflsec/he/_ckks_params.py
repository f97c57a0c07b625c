"""CKKS parameters, slot layouts and the flooding noise's scale (no TenSEAL needed).

The pure arithmetic behind :mod:`vflsec.he.ckks` (which re-exports every
name here): the parameter set checked against the HE standard, the Galois
steps the key holder sends, the layouts of batch vectors and packed products,
and the flooding sigma. See that module's docstring for what each means.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .._arrays import check_positive_int

__all__ = [
    "DEFAULT_FLOODING_BITS",
    "DEFAULT_MASK_BOUND",
    "ERROR_BITS_ABOVE_SCALE",
    "HE_STANDARD_MAX_COEFF_BITS",
    "CKKSParameters",
    "Layout",
    "batch_layout",
    "flooding_sigma",
    "galois_steps",
    "next_power_of_two",
    "product_layout",
    "secure_uniform",
]

# Largest total coefficient modulus for 128-bit classical security with a
# ternary secret, Homomorphic Encryption Standard (2018), Table 1.
HE_STANDARD_MAX_COEFF_BITS = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}

ERROR_BITS_ABOVE_SCALE = 24
"""Bound on the absolute decryption error of the packed product (outputs up to ~8): 2^-(scale_bits - 24)."""

DEFAULT_FLOODING_BITS = 6
DEFAULT_MASK_BOUND = 2.0 ** 18

Layout = Tuple[Tuple[int, int], ...]
"""Per ciphertext: (number of values, period); see the module docstring."""


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
            raise ValueError("coeff_mod_bit_sizes needs at least 4 primes: a first prime, two middle primes and "
                             "the special prime")
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


def galois_steps(params: CKKSParameters) -> Tuple[int, ...]:
    """The rotation steps whose Galois keys the key holder sends: 1, 2, 4, ..., S/2.

    The diagonal product rotates by 1 (baby steps), by its giant step and by
    the strides m, ..., S/2 of its rotate-and-sum, all powers of two; the set
    covers every matrix width, so it does not depend on the parties' widths
    (which the key holder learns only after sending the keys).
    """
    return tuple(1 << e for e in range(params.slot_count.bit_length() - 1))


def batch_layout(length: int, slots: int) -> Layout:
    """Layout of a batch vector of ``length`` values: one value per slot."""
    return tuple((min(slots, length - start), slots) for start in range(0, length, slots))


def product_layout(width: int, slots: int) -> Layout:
    """Layout of :meth:`CKKSEncryptedVector.dot` with ``width`` columns: blocks
    of at most ``slots`` columns, each with the period of the next power of two."""
    return tuple((min(slots, width - start), next_power_of_two(min(slots, width - start)))
                 for start in range(0, width, slots))


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


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
