"""vflsec.glm.fast: the grid trainer computes the protocols' recursion."""
import dataclasses

import numpy as np
import pytest

from vflsec.glm import GLMJob, PartyData, run_job
from vflsec.glm.fast import GridFit, fit_grid


def _unit_rows(X):
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]


def _data(widths, n=300, seed=0, loss="logistic"):
    rng = np.random.default_rng(seed)
    parts = [_unit_rows(rng.standard_normal((n, d))) for d in widths]
    signal = sum(X[:, 0] for X in parts) * 3 + 0.5 * rng.standard_normal(n)
    if loss in ("logistic", "svm"):
        y = np.where(signal > 0, 1.0, -1.0)
    elif loss == "least_squares":
        y = np.clip(signal, -3, 3)
    else:
        y = np.minimum(rng.poisson(np.exp(0.5 * signal / 3)), 5).astype(float)
    return parts, y


def _job(protocol="plain", n_parties=2, n=300, **kw):
    kw.setdefault("batch_size", 64)  # 300 = 4 * 64 + 44: the last batch is smaller
    kw.setdefault("epochs", 3)
    kw.setdefault("lr", 0.5)
    passives = tuple(f"p{i}" for i in range(1, n_parties))
    return GLMJob(protocol, n_samples=n, passives=passives, **kw)


def _threaded(job, parts, y):
    data = {job.active: PartyData(parts[0], y)}
    data.update({name: PartyData(X) for name, X in zip(job.passives, parts[1:])})
    results = run_job(job, data).results
    return [results[name].coef for name in (job.active, *job.passives)]


def _assert_close(fast, ref, rtol=1e-12):
    # gemm vs gemv summation order: rounding-level differences only.
    for a, b in zip(fast, ref):
        assert a.shape == b.shape
        scale = max(np.max(np.abs(b)), 1e-300)
        assert np.max(np.abs(a - b)) <= rtol * scale


SETTINGS = [
    dict(protocol="plain", k=None, lr=1.0),
    dict(protocol="plain", k=0.3, lam=0.01),
    dict(protocol="hdp", noise=False, k=1.0),
    dict(protocol="hdp", noise_seed=11, k=0.5, epsilon=2.0),
]


@pytest.mark.parametrize("n_parties", [2, 3])
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_each_setting_equals_the_threaded_protocol(n_parties, setting):
    parts, y = _data([5, 4, 3][:n_parties])
    job = _job(n_parties=n_parties, **setting)
    ref = _threaded(job, parts, y)
    exact = fit_grid(parts, y, [job], exact=True)
    for a, b in zip(exact[0], ref):
        np.testing.assert_array_equal(a, b)  # bit for bit
    _assert_close(fit_grid(parts, y, [job])[0], ref)


@pytest.mark.slow  # end to end: a grid of trainings
def test_mixed_grid_equals_per_setting_runs():
    parts, y = _data([5, 4, 3])
    base = _job(n_parties=3)
    jobs = [
        dataclasses.replace(base, protocol="plain", k=None, lr=1.5, lam=0.0),
        dataclasses.replace(base, protocol="plain", k=0.2, epochs=1),
        dataclasses.replace(base, protocol="hdp", noise=False, lr=0.25, mu=2.0, epochs=2),
        dataclasses.replace(base, protocol="hdp", noise_seed=3, epsilon=0.5, k=1.0),
        dataclasses.replace(base, protocol="hdp", noise_seed=4, epsilon=4.0, k=0.1, lam=0.1, epochs=5),
        dataclasses.replace(base, protocol="hdp", noise_seed=3, calibration="classic", epsilon=0.5, delta=1e-5),
    ]
    exact = fit_grid(parts, y, jobs, exact=True)
    fast = fit_grid(parts, y, jobs)
    assert isinstance(exact, GridFit) and len(exact) == len(jobs)
    for g, job in enumerate(jobs):
        ref = _threaded(job, parts, y)
        for a, b in zip(exact[g], ref):
            np.testing.assert_array_equal(a, b)
        _assert_close(fast[g], ref)
    assert fast.info[0] == {} and set(fast.info[3]) >= {"sigma_active", "sigma_passive"}


@pytest.mark.parametrize("penalty", ["l2", "l1", "elasticnet"])
@pytest.mark.parametrize("loss", ["logistic", "svm", "least_squares", "poisson"])
def test_losses_and_penalties(loss, penalty):
    parts, y = _data([4, 3], loss=loss)
    extra = dict(y_max=5.0) if loss == "poisson" else {}
    lr = {"logistic": 0.5, "svm": 0.2, "least_squares": 0.2, "poisson": 0.05}[loss]
    jobs = [
        _job("plain", loss=loss, penalty=penalty, lr=lr, lam=0.01, k=1.0),
        _job("hdp", loss=loss, penalty=penalty, lr=lr, lam=0.01, k=0.5, noise_seed=7, epsilon=3.0, **extra),
    ]
    fit = fit_grid(parts, y, jobs, exact=True)
    for g, job in enumerate(jobs):
        for a, b in zip(fit[g], _threaded(job, parts, y)):
            np.testing.assert_array_equal(a, b)


def test_unseeded_noise_is_fresh_and_seeded_noise_reproducible():
    parts, y = _data([4, 3])
    fresh = _job("hdp", noise_seed=None)
    a, b = fit_grid(parts, y, [fresh, fresh])
    assert not np.array_equal(a[0], b[0])
    seeded = dataclasses.replace(fresh, noise_seed=5)
    c, d = fit_grid(parts, y, [seeded, seeded])
    np.testing.assert_array_equal(c[0], d[0])


def test_gridfit_access_and_decision_function():
    parts, y = _data([4, 3])
    jobs = [_job(lr=0.5), _job(lr=1.0)]
    fit = fit_grid(parts, y, jobs)
    assert [b.shape for b in fit.blocks] == [(2, 4), (2, 3)]
    assert len(fit[0:2]) == 2
    theta = fit.decision_function(parts)
    assert theta.shape == (300, 2)
    np.testing.assert_allclose(theta[:, 1], parts[0] @ fit[1][0] + parts[1] @ fit[1][1], rtol=1e-12, atol=1e-14)
    fit[0][0][:] = 99.0  # items are copies
    assert not np.any(fit.blocks[0] == 99.0)
    with pytest.raises(ValueError, match="columns"):
        fit.decision_function([parts[0][:, :3], parts[1]])


def test_bad_inputs():
    parts, y = _data([4, 3])
    job = _job()
    with pytest.raises(ValueError, match="empty"):
        fit_grid(parts, y, [])
    with pytest.raises(TypeError, match="sequence of GLMJob"):
        fit_grid(parts, y, job)
    with pytest.raises(TypeError, match=r"jobs\[1\] must be a GLMJob"):
        fit_grid(parts, y, [job, "x"])
    with pytest.raises(ValueError, match="batch_size"):
        fit_grid(parts, y, [job, dataclasses.replace(job, batch_size=32)])
    with pytest.raises(ValueError, match="passives"):
        fit_grid(parts, y, [job, dataclasses.replace(job, passives=("q",))])
    with pytest.raises(ValueError, match="computes"):
        fit_grid(parts, y, [dataclasses.replace(job, protocol="paillier")])
    with pytest.raises(ValueError, match="from scratch"):
        fit_grid(parts, y, [dataclasses.replace(job, start_epoch=1)])
    with pytest.raises(ValueError, match="2 party blocks"):
        fit_grid(parts[:1], y, [job])
    with pytest.raises(ValueError, match="row counts"):
        fit_grid([parts[0], parts[1][:-1]], y, [job])
    with pytest.raises(ValueError, match="n_samples"):
        fit_grid([X[:-1] for X in parts], y[:-1], [job])
    bad = parts[1].copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_grid([parts[0], bad], y, [job])
    with pytest.raises(ValueError, match="NaN"):
        fit_grid(parts, np.where(np.arange(300) == 0, np.nan, y), [job])
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        fit_grid(parts, (y + 1) / 2, [job])
    with pytest.raises(ValueError, match="norm"):
        fit_grid([parts[0] * 3, parts[1]], y, [_job("hdp")])
    with pytest.raises(ValueError, match="lr="):
        fit_grid(parts, y, [_job("hdp", lr=10.0)])
    with pytest.raises(ValueError, match="blas_threads"):
        fit_grid(parts, y, [job], blas_threads=0)
    with pytest.raises(TypeError, match="exact"):
        fit_grid(parts, y, [job], exact=1)


def test_unseeded_noise_has_the_calibrated_scale():
    # Unseeded jobs are released together from one fresh OS-entropy generator
    # per party; each row must still be its value plus N(0, sigma_job^2), on
    # its own job's lattice, and a noise-free job's row must pass unchanged.
    from vflsec.glm.fast import _release, _Settings
    from vflsec.kernels import lattice_spacing

    parts, y = _data([4, 3])
    jobs = [_job("hdp", epsilon=0.5), _job("hdp", epsilon=4.0), _job("hdp", noise=False)]
    settings = _Settings(tuple(jobs), parts, y)
    values = np.random.default_rng(0).uniform(-1, 1, size=(3, 5000))
    released = np.concatenate([_release(settings, 1, values) for _ in range(4)], axis=1)
    noise = released - np.tile(values, 4)
    sigmas = [fit_info["sigma_passive"] for fit_info in settings.info[:2]]
    np.testing.assert_allclose(noise[:2].std(axis=1), sigmas, rtol=0.03)
    assert sigmas[0] > 2 * sigmas[1] and np.array_equal(released[2], np.tile(values[2], 4))
    assert not np.array_equal(noise[0] / sigmas[0], noise[1] / sigmas[1])
    for g in range(2):
        k = released[g] / lattice_spacing(sigmas[g])
        assert np.array_equal(k, np.round(k))
