"""Issue 18 items 10-13: numeric edge cases of the public API give a clear
ValueError (never OverflowError / ZeroDivisionError / RuntimeError, never a
wrong answer), every loop and allocation is bounded, and misaligned arrays
never reach the C++ kernels."""
import math
import time
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from vflsec import kernels
from vflsec._arrays import as_float_array, check_real
from vflsec.dp import gaussian_delta, gaussian_sigma, hdp_sensitivities
from vflsec.dp.accounting import composed_gaussian, noise_multiplier_for_epsilon

HUGE = 2**1100


# -- item 10: overflowing Python ints -----------------------------------------

def test_check_real_refuses_ints_beyond_float_range() -> None:
    with pytest.raises(ValueError, match="sigma"):
        check_real(HUGE, "sigma")
    with pytest.raises(ValueError, match="sigma"):
        check_real(-HUGE, "sigma")
    with pytest.raises(ValueError, match="x"):
        check_real(Fraction(HUGE, 3), "x")


@pytest.mark.parametrize("call", [
    lambda: kernels.add_gaussian_noise(np.ones(2), sigma=HUGE),
    lambda: kernels.gaussian_noise(2, sigma=HUGE),
    lambda: gaussian_sigma(epsilon=HUGE, delta=1e-5),
    lambda: gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=HUGE),
    lambda: gaussian_delta(epsilon=HUGE, sigma=1.0),
    lambda: hdp_sensitivities(loss="logistic", lr=0.1, epochs=1, steps=1, batch_size=1, k=HUGE, n_parties=2),
    lambda: hdp_sensitivities(loss="logistic", lr=HUGE, epochs=1, steps=1, batch_size=1, k=1.0, n_parties=2),
    lambda: kernels.fuzzy_cmeans(np.arange(8.0).reshape(4, 2), 2, m=HUGE),
])
def test_huge_int_parameters_raise_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()


def test_pairwise_distance_stats_overflow_is_documented_inf() -> None:
    X = np.array([[1e308, 1e308], [-1e308, -1e308], [0.0, 0.0]])
    d = kernels.pairwise_distances(X)
    assert np.isinf(d[0, 1])
    s = kernels.pairwise_distance_stats(X)
    assert s.count == 3
    assert s.max == math.inf and s.mean == math.inf
    assert s.min == pytest.approx(math.hypot(1e308, 1e308))


def test_gaussian_sigma_and_delta_extremes_raise_value_error() -> None:
    for eps, delta in [(1e-300, 1e-5), (1e-200, 0.5), (1e300, 1e-5), (1e-10, 1e-300)]:
        for method in ("analytic", "classic"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    sigma = gaussian_sigma(eps, delta, method=method)
                except ValueError:
                    continue
            assert math.isfinite(sigma) and sigma > 0
    for eps, sigma in [(1e-300, 1e-300), (1e300, 1e300), (1e-300, 1e300), (1e300, 1e-300)]:
        try:
            value = gaussian_delta(eps, sigma)
        except ValueError:
            continue
        assert 0.0 <= value <= 1.0


def test_hdp_sensitivities_overflow_and_underflow_refused() -> None:
    common = dict(loss="logistic", epochs=1, steps=1, batch_size=1, n_parties=2)
    with pytest.raises(ValueError, match="overflow|range"):
        hdp_sensitivities(lr=0.1, k=1e200, **common)
    with pytest.raises(ValueError, match="underflow|range"):
        hdp_sensitivities(lr=1e-300, k=1e-300, **common)


# -- item 11: silent wrong answers ---------------------------------------------

@pytest.mark.parametrize("x", [np.float64(1.5), np.array(1.5), 2.0, np.array(3, dtype=np.float32)])
def test_add_gaussian_noise_keeps_0d_shape(x) -> None:
    out = kernels.add_gaussian_noise(x, sigma=1.0, generator=kernels.NoiseGenerator(seed=1))
    assert np.shape(out) == ()
    assert np.shape(kernels.add_gaussian_noise(x, sigma=0.0)) == ()


@pytest.mark.parametrize("scale", [1e170, 1e200, 1e300, -1e300])
def test_fuzzy_cmeans_zero_spread_huge_values(scale) -> None:
    X = np.full((10, 2), scale)
    try:
        res = kernels.fuzzy_cmeans(X, 2, seed=0)
    except ValueError:
        return
    assert np.isfinite(res.membership).all()
    np.testing.assert_allclose(res.membership.sum(axis=1), 1.0)
    assert np.isfinite(res.centers).all()


def _exact_delta(eps: float, sigma: float) -> mpmath.mpf:
    with mpmath.workdps(120):
        e, r = mpmath.mpf(eps), 1 / mpmath.mpf(sigma)
        phi = lambda t: mpmath.ncdf(t)  # noqa: E731
        return phi(r / 2 - e / r) - mpmath.exp(e) * phi(-r / 2 - e / r)


@pytest.mark.parametrize("eps,delta", [
    (1e-12, 1e-30), (1e-9, 1e-20), (1e-6, 1e-300), (1e-3, 1e-30), (1e-3, 1e-12), (0.5, 1e-15), (1.0, 1e-5),
    (10.0, 1e-10), (1e3, 1e-5), (5.0, 1e-100), (50.0, 1e-100), (1e3, 1e-100), (1e18, 1e-5), (1e19, 1e-10),
])
def test_analytic_sigma_never_under_noises(eps, delta) -> None:
    try:
        sigma = gaussian_sigma(eps, delta)
    except ValueError:
        return
    assert _exact_delta(eps, sigma) <= delta


@pytest.mark.parametrize("eps,sigma", [(0.5, 14.7), (1.0, 7.46), (2.0, 4.0), (1e-3, 1.04e4), (1e-12, 8.2e12),
                                       (1e-6, 3.6e7), (10.0, 0.7)])
def test_gaussian_delta_accurate_near_small_deltas(eps, sigma) -> None:
    exact = float(_exact_delta(eps, sigma))
    assert gaussian_delta(eps, sigma) == pytest.approx(exact, rel=1e-6)


def test_gaussian_delta_accurate_near_1e_minus_15() -> None:
    for sigma in np.linspace(7.0, 8.0, 25):
        exact = float(_exact_delta(1.0, sigma))
        assert gaussian_delta(1.0, sigma) == pytest.approx(exact, rel=1e-9)
    for eps in np.logspace(-12, 1, 14):
        base = math.sqrt(2 * math.log(1.25e15)) / eps
        for f in (0.9, 1.0, 1.1):
            exact = float(_exact_delta(eps, base * f))
            if exact > 0:
                assert gaussian_delta(eps, base * f) == pytest.approx(exact, rel=1e-9), (eps, f)


# -- item 12: bounded work -----------------------------------------------------

def test_discrete_gaussian_size_cap() -> None:
    t = time.monotonic()
    with pytest.raises(ValueError, match="too many|at most"):
        kernels.discrete_gaussian((10**7,), Fraction(1, 3**400))  # pure-Python sampler
    with pytest.raises((ValueError, MemoryError)):
        kernels.discrete_gaussian((10**6, 10**6), 1.0)
    assert time.monotonic() - t < 10


def test_fuzzy_cmeans_max_iter_capped() -> None:
    from vflsec.kernels._checks import MAX_ITER_LIMIT

    assert MAX_ITER_LIMIT <= 1_000_000
    with pytest.raises(ValueError, match="max_iter must be <="):
        kernels.fuzzy_cmeans(np.arange(8.0).reshape(4, 2), 2, max_iter=2**31 - 1)


@pytest.mark.slow  # accountant inversion at the tightest tolerance
def test_noise_multiplier_tolerance_bounded() -> None:
    t = time.monotonic()
    with pytest.raises(ValueError, match="tolerance"):
        noise_multiplier_for_epsilon(1.0, 1e-5, tolerance=1e-300)
    z = noise_multiplier_for_epsilon(1.0, 1e-5, tolerance=1e-12)
    assert math.isfinite(z)
    assert time.monotonic() - t < 60


def test_pld_delta_floor() -> None:
    t = time.monotonic()
    with pytest.raises(ValueError, match="delta"):
        composed_gaussian(1.0, 10, 1e-300, accountant="pld")
    with pytest.raises(ValueError, match="delta"):
        noise_multiplier_for_epsilon(1.0, 1e-300, accountant="pld")
    assert time.monotonic() - t < 10


# -- item 13: alignment ---------------------------------------------------------

def _misaligned(shape, dtype=np.float64) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.zeros(n * dt.itemsize + 1, dtype=np.uint8)
    arr = buf[1:].view(dt).reshape(shape)
    assert arr.flags.c_contiguous and arr.ctypes.data % dt.alignment != 0
    arr[...] = np.arange(n, dtype=dt).reshape(shape)
    return arr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_as_float_array_aligns(dtype) -> None:
    x = _misaligned((5, 3), dtype)
    out, _ = as_float_array(x, "x")
    assert out.ctypes.data % out.dtype.alignment == 0
    assert out.flags.aligned and out.flags.c_contiguous
    np.testing.assert_array_equal(out, x)


def test_kernels_accept_misaligned_inputs() -> None:
    x = _misaligned((6, 3))
    np.testing.assert_allclose(kernels.pairwise_distances(x), kernels.pairwise_distances(np.array(x)))
    assert kernels.pairwise_distance_stats(x) == kernels.pairwise_distance_stats(np.array(x))
    g = kernels.NoiseGenerator(seed=3)
    h = kernels.NoiseGenerator(seed=3)
    np.testing.assert_array_equal(kernels.add_gaussian_noise(x, 1.0, generator=g),
                                  kernels.add_gaussian_noise(np.array(x), 1.0, generator=h))
    r1 = kernels.fuzzy_cmeans(x, 2, seed=0)
    r2 = kernels.fuzzy_cmeans(np.array(x), 2, seed=0)
    np.testing.assert_array_equal(r1.membership, r2.membership)
