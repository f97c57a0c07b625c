"""The secure Gaussian release (vflsec.kernels.add_gaussian_noise): the
floating-point attack, the integer samplers against their exact pmfs, the
noise's scale, worst-case inputs, reproducibility, and the calibration of
vflsec.dp.gaussian_sigma for the lattice.

Statistical thresholds. Every statistical test here runs on a seeded
generator, so it is deterministic: for a given implementation it always
passes or always fails. The goodness-of-fit tests use p > 1e-3; where a test
shows its own power (the old float path, a wrong scale, a rounded continuous
Gaussian in place of the discrete one) the alternative must give p < 1e-6.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from vflsec import NoiseGenerator, _core, kernels
from vflsec.dp import gaussian_delta, gaussian_sigma
from vflsec.dp import lattice as dp_lattice

SIGMA_ATTACK = gaussian_sigma(1.0, 1e-5, 1.0)  # about 3.73
N_ATTACK = 2_000_000
N_STAT = 10**6


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def attack_event(y: np.ndarray) -> int:
    """How many y satisfy |y| < 0.5 and y * 2^53 is not an integer (Jin et al. 2022):
    x = 1 + noise computed in float64 lies on the 2^-53 grid there, x = 0 + noise not."""
    y = np.asarray(y, dtype=np.float64)  # exact for float32
    return int(np.count_nonzero((np.abs(y) < 0.5) & (np.modf(np.ldexp(y, 53))[0] != 0.0)))


def lowest_set_bit(y: np.ndarray) -> np.ndarray:
    """The exponent of the largest power of two dividing y (y = 0: a large sentinel)."""
    y = np.asarray(y, dtype=np.float64)
    mantissa, exponent = np.frexp(y)
    m = np.ldexp(mantissa, 53).astype(np.int64)  # exact: 53-bit integer mantissa
    out = np.full(y.shape, 10**6, dtype=np.int64)
    nz = m != 0
    low = m[nz] & -m[nz]
    out[nz] = exponent[nz].astype(np.int64) - 53 + np.round(np.log2(low.astype(np.float64))).astype(np.int64)
    return out


def homogeneity_pvalue(a: np.ndarray, b: np.ndarray, min_count: int = 20) -> float:
    """Chi-square test that two integer samples have the same distribution.

    Values are binned individually, then adjacent bins are merged (in
    increasing order) until each holds at least ``min_count`` of the two
    samples together.
    """
    values = np.union1d(a, b)
    ca = np.searchsorted(values, a)
    cb = np.searchsorted(values, b)
    table = np.vstack([np.bincount(ca, minlength=values.size), np.bincount(cb, minlength=values.size)])
    total = table.sum(axis=0)
    cols, acc = [], np.zeros(2, dtype=np.int64)
    for j in range(values.size):  # merge small bins into the next; the last remainder into the previous
        acc += table[:, j]
        if acc.sum() >= min_count:
            cols.append(acc.copy())
            acc[:] = 0
    if acc.any():
        if cols:
            cols[-1] += acc
        else:
            cols.append(acc.copy())
    merged = np.array(cols).T
    assert merged.sum() == total.sum()
    if merged.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(merged, correction=False).pvalue)


def pooled_chisquare(observed: np.ndarray, expected_prob: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square p-value of bin counts against bin probabilities; bins at either end
    with fewer than ``min_expected`` expected counts are pooled into their neighbour."""
    n = observed.sum()
    expected = expected_prob / expected_prob.sum() * n
    inner = np.nonzero(expected >= min_expected)[0]
    lo, hi = inner[0], inner[-1]
    obs = observed[lo:hi + 1].astype(np.float64)
    exp = expected[lo:hi + 1].copy()
    obs[0] += observed[:lo].sum()
    exp[0] += expected[:lo].sum()
    obs[-1] += observed[hi + 1:].sum()
    exp[-1] += expected[hi + 1:].sum()
    return float(stats.chisquare(obs, exp).pvalue)


def rounded_gaussian_bin_probs(lo: int, width: int, nbins: int, s: float) -> np.ndarray:
    """P(Z in bin i) for the rounded Gaussian Z = round(s N), P(Z = z) = Phi((z + 1/2) / s) -
    Phi((z - 1/2) / s); bin i = [lo + i width, lo + (i + 1) width - 1], the end bins take the tails."""
    t = (lo + width * np.arange(nbins + 1, dtype=np.float64) - 0.5) / s
    t[0], t[-1] = -np.inf, np.inf
    left = special.ndtr(t[1:]) - special.ndtr(t[:-1])
    right = special.ndtr(-t[:-1]) - special.ndtr(-t[1:])  # accurate where the bin is right of 0
    return np.where(t[:-1] > 0, right, left)


def binned_rounded_gaussian_pvalue(z: np.ndarray, s: float, width: int, half_range: float = 6.0) -> float:
    """Chi-square of integer samples against round(s N) in bins of ``width`` over
    +-``half_range`` s (tails pooled into the end bins)."""
    lo = -int(math.ceil(half_range * s / width)) * width
    nbins = 2 * (-lo) // width
    idx = np.clip((z - lo) // width, 0, nbins - 1)
    observed = np.bincount(idx, minlength=nbins)
    return pooled_chisquare(observed, rounded_gaussian_bin_probs(lo, width, nbins, s))


def lattice_scale(sigma: float) -> float:
    """The integer noise scale the release uses at sigma (sigma rounded up to its grid)."""
    return kernels.lattice_sigma(sigma) / kernels.lattice_spacing(sigma)


# ---------------------------------------------------------------------------
# 1. the floating-point attack (Mironov 2012; Jin et al., IEEE S&P 2022)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def attack_releases():
    """2,000,000 secure releases of x = 0 and of x = 1, float64 and float32, and the
    old float path's float64 releases."""
    out = {}
    for dtype in (np.float64, np.float32):
        for x in (0.0, 1.0):
            gen = NoiseGenerator(seed=f"attack/{np.dtype(dtype).name}/{x}".encode())
            out[np.dtype(dtype).name, x] = kernels.add_gaussian_noise(np.full(N_ATTACK, x, dtype=dtype),
                                                                    SIGMA_ATTACK, generator=gen)
    for x in (0.0, 1.0):
        gen = NoiseGenerator(seed=f"attack/old/{x}".encode())
        out["old", x] = gen._add_normal(np.full(N_ATTACK, x), SIGMA_ATTACK)
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_attack_event_never_occurs_on_the_lattice(attack_releases, dtype):
    for x in (0.0, 1.0):
        y = attack_releases[dtype, x]
        assert y.dtype == np.dtype(dtype)
        assert np.count_nonzero(np.abs(y) < 0.5) > 0.05 * N_ATTACK  # the event's first half is common
        assert attack_event(y) == 0


def test_attack_event_occurs_on_the_old_float_path(attack_releases):
    # The test can detect the leak: x + float noise hits the event about 7% of
    # the time for x = 0 and never for x = 1 (an infinite privacy loss).
    hits0 = attack_event(attack_releases["old", 0.0])
    hits1 = attack_event(attack_releases["old", 1.0])
    assert hits0 > 0.05 * N_ATTACK
    assert hits1 == 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lowest_set_bit_histograms_agree_on_the_lattice(attack_releases, dtype):
    g = kernels.lattice_spacing(SIGMA_ATTACK)
    y0, y1 = attack_releases[dtype, 0.0], attack_releases[dtype, 1.0]
    # On the lattice: y / g is an integer, and its trailing zeros are those of
    # the float's lowest set bit, shifted by log2 g.
    for y in (y0, y1):
        k = y.astype(np.float64) / g
        assert np.all(np.modf(k)[0] == 0.0)
    lsb0, lsb1 = lowest_set_bit(y0), lowest_set_bit(y1)
    assert lsb0.min() >= math.log2(g) and lsb1.min() >= math.log2(g)
    assert homogeneity_pvalue(lsb0, lsb1) > 1e-3
    # and the integer y / g directly: trailing zero bits, x = 0 vs x = 1
    tz = [lowest_set_bit((y.astype(np.float64) / g)) for y in (y0, y1)]
    assert homogeneity_pvalue(*tz) > 1e-3


def test_lowest_set_bit_histograms_differ_on_the_old_float_path(attack_releases):
    lsb0 = lowest_set_bit(attack_releases["old", 0.0])
    lsb1 = lowest_set_bit(attack_releases["old", 1.0])
    assert homogeneity_pvalue(lsb0, lsb1) < 1e-100
    assert lsb0.min() < -53 <= lsb1.min()  # 1 + noise never goes below the 2^-53 grid


# ---------------------------------------------------------------------------
# 2. the integer sampler against the exact rounded Gaussian
# ---------------------------------------------------------------------------

LATTICE_SIGMAS = {
    "s=2^20": 1.0,
    "s=2^21-": 2.0 - 2.0**-8,  # the octave's top grid step, s = 2^21 - 2^12
    "s=1.5*2^20": 1.5,
    "s(eps=1)": SIGMA_ATTACK,
    "tiny": 1e-200,
    "huge": 3e200,
}


@pytest.fixture(scope="module")
def lattice_samples():
    return {name: kernels.lattice_gaussian(N_STAT, sigma, generator=NoiseGenerator(seed=f"pmf/{name}".encode()))
            for name, sigma in LATTICE_SIGMAS.items()}


def test_lattice_scales_cover_the_octave():
    assert lattice_scale(1.0) == 2.0**20
    assert lattice_scale(2.0 - 2.0**-8) == 2.0**21 - 2.0**12
    # just below the octave's end, sigma rounds up into the next octave
    assert lattice_scale(math.nextafter(2.0, 0.0)) == 2.0**20
    assert kernels.lattice_sigma(math.nextafter(2.0, 0.0)) == 2.0
    for sigma in LATTICE_SIGMAS.values():
        s = lattice_scale(sigma)
        assert 2.0**20 <= s < 2.0**21 and s % 2.0**12 == 0  # 256 steps per octave
        assert sigma <= kernels.lattice_sigma(sigma) <= sigma * (1 + 2.0**-8)
        g = kernels.lattice_spacing(sigma)
        assert g == 2.0 ** round(math.log2(g))
        assert sigma * 2.0**-21 < g <= sigma * 2.0**-20


@pytest.mark.parametrize("name", list(LATTICE_SIGMAS))
def test_lattice_sampler_matches_rounded_gaussian_pmf(lattice_samples, name):
    z = lattice_samples[name]
    s = lattice_scale(LATTICE_SIGMAS[name])
    assert z.dtype == np.int64 and z.shape == (N_STAT,)
    # coarse bins (s / 20 wide) and the sampler's own 2048-wide blocks, over +-6 s
    assert binned_rounded_gaussian_pvalue(z, s, width=int(math.ceil(s / 20))) > 1e-3
    assert binned_rounded_gaussian_pvalue(z, s, width=2048) > 1e-3


@pytest.mark.parametrize("name", ["s=2^20", "s=2^21-"])
def test_lattice_pmf_test_has_power(lattice_samples, name):
    # The same test rejects the right samples against a scale 1% off.
    z = lattice_samples[name]
    s = lattice_scale(LATTICE_SIGMAS[name])
    assert binned_rounded_gaussian_pvalue(z, s * 1.01, width=int(math.ceil(s / 20))) < 1e-6


def test_lattice_tail_frequencies(lattice_samples):
    # All samples pooled (the pmf is the same function of z / s at every scale).
    u = np.concatenate([np.abs(z) / lattice_scale(LATTICE_SIGMAS[name]) for name, z in lattice_samples.items()])
    n = u.size
    for k in (2.0, 3.0, 4.0, 4.5):
        expected = n * 2.0 * special.ndtr(-k)  # continuous-scale tail; the rounding moves it by ~1/s
        observed = np.count_nonzero(u > k)
        p = 2.0 * min(stats.poisson.cdf(observed, expected), stats.poisson.sf(observed - 1, expected))
        assert p > 1e-3, (k, observed, expected)
    assert u.max() < 13.0  # the sampler's support: |z| < T, T ~ 13 s
    assert u.max() > 4.0


@pytest.mark.parametrize("name", ["s=2^20", "s=2^21-", "s(eps=1)"])
def test_offset_within_block_is_uniform(lattice_samples, name):
    # z mod 2048 is the sampler's in-block offset; near 0 the density is flat
    # across a block to within 2048 s / s^2 < 0.1%, far below this test's reach.
    z = lattice_samples[name]
    s = lattice_scale(LATTICE_SIGMAS[name])
    inner = z[np.abs(z) < s / 4]
    assert inner.size > 0.15 * N_STAT
    counts = np.bincount(inner % 2048, minlength=2048)
    assert stats.chisquare(counts).pvalue > 1e-3
    # low bits alone (the offset's least significant ones), finer resolution
    assert stats.chisquare(np.bincount(inner % 16, minlength=16)).pvalue > 1e-3


def test_lattice_sampler_is_symmetric_and_centred(lattice_samples):
    for name, z in lattice_samples.items():
        s = lattice_scale(LATTICE_SIGMAS[name])
        assert abs(z.mean()) < 5.0 * s / math.sqrt(z.size)
        pos, neg = np.count_nonzero(z > 0), np.count_nonzero(z < 0)
        assert abs(pos - neg) < 5.0 * math.sqrt(pos + neg)


# ---------------------------------------------------------------------------
# 3. the exact discrete Gaussian (discrete_gaussian, C++ CKS)
# ---------------------------------------------------------------------------

def discrete_gaussian_pvalue(x: np.ndarray, sigma: float, width: int) -> float:
    half = int(math.ceil(16 * sigma)) + 4  # mass outside < 1e-55
    xs = np.arange(-half, half + 1)
    w = np.exp(-(xs.astype(np.float64) ** 2) / (2.0 * sigma * sigma))
    pmf = w / w.sum()
    assert x.min() >= -half and x.max() <= half
    nbins = (xs.size + width - 1) // width
    probs = np.bincount((xs + half) // width, weights=pmf, minlength=nbins)
    observed = np.bincount((x + half) // width, minlength=nbins)
    return pooled_chisquare(observed, probs)


@pytest.mark.parametrize("sigma, width", [(0.5, 1), (3.0, 1), (1e4, 500)], ids=str)
def test_discrete_gaussian_matches_exact_pmf_at_a_million(sigma, width):
    x = kernels.discrete_gaussian(N_STAT, sigma, generator=NoiseGenerator(seed=f"cks/{sigma}".encode()))
    assert x.dtype == np.int64 and x.shape == (N_STAT,)
    assert discrete_gaussian_pvalue(x, sigma, width) > 1e-3


def test_discrete_gaussian_test_rejects_a_rounded_gaussian():
    # Power: at sigma = 0.5 the rounded continuous Gaussian is a different distribution.
    x = np.rint(np.random.default_rng(5).standard_normal(N_STAT) * 0.5).astype(np.int64)
    assert discrete_gaussian_pvalue(x, 0.5, 1) < 1e-6


# ---------------------------------------------------------------------------
# 4. the noise the release adds
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [1e-200, 1e-5, 1.0, SIGMA_ATTACK, 7e4, 1e200], ids=str)
def test_release_noise_std_and_mean(sigma):
    y = kernels.add_gaussian_noise(np.zeros(N_STAT), sigma, generator=NoiseGenerator(seed=f"std/{sigma}".encode()))
    u = y / sigma  # no under/overflow in the moments at 1e-200 or 1e200
    assert abs(u.std() - 1.0) < 0.005
    assert abs(u.mean()) < 5.0 / math.sqrt(N_STAT)


@pytest.mark.parametrize("sigma", [1e-30, 1.0, 1e30], ids=str)
def test_release_noise_std_float32(sigma):
    y = kernels.add_gaussian_noise(np.zeros(N_STAT, np.float32), sigma,
                                   generator=NoiseGenerator(seed=f"std32/{sigma}".encode()))
    assert y.dtype == np.float32
    u = y.astype(np.float64) / sigma
    assert abs(u.std() - 1.0) < 0.005
    assert abs(u.mean()) < 5.0 / math.sqrt(N_STAT)


def test_release_centred_on_x():
    x = np.linspace(-50.0, 50.0, N_STAT)
    y = kernels.add_gaussian_noise(x, 2.0, generator=NoiseGenerator(seed=b"centred"))
    d = (y - x) / 2.0
    assert abs(d.mean()) < 5.0 / math.sqrt(N_STAT) and abs(d.std() - 1.0) < 0.005


# ---------------------------------------------------------------------------
# 5. worst-case inputs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_x_refused(dtype, bad):
    x = np.array([0.0, bad, 1.0], dtype=dtype)
    with pytest.raises(ValueError, match="NaN or infinite"):
        kernels.add_gaussian_noise(x, 1.0)


def test_x_beyond_the_lattice_range_refused_clearly():
    # sigma = 1: g = 2^-20, the lattice holds |x| < 2^62 g = 2^42.
    with pytest.raises(ValueError, match=r"too large to release with sigma=1 .*2\^62 lattice steps.*rescale"):
        kernels.add_gaussian_noise(np.array([0.0, 1e308]), 1.0)
    with pytest.raises(ValueError, match="1 values of x are too large"):
        kernels.add_gaussian_noise(np.array([0.0, -2.0**42]), 1.0)
    inside = np.array([math.nextafter(2.0**42, 0.0), -math.nextafter(2.0**42, 0.0)])
    y = kernels.add_gaussian_noise(inside, 1.0, generator=NoiseGenerator(seed=1))
    assert np.all(np.abs(y - inside) < 20.0)


def test_x_near_the_float64_maximum():
    gen = NoiseGenerator(seed=2)
    x = np.array([1e308, -1e308, 0.0, 1e300])
    y = kernels.add_gaussian_noise(x, 1e300, generator=gen)
    assert np.all(np.isfinite(y)) and np.all(np.abs(y - x) < 20 * 1e300)
    # x + noise past the float64 maximum: a ValueError with the reason (the
    # limit itself, 2^1038, is beyond float range and must still be printed).
    top = np.full(64, np.finfo(np.float64).max)
    with pytest.raises(ValueError, match=r"too large to release.*2\^1038.*finite in float64"):
        kernels.add_gaussian_noise(top, 1e300, generator=gen)
    with pytest.raises(ValueError, match="too large to release"):
        kernels.add_gaussian_noise(top, 1.0, generator=gen)  # beyond the lattice


def test_x_near_the_float32_maximum():
    gen = NoiseGenerator(seed=3)
    top = np.full(64, np.finfo(np.float32).max, dtype=np.float32)
    with pytest.raises(ValueError, match="too large to release"):
        kernels.add_gaussian_noise(top, 1.0, generator=gen)  # |x| / g ~ 2^148
    with pytest.raises(ValueError, match="finite in float32"):
        kernels.add_gaussian_noise(top, 1e37, generator=gen)  # in range; x + noise overflows
    # noise far below float32's spacing at the maximum: a finite result
    y = kernels.add_gaussian_noise(top, 1e28, generator=gen)  # range 2^135 g-steps ~ 4e40
    assert y.dtype == np.float32 and np.all(np.isfinite(y))
    x = np.full(64, 1e38, dtype=np.float32)
    y = kernels.add_gaussian_noise(x, 1e36, generator=gen)
    assert y.dtype == np.float32 and np.all(np.isfinite(y))
    assert np.all(np.abs(y.astype(np.float64) - 1e38) < 20 * 1e36)


def test_empty_arrays():
    for dtype in (np.float32, np.float64, np.int64):
        for shape in ((0,), (0, 3), (4, 0)):
            gen = NoiseGenerator(seed=4)
            out = kernels.add_gaussian_noise(np.empty(shape, dtype=dtype), 1.0, generator=gen)
            assert out.shape == shape
            assert out.dtype == (np.float64 if dtype == np.int64 else dtype)
            assert gen.blocks_used == 0
    assert kernels.lattice_gaussian((0, 5), 1.0).shape == (0, 5)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    for dtype, want in ((torch.float32, torch.float32), (torch.float64, torch.float64),
                        (torch.int64, torch.float64), (torch.float16, torch.float32)):
        t = torch.arange(12, dtype=dtype).reshape(3, 4)
        before = t.clone()
        out = kernels.add_gaussian_noise(t, 0.25, generator=NoiseGenerator(seed=5))
        assert isinstance(out, torch.Tensor) and out.dtype == want and out.shape == t.shape
        assert torch.equal(t, before)
    empty = kernels.add_gaussian_noise(torch.empty(0, 2, dtype=torch.float32), 1.0)
    assert isinstance(empty, torch.Tensor) and empty.shape == (0, 2) and empty.dtype == torch.float32
    grad = torch.ones(5, requires_grad=True)
    assert not kernels.add_gaussian_noise(grad, 1.0).requires_grad


def test_integer_input_gives_float64():
    for dtype in (np.int8, np.int32, np.int64, np.uint16, np.uint64):
        x = np.arange(10, dtype=dtype)
        y = kernels.add_gaussian_noise(x, 0.5, generator=NoiseGenerator(seed=6))
        assert y.dtype == np.float64
        ref = kernels.add_gaussian_noise(x.astype(np.float64), 0.5, generator=NoiseGenerator(seed=6))
        np.testing.assert_array_equal(y, ref)
    assert kernels.add_gaussian_noise([1, 2, 3], 1.0).dtype == np.float64


def test_sigma_zero_is_a_copy():
    for x in (np.linspace(-1, 1, 7), np.linspace(-1, 1, 7, dtype=np.float32)):
        gen = NoiseGenerator(seed=7)
        y = kernels.add_gaussian_noise(x, 0.0, generator=gen)
        assert y.dtype == x.dtype and not np.shares_memory(x, y)
        np.testing.assert_array_equal(y, x)
        assert gen.blocks_used == 0


@pytest.mark.parametrize("sigma", [-1.0, -1e-300, float("nan"), float("inf"), -float("inf")], ids=str)
def test_bad_sigma_refused(sigma):
    with pytest.raises(ValueError, match="sigma"):
        kernels.add_gaussian_noise(np.zeros(3), sigma)
    with pytest.raises(ValueError, match="sigma"):
        kernels.lattice_gaussian(3, sigma)


@pytest.mark.parametrize("sigma", [2.0**-1001, 1e-305, 5e-324], ids=str)
def test_sigma_below_two_to_minus_1000_refused(sigma):
    with pytest.raises(ValueError, match="too small for the lattice release"):
        kernels.add_gaussian_noise(np.zeros(3), sigma)
    with pytest.raises(ValueError, match="too small for the lattice release"):
        kernels.lattice_gaussian(3, sigma)


def test_sigma_at_two_to_minus_1000_works():
    sigma = 2.0**-1000
    y = kernels.add_gaussian_noise(np.zeros(10_000), sigma, generator=NoiseGenerator(seed=8))
    assert np.all(np.isfinite(y)) and 0.95 < (y / sigma).std() < 1.05
    g = kernels.lattice_spacing(sigma)
    assert g == 2.0**-1020 and np.all(np.modf(y / g)[0] == 0.0)


# ---------------------------------------------------------------------------
# 6. reproducibility, threads, ISA paths, the lattice
# ---------------------------------------------------------------------------

def _seeded_outputs(n: int):
    x64 = np.random.default_rng(11).standard_normal(n) * 30.0
    gen = NoiseGenerator(seed=b"repro")
    return (kernels.add_gaussian_noise(x64, SIGMA_ATTACK, generator=gen),
            kernels.add_gaussian_noise(x64.astype(np.float32), 0.3, generator=gen),
            kernels.lattice_gaussian(n, 1e-7, generator=gen))


def test_seeded_release_identical_for_one_and_two_threads():
    n = 1_000_003  # slow-path values included (about 0.1-0.4%), not a multiple of 8
    before = _core.get_num_threads()
    try:
        outs = []
        for threads in (1, 2):
            _core.set_num_threads(threads)
            assert _core.get_num_threads() == threads
            outs.append(_seeded_outputs(n))
    finally:
        _core.set_num_threads(before)
    for a, b in zip(*outs):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(outs[0][0], _seeded_outputs_other_seed(n))


def _seeded_outputs_other_seed(n: int) -> np.ndarray:
    x64 = np.random.default_rng(11).standard_normal(n) * 30.0
    return kernels.add_gaussian_noise(x64, SIGMA_ATTACK, generator=NoiseGenerator(seed=b"other"))


def test_seeded_release_identical_on_every_isa_path():
    paths = kernels.supported_isas()["noise"]
    n = 200_003
    outs = {}
    for path in paths:
        with kernels.force_isa("noise", path) as in_use:
            assert in_use == path
            outs[path] = _seeded_outputs(n)
    for path in paths[1:]:
        for a, b in zip(outs["default"], outs[path]):
            np.testing.assert_array_equal(a, b)


def _refusals():
    """The error of each out-of-range case: (message,) per case, on the current ISA path."""
    rng = np.random.default_rng(13)
    cases = []
    for dtype, sigma, bad_value in [(np.float64, 1.0, 2.0**43), (np.float64, 1e300, np.finfo(np.float64).max),
                                    (np.float32, 1e37, np.finfo(np.float32).max), (np.float64, 1.0, np.nan),
                                    (np.float32, 1.0, -np.inf)]:
        x = rng.standard_normal(1003).astype(dtype)
        x[rng.choice(x.size, 17, replace=False)] = bad_value  # in full blocks and the partial last one
        x[-1] = bad_value
        with pytest.raises(ValueError) as info:
            kernels.add_gaussian_noise(x, sigma, generator=NoiseGenerator(seed=4))
        cases.append(str(info.value))
    return cases


def test_refusals_identical_on_every_isa_path():
    # the vector path counts out-of-range and non-finite values like the scalar one
    paths = kernels.supported_isas()["noise"]
    seen = {}
    for path in paths:
        with kernels.force_isa("noise", path):
            seen[path] = _refusals()
    assert seen["default"][0].startswith("18 values of x are too large")
    assert "finite in float64" in seen["default"][1] and "finite in float32" in seen["default"][2]
    assert seen["default"][3] == seen["default"][4] == "x contains NaN or infinite values"
    for path in paths[1:]:
        assert seen[path] == seen["default"]


@pytest.mark.parametrize("sigma", [1e-200, 0.7, SIGMA_ATTACK, 1e6, 1e200], ids=str)
def test_release_lies_on_the_lattice(sigma):
    g = kernels.lattice_spacing(sigma)
    x = np.random.default_rng(12).standard_normal(100_000) * sigma * 5.0
    gen = NoiseGenerator(seed=9)
    y = kernels.add_gaussian_noise(x, sigma, generator=gen)
    k = y / g  # exact: g is a power of two, no under/overflow here
    assert np.all(np.modf(k)[0] == 0.0)
    z = kernels.lattice_gaussian(x.size, sigma, generator=NoiseGenerator(seed=9))
    np.testing.assert_array_equal(k, np.rint(x / g) + z)


# ---------------------------------------------------------------------------
# 7. calibration for the lattice (vflsec.dp.gaussian_sigma, vflsec.dp.lattice)
# ---------------------------------------------------------------------------

COORDINATES = [1, 2, 10, 1000, 10**5, 10**7, 10**9, 10**12]
TARGETS = [(1.0, 1e-5, 1.0), (0.1, 1e-6, 3.0), (8.0, 1e-3, 0.01)]


@pytest.mark.parametrize("epsilon, delta, sensitivity", TARGETS)
def test_gaussian_sigma_monotone_in_coordinates(epsilon, delta, sensitivity):
    # The query is not rounded: coordinates only count the sampler's per-draw
    # error (2^-58), so sigma barely moves, and never down.
    sigmas = [gaussian_sigma(epsilon, delta, sensitivity, coordinates=d) for d in COORDINATES]
    assert all(b >= a for a, b in zip(sigmas, sigmas[1:]))
    assert sigmas[-1] <= sigmas[0] * (1 + 2.0**-7)


@pytest.mark.parametrize("epsilon, delta, sensitivity", TARGETS)
@pytest.mark.parametrize("d", COORDINATES)
def test_gaussian_sigma_meets_the_lattice_guarantee(epsilon, delta, sensitivity, d):
    sigma = gaussian_sigma(epsilon, delta, sensitivity, coordinates=d)
    assert kernels.lattice_sigma(sigma) == sigma  # what the release really uses
    ratio = sensitivity / sigma
    eps_ideal, delta_ideal = dp_lattice.ideal_target(epsilon, delta, draws=d, ratio=ratio)
    assert eps_ideal <= epsilon and delta_ideal <= delta
    ideal = gaussian_delta(eps_ideal, sigma, sensitivity)
    assert ideal <= delta_ideal <= delta
    eps_impl, delta_impl = dp_lattice.implemented_guarantee(eps_ideal, ideal, draws=d, ratio=ratio)
    assert eps_impl <= epsilon * (1 + 1e-12) and delta_impl <= delta * (1 + 1e-12)
    # Tight up to the grid: 1% less sigma misses the ideal target.
    assert gaussian_delta(eps_ideal, sigma * 0.99, sensitivity) > delta_ideal


def test_gaussian_sigma_classic_is_the_formula_on_the_grid():
    epsilon, delta, d = 0.5, 1e-5, 10**6
    sigma = gaussian_sigma(epsilon, delta, 2.0, method="classic", coordinates=d)
    eps_ideal, delta_ideal = dp_lattice.ideal_target(epsilon, delta, draws=d, ratio=0.3)
    formula = math.sqrt(2.0 * math.log(1.25 / delta_ideal)) * 2.0 / eps_ideal
    assert formula * (1 - 1e-12) <= sigma <= formula * (1 + 2.0**-8)


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-3, ValueError), (1.5, TypeError), (True, TypeError)])
def test_gaussian_sigma_rejects_bad_coordinates(bad, exc):
    with pytest.raises(exc):
        gaussian_sigma(1.0, 1e-5, 1.0, coordinates=bad)


def test_gaussian_sigma_bad_coordinates_message_names_the_argument():
    with pytest.raises(ValueError, match="coordinates"):
        gaussian_sigma(1.0, 1e-5, 1.0, coordinates=0)


@pytest.mark.parametrize("draws", [1, 1000, 10**6, 10**9, 10**12])
@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (0.05, 1e-9), (20.0, 0.1)])
def test_ideal_target_and_implemented_guarantee_round_trip(epsilon, delta, draws):
    eps_ideal, delta_ideal = dp_lattice.ideal_target(epsilon, delta, draws=draws, ratio=3.0)
    assert 0 < eps_ideal <= epsilon and 0 < delta_ideal <= delta
    if draws >= 1000:  # below that the correction is under float resolution
        assert eps_ideal < epsilon and delta_ideal < delta
    eps_impl, delta_impl = dp_lattice.implemented_guarantee(eps_ideal, delta_ideal, draws=draws, ratio=3.0)
    assert eps_impl == pytest.approx(epsilon, rel=1e-12, abs=0)
    assert delta_impl == pytest.approx(delta, rel=1e-9, abs=0)
    assert eps_impl <= epsilon * (1 + 1e-15) and delta_impl <= delta * (1 + 1e-12)
    # the implementation never claims more than the ideal mechanism
    e2, d2 = dp_lattice.implemented_guarantee(epsilon, delta, draws=draws, ratio=3.0)
    assert e2 >= epsilon and d2 >= delta


@pytest.mark.parametrize("epsilon, ok", [(10.0, True), (1000.0, True), (5000.0, True), (20000.0, False)])
def test_support_term_is_negligible_until_epsilon_in_the_thousands(epsilon, ok):
    # The noise is supported on |Z| < 130 s: a neighbour shifted by r sigma can
    # produce outputs the other cannot with probability Phi(-(130 - r)).
    if ok:
        sigma = gaussian_sigma(epsilon, 1e-5, 1.0)
        assert dp_lattice.support_failure(1.0 / sigma) < 1e-100
    else:
        with pytest.raises(ValueError, match="finite support"):
            gaussian_sigma(epsilon, 1e-5, 1.0)
    assert dp_lattice.support_failure(129.0) == pytest.approx(0.5)  # 130 sigma less one lattice step, rounded


def test_ideal_target_refuses_absurd_draw_counts():
    # 2 D 2^-58 >= epsilon: the sampler's error bound alone uses up the budget.
    with pytest.raises(ValueError, match="sampler's error"):
        dp_lattice.ideal_target(1.0, 1e-5, draws=2**57)
