"""The CUDA kernel bodies, run on the CPU (no GPU needed), against the CPU kernels.

Every kernel in cpp/cuda is a per-thread functor that vflsec._core_cuda can
also run in a plain host loop (the ``_host_*`` hooks): these tests check the
GPU code's arithmetic, tiling, masking and reductions where no GPU is
present. Skipped when vflsec was built without its CUDA module.
"""
import numpy as np
import pytest

from vflsec import kernels
from vflsec.kernels import NoiseGenerator

core_cuda = pytest.importorskip("vflsec._core_cuda", reason="vflsec built without CUDA kernels (VFLSEC_CUDA)")

TOL = {np.float32: 2e-6, np.float64: 1e-14}


def host_distances(X, Y, squared=False, scale_exp=0):
    fn = core_cuda._host_pairwise_distances_f32 if X.dtype == np.float32 else core_cuda._host_pairwise_distances_f64
    return fn(X, Y, squared, scale_exp)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,m,d", [(1, 1, 1), (5, 7, 3), (9, 4, 300), (13, 17, 513), (33, 2, 8), (150, 70, 5),
                                   (65, 129, 2)])
def test_distances_match_cpu(dtype, n, m, d):
    rng = np.random.default_rng(n * 1000 + m * 10 + d)
    X = (rng.standard_normal((n, d)) + 50.0).astype(dtype)
    Y = (rng.standard_normal((m, d)) + 50.0).astype(dtype)
    for squared in (False, True):
        got = host_distances(X, Y, squared)
        want = kernels.pairwise_distances(X, Y, squared=squared)
        assert got.dtype == dtype and got.shape == (n, m)
        np.testing.assert_allclose(got, want, rtol=4 * TOL[dtype], atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_distances_self_exact_zero_diagonal_and_symmetric(dtype):
    rng = np.random.default_rng(3)
    # Far from the origin: the GEMM expansion would leave a nonzero diagonal.
    X = (rng.standard_normal((23, 37)) * 1e-3 + 1e4).astype(dtype)
    D = host_distances(X, X)
    assert np.all(np.diag(D) == 0.0)
    np.testing.assert_array_equal(D, D.T)
    exact = np.sqrt(((X[:, None, :].astype(np.float64) - X[None, :, :]) ** 2).sum(-1))
    off = ~np.eye(23, dtype=bool)
    assert np.max(np.abs(D[off] - exact[off]) / exact[off]) < 1e-5


@pytest.mark.filterwarnings("ignore:overflow encountered in ldexp")
@pytest.mark.parametrize("dtype,scale", [(np.float32, 1e30), (np.float32, 1e-30), (np.float64, 1e200),
                                         (np.float64, 1e-200)])
def test_distances_power_of_two_scaling(dtype, scale):
    from vflsec.kernels.distances import _scale_exponent

    rng = np.random.default_rng(4)
    X = (rng.standard_normal((6, 11)) * scale).astype(dtype)
    Y = (rng.standard_normal((5, 11)) * scale).astype(dtype)
    exponent = _scale_exponent(X, Y)
    assert exponent != 0
    for squared in (False, True):
        got = host_distances(X, Y, squared, exponent)
        want = kernels.pairwise_distances(X, Y, squared=squared)
        np.testing.assert_allclose(got, want, rtol=4 * TOL[dtype], atol=0)
        assert np.all(np.isfinite(got)) or squared


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d", [(2, 1), (3, 5), (8, 3), (66, 7), (150, 4), (301, 260)])
def test_distance_stats_match_cpu(dtype, n, d):
    rng = np.random.default_rng(n + d)
    X = rng.standard_normal((n, d)).astype(dtype)
    fn = (core_cuda._host_pairwise_distance_stats_f32 if dtype == np.float32
          else core_cuda._host_pairwise_distance_stats_f64)
    count, mean, std, lo, hi = fn(X, 0)
    want = kernels.pairwise_distance_stats(X)
    assert int(count) == want.count == n * (n - 1) // 2
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose([mean, std, lo, hi], [want.mean, want.std, want.min, want.max], rtol=rtol)


def test_distance_stats_duplicates_give_zero_min():
    X = np.repeat(np.arange(10.0).reshape(5, 2), 3, axis=0)
    count, mean, std, lo, hi = core_cuda._host_pairwise_distance_stats_f64(X, 0)
    assert count == 105 and lo == 0.0
    want = kernels.pairwise_distance_stats(X)
    np.testing.assert_allclose([mean, std, hi], [want.mean, want.std, want.max], rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [2.0, 1.5, 2.3])
def test_fcm_matches_cpu_from_centres(dtype, m, blobs):
    X = blobs(300, 5, 3, dtype)
    start = X[[0, 100, 200]].copy()
    fn = core_cuda._host_fuzzy_cmeans_f32 if dtype == np.float32 else core_cuda._host_fuzzy_cmeans_f64
    centers, membership, labels, confidence, (history, n_iter, converged, shift, weightless) = fn(
        X, 3, m, 100, 1e-4, init_centers=start)
    want = kernels.fuzzy_cmeans(X, 3, m=m, max_iter=100, tol=1e-4, init=start)
    assert weightless == -1
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(centers, want.centers, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(membership, want.membership, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(membership.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(labels, want.labels)
    np.testing.assert_allclose(confidence, want.confidence, rtol=rtol, atol=rtol)
    assert converged == want.converged
    assert abs(n_iter - want.n_iter) <= (1 if dtype == np.float32 else 0)
    np.testing.assert_allclose(history[-1], want.objective, rtol=rtol)
    assert all(b <= a * (1 + 1e-5) for a, b in zip(history, history[1:]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fcm_matches_cpu_from_memberships(dtype, blobs):
    X = blobs(517, 3, 4, dtype, seed=5)
    rng = np.random.default_rng(1)
    u0 = rng.random((517, 4))
    u0 = (u0 / u0.sum(axis=1, keepdims=True)).astype(dtype)
    fn = core_cuda._host_fuzzy_cmeans_f32 if dtype == np.float32 else core_cuda._host_fuzzy_cmeans_f64
    centers, membership, labels, confidence, (history, n_iter, converged, shift, weightless) = fn(
        X, 4, 2.0, 7, 1e-9, init_membership=u0)
    want = kernels.fuzzy_cmeans(X, 4, m=2.0, max_iter=7, tol=1e-9, init=u0)
    assert n_iter == want.n_iter == 7 and not converged
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(centers, want.centers, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(history, want.objective_history, rtol=rtol)
    np.testing.assert_allclose(shift, want.center_shift, rtol=1e-3 if dtype == np.float32 else 1e-8)


def test_fcm_point_on_centre_and_weightless_cluster():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [6.0, 5.0]])
    centers, membership, labels, *_ = core_cuda._host_fuzzy_cmeans_f64(X, 2, 2.0, 1, 1e-9,
                                                                      init_centers=X[[0, 2]].copy())
    want = kernels.fuzzy_cmeans(X, 2, m=2.0, max_iter=1, tol=1e-9, init=X[[0, 2]].copy())
    np.testing.assert_allclose(membership, want.membership, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(labels, [0, 0, 1, 1])
    u0 = np.array([[1.0, 0.0]] * 4)
    *_, outcome = core_cuda._host_fuzzy_cmeans_f64(X, 2, 2.0, 5, 1e-9, init_membership=u0)
    assert outcome[4] == 1  # cluster 1 has no weight


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 1001])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_seeded_noise_bit_identical_to_cpu(n, dtype):
    fn = core_cuda._host_normal_f32 if dtype == "float32" else core_cuda._host_normal_f64
    gen = NoiseGenerator(seed=1234)
    got = fn(gen._core_gen, n, 2.5)
    want = NoiseGenerator(seed=1234).normal(n, sigma=2.5, dtype=dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_gpu_draws_share_the_generators_counter():
    """CPU and GPU-path draws of one generator continue one stream: no reuse."""
    gen = NoiseGenerator(seed=99)
    a = gen.normal(10)
    b = core_cuda._host_normal_f64(gen._core_gen, 13, 1.0)
    c = gen.normal(5)
    assert gen.blocks_used == 2 + 2 + 1
    ref = NoiseGenerator(seed=99)
    np.testing.assert_array_equal(a, ref.normal(10))
    np.testing.assert_array_equal(b, ref.normal(13))
    np.testing.assert_array_equal(c, ref.normal(5))


def test_generator_type_registered_by_core_alone():
    """_core_cuda takes _core's generator objects and registers no type of its own."""
    from vflsec import _core

    assert not hasattr(core_cuda, "ChaCha20Generator")
    gen = _core.ChaCha20Generator.from_key(bytes(range(32)))
    want = np.empty(9)
    _core.ChaCha20Generator.from_key(bytes(range(32))).fill_normal(want, 1.0)
    np.testing.assert_array_equal(core_cuda._host_normal_f64(gen, 9, 1.0), want)
    with pytest.raises(TypeError):
        core_cuda._host_normal_f64(object(), 9, 1.0)


def test_secure_generator_path_and_statistics():
    g1, g2 = NoiseGenerator(), NoiseGenerator()
    a = core_cuda._host_normal_f64(g1._core_gen, 20000, 1.0)
    b = core_cuda._host_normal_f64(g2._core_gen, 20000, 1.0)
    assert not np.array_equal(a, b)
    assert g1.blocks_used == 2500
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1.0) < 0.05


def test_workspace_sizes():
    assert core_cuda.distance_stats_workspace(2) >= 5
    assert core_cuda.distance_stats_workspace(100_000) * 8 < 64 * 2**20
    assert core_cuda.fcm_workspace(1000, 3, 4) >= 1000 * 3 + 1000
