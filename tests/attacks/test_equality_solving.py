"""Equality solving on the real vertical GLM: the active party's view is only
the messages addressed to it in the hub transcript."""
import numpy as np
import pytest

from vflsec.attacks import (
    active_party_view,
    equality_solving_attack,
    normalized_feature_mse,
    solve_linear_features,
)
from vflsec.federation import InMemoryHub
from vflsec.glm.job import GLMJob, PartyData
from vflsec.glm.runner import run_job

N, D_A, D_B = 120, 3, 5


def data(seed=0):
    rng = np.random.default_rng(seed)
    XA = rng.normal(size=(N, D_A))
    XB = rng.normal(size=(N, D_B))
    XA /= 1.5 * np.linalg.norm(XA, axis=1, keepdims=True)
    XB /= 1.2 * np.linalg.norm(XB, axis=1, keepdims=True)
    y = np.where(XA.sum(1) + XB @ np.arange(1.0, D_B + 1) > 0, 1.0, -1.0)
    return XA, XB, y


def run(protocol, XA, XB, y, **job_kw):
    job = GLMJob(protocol=protocol, n_samples=N, lr=1.0, seed=0, **job_kw)
    hub = InMemoryHub(keep_payloads=True)
    run_job(job, {"active": PartyData(XA, y), "passive": PartyData(XB)}, hub)
    return job, hub.transcript


def attack(job, transcript, XB, aux):
    view = active_party_view(transcript, job)
    result = equality_solving_attack(view, aux, XB[aux])
    rest = np.setdiff1d(np.arange(N), aux)
    return view, result, rest


def test_exact_recovery_from_plain_irs_with_enough_equations():
    XA, XB, y = data()
    aux = np.arange(D_B + 2)  # the attacker knows 7 customers' passive features
    job, transcript = run("plain", XA, XB, y, epochs=D_B + 3, batch_size=N)
    view, result, rest = attack(job, transcript, XB, aux)
    assert view.n_plaintext_steps == job.total_steps
    assert result.exact_rows.size == rest.size
    assert normalized_feature_mse(XB[rest], result.features[rest]) < 1e-12  # exact up to rounding
    # Fewer epochs than unknowns: not enough equations for exact recovery
    # (the first step's weights are zero, so D_B - 1 epochs give D_B - 2 equations).
    job, transcript = run("plain", XA, XB, y, epochs=D_B - 1, batch_size=N)
    _, short, _ = attack(job, transcript, XB, aux)
    assert short.exact_rows.size == 0
    assert normalized_feature_mse(XB[rest], short.features[rest]) > 0.05


def test_mini_batches_need_known_rows_in_each_batch():
    XA, XB, y = data(1)
    aux = np.arange(60)  # half the rows known: ~15 per batch of 30 >= D_B
    job, transcript = run("plain", XA, XB, y, epochs=12, batch_size=30)
    _, result, rest = attack(job, transcript, XB, aux)
    assert result.solved_steps == job.total_steps
    assert normalized_feature_mse(XB[rest], result.features[rest]) < 1e-12


def test_hdp_noise_defeats_the_attack():
    XA, XB, y = data()
    aux = np.arange(D_B + 2)
    job, transcript = run("hdp", XA, XB, y, epochs=D_B + 3, batch_size=N, epsilon=1.0, noise_seed=3)
    view, result, rest = attack(job, transcript, XB, aux)
    assert view.n_plaintext_steps == job.total_steps  # noisy, but plaintext
    assert normalized_feature_mse(XB[rest], result.features[rest]) > 1.0


def test_encrypted_irs_leave_only_the_auxiliary_mean():
    pytest.importorskip("tenseal")
    XA, XB, y = data()
    aux = np.arange(D_B + 2)
    job, transcript = run("ckks", XA, XB, y, epochs=2, batch_size=N, coordinator="coordinator")
    view, result, rest = attack(job, transcript, XB, aux)
    assert view.n_plaintext_steps == 0 and result.solved_steps == 0
    np.testing.assert_allclose(result.features[rest], np.tile(XB[aux].mean(0), (rest.size, 1)))


def test_view_reads_only_messages_addressed_to_the_active_party():
    XA, XB, y = data()
    job, transcript = run("plain", XA, XB, y, epochs=2, batch_size=N)
    to_active = [(r, p) for r, p in transcript if r.receiver == job.active]
    a = active_party_view(transcript, job)
    b = active_party_view(to_active, job)
    assert all(np.array_equal(x[1], z[1]) for x, z in zip(a.steps, b.steps))
    with pytest.raises(ValueError, match="keep_payloads"):
        active_party_view([(r, p) for r, p in transcript if r.receiver != job.active], job)


def test_solve_linear_features_luo_equality_solving():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(6, 4))  # e.g. 6 class scores of a released multi-class model
    X = rng.normal(size=(10, 4))
    np.testing.assert_allclose(solve_linear_features(W, X @ W.T), X, atol=1e-10)
    # Underdetermined: the solution still satisfies the equations, nearest the prior.
    W2 = W[:2]
    prior = rng.normal(size=4)
    sol = solve_linear_features(W2, X @ W2.T, prior=prior)
    np.testing.assert_allclose(sol @ W2.T, X @ W2.T, atol=1e-10)
    with pytest.raises(ValueError):
        solve_linear_features(W, np.ones((3, 5)))
    with pytest.raises(ValueError):
        solve_linear_features(W, np.full((3, 6), np.nan))


def test_attack_validates_auxiliary_rows():
    XA, XB, y = data()
    job, transcript = run("plain", XA, XB, y, epochs=1, batch_size=N)
    view = active_party_view(transcript, job)
    with pytest.raises(ValueError):
        equality_solving_attack(view, np.array([0, 0]), XB[:2])
    with pytest.raises(ValueError):
        equality_solving_attack(view, np.array([0, N]), XB[:2])
    with pytest.raises(ValueError):
        equality_solving_attack(view, np.array([0, 1]), XB[:3])
    with pytest.raises(TypeError):
        equality_solving_attack("view", np.array([0]), XB[:1])
