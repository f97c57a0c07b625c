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

import vflsec
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


# ---------------------------------------------------------------------------
# The C++ sampler (cpp/discrete_gaussian.hpp): exactness at 10^6 samples,
# stream layout, threads.
# ---------------------------------------------------------------------------

def exact_pmf_wide(sigma) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of N_Z(0, sigma^2) normalized over +-(16 sigma + 4): the mass left out is < 1e-55."""
    s2 = float(Fraction(sigma) ** 2)
    half = int(math.ceil(16 * math.sqrt(s2))) + 4
    return exact_pmf(s2, half)


def chisquare_binned(samples: np.ndarray, sigma, width: int = 1) -> float:
    """Chi-square p-value of samples against N_Z(0, sigma^2), in bins of `width` integers, tails pooled."""
    xs, pmf = exact_pmf_wide(sigma)
    if width == 1:
        return chisquare_against(samples, xs, pmf)
    lo = xs[0]
    nbins = (xs.size + width - 1) // width
    bin_pmf = np.bincount((xs - lo) // width, weights=pmf, minlength=nbins)
    assert samples.min() >= lo and samples.max() <= xs[-1]
    return chisquare_against((samples - lo) // width, np.arange(nbins), bin_pmf)


def bin_width(sigma) -> int:
    return max(1, int(float(sigma) // 20))


MILLION_SIGMAS = [0.3, 0.7, 1.0, 3.7, 100.0, 1e4, Fraction(7, 3)]


@pytest.mark.slow  # statistical: a million samples per case
@pytest.mark.parametrize("sigma", MILLION_SIGMAS, ids=str)
def test_native_chisquare_million_samples(sigma):
    n = 10**6
    x = kernels.discrete_gaussian(n, sigma, generator=NoiseGenerator(seed=1000))
    assert x.dtype == np.int64 and x.shape == (n,)
    assert chisquare_binned(x, sigma, bin_width(sigma)) > 1e-3


@pytest.mark.parametrize("sigma", [0.3, 0.7, 1.0, 1.5], ids=str)
def test_chisquare_rejects_a_rounded_continuous_gaussian(sigma):
    # The goodness-of-fit test above has power: rounding a continuous normal
    # is not the discrete Gaussian, and 10^6 samples show it.
    rng = np.random.default_rng(1)
    x = np.rint(rng.standard_normal(10**6) * float(sigma)).astype(np.int64)
    assert chisquare_binned(x, sigma) < 1e-6


@pytest.mark.parametrize("sigma, wrong", [(3.7, 3.72), (100.0, 101.0), (1e4, 1.01e4)], ids=str)
def test_binned_chisquare_rejects_a_wrong_sigma(sigma, wrong):
    x = kernels.discrete_gaussian(10**6, wrong, generator=NoiseGenerator(seed=1001))
    assert chisquare_binned(x, sigma, bin_width(sigma)) < 1e-6


@pytest.mark.slow  # statistical: a million samples per case
@pytest.mark.parametrize("sigma", [1.0, 3.7, 100.0, 1e4, 2**20], ids=str)
def test_native_variance_within_half_percent(sigma):
    x = kernels.discrete_gaussian(10**6, sigma, generator=NoiseGenerator(seed=1002)).astype(np.float64)
    if sigma <= 1e4:
        xs, pmf = exact_pmf_wide(sigma)
        var = float(np.sum(xs.astype(np.float64) ** 2 * pmf))
    else:  # by Poisson summation the variance is sigma^2 (1 - O(exp(-2 pi^2 sigma^2)))
        var = float(sigma) ** 2
    assert abs(np.mean(x**2) / var - 1) < 0.005
    assert abs(x.mean()) < 5 * math.sqrt(var / x.size)


def test_small_sigma_variance_is_below_sigma_squared():
    # N_Z(0, sigma^2) has variance < sigma^2; for sigma = 0.3 it is 0.0077 (not 0.09).
    xs, pmf = exact_pmf_wide(0.3)
    var = float(np.sum(xs.astype(np.float64) ** 2 * pmf))
    assert var < 0.09 * 0.1
    x = kernels.discrete_gaussian(10**6, 0.3, generator=NoiseGenerator(seed=1003)).astype(np.float64)
    assert abs(np.mean(x**2) - var) < 5 * math.sqrt(var / x.size)


# sigma^2 of 128-bit (2 limbs), 256-bit (4 limbs) and 512-bit (8 limbs) parameters.
LIMB_SIGMAS = [3.0, 3.7, Fraction(3 * 2**100 + 1, 2**100)]


def test_parameter_widths_select_the_limb_counts():
    widths = [len(dg.native_parameters(Fraction(s) ** 2)[0]) for s in LIMB_SIGMAS]
    assert widths == [2, 4, 8]
    assert dg.native_parameters(Fraction(3 * 2**200 + 1, 2**200) ** 2) is None


def test_eight_limb_parameters_are_exact():
    sigma = LIMB_SIGMAS[2]
    x = kernels.discrete_gaussian(200_000, sigma, generator=NoiseGenerator(seed=1004))
    assert chisquare_binned(x, sigma) > 1e-3


def test_python_fallback_for_parameters_wider_than_512_bits():
    sigma = Fraction(3 * 2**200 + 1, 2**200)
    x = kernels.discrete_gaussian(3000, sigma, generator=NoiseGenerator(seed=1005))
    assert x.dtype == np.int64
    assert chisquare_binned(x, sigma) > 1e-3
    assert kernels.discrete_gaussian(5, 1e-300).tolist() == [0] * 5


def test_pure_python_sampler_still_exact():
    x = dg.sample_discrete_gaussian(NoiseGenerator(seed=1006), 30_000, Fraction(3.7) ** 2)
    assert chisquare_binned(x, 3.7) > 1e-3


def test_native_sampler_at_the_largest_sigma():
    x = kernels.discrete_gaussian(20_000, 2**52, generator=NoiseGenerator(seed=1007)).astype(np.float64)
    assert abs(x.std() / 2**52 - 1) < 5 * math.sqrt(0.5 / x.size)


def _with_threads(threads, fn):
    before = vflsec.get_num_threads()
    try:
        vflsec.set_num_threads(threads)
        return fn()
    finally:
        vflsec.set_num_threads(before)


@pytest.mark.parametrize("sigma", [0.7] + LIMB_SIGMAS + [2**20], ids=str)
def test_native_same_samples_for_one_and_two_threads(sigma):
    def draw():
        gen = NoiseGenerator(seed=1100)
        return [kernels.discrete_gaussian(100_003, sigma, generator=gen),
                kernels.discrete_gaussian((70, 30), sigma, generator=gen),
                kernels.discrete_gaussian(50_000, sigma, generator=gen)]

    one, two = _with_threads(1, draw), _with_threads(2, draw)
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(one[0][:50_000], one[2])


def test_overflow_streams_are_thread_invariant_and_exact():
    # One block per chunk of 3 samples: nearly every chunk runs past its
    # reserved block onto its own overflow stream.
    sigma2 = Fraction(3.7) ** 2

    def draw():
        return dg.sample_discrete_gaussian_native(NoiseGenerator(seed=1101), 300_000, sigma2,
                                                  samples_per_chunk=3, blocks_per_chunk=1)

    one, two = _with_threads(1, draw), _with_threads(2, draw)
    np.testing.assert_array_equal(one, two)
    assert chisquare_binned(one, 3.7) > 1e-3
    default = dg.sample_discrete_gaussian_native(NoiseGenerator(seed=1101), 300_000, sigma2)
    assert not np.array_equal(one, default)


def test_native_reserves_blocks_and_is_reproducible():
    gen = NoiseGenerator(seed=1102)
    a = kernels.discrete_gaussian(1000, 5.0, generator=gen)
    used = gen.blocks_used
    assert used > 0
    b = kernels.discrete_gaussian(1000, 5.0, generator=gen)
    assert gen.blocks_used == 2 * used  # a fixed reservation per request size
    assert not np.array_equal(a, b)
    gen2 = NoiseGenerator(seed=1102)
    np.testing.assert_array_equal(kernels.discrete_gaussian(1000, 5.0, generator=gen2), a)
    np.testing.assert_array_equal(kernels.discrete_gaussian(1000, 5.0, generator=gen2), b)


def test_two_secure_generators_differ():
    a = kernels.discrete_gaussian(10_000, 1e3, generator=NoiseGenerator())
    b = kernels.discrete_gaussian(10_000, 1e3, generator=NoiseGenerator())
    assert not np.array_equal(a, b)
    assert np.mean(a == b) < 0.01
