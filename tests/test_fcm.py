"""fuzzy_cmeans: agreement with scikit-fuzzy, invariants, edge cases, bad input."""
import numpy as np
import pytest

import vflsec
from vflsec import kernels

skfuzzy = pytest.importorskip("skfuzzy")


def _blobs(n=600, d=3, c=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((c, d)) * 5
    return (centers[rng.integers(0, c, n)] + rng.standard_normal((n, d))).astype(dtype)


def _u0(n, c, seed=1):
    u = np.random.default_rng(seed).random((n, c))
    return u / u.sum(axis=1, keepdims=True)


def _objective(X, U, V, m=2.0):
    d2 = ((X[:, None, :] - V[None, :, :]) ** 2).sum(-1)
    return float(((U ** m) * d2).sum())


@pytest.mark.parametrize("m", [2.0, 1.5, 3.0])
def test_matches_skfuzzy_iteration_for_iteration(m):
    X = _blobs()
    u0 = _u0(len(X), 4)
    iters = 25
    res = kernels.fuzzy_cmeans(X, 4, m=m, max_iter=iters, tol=1e-300, init=u0)
    cntr, u, *_rest, p, _fpc = skfuzzy.cluster.cmeans(X.T, 4, m, error=0.0, maxiter=iters, init=u0.T)
    assert res.n_iter == p == iters
    np.testing.assert_allclose(res.centers, cntr, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.membership, u.T, rtol=1e-9, atol=1e-12)
    assert res.objective == pytest.approx(_objective(X, u.T, cntr, m), rel=1e-8)


def test_converged_run_matches_skfuzzy_objective():
    X = _blobs(seed=3)
    u0 = _u0(len(X), 4, seed=4)
    res = kernels.fuzzy_cmeans(X, 4, max_iter=1000, tol=1e-10, init=u0)
    cntr, u, *_ = skfuzzy.cluster.cmeans(X.T, 4, 2.0, error=1e-12, maxiter=1000, init=u0.T)
    assert res.converged
    assert res.objective == pytest.approx(_objective(X, u.T, cntr), rel=1e-8)


def test_invariants_rows_sum_to_one_and_objective_non_increasing():
    X = _blobs(n=900, d=5, c=6, seed=5)
    res = kernels.fuzzy_cmeans(X, 6, seed=0, max_iter=200)
    np.testing.assert_allclose(res.membership.sum(axis=1), 1.0, atol=1e-12)
    assert (res.membership >= 0).all()
    hist = np.array(res.objective_history)
    assert len(hist) == res.n_iter
    assert np.all(np.diff(hist) <= 1e-9 * hist[:-1])
    assert res.objective == hist[-1]
    np.testing.assert_array_equal(res.labels, np.argmax(res.membership, axis=1))
    np.testing.assert_array_equal(res.confidence, res.membership.max(axis=1))
    assert res.labels.dtype == np.int64


def test_converges_before_max_iter_with_tol():
    res = kernels.fuzzy_cmeans(_blobs(), 4, seed=0, tol=1e-6, max_iter=500)
    assert res.converged and res.n_iter < 500


def test_point_on_a_centre_gets_full_membership():
    # Two well separated pairs of identical points: the centres land exactly on them.
    X = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 10.0], [10.0, 10.0]])
    res = kernels.fuzzy_cmeans(X, 2, init=np.array([[0.0, 0.0], [10.0, 10.0]]), max_iter=5)
    assert np.isfinite(res.membership).all()
    np.testing.assert_array_equal(np.sort(res.membership, axis=1), [[0, 1]] * 4)
    np.testing.assert_array_equal(res.centers, [[0, 0], [10, 10]])


def test_point_on_two_coincident_centres_splits_evenly():
    X = np.array([[1.0], [1.0], [1.0]])
    res = kernels.fuzzy_cmeans(X, 2, init=np.array([[1.0], [1.0]]), max_iter=3)
    np.testing.assert_allclose(res.membership, 0.5)


def test_deterministic_for_seed_and_seeds_differ():
    X = _blobs(seed=7)
    a = kernels.fuzzy_cmeans(X, 4, seed=11, max_iter=3)
    b = kernels.fuzzy_cmeans(X, 4, seed=11, max_iter=3)
    c = kernels.fuzzy_cmeans(X, 4, seed=12, max_iter=3)
    np.testing.assert_array_equal(a.membership, b.membership)
    assert not np.array_equal(a.membership, c.membership)


def test_thread_count_invariance():
    X = _blobs(n=5000, d=8, seed=8)
    before = vflsec.get_num_threads()
    try:
        runs = {}
        for t in (1, 2, 3):
            vflsec.set_num_threads(t)
            runs[t] = [kernels.fuzzy_cmeans(X, 4, seed=0, max_iter=20) for _ in range(2)]
            np.testing.assert_array_equal(runs[t][0].centers, runs[t][1].centers)
        for t in (2, 3):
            np.testing.assert_allclose(runs[t][0].centers, runs[1][0].centers, rtol=1e-12)
    finally:
        vflsec.set_num_threads(before)


def test_kmeanspp_and_center_init():
    X = _blobs(seed=9)
    res = kernels.fuzzy_cmeans(X, 4, init="kmeans++", seed=0)
    assert res.converged
    res2 = kernels.fuzzy_cmeans(X, 4, init=res.centers, max_iter=50)
    np.testing.assert_allclose(res2.centers, res.centers, atol=1e-4)


def test_float32_close_to_float64_and_keeps_dtype():
    X = _blobs(seed=10)
    u0 = _u0(len(X), 4)
    r64 = kernels.fuzzy_cmeans(X, 4, init=u0, max_iter=30, tol=1e-300)
    r32 = kernels.fuzzy_cmeans(X.astype(np.float32), 4, init=u0.astype(np.float32), max_iter=30, tol=1e-300)
    assert r32.centers.dtype == np.float32 and r32.membership.dtype == np.float32
    np.testing.assert_allclose(r32.centers, r64.centers, rtol=1e-4, atol=1e-4)
    assert r32.objective == pytest.approx(r64.objective, rel=1e-4)


def test_edge_shapes_and_layouts():
    X = _blobs(n=50, d=1, c=2, seed=2)
    res = kernels.fuzzy_cmeans(X, 2, seed=0)
    assert res.centers.shape == (2, 1)
    Xn = np.arange(6.0).reshape(3, 2)
    res = kernels.fuzzy_cmeans(Xn, 3, seed=0)  # n == n_clusters
    assert res.membership.shape == (3, 3)
    Xf = np.asfortranarray(_blobs())
    u0 = _u0(len(Xf), 4)
    a = kernels.fuzzy_cmeans(Xf, 4, init=u0, max_iter=5, tol=1e-300)
    b = kernels.fuzzy_cmeans(np.ascontiguousarray(Xf), 4, init=u0, max_iter=5, tol=1e-300)
    np.testing.assert_array_equal(a.centers, b.centers)
    ints = kernels.fuzzy_cmeans(np.arange(20).reshape(10, 2), 2, seed=0)
    assert ints.centers.dtype == np.float64


def test_torch_input_gives_torch_output():
    torch = pytest.importorskip("torch")
    X = _blobs(seed=12)
    res = kernels.fuzzy_cmeans(torch.from_numpy(X), 4, seed=0, max_iter=5)
    ref = kernels.fuzzy_cmeans(X, 4, seed=0, max_iter=5)
    assert isinstance(res.centers, torch.Tensor) and isinstance(res.labels, torch.Tensor)
    np.testing.assert_array_equal(res.centers.numpy(), ref.centers)


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        (dict(X=np.zeros((0, 2)), n_clusters=2), ValueError, "X"),
        (dict(X=np.ones(5), n_clusters=2), ValueError, "X"),
        (dict(X=np.array([[1.0, np.nan], [0, 0]]), n_clusters=2), ValueError, "X"),
        (dict(X=np.ones((4, 2), dtype=bool), n_clusters=2), TypeError, "X"),
        (dict(X=np.ones((4, 2), dtype=complex), n_clusters=2), TypeError, "X"),
        (dict(X=np.ones((4, 2)), n_clusters=1), ValueError, "n_clusters"),
        (dict(X=np.ones((4, 2)), n_clusters=5), ValueError, "n_clusters"),
        (dict(X=np.ones((4, 2)), n_clusters=2.0), TypeError, "n_clusters"),
        (dict(X=np.ones((4, 2)), n_clusters=2, m=1.0), ValueError, "m"),
        (dict(X=np.ones((4, 2)), n_clusters=2, m=float("nan")), ValueError, "m"),
        (dict(X=np.ones((4, 2)), n_clusters=2, tol=0.0), ValueError, "tol"),
        (dict(X=np.ones((4, 2)), n_clusters=2, max_iter=0), ValueError, "max_iter"),
        (dict(X=np.ones((4, 2)), n_clusters=2, seed=-1), ValueError, "seed"),
        (dict(X=np.ones((4, 2)), n_clusters=2, init="kmeans"), ValueError, "init"),
        (dict(X=np.ones((4, 2)), n_clusters=2, init=np.ones((3, 3))), ValueError, "init"),
        (dict(X=np.ones((4, 2)), n_clusters=2, init=np.full((4, 2), 0.7)), ValueError, "init"),
        (dict(X=np.ones((4, 2)), n_clusters=2, init=np.array([[np.inf, 0], [0, 0]])), ValueError, "init"),
    ],
)
def test_bad_input_raises(kwargs, exc, word):
    X = kwargs.pop("X")
    c = kwargs.pop("n_clusters")
    with pytest.raises(exc, match=word):
        kernels.fuzzy_cmeans(X, c, **kwargs)
