"""Exact sampling of the discrete Gaussian N_Z(0, sigma^2).

Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020), Algorithms 1-3, with exact integer arithmetic throughout:

1. Bernoulli(exp(-gamma)) for rational gamma >= 0, from Bernoulli(gamma / k)
   draws (no floating point).
2. The discrete Laplace distribution P[x] ~ exp(-|x| s / t).
3. The discrete Gaussian by rejection from the discrete Laplace with scale
   t = floor(sigma) + 1.

Every random decision is a uniform integer drawn by exact rejection sampling
from the generator's 64-bit words (:class:`UniformSource`), so the output
distribution is exactly N_Z(0, sigma^2). The number of words used (and so the
running time) varies from sample to sample, as in any exact sampler of an
unbounded distribution.

The public entry point is :func:`vflsec.kernels.discrete_gaussian`, which
validates its arguments and calls :func:`sample_discrete_gaussian_native`, the
same algorithm in C++ (cpp/discrete_gaussian.hpp: 128/256/512-bit integer
arithmetic, OpenMP threads, one sub-stream per chunk of samples). Parameters
wider than 512 bits fall back to :func:`sample_discrete_gaussian` here. The
two consume the generator's stream differently, so a seed gives different
(identically distributed) samples on the two paths.
"""
from __future__ import annotations

from fractions import Fraction
from math import isqrt
from typing import Any, List, Optional, Tuple

import numpy as np

__all__ = [
    "UniformSource",
    "bernoulli_exp_neg",
    "discrete_laplace",
    "native_parameters",
    "sample_discrete_gaussian",
    "sample_discrete_gaussian_native",
]

_MAX_CHUNK_WORDS = 1 << 16
# Limb counts the C++ sampler is compiled for (cpp/discrete_gaussian.cpp).
_NATIVE_LIMBS = (2, 4, 8)


class UniformSource:
    """Exact uniform integers from a generator's 64-bit words.

    Words are fetched in chunks with ``generator.random_raw`` and consumed in
    order; unused words are discarded with the source. A source lives for one
    sampling call only, so no buffered randomness survives into a forked child.
    """

    __slots__ = ("_gen", "_words", "_pos", "_chunk")

    def __init__(self, generator: Any, chunk_words: int = 256) -> None:
        self._gen = generator
        self._words: List[int] = []
        self._pos = 0
        self._chunk = max(8, min(int(chunk_words), _MAX_CHUNK_WORDS))

    def word(self) -> int:
        """One uniform integer on [0, 2^64)."""
        if self._pos == len(self._words):
            self._words = self._gen.random_raw(self._chunk).tolist()
            self._pos = 0
            self._chunk = min(2 * self._chunk, _MAX_CHUNK_WORDS)
        w = self._words[self._pos]
        self._pos += 1
        return w

    def below(self, n: int) -> int:
        """A uniform integer on [0, n), n >= 1: draw bit_length(n - 1) bits, reject values >= n."""
        if n <= 1:
            return 0
        k = (n - 1).bit_length()
        if k <= 64:
            shift = 64 - k
            while True:
                v = self.word() >> shift
                if v < n:
                    return v
        nwords = (k + 63) // 64
        shift = 64 * nwords - k
        while True:
            v = 0
            for _ in range(nwords):
                v = (v << 64) | self.word()
            v >>= shift
            if v < n:
                return v


def _bernoulli_exp_neg_unit(src: UniformSource, num: int, den: int) -> bool:
    # Algorithm 1, gamma = num / den in [0, 1]: the first k with
    # Bernoulli(gamma / k) = 0 is odd with probability exp(-gamma).
    k = 1
    while src.below(den * k) < num:
        k += 1
    return (k & 1) == 1


def bernoulli_exp_neg(src: UniformSource, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1 (CKS Algorithm 1)."""
    # exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))); stop at the first failure.
    while num > den:
        if not _bernoulli_exp_neg_unit(src, 1, 1):
            return False
        num -= den
    return _bernoulli_exp_neg_unit(src, num, den)


def discrete_laplace(src: UniformSource, s: int, t: int) -> int:
    """One sample with P[x] proportional to exp(-|x| s / t), integers s, t >= 1 (CKS Algorithm 2)."""
    while True:
        u = src.below(t)
        if not bernoulli_exp_neg(src, u, t):
            continue
        v = 0
        while bernoulli_exp_neg(src, 1, 1):
            v += 1
        y = (u + t * v) // s
        negative = src.below(2) == 1
        if negative and y == 0:
            continue  # 0 would otherwise be counted twice
        return -y if negative else y


def _discrete_gaussian_one(src: UniformSource, a: int, b: int, t: int, bt: int, den: int) -> int:
    # Algorithm 3 with sigma^2 = a / b: accept a discrete Laplace(t) draw y with
    # probability exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|y| b t - a)^2 / (2 a b t^2)).
    while True:
        y = discrete_laplace(src, 1, t)
        d = abs(y) * bt - a
        if bernoulli_exp_neg(src, d * d, den):
            return y


def _limbs(value: int, count: int) -> List[int]:
    return [(value >> (64 * i)) & 0xFFFF_FFFF_FFFF_FFFF for i in range(count)]


def native_parameters(sigma2: Fraction) -> Optional[Tuple[List[int], List[int], List[int], int]]:
    """The C++ sampler's parameters (a, bt, den as little-endian uint64 limbs, and t), or None.

    With sigma2 = a / b: t = floor(sigma) + 1, bt = b t, den = 2 a b t^2. The
    C++ kernel (cpp/discrete_gaussian.hpp) takes 2, 4 or 8 limbs (128, 256 or
    512 bits); parameters wider than 512 bits (extreme float sigmas such as
    1e-300) return None and stay on the pure-Python sampler.
    """
    a, b = sigma2.numerator, sigma2.denominator
    t = isqrt(a // b) + 1
    bt = b * t
    den = 2 * a * b * t * t
    bits = max(a.bit_length(), bt.bit_length(), den.bit_length())
    for nlimbs in _NATIVE_LIMBS:
        if bits <= 64 * nlimbs:
            return _limbs(a, nlimbs), _limbs(bt, nlimbs), _limbs(den, nlimbs), t
    return None


def sample_discrete_gaussian_native(generator: Any, count: int, sigma2: Fraction, *,
                                    samples_per_chunk: Optional[int] = None,
                                    blocks_per_chunk: Optional[int] = None) -> Optional[np.ndarray]:
    """``count`` exact N_Z(0, sigma2) samples from the C++ kernel, or None if sigma2 is too wide for it.

    ``generator`` is a :class:`vflsec.NoiseGenerator`; the chunk sizes (see
    cpp/discrete_gaussian.hpp for the stream layout) default to the kernel's
    and are exposed for tests only: they change the samples a seed gives.
    """
    params = native_parameters(sigma2)
    if params is None:
        return None
    a, bt, den, t = params
    kwargs = {}
    if samples_per_chunk is not None:
        kwargs["samples_per_chunk"] = int(samples_per_chunk)
    if blocks_per_chunk is not None:
        kwargs["blocks_per_chunk"] = int(blocks_per_chunk)
    out = np.empty(count, dtype=np.int64)
    if count:
        generator._core_gen.fill_discrete_gaussian(out, a, bt, den, t, **kwargs)
    return out


def sample_discrete_gaussian(generator: Any, count: int, sigma2: Fraction) -> np.ndarray:
    """``count`` exact N_Z(0, sigma2) samples (int64) for a rational ``sigma2 > 0``.

    ``generator`` needs only ``random_raw(n)`` (uint64 words); arguments are
    trusted (the public wrapper validates them).
    """
    a, b = sigma2.numerator, sigma2.denominator
    t = isqrt(a // b) + 1  # floor(sigma) + 1, exactly
    bt = b * t
    den = 2 * a * b * t * t
    # About a dozen words per sample for small sigma^2 denominators; the chunk
    # doubles on demand, so this only sets the first request's size.
    src = UniformSource(generator, chunk_words=16 * count)
    return np.array([_discrete_gaussian_one(src, a, b, t, bt, den) for _ in range(count)], dtype=np.int64)
