"""HE-VFL with a DP model: protocols "paillier_dp", "ckks_dp" and "taylor_dp" (vflsec.glm.he_dp)."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import optimize, stats

from vflsec.data import load_breast, vertical_split
from vflsec.federation.channel import InMemoryHub
from vflsec.glm import (
    GLMJob,
    PartyData,
    VerticalLogisticRegression,
    available_protocols,
    get_protocol,
    he_dp,
    he_vfl,
    run_job,
    taylor_dp,
)
from vflsec.glm.model import privacy_spent, privacy_text


def _job(protocol="taylor_dp", **overrides):
    fields = dict(protocol=protocol, n_samples=64, batch_size=64, epochs=1, lr=1e-3, lam=0.0, k=5.0,
                  passives=("passive",), coordinator="coordinator", key_bits=2048, epsilon=10.0, delta=1e-5,
                  widths={"active": 3, "passive": 40})
    fields.update(overrides)
    return GLMJob(**fields)


def _run(job, blocks, y, hub=None):
    data = {job.active: PartyData(blocks[0], y)}
    data.update({name: PartyData(X) for name, X in zip(job.passives, blocks[1:])})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 2048-bit Paillier keys keep the tests short
        return run_job(job, data, hub=hub, timeout=600)


def _units(job):
    """The noise units of the job's protocol (what its key holder decrypts)."""
    return importlib.import_module(f"vflsec.glm.{job.protocol}").noise_units(job)


def _unit_rows(rng, n, d):
    X = rng.normal(size=(n, d))
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]


@pytest.fixture(params=["taylor_dp", "paillier_dp", "ckks_dp"])
def dp_protocol(request):
    if request.param == "paillier_dp":
        pytest.importorskip("phe")
    if request.param == "ckks_dp":
        pytest.importorskip("tenseal")
    return request.param


# -- the sensitivity ---------------------------------------------------------------------------
def _contribution_gap(params, parties, width, k, labels):
    """||x r - x' r'|| for the two rows of ``params`` (each block projected onto the unit ball),
    weights k e_1 in every block, residuals r = w . x + s(y) of the Taylor logistic loss."""
    rows = params.reshape(2, parties, width)
    rows = rows / np.maximum(1.0, np.linalg.norm(rows, axis=2))[:, :, None]
    w = np.zeros((parties, width))
    w[:, 0] = k
    out = []
    for row, y in zip(rows, labels):
        r = float(np.sum(row * w)) - 2.0 * y
        out.append(row.ravel() * r)
    return float(np.linalg.norm(out[0] - out[1]))


def _tilted_row(parties, k):
    """The component ``a`` along the weights that maximises ``(P k a + 2) sqrt(1 - a^2)``: two rows with
    ``-a`` along the weights in every block, opposite orthogonal parts ``+-sqrt(1 - a^2)`` and label +1
    (residual ``-(P k a + 2)`` in both) move ``X^T r`` by ``2 sqrt(P) (P k a + 2) sqrt(1 - a^2)``."""
    pk = parties * k
    a = (-2.0 + math.sqrt(4.0 + 8.0 * pk * pk)) / (4.0 * pk)
    return a, 2.0 * math.sqrt(parties) * (pk * a + 2.0) * math.sqrt(1.0 - a * a)


@pytest.mark.parametrize("parties, k", [(2, 5.0), (2, 1.0), (3, 2.0)])
def test_worst_case_rows_stay_within_the_stated_sensitivity(parties, k):
    """A search over two rows (the replaced one, in every block) and their labels for the largest change of
    the joint batch-sum gradient X^T r, weights at the clip bound: it finds the tilted pair of
    :func:`_tilted_row` and stays below base_sensitivity (scale 1), which is within 15% of it, where the
    triangle inequality's 2 sqrt(P) (P k + 2) is not."""
    job = _job(passives=tuple(f"passive_{i}" for i in range(parties - 1)), k=k,
               widths={"active": 3, **{f"passive_{i}": 3 for i in range(parties - 1)}})
    bound = he_dp.base_sensitivity(job, he_dp.DecryptedUnits(scale=1.0))
    assert bound == pytest.approx(math.sqrt(parties) * (parties * k + 4.0), rel=1e-8)
    rng = np.random.default_rng(0)
    best = 0.0
    for labels in itertools.product((-1.0, 1.0), repeat=2):
        def negative_gap(p, labels=labels):
            return -_contribution_gap(p, parties, 3, k, labels)

        for _ in range(6):
            found = optimize.minimize(negative_gap, rng.normal(size=2 * parties * 3), method="Powell")
            best = max(best, -found.fun)
    _, tilted = _tilted_row(parties, k)
    assert tilted * (1.0 - 1e-6) <= best <= bound
    assert best / bound > 0.85 and 2.0 * math.sqrt(parties) * (parties * k + 2.0) > 1.2 * best


def test_worst_case_neighbour_in_a_real_run_moves_the_release_by_at_most_the_sensitivity():
    """Two datasets that differ in one row, chosen so the first release that sees it moves the most: every
    other row drives the weights to the clip bound along e_1 (the Taylor loss's fixed point theta = 2 with
    rows 0.2 e_1 and k = 5), then the changed row is the tilted pair of :func:`_tilted_row`. The key
    holder's inputs (taylor_dp: in the clear) at that step differ by at most the mechanism's sensitivity,
    and by more than 90% of it."""
    n, b = 200, 10
    job = _job(n_samples=n, batch_size=b, epochs=1, lr=25.0, k=5.0, noise=False, widths={"active": 2, "passive": 2})
    *_, (_, step, batch) = he_vfl.he_batches(job)  # the changed row is first seen at the epoch's last step
    changed = int(batch[0])
    a, tilted = _tilted_row(2, job.k)
    released = []
    for world in (0, 1):
        blocks = [np.tile([0.2, 0.0], (n, 1)) for _ in range(2)]
        for block in blocks:
            block[changed] = (-a, math.sqrt(1.0 - a * a) * (1.0 if world == 0 else -1.0))
        hub = InMemoryHub(keep_payloads=True)
        _run(job, blocks, np.ones(n), hub)
        requests = {record.sender: payload["ciphertext"] for record, payload in hub.transcript
                    if record.tag == he_vfl.TAG_MASKED_GRADIENT and payload["step"] == step}
        released.append(np.concatenate([requests["active"], requests["passive"]]))
    mechanism = he_dp.gradient_mechanism(job, taylor_dp.noise_units(job))
    gap = float(np.linalg.norm(released[1] - released[0]))
    assert gap == pytest.approx(tilted, rel=1e-3)  # the weights reached k = 5 along e_1
    assert 0.9 * mechanism.sensitivity < gap <= mechanism.sensitivity


def test_every_party_checks_its_part_of_the_residual_bound():
    check = he_dp.ResidualCheck(_job(k=2.0))
    check.scores(np.array([2.0, -2.0]))
    check.active_part(np.array([4.0, -4.0]))  # u_A + s(y) <= k + 2
    with pytest.raises(ValueError, match="partial score"):
        check.scores(np.array([2.001]))
    with pytest.raises(ValueError, match="active party"):
        check.active_part(np.array([-4.001]))


# -- the accounting ----------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon, delta, epochs", [(0.1, 1e-5, 10), (1.0, 1e-5, 10), (10.0, 1e-2, 10),
                                                    (1.0, 1e-2, 1), (3.0, 1e-5, 40)])
def test_epsilon_reported_never_exceeds_the_target_and_is_close_to_it(dp_protocol, epsilon, delta, epochs):
    job = _job(dp_protocol, epsilon=epsilon, delta=delta, epochs=epochs, batch_size=50, n_samples=500)
    spent = he_dp.he_dp_privacy_spent(job)
    assert spent.epsilon <= epsilon
    assert spent.epsilon >= 0.97 * epsilon  # the calibration wastes little (sigma's lattice grid: <= 0.39%)
    assert (spent.delta, spent.releases, spent.neighbours, spent.accountant) == (delta, epochs, "replace_one", "pld")
    assert "colluding with the key holder" in spent.caveat
    # One release per epoch for each row: the same mechanism composed over the epochs, as an accountant sees it.
    mechanism = he_dp.gradient_mechanism(job, _units(job))
    from vflsec.dp import make_accountant

    accountant = make_accountant("pld")
    accountant.step(mechanism.accounting(epochs))
    assert accountant.get_epsilon(delta) == pytest.approx(spent.epsilon, rel=1e-9)
    # The estimator and `vflsec party` report the same guarantee for every data party.
    assert privacy_spent(job, "active") == privacy_spent(job, "passive") == spent
    assert privacy_text(job, "passive") == str(spent)
    assert privacy_spent(job, "coordinator") is None
    assert privacy_spent(dataclasses.replace(job, noise=False), "active") is None


def test_more_epochs_at_the_same_budget_mean_more_noise_and_batches_do_not_change_the_multiplier():
    base = he_dp.gradient_mechanism(_job(epochs=4, n_samples=400, batch_size=40),
                                    he_dp.DecryptedUnits(scale=1.0))
    longer = he_dp.gradient_mechanism(_job(epochs=16, n_samples=400, batch_size=40), he_dp.DecryptedUnits(scale=1.0))
    smaller = he_dp.gradient_mechanism(_job(epochs=4, n_samples=400, batch_size=10), he_dp.DecryptedUnits(scale=1.0))
    assert longer.noise_multiplier == pytest.approx(2.0 * base.noise_multiplier, rel=0.02)  # sqrt(epochs)
    # No subsampling amplification: the batch size does not enter the multiplier.
    assert smaller.noise_multiplier == pytest.approx(base.noise_multiplier, rel=0.01)


# -- the noise in what a party unmasks -------------------------------------------------------
def _one_step_noise(protocol, noise_seed):
    """(noise on each party's gradient, the stated sigma): one step of a job at lr 1e-3 (no clip, no
    penalty), with the key holder's noise and without, so the weights' difference over lr is the noise."""
    rng = np.random.default_rng(7)
    blocks = [_unit_rows(rng, 64, 3), _unit_rows(rng, 64, 40)]
    y = np.where(rng.uniform(size=64) < 0.5, -1.0, 1.0)
    noisy_job = _job(protocol, noise_seed=noise_seed)
    noisy = _run(noisy_job, blocks, y).results
    clean = _run(dataclasses.replace(noisy_job, noise=False), blocks, y).results
    noise = np.concatenate([(clean[p].coef - noisy[p].coef) / noisy_job.lr for p in ("active", "passive")])
    assert all(np.linalg.norm(noisy[p].coef) < 0.5 * noisy_job.k for p in ("active", "passive"))  # never clipped
    sigma = noisy["passive"].info["dp_sigma_gradient"]
    assert noisy["active"].info["dp_sigma_gradient"] == sigma
    assert noisy["coordinator"].info["dp_mechanism"] == "he_dp_gradient"
    return noise, sigma


def test_the_passive_party_unmasks_its_gradient_plus_gaussian_noise_of_the_stated_sigma():
    """taylor_dp: 25 seeded runs, 1075 noise values: a KS test against N(0, sigma^2), sigma the stated one."""
    samples = []
    for seed in range(25):
        noise, sigma = _one_step_noise("taylor_dp", seed)
        samples.append(noise / sigma)
    z = np.concatenate(samples)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert 0.93 < np.std(z) < 1.07 and abs(np.mean(z)) < 0.1


@pytest.mark.slow  # HE key generation per run
@pytest.mark.parametrize("protocol", ["paillier_dp", "ckks_dp"])
def test_he_protocols_unmask_gradient_plus_noise_of_the_stated_sigma(protocol):
    pytest.importorskip("phe" if protocol == "paillier_dp" else "tenseal")
    z = np.concatenate([noise / sigma for noise, sigma in (_one_step_noise(protocol, seed) for seed in range(3))])
    assert z.size == 3 * 43
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert 0.8 < np.std(z) < 1.2


def test_noise_comes_from_the_csprng_unless_a_seed_is_given():
    rng = np.random.default_rng(3)
    blocks = [_unit_rows(rng, 64, 3), _unit_rows(rng, 64, 40)]
    y = np.where(rng.uniform(size=64) < 0.5, -1.0, 1.0)
    fresh = [_run(_job(), blocks, y).results["passive"].coef for _ in range(2)]
    seeded = [_run(_job(noise_seed=5), blocks, y).results["passive"].coef for _ in range(2)]
    assert not np.array_equal(fresh[0], fresh[1])
    np.testing.assert_array_equal(seeded[0], seeded[1])


@pytest.mark.slow  # Paillier training
def test_paillier_dp_computes_what_taylor_dp_computes_with_the_same_noise():
    """The same seeded noise stream and sigma: the weights agree to the fixed point and lattice rounding."""
    pytest.importorskip("phe")
    rng = np.random.default_rng(11)
    n = 120
    blocks = [_unit_rows(rng, n, 3), _unit_rows(rng, n, 5)]
    y = np.where(blocks[0][:, 0] + blocks[1][:, 1] > 0, 1.0, -1.0)
    fields = dict(n_samples=n, batch_size=30, epochs=2, lr=1.0, lam=1e-3, k=2.0, noise_seed=4,
                  widths={"active": 3, "passive": 5})
    paillier = _run(_job("paillier_dp", **fields), blocks, y).results
    taylor = _run(_job("taylor_dp", **fields), blocks, y).results
    assert paillier["coordinator"].info["dp_sigma"] == taylor["coordinator"].info["dp_sigma"]
    for party in ("active", "passive"):
        np.testing.assert_allclose(paillier[party].coef, taylor[party].coef, atol=1e-6)
    assert paillier["active"].info["epsilon_spent"] <= 10.0


# -- accuracy ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def breast():
    split = vertical_split(load_breast(), [10, 20], seed=0, scaling="standard")
    majority = max(float(np.mean(split.y_test == c)) for c in np.unique(split.y_test))
    return split, majority


DP_SETTINGS = dict(epsilon=10.0, delta=1e-5, k=2.0, batch_size=0.25, epochs=5, lr=5.0)


def test_taylor_dp_at_epsilon_10_is_well_above_the_majority_rate_on_breast_cancer(breast):
    split, majority = breast
    scores = []
    for seed in range(3):
        model = VerticalLogisticRegression("taylor_dp", noise_seed=seed, seed=seed, **DP_SETTINGS)
        scores.append(model.fit(split.X_train, split.y_train).score(split.X_test, split.y_test))
        spent = model.privacy_spent_
        assert spent["active"] == spent["passive_0"] and spent["active"].epsilon <= 10.0
        assert model.history_["dp_releases_per_row"] == 5 and model.history_["epsilon_spent"] <= 10.0
    assert np.mean(scores) > majority + 0.2  # majority 0.63; non-private taylor ~0.94


@pytest.mark.slow  # CKKS training on all 455 rows
def test_ckks_dp_at_epsilon_10_is_well_above_the_majority_rate_on_breast_cancer(breast):
    pytest.importorskip("tenseal")
    split, majority = breast
    model = VerticalLogisticRegression("ckks_dp", noise_seed=0, seed=0, **DP_SETTINGS)
    assert model.fit(split.X_train, split.y_train).score(split.X_test, split.y_test) > majority + 0.2
    assert "CKKS decryption errors" in model.privacy_spent_["active"].caveat


@pytest.mark.slow  # Paillier training
def test_paillier_dp_at_epsilon_10_on_a_breast_cancer_subset_is_well_above_the_majority_rate(breast):
    """160 training rows (Paillier is slow), full batches, 5 epochs, a 2048-bit key."""
    pytest.importorskip("phe")
    split, majority = breast
    rows = slice(0, 160)
    model = VerticalLogisticRegression("paillier_dp", epsilon=10.0, delta=1e-5, k=1.0, batch_size=1.0, epochs=5,
                                       lr=2.5, noise_seed=0, key_bits=2048)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model.fit([X[rows] for X in split.X_train], split.y_train[rows])
    assert model.score(split.X_test, split.y_test) > majority + 0.2
    assert model.privacy_spent_["active"].epsilon <= 10.0
    assert model.history_["scheme"] == "paillier_dp"


# -- refusals and registration -------------------------------------------------------------------
@pytest.mark.parametrize("overrides, match", [
    (dict(k=None), "finite weight clip"),
    (dict(calibration="classic"), "PLD accounting"),
    (dict(options={"encrypted_loss": True}), "encrypted_loss"),
    (dict(delta=1e-20), "PLD accountant's floor"),
    (dict(epsilon=1e-7, delta=1e-12), "no noise multiplier"),
    (dict(loss="svm"), "supports losses"),
    (dict(start_epoch=1, epochs=2), "cannot resume"),
])
def test_parameters_that_cannot_be_honoured_are_refused(dp_protocol, overrides, match):
    job = _job(dp_protocol, **overrides)
    with pytest.raises(ValueError, match=match):
        get_protocol(dp_protocol).check_job(job)


def test_the_estimator_refuses_what_the_protocol_cannot_honour(breast):
    split, _ = breast
    with pytest.raises(ValueError, match="PLD accounting"):
        VerticalLogisticRegression("taylor_dp", calibration="classic").fit(split.X_train, split.y_train)
    with pytest.raises(ValueError, match="finite weight clip"):
        VerticalLogisticRegression("taylor_dp", k=None).fit(split.X_train, split.y_train)
    with pytest.raises(ValueError, match=r"\|\|x_i\|\|_2 <= 1"):
        VerticalLogisticRegression("taylor_dp", row_norm=None, fit_intercept=False).fit(
            [X * 10 for X in split.X_train], split.y_train)
    with pytest.raises(TypeError):
        VerticalLogisticRegression("taylor_dp", 1.0)  # epsilon is keyword-only


def test_protocols_are_registered_and_refuse_resume():
    names = available_protocols()
    for name, library in (("paillier_dp", "phe"), ("ckks_dp", "tenseal")):
        assert (name in names) == (importlib.util.find_spec(library) is not None)
    protocol = get_protocol("taylor_dp")
    assert protocol.needs_coordinator and not protocol.resumable and protocol.tags == frozenset(he_vfl.TAGS)
    assert "epoch" in protocol.resume_refusal


@pytest.mark.slow  # 3000 runs per world
def test_the_auditor_finds_no_epsilon_above_the_claim_on_the_worst_case_pair():
    from vflsec.audit.cases import load_cases
    from vflsec.audit.runner import audit_case, violations

    row = audit_case(load_cases()["he_dp_gradient[taylor_dp]"], runs=3000, seed=0)
    assert not violations([row]), violations([row])
    assert 0.9 < row["realized_sensitivity_ratio"] <= 1.0
    assert row["lower_bound"] > 0.3 * row["claimed_epsilon"]  # the pair and the distinguisher are not vacuous
