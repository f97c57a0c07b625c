"""Fuzzy c-means: agreement with scikit-fuzzy and the numpy reference,
invariants, edge cases, determinism and input validation."""
import numpy as np
import pytest

import vflsec
from vflsec import kernels
from vflsec.kernels import FCMResult, fuzzy_cmeans
from vflsec.kernels._reference import numpy_fuzzy_cmeans

TINY_TOL = 1e-300  # never reached: runs exactly max_iter updates


def blobs(n=600, d=4, c=3, seed=0, spread=3.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((c, d)) * spread
    truth = rng.integers(0, c, n)
    X = centers[truth] + rng.standard_normal((n, d))
    return X.astype(dtype), truth, centers


def random_membership(n, c, seed=1):
    u = np.random.default_rng(seed).random((n, c))
    return u / u.sum(axis=1, keepdims=True)


def objective(X, centers, membership, m):
    X = np.asarray(X, dtype=np.float64)
    d2 = ((X[:, None, :] - np.asarray(centers, dtype=np.float64)[None]) ** 2).sum(-1)
    return float((np.asarray(membership, dtype=np.float64) ** m * d2).sum())


@pytest.fixture
def threads():
    before = vflsec.get_num_threads()
    yield vflsec.set_num_threads
    vflsec.set_num_threads(before)


# ---------------------------------------------------------------------------
# agreement with scikit-fuzzy and the numpy reference
# ---------------------------------------------------------------------------

# 2.0: the dedicated m = 2 path; 1.5, 3.0, 1.25, 5.0: powers by square roots and
# multiplications; 2.5, 1.7: std::pow
@pytest.mark.parametrize("m", [2.0, 1.5, 3.0, 1.25, 5.0, 2.5, 1.7])
@pytest.mark.parametrize("iterations", [1, 7, 25])
def test_same_iterations_as_skfuzzy(m, iterations):
    skfuzzy = pytest.importorskip("skfuzzy")
    X, _, _ = blobs()
    u0 = random_membership(len(X), 3)
    # skfuzzy: error=0 never stops early, so exactly `iterations` steps; its
    # last step computes centres from u_{k-1} and u_k from those centres, the
    # same pair (V_k, U(V_k)) that fuzzy_cmeans returns.
    cntr, u, _, _, _, p, _ = skfuzzy.cluster.cmeans(X.T, 3, m, error=0.0, maxiter=iterations, init=u0.T)
    res = fuzzy_cmeans(X, 3, m=m, max_iter=iterations, tol=TINY_TOL, init=u0)
    assert p == res.n_iter == iterations
    np.testing.assert_allclose(res.centers, cntr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.membership, u.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.objective, objective(X, cntr, u.T, m), rtol=1e-8)


def test_converged_solution_matches_skfuzzy():
    skfuzzy = pytest.importorskip("skfuzzy")
    X, _, _ = blobs(n=500, d=3, c=4, seed=3)
    u0 = random_membership(len(X), 4, seed=5)
    cntr, u, _, _, _, p, _ = skfuzzy.cluster.cmeans(X.T, 4, 2.0, error=1e-12, maxiter=5000, init=u0.T)
    res = fuzzy_cmeans(X, 4, max_iter=5000, tol=1e-12, init=u0)
    assert res.converged and p < 5000
    np.testing.assert_allclose(res.centers, cntr, atol=1e-8)
    np.testing.assert_allclose(res.membership, u.T, atol=1e-8)
    np.testing.assert_allclose(res.objective, objective(X, cntr, u.T, 2.0), rtol=1e-8)


@pytest.mark.parametrize("m", [2.0, 2.5])
def test_matches_numpy_reference_including_stopping(m):
    X, _, _ = blobs(n=800, d=5, c=4, seed=2)
    u0 = random_membership(len(X), 4, seed=9)
    ref = numpy_fuzzy_cmeans(X, 4, m, 500, 1e-7, u0)
    res = fuzzy_cmeans(X, 4, m=m, max_iter=500, tol=1e-7, init=u0)
    assert res.n_iter == ref.n_iter and res.converged == ref.converged
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-9)
    np.testing.assert_allclose(res.centers, ref.centers, atol=1e-9)
    np.testing.assert_allclose(res.membership, ref.membership, atol=1e-9)


# ---------------------------------------------------------------------------
# result invariants
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m", [2.0, 1.3, 4.0])
def test_invariants(dtype, m):
    X, _, _ = blobs(n=1000, d=6, c=5, seed=4, dtype=dtype)
    res = fuzzy_cmeans(X, 5, m=m, seed=0, max_iter=200, tol=1e-4)
    assert isinstance(res, FCMResult)
    n = len(X)
    assert res.centers.shape == (5, 6) and res.membership.shape == (n, 5)
    for arr in (res.centers, res.membership, res.confidence):
        assert arr.dtype == dtype and arr.flags.c_contiguous
    assert res.labels.dtype == np.int64 and res.labels.shape == (n,)
    assert res.objective_history.dtype == np.float64 and len(res.objective_history) == res.n_iter
    assert np.isfinite(res.membership).all() and (res.membership >= 0).all()
    eps = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(res.membership.sum(axis=1, dtype=np.float64), 1.0, atol=eps)
    np.testing.assert_array_equal(res.labels, res.membership.argmax(axis=1))
    np.testing.assert_array_equal(res.confidence, res.membership.max(axis=1))
    assert res.objective == res.objective_history[-1]
    # the objective belongs to the returned (centres, memberships) pair
    np.testing.assert_allclose(res.objective, objective(X, res.centers, res.membership, m),
                               rtol=1e-10 if dtype == np.float64 else 1e-4)
    # J_m(U_p, V_p) never increases (up to rounding)
    steps = np.diff(res.objective_history)
    slack = (1e-12 if dtype == np.float64 else 1e-5) * res.objective_history[0]
    assert (steps <= slack).all(), steps.max()
    assert res.converged == (res.center_shift < 1e-4)
    if res.converged:
        assert res.n_iter < 200


def test_float32_close_to_float64():
    X, _, _ = blobs(n=2000, d=8, c=4, seed=6)
    u0 = random_membership(len(X), 4, seed=2)
    r64 = fuzzy_cmeans(X, 4, init=u0, max_iter=30, tol=TINY_TOL)
    r32 = fuzzy_cmeans(X.astype(np.float32), 4, init=u0.astype(np.float32), max_iter=30, tol=TINY_TOL)
    assert r32.centers.dtype == np.float32
    np.testing.assert_allclose(r32.centers, r64.centers, atol=2e-4)
    np.testing.assert_allclose(r32.membership, r64.membership, atol=2e-4)
    np.testing.assert_allclose(r32.objective, r64.objective, rtol=1e-5)


def test_max_iter_stop_and_first_shift_undefined():
    X, _, _ = blobs()
    res = fuzzy_cmeans(X, 3, max_iter=1, seed=0)
    assert res.n_iter == 1 and not res.converged and res.center_shift == np.inf
    res = fuzzy_cmeans(X, 3, max_iter=3, tol=TINY_TOL, seed=0)
    assert res.n_iter == 3 and not res.converged and 0 < res.center_shift < np.inf


def test_converges_to_true_clusters_from_centres():
    X, truth, centers = blobs(n=900, d=3, c=3, seed=7, spread=6.0)
    res = fuzzy_cmeans(X, 3, init=centers, tol=1e-8)
    assert res.converged
    np.testing.assert_array_equal(res.labels, truth)
    np.testing.assert_allclose(res.centers, centers, atol=0.2)


# ---------------------------------------------------------------------------
# coincident points and degenerate data
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("m", [2.0, 1.5, 3.0])
def test_points_on_centres_including_duplicate_centres(m):
    a, b = [1.0, -2.0], [3.0, 0.5]
    X = np.array([a] * 5 + [b] * 3)
    # centres 0 and 1 coincide with each other and with the points at a
    res = fuzzy_cmeans(X, 3, m=m, init=np.array([a, a, b]), tol=1e-12)
    expected = np.array([[0.5, 0.5, 0.0]] * 5 + [[0.0, 0.0, 1.0]] * 3)
    np.testing.assert_array_equal(res.membership, expected)
    np.testing.assert_array_equal(res.centers, [a, a, b])
    assert res.objective == 0.0 and res.converged and res.n_iter == 1
    np.testing.assert_array_equal(res.labels, [0] * 5 + [2] * 3)  # first maximum on ties
    np.testing.assert_array_equal(res.confidence, [0.5] * 5 + [1.0] * 3)


def test_n_equals_n_clusters():
    X = np.array([[0.0, 1.0], [4.0, -1.0], [2.5, 7.0]])
    res = fuzzy_cmeans(X, 3, init="kmeans++", seed=0, tol=1e-12)
    # k-means++ must pick every distinct point, each its own cluster
    np.testing.assert_array_equal(np.sort(res.labels), [0, 1, 2])
    np.testing.assert_array_equal(res.membership, np.eye(3)[res.labels])
    assert res.objective == 0.0
    res = fuzzy_cmeans(X, 3, seed=0)  # random start: still a valid partition
    np.testing.assert_allclose(res.membership.sum(axis=1), 1.0, atol=1e-12)
    assert np.isfinite(res.centers).all()


def test_duplicates_and_constant_data():
    X, _, _ = blobs(n=300, d=2, c=3, seed=8)
    X = np.repeat(X[:50], 6, axis=0)  # every point six times
    res = fuzzy_cmeans(X, 3, seed=1)
    rows = res.membership.reshape(50, 6, 3)
    np.testing.assert_array_equal(rows, np.repeat(rows[:, :1], 6, axis=1))
    constant = np.tile([2.0, -0.5, 4.0], (40, 1))  # powers of two: weighted means stay exact
    res = fuzzy_cmeans(constant, 4, seed=0)
    # every centre lands on the one point: memberships split evenly, J = 0
    np.testing.assert_array_equal(res.centers, constant[:4])
    np.testing.assert_array_equal(res.membership, np.full((40, 4), 0.25))
    assert res.objective == 0.0


def test_one_dimensional_data():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-5, 1, 200), rng.normal(5, 1, 300)])[:, None]
    res = fuzzy_cmeans(X, 2, seed=3, tol=1e-9)
    assert res.converged
    np.testing.assert_allclose(np.sort(res.centers[:, 0]), [-5, 5], atol=0.3)
    ref = numpy_fuzzy_cmeans(X, 2, 2.0, res.n_iter, TINY_TOL, random_membership_from_seed(len(X), 2, 3))
    np.testing.assert_allclose(res.objective, ref.objective_history[-1], rtol=1e-9)


def random_membership_from_seed(n, c, seed):
    # the documented init=None rule: default_rng(seed).random((n, c)), rows normalised
    u = np.random.default_rng(seed).random((n, c))
    return u / u.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("m", [1.0001, 1.01, 60.0])
def test_extreme_fuzzifier_stays_finite(m):
    X, _, _ = blobs(n=400, d=3, c=4, seed=1, spread=8.0)
    for dtype in (np.float64, np.float32):
        res = fuzzy_cmeans(X.astype(dtype), 4, m=m, seed=0, max_iter=50)
        assert np.isfinite(res.centers).all() and np.isfinite(res.membership).all()
        np.testing.assert_allclose(res.membership.sum(axis=1, dtype=np.float64), 1.0, atol=1e-5)
        assert np.isfinite(res.objective_history).all()


# ---------------------------------------------------------------------------
# initialisation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("init", [None, "random", "kmeans++"])
def test_seeded_starts_are_deterministic(init):
    X, _, _ = blobs(n=700, d=3, c=5, seed=11)
    a = fuzzy_cmeans(X, 5, init=init, seed=42, max_iter=5, tol=TINY_TOL)
    b = fuzzy_cmeans(X, 5, init=init, seed=42, max_iter=5, tol=TINY_TOL)
    c = fuzzy_cmeans(X, 5, init=init, seed=43, max_iter=5, tol=TINY_TOL)
    np.testing.assert_array_equal(a.centers, b.centers)
    np.testing.assert_array_equal(a.membership, b.membership)
    assert a.objective == b.objective
    assert not np.array_equal(a.centers, c.centers)
    g1 = fuzzy_cmeans(X, 5, init=init, seed=np.random.default_rng(42), max_iter=5, tol=TINY_TOL)
    np.testing.assert_array_equal(a.centers, g1.centers)


def test_random_start_is_the_documented_membership():
    X, _, _ = blobs()
    u0 = random_membership_from_seed(len(X), 3, 17)
    a = fuzzy_cmeans(X, 3, seed=17, max_iter=4, tol=TINY_TOL)
    b = fuzzy_cmeans(X, 3, init=u0, max_iter=4, tol=TINY_TOL)
    np.testing.assert_array_equal(a.centers, b.centers)


def test_kmeans_plus_plus_finds_separated_blobs():
    X, truth, _ = blobs(n=1200, d=2, c=4, seed=21, spread=25.0)
    for seed in range(3):
        res = fuzzy_cmeans(X, 4, init="kmeans++", seed=seed, tol=1e-6)
        # the same partition as the truth, up to renaming clusters
        pairs = set(zip(res.labels.tolist(), truth.tolist()))
        assert len(pairs) == 4


def test_membership_start_is_renormalised_within_tolerance():
    X, _, _ = blobs()
    u0 = random_membership(len(X), 3)
    exact = fuzzy_cmeans(X, 3, init=u0, max_iter=5, tol=TINY_TOL)
    off = fuzzy_cmeans(X, 3, init=u0 * (1 + 5e-7), max_iter=5, tol=TINY_TOL)
    np.testing.assert_allclose(off.centers, exact.centers, rtol=1e-12)
    with pytest.raises(ValueError, match="init membership rows must sum to 1"):
        fuzzy_cmeans(X, 3, init=u0 * 1.01)


def test_square_init_is_read_as_centres():
    # n == n_clusters == d: a (3, 3) array matches both shapes; it means centres
    X = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    res = fuzzy_cmeans(X, 3, init=X, tol=1e-12)
    np.testing.assert_array_equal(res.centers, X)
    np.testing.assert_array_equal(res.membership, np.eye(3))


def test_integer_input_becomes_float64():
    X = np.array([[0, 0], [0, 1], [10, 10], [10, 11], [0, 2], [11, 10]])
    res = fuzzy_cmeans(X, 2, seed=0)
    assert res.centers.dtype == np.float64 and res.membership.dtype == np.float64
    assert len(set(res.labels[[0, 1, 4]].tolist())) == 1


# ---------------------------------------------------------------------------
# input layouts and types
# ---------------------------------------------------------------------------

def test_non_contiguous_input():
    X, _, _ = blobs(n=500, d=6)
    strided = X[::2, ::2]
    fortran = np.asfortranarray(X)
    a = fuzzy_cmeans(strided, 3, seed=1)
    b = fuzzy_cmeans(np.ascontiguousarray(strided), 3, seed=1)
    np.testing.assert_array_equal(a.centers, b.centers)
    c = fuzzy_cmeans(fortran, 3, seed=1)
    d = fuzzy_cmeans(X, 3, seed=1)
    np.testing.assert_array_equal(c.membership, d.membership)
    assert c.membership.flags.c_contiguous


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    X, _, _ = blobs(n=400, d=3, dtype=np.float32)
    u0 = random_membership(400, 3).astype(np.float32)
    res = fuzzy_cmeans(torch.from_numpy(X), 3, init=torch.from_numpy(u0), max_iter=10, tol=TINY_TOL)
    ref = fuzzy_cmeans(X, 3, init=u0, max_iter=10, tol=TINY_TOL)
    for name in ("centers", "membership", "labels", "confidence", "objective_history"):
        got = getattr(res, name)
        assert isinstance(got, torch.Tensor), name
        np.testing.assert_array_equal(got.numpy(), getattr(ref, name))
    assert res.centers.dtype == torch.float32 and res.labels.dtype == torch.int64
    # a non-contiguous tensor and one that requires grad are accepted
    t = torch.from_numpy(X).t().contiguous().t().requires_grad_(True)
    res2 = fuzzy_cmeans(t, 3, init=torch.from_numpy(u0), max_iter=10, tol=TINY_TOL)
    np.testing.assert_array_equal(res2.centers.numpy(), ref.centers)


# ---------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------

def test_thread_count_does_not_change_results(threads):
    X, _, _ = blobs(n=10_000, d=7, c=6, seed=13)  # several 2048-point chunks
    u0 = random_membership(len(X), 6, seed=4)
    results = {}
    for count in (1, 2, 3, 2):
        threads(count)
        for m in (2.0, 1.7):
            res = fuzzy_cmeans(X, 6, m=m, init=u0, max_iter=15, tol=TINY_TOL)
            key = (count, m)
            if key in results:  # a repeated count reproduces itself exactly
                np.testing.assert_array_equal(res.membership, results[key].membership)
            results[key] = res
    for m in (2.0, 1.7):
        base = results[(1, m)]
        for count in (2, 3):
            other = results[(count, m)]
            # chunking depends on (n, c, d) only: bitwise equal across counts
            np.testing.assert_array_equal(other.centers, base.centers)
            np.testing.assert_array_equal(other.membership, base.membership)
            assert other.objective == base.objective
            np.testing.assert_allclose(other.objective, base.objective, rtol=1e-12)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

GOOD_X = blobs(n=30, d=2)[0]


@pytest.mark.parametrize(
    "X, exc, match",
    [
        (None, TypeError, "X"),
        (np.zeros(10), ValueError, "X must be 2-dimensional"),
        (np.zeros((2, 3, 4)), ValueError, "X must be 2-dimensional"),
        (np.zeros((0, 3)), ValueError, "X is empty"),
        (np.zeros((5, 0)), ValueError, "X is empty"),
        (np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 2.0]]), ValueError, "X contains NaN"),
        (np.array([[1.0, np.inf], [0.0, 1.0], [2.0, 2.0]]), ValueError, "X contains NaN"),
        (np.ones((4, 2), dtype=complex), TypeError, "X has complex"),
        (np.ones((4, 2), dtype=bool), TypeError, "X has boolean"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "X has dtype"),
        ([[1.0, 2.0], [3.0]], ValueError, "X could not be converted"),
        (np.full((4, 2), 3e19, dtype=np.float32) * np.array([[1], [-1], [1], [-1]], dtype=np.float32),
         ValueError, "squared distances would overflow float32"),
        (np.array([[1e300, 0.0], [-1e300, 0.0], [0.0, 0.0]]), ValueError, "X spans"),
    ],
)
def test_bad_X(X, exc, match):
    with pytest.raises(exc, match=match):
        fuzzy_cmeans(X, 2)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(n_clusters=1), ValueError, "n_clusters must be between 2"),
        (dict(n_clusters=31), ValueError, "n_clusters must be between 2"),
        (dict(n_clusters=2.0), TypeError, "n_clusters must be an integer"),
        (dict(n_clusters=True), TypeError, "n_clusters must be an integer"),
        (dict(n_clusters="3"), TypeError, "n_clusters must be an integer"),
        (dict(m=1.0), ValueError, "m must be > 1"),
        (dict(m=0.5), ValueError, "m must be > 1"),
        (dict(m=float("nan")), ValueError, "m must be finite"),
        (dict(m=float("inf")), ValueError, "m must be finite"),
        (dict(m="2"), TypeError, "m must be a real number"),
        (dict(m=True), TypeError, "m must be a real number"),
        (dict(tol=0.0), ValueError, "tol must be > 0"),
        (dict(tol=-1e-3), ValueError, "tol must be > 0"),
        (dict(tol=float("nan")), ValueError, "tol must be finite"),
        (dict(tol=None), TypeError, "tol must be a real number"),
        (dict(max_iter=0), ValueError, "max_iter must be >= 1"),
        (dict(max_iter=2.5), TypeError, "max_iter must be an integer"),
        (dict(max_iter=2**31), ValueError, "max_iter must be <="),
        (dict(seed=-1), ValueError, "seed must be >= 0"),
        (dict(seed=1.5), TypeError, "seed must be None"),
        (dict(seed="a"), TypeError, "seed must be None"),
        (dict(seed=True), TypeError, "seed must be None"),
        (dict(init="kmeans"), ValueError, "init must be None, 'random', 'kmeans\\+\\+'"),
        (dict(init=np.zeros((3, 3))), ValueError, "init array must have shape"),
        (dict(init=np.zeros(3)), ValueError, "init must be 2-dimensional"),
        (dict(init=np.full((3, 2), np.nan)), ValueError, "init contains NaN"),
        (dict(init=np.ones((3, 2), dtype=complex)), TypeError, "init has complex"),
        (dict(init=np.full((30, 3), 0.5)), ValueError, "init membership rows must sum to 1"),
        (dict(init=np.tile([1.5, -0.5, 0.0], (30, 1))), ValueError, "init memberships must be nonnegative"),
        (dict(init=np.tile([0.5, 0.5, 0.0], (30, 1))), ValueError, "give cluster 2 no weight"),
        (dict(init=np.full((3, 2), 1e300)), ValueError, "X spans"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    args = dict(n_clusters=3)
    args.update(kwargs)
    n_clusters = args.pop("n_clusters")
    with pytest.raises(exc, match=match):
        fuzzy_cmeans(GOOD_X, n_clusters, **args)


def test_exported_from_kernels():
    assert kernels.fuzzy_cmeans is fuzzy_cmeans
    with pytest.raises(TypeError):
        fuzzy_cmeans(GOOD_X, 3, 2.0)  # m is keyword-only
