"""Exact discrete Gaussian (Canonne-Kamath-Steinke 2020): its building blocks
and the final distribution against the exact pmf.

Seeded generators make these statistical tests deterministic; they use
p > 1e-3 (or 5 standard errors). The one test on the secure generator uses
p > 1e-6: under a correct sampler its p-value is uniform, so it fails
spuriously once in a million runs.
"""
from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from vflsec import NoiseGenerator, kernels

# The module, not the function of the same name that vflsec.kernels exports.
dg = importlib.import_module("vflsec.kernels._discrete_gaussian")


def exact_pmf(sigma2: float, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Support -half_width..half_width and the pmf of N_Z(0, sigma2) normalized over it."""
    xs = np.arange(-half_width, half_width + 1)
    w = np.exp(-(xs.astype(np.float64) ** 2) / (2.0 * sigma2))
    return xs, w / w.sum()


def chisquare_against(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square p-value of integer samples against a pmf on xs, tails lumped so every bin expects >= 5."""
    n = samples.size
    expected = pmf * n
    inner = np.nonzero(expected >= min_expected)[0]
    lo, hi = inner[0], inner[-1]
    # lump everything left of lo into lo and right of hi into hi
    exp_bins = expected[lo:hi + 1].copy()
    exp_bins[0] += expected[:lo].sum()
    exp_bins[-1] += expected[hi + 1:].sum()
    idx = np.clip(samples - xs[0], lo, hi) - lo
    obs_bins = np.bincount(idx, minlength=hi - lo + 1)
    assert obs_bins.sum() == n
    return stats.chisquare(obs_bins, exp_bins * (n / exp_bins.sum())).pvalue


SIGMAS = [0.5, 1.0, 3.3, Fraction(7, 3), 25.0]


@pytest.mark.parametrize("sigma", SIGMAS, ids=str)
def test_chisquare_against_exact_pmf(sigma):
    n = 30_000
    x = kernels.discrete_gaussian(n, sigma, generator=NoiseGenerator(seed=100))
    assert x.dtype == np.int64 and x.shape == (n,)
    s2 = float(Fraction(sigma) ** 2)
    xs, pmf = exact_pmf(s2, int(math.ceil(15 * math.sqrt(s2))) + 2)
    assert chisquare_against(x, xs, pmf) > 1e-3


@pytest.mark.parametrize("sigma", [1.0, 3.3, 25.0], ids=str)
def test_mean_and_variance_match_exact_moments(sigma):
    n = 30_000
    x = kernels.discrete_gaussian(n, sigma, generator=NoiseGenerator(seed=200)).astype(np.float64)
    xs, pmf = exact_pmf(sigma**2, int(math.ceil(15 * sigma)) + 2)
    var = float(np.sum(xs.astype(np.float64) ** 2 * pmf))
    fourth = float(np.sum(xs.astype(np.float64) ** 4 * pmf))
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    assert abs(np.mean(x**2) - var) < 5 * math.sqrt((fourth - var**2) / n)


def test_secure_generator_distribution():
    x = kernels.discrete_gaussian(20_000, 2.0)
    xs, pmf = exact_pmf(4.0, 40)
    assert chisquare_against(x, xs, pmf) > 1e-6


def test_bernoulli_exp_matches_exp_minus_gamma():
    src = dg.UniformSource(NoiseGenerator(seed=300))
    n = 20_000
    for num, den in [(0, 1), (1, 3), (1, 1), (5, 2), (7, 1), (2**70 + 1, 2**70)]:
        p = math.exp(-num / den)
        hits = sum(dg.bernoulli_exp_neg(src, num, den) for _ in range(n))
        assert abs(hits - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9, (num, den)


@pytest.mark.parametrize("s, t", [(1, 3), (2, 3), (3, 1)])
def test_discrete_laplace_pmf(s, t):
    src = dg.UniformSource(NoiseGenerator(seed=400 + 10 * s + t))
    n = 20_000
    x = np.array([dg.discrete_laplace(src, s, t) for _ in range(n)])
    xs = np.arange(-200, 201)
    w = np.exp(-np.abs(xs) * s / t)
    assert chisquare_against(x, xs, w / w.sum()) > 1e-3


def test_uniform_source_is_exactly_uniform():
    src = dg.UniformSource(NoiseGenerator(seed=500))
    small = np.array([src.below(6) for _ in range(30_000)])
    assert small.min() == 0 and small.max() == 5
    assert stats.chisquare(np.bincount(small, minlength=6)).pvalue > 1e-3
    n = 2**64 + 3  # needs two words and rejects about half of them
    big = [src.below(n) for _ in range(8000)]
    assert all(0 <= v < n for v in big)
    quarters = np.bincount([v * 4 // n for v in big], minlength=4)
    assert stats.chisquare(quarters).pvalue > 1e-3
    assert src.below(1) == 0


def test_reproducible_and_secure_differs():
    a = kernels.discrete_gaussian((40, 5), 3.0, generator=NoiseGenerator(seed=7))
    b = kernels.discrete_gaussian((40, 5), 3.0, generator=NoiseGenerator(seed=7))
    assert a.shape == (40, 5)
    np.testing.assert_array_equal(a, b)
    c = kernels.discrete_gaussian(200, 3.0)
    d = kernels.discrete_gaussian(200, 3.0)
    assert not np.array_equal(c, d)


def test_sigma_zero_and_empty_shapes():
    z = kernels.discrete_gaussian((3, 2), 0.0)
    assert z.dtype == np.int64 and z.shape == (3, 2) and not z.any()
    assert kernels.discrete_gaussian((0, 4), 2.0).shape == (0, 4)
    scalar = kernels.discrete_gaussian((), 2.0)
    assert scalar.shape == () and scalar.dtype == np.int64
    assert kernels.discrete_gaussian(5, 3).dtype == np.int64  # int sigma is exact


def test_large_sigma():
    x = kernels.discrete_gaussian(2000, 1e9, generator=NoiseGenerator(seed=8)).astype(np.float64)
    assert abs(x.std() / 1e9 - 1) < 5 * math.sqrt(0.5 / 2000)


@pytest.mark.parametrize("sigma, exc", [
    (-1.0, ValueError), (Fraction(-1, 2), ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
    (2**53, ValueError), (1e20, ValueError), ("1", TypeError), (None, TypeError), (True, TypeError), (1j, TypeError),
])
def test_rejects_bad_sigma(sigma, exc):
    with pytest.raises(exc, match="sigma"):
        kernels.discrete_gaussian(3, sigma)
