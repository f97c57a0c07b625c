"""vflsec.glm.tuning: cross-validation, the search's privacy cost, private selection."""
import dataclasses
import math

import numpy as np
import pytest

from vflsec.dp import gaussian_delta, gaussian_sigma
from vflsec.dp.lattice import lattice_noise_multiplier
from vflsec.glm import GLMJob, PartyData, run_job
from vflsec.glm.hdp import hdp_mechanisms, hdp_noise_scales
from vflsec.glm.tuning import (
    CVResult,
    PoissonRepetitions,
    TruncatedNegativeBinomialRepetitions,
    compose_gaussian_epsilon,
    cv_select,
    grid_jobs,
    private_select,
    rdp_to_epsilon,
    search_privacy,
    selection_epsilon,
)
from vflsec.kernels import NoiseGenerator

N = 400


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((N, d)) for d in (5, 4)]
    parts = [X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] for X in parts]
    y = np.where(3 * parts[0][:, 0] + 2 * parts[1][:, 0] + 0.3 * rng.standard_normal(N) > 0, 1.0, -1.0)
    return parts, y


def _base(**kw):
    settings = dict(protocol="hdp", n_samples=N, batch_size=50, epochs=3, lr=1.0, k=1.0, epsilon=1.0, delta=1e-5)
    settings.update(kw)
    return GLMJob(**settings)


# -- composition ------------------------------------------------------------------
def test_compose_single_gaussian_inverts_the_analytic_calibration():
    for eps, delta in [(0.5, 1e-5), (1.0, 1e-6), (8.0, 1e-3)]:
        # The lattice release's effective multiplier is what the calibration targets.
        # gaussian_sigma rounds sigma up to the release's grid (<= 0.39% more
        # noise), so the composed epsilon is at most eps and within ~1% of it.
        z = lattice_noise_multiplier(gaussian_sigma(eps, delta, 1.0), 1.0)
        composed = compose_gaussian_epsilon([z], delta)
        assert eps * 0.99 < composed <= eps


def test_compose_is_the_gaussian_with_mu_sqrt_sum_of_inverse_squares():
    # Composed by the DP layer's PLD accountant: never below the exact Gaussian-DP
    # value (pessimistic discretization, lattice corrections added), within 1e-3 of it.
    z = [0.8, 2.0, 3.5, 10.0]
    mu = math.sqrt(sum(v ** -2 for v in z))
    eps = compose_gaussian_epsilon(z, 1e-5)
    assert compose_gaussian_epsilon([1.0 / mu], 1e-5) == pytest.approx(eps, rel=1e-3)
    # The closed form: delta(eps) of a mu-GDP mechanism is at most the target delta, and close to it.
    assert gaussian_delta(eps, 1.0, mu) <= 1e-5
    assert gaussian_delta(eps * (1 - 2e-3), 1.0, mu) > 1e-5
    assert compose_gaussian_epsilon(z + [math.inf], 1e-5) == eps
    # It is the accountant's composition of the four releases (lattice draws included).
    from vflsec.dp import make_accountant
    from vflsec.dp.accountant import Release

    accountant = make_accountant("pld")
    for v in sorted(z):
        accountant.step(Release(v, 1.0, 7, 1))
    assert compose_gaussian_epsilon(z, 1e-5, coordinates=7) == accountant.get_epsilon(1e-5)
    with pytest.raises(ValueError, match="coordinates has 2 entries"):
        compose_gaussian_epsilon(z, 1e-5, coordinates=[1, 2])
    with pytest.raises(ValueError, match="coordinates"):
        compose_gaussian_epsilon(z, 1e-5, coordinates=0)


@pytest.mark.slow  # PLD accountant
def test_compose_matches_dp_accounting_pld():
    dp_accounting = pytest.importorskip("dp_accounting")
    z = [1.0, 2.0, 3.5] + [4.0] * 20
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(v) for v in z]))
    pld = acc.get_epsilon(1e-6)
    exact = compose_gaussian_epsilon(z, 1e-6)
    # PLD discretizes pessimistically: never below the exact value, and close.
    assert exact <= pld * (1 + 1e-9)
    assert exact == pytest.approx(pld, rel=1e-3)


def test_compose_edge_cases_and_bad_inputs():
    assert compose_gaussian_epsilon([math.inf], 1e-5) == 0.0
    assert compose_gaussian_epsilon([100.0], 0.5) < 1e-15  # delta above delta(0): the lattice corrections only
    assert compose_gaussian_epsilon([1.0] * 4, 1e-5) > compose_gaussian_epsilon([1.0] * 3, 1e-5)
    with pytest.raises(ValueError, match="empty"):
        compose_gaussian_epsilon([], 1e-5)
    with pytest.raises(ValueError, match="> 0"):
        compose_gaussian_epsilon([1.0, 0.0], 1e-5)
    with pytest.raises(ValueError, match="> 0"):
        compose_gaussian_epsilon([float("nan")], 1e-5)
    with pytest.raises(ValueError, match="delta"):
        compose_gaussian_epsilon([1.0], 0.0)
    with pytest.raises(TypeError):
        compose_gaussian_epsilon(2.0, 1e-5)


def test_rdp_conversion_is_valid_and_tight_for_a_gaussian():
    from vflsec.glm.tuning import RDP_ORDERS

    z = 3.0
    eps, order = rdp_to_epsilon(RDP_ORDERS, RDP_ORDERS / (2 * z * z), 1e-5)
    exact = compose_gaussian_epsilon([z], 1e-5)
    assert exact <= eps <= 1.25 * exact and order > 1
    with pytest.raises(ValueError, match="order"):
        rdp_to_epsilon([1.0, 2.0], [0.1, 0.2], 1e-5)


# -- repetition theorems ----------------------------------------------------------
@pytest.mark.parametrize("eta, factor", [(1.0, 3.0), (0.0, 2.0), (0.5, 2.5)])
def test_tnb_reduces_to_liu_talwar_for_pure_dp(eta, factor):
    eps0 = 0.7
    rep = TruncatedNegativeBinomialRepetitions(eta, 0.05)
    pure = lambda orders: np.full(np.shape(orders), eps0)  # noqa: E731  (eps0-DP: RDP <= eps0 at every order)
    value = rep.rdp(np.array([1e9]), pure)[0]
    assert value == pytest.approx(factor * eps0, rel=1e-3)  # (2 + eta) eps0
    assert value >= factor * eps0 - 1e-12


def test_tnb_gaussian_matches_the_closed_form_lambda_hat():
    z, gamma, eta, lam = 4.0, 0.1, 1.0, 20.0
    rep = TruncatedNegativeBinomialRepetitions(eta, gamma)
    rdp = lambda orders: np.asarray(orders) / (2 * z * z)  # noqa: E731
    hat = z * math.sqrt(2 * math.log(1 / gamma))  # argmin of (hat - 1)/(2 z^2) + log(1/gamma)/hat
    closed = (lam / (2 * z * z) + (1 + eta) * ((hat - 1) / (2 * z * z) + math.log(1 / gamma) / hat)
              + math.log(rep.expected) / (lam - 1))
    assert rep.rdp(np.array([lam]), rdp)[0] == pytest.approx(closed, rel=1e-4)
    assert rep.rdp(np.array([lam]), rdp)[0] >= closed - 1e-12


def test_tnb_with_gamma_near_one_costs_one_run():
    z = 3.0
    rep = TruncatedNegativeBinomialRepetitions(1.0, 1 - 1e-9)
    orders = np.array([2.0, 10.0, 50.0])
    np.testing.assert_allclose(rep.rdp(orders, lambda o: np.asarray(o) / (2 * z * z)), orders / (2 * z * z),
                               atol=1e-6)


def test_selection_epsilon_monotone_and_never_below_one_run():
    z, delta = 4.0, 1e-6
    one = compose_gaussian_epsilon([z], delta)
    poisson = [selection_epsilon(z, PoissonRepetitions(m), delta)[0] for m in (1, 5, 20, 100)]
    geometric = [selection_epsilon(z, TruncatedNegativeBinomialRepetitions.geometric(g), delta)[0]
                 for g in (0.5, 0.2, 0.05, 0.01)]
    for values in (poisson, geometric):
        assert all(v >= one for v in values)
        assert all(a < b for a, b in zip(values, values[1:]))
    # Selection is far cheaper than composing the expected number of runs.
    assert poisson[-1] < compose_gaussian_epsilon([z] * 100, delta)
    assert selection_epsilon(2 * z, PoissonRepetitions(20), delta)[0] < poisson[2]


# Values of vflsec.glm.tuning.selection_epsilon before the accountant moved to the DP
# layer (vflsec.dp.selection, issue 24): (z, repetitions, delta) -> (epsilon, order).
OLD_SELECTION = [
    (4.0, PoissonRepetitions(10.0), 1e-6, 2.0393658988469356, 18.5),
    (2.5, PoissonRepetitions(3.0), 1e-5, 2.1652471384792196, 11.75),
    (4.0, TruncatedNegativeBinomialRepetitions.geometric(0.1), 1e-6, 2.2713223485800196, 21.5),
    (6.0, TruncatedNegativeBinomialRepetitions(0.0, 0.05), 1e-5, 1.118000480335215, 28.0),
    (3.0, TruncatedNegativeBinomialRepetitions(0.5, 0.2), 1e-3, 1.9088903155890378, 11.25),
]


@pytest.mark.parametrize("z, rep, delta, epsilon, order", OLD_SELECTION)
def test_selection_accountant_of_the_dp_layer_gives_the_old_values(z, rep, delta, epsilon, order):
    from vflsec.dp import selection

    eps, lam = selection.selection_epsilon(z, rep, delta)
    assert eps == pytest.approx(epsilon, rel=1e-12) and lam == order
    spent = selection.selection_privacy_spent(z, rep, delta)
    assert spent.epsilon == eps and spent.delta == delta and spent.neighbours == "replace_one"
    assert rep.theorem in spent.accountant and spent.releases == 1
    # vflsec.glm.tuning keeps the names, as the DP layer's objects.
    assert selection_epsilon is selection.selection_epsilon and rdp_to_epsilon is selection.rdp_to_epsilon


def test_private_select_privacy_is_unchanged_through_the_dp_layer(data):
    # SelectionPrivacy of the seeded runs below, computed before the move (transcripts were exact
    # Gaussian-DP compositions then; the accountant's PLD is within 1e-6 of them here).
    parts, y = data
    cands = grid_jobs(_base(), epochs=[1, 3], k=[0.3, 1.0])
    a = private_select(parts, y, cands, PoissonRepetitions(6.0), delta=1e-6, seed=7)
    assert (a.n_runs, a.drawn) == (3, (2, 0, 2))
    p = a.privacy
    assert p.theorem == "Papernot & Steinke 2022, Theorem 6 (Poisson K)"
    assert p.noise_multiplier_by_party == pytest.approx({"active": 3.7315710559871893, "passive": 3.7315710559871893},
                                                        rel=1e-14)
    assert p.epsilon == pytest.approx(1.8339414795728546, rel=1e-12)
    assert p.epsilon_by_party == pytest.approx({"active": 1.8339414795728546, "passive": 1.8339414795728546},
                                               rel=1e-12)
    old_transcript = {"active": 2.0728627262733887, "passive": 2.072431542965515}
    assert p.transcript_epsilon_by_party == pytest.approx(old_transcript, rel=1e-6)
    assert all(p.transcript_epsilon_by_party[n] >= old_transcript[n] for n in old_transcript)  # PLD: never below
    g = private_select(parts, y, cands, TruncatedNegativeBinomialRepetitions.geometric(0.3), delta=1e-6, seed=3)
    assert g.n_runs == 2 and g.privacy.epsilon == pytest.approx(2.0586921578407784, rel=1e-12)
    assert g.privacy.theorem == "Papernot & Steinke 2022, Theorem 2 (truncated negative binomial K)"
    assert g.privacy.transcript_epsilon_by_party == pytest.approx(
        {"active": 1.6619538843411403, "passive": 1.6604820914091498}, rel=1e-6)


def test_score_mechanism_is_the_catalogued_selection_score():
    from vflsec.dp import MECHANISMS
    from vflsec.dp.lattice import sigma_for_multiplier
    from vflsec.dp.selection import score_mechanism

    for z in (0.3, 3.7315710559871893, 40.0):
        m = score_mechanism(z)
        assert m.name == "selection_score" and "selection_score" in MECHANISMS
        assert m.sensitivity == 1.0 and m.coordinates == 1 and m.neighbours == "replace_one"
        assert m.sigma == sigma_for_multiplier(z, 1.0) and m.sigma >= z
    with pytest.raises(ValueError, match="noise_multiplier"):
        score_mechanism(0.0)
    # private_select's score release: one release of that mechanism per run's count.
    from vflsec.dp import GaussianMechanism
    from vflsec.glm.tuning import release_scores
    from vflsec.kernels import NoiseGenerator

    noisy = release_scores([30.0, 31.0, 29.0], score_mechanism(2.0), NoiseGenerator(1))
    assert noisy.shape == (3,) and np.all(np.abs(noisy - [30.0, 31.0, 29.0]) < 20)
    with pytest.raises(TypeError, match="selection_score"):
        release_scores([3.0], hdp_mechanisms(_base())["active"], NoiseGenerator(1))
    with pytest.raises(ValueError, match="sensitivity 1"):
        release_scores([3.0], GaussianMechanism.with_sigma("selection_score", sigma=2.0, sensitivity=2.0),
                       NoiseGenerator(1))
    with pytest.raises(TypeError, match="repetitions"):
        selection_epsilon(3.0, "poisson", 1e-6)


def test_repetition_distributions():
    gen = NoiseGenerator(1)
    geo = TruncatedNegativeBinomialRepetitions.geometric(0.2)
    assert geo.expected == pytest.approx(5.0)
    draws = np.array([geo.sample(gen) for _ in range(4000)])
    assert draws.min() >= 1 and draws.mean() == pytest.approx(5.0, rel=0.08)
    assert np.mean(draws == 1) == pytest.approx(0.2, abs=0.03)
    for eta, gamma in [(0.0, 0.1), (-0.5, 0.05), (2.5, 0.3)]:
        rep = TruncatedNegativeBinomialRepetitions(eta, gamma)
        draws = np.array([rep.sample(gen) for _ in range(4000)])
        assert draws.min() >= 1 and draws.mean() == pytest.approx(rep.expected, rel=0.12)
    poisson = PoissonRepetitions(6.0)
    draws = np.array([poisson.sample(gen) for _ in range(4000)])
    assert draws.min() >= 0 and draws.mean() == pytest.approx(6.0, rel=0.05)
    with pytest.raises(ValueError, match="gamma"):
        TruncatedNegativeBinomialRepetitions(1.0, 1.0)
    with pytest.raises(ValueError, match="eta"):
        TruncatedNegativeBinomialRepetitions(-1.0, 0.5)
    with pytest.raises(ValueError, match="mean"):
        PoissonRepetitions(0.0)


# -- cross-validation -------------------------------------------------------------
def test_grid_jobs():
    jobs = grid_jobs(_base(), epochs=[2, 4], k=[0.1, 0.5, 1.0])
    assert [(j.epochs, j.k) for j in jobs] == [(2, 0.1), (2, 0.5), (2, 1.0), (4, 0.1), (4, 0.5), (4, 1.0)]
    with pytest.raises(ValueError, match="not a GLMJob field"):
        grid_jobs(_base(), epoch=[1])
    with pytest.raises(ValueError, match="non-empty"):
        grid_jobs(_base(), k=[])


def test_cv_select_matches_threaded_runs_per_fold(data):
    parts, y = data
    cands = grid_jobs(_base(protocol="plain"), lr=[0.2, 1.0], epochs=[1, 3])
    cands.append(dataclasses.replace(cands[0], batch_size=40, penalty="l1"))  # another schedule group
    cv = cv_select(parts, y, cands, n_folds=4, fold_seed=3, exact=True)
    assert isinstance(cv, CVResult) and cv.fold_scores.shape == (4, 5) and cv.n_folds == 4
    np.testing.assert_allclose(cv.mean_scores, cv.fold_scores.mean(axis=0))
    assert cv.best_index == int(np.argmax(cv.mean_scores)) and cv.best_job == cands[cv.best_index]
    assert cv.score_name == "accuracy" and cv.n_fits == 20 and cv.n_private_fits == 0
    folds = np.array_split(np.random.default_rng(3).permutation(N), 4)
    for f in (0, 3):
        train = np.sort(np.concatenate([folds[i] for i in range(4) if i != f]))
        for g in (1, 4):
            job = dataclasses.replace(cands[g], n_samples=len(train))
            data_ = {"active": PartyData(parts[0][train], y[train]), "passive": PartyData(parts[1][train])}
            res = run_job(job, data_).results
            theta = parts[0][folds[f]] @ res["active"].coef + parts[1][folds[f]] @ res["passive"].coef
            assert cv.fold_scores[f, g] == np.mean(np.where(theta > 0, 1.0, -1.0) == y[folds[f]])
    assert search_privacy(cv, 1e-5).epsilon == math.inf


@pytest.mark.slow  # end to end: a cross-validated search
def test_cv_search_privacy_counts_every_run_on_a_record(data):
    parts, y = data
    cands = grid_jobs(_base(), epochs=[1, 2, 3], k=[0.3, 1.0])
    cv = cv_select(parts, y, cands, n_folds=5)
    assert cv.n_private_fits == 5 * 6
    z = cv.fold_noise_multipliers
    assert z.shape == (5, 6, 2) and np.all(np.isfinite(z))
    # Every fit is calibrated to (1, 1e-5): nearly the same multiplier everywhere,
    # the lattice release's effective one, never below what (1, 1e-5) needs
    # (fits differ in the rounding term g sqrt(epochs * n) only).
    # sigmas sit on the release's grid (256 steps per octave), so fits differ
    # by up to 0.39%; none is below the continuous analytic requirement.
    from vflsec.dp.gaussian import _analytic_ratio

    z0 = lattice_noise_multiplier(gaussian_sigma(1.0, 1e-5, 1.0), 1.0)
    assert np.all(z >= (1.0 / _analytic_ratio(1.0, 1e-5)) * (1 - 1e-12))
    np.testing.assert_allclose(z, z0, rtol=2.0**-7)
    fold0 = dataclasses.replace(cands[0], n_samples=N - np.array_split(np.arange(N), 5)[0].size)
    s = hdp_noise_scales(fold0)
    assert s["coordinates"] == fold0.epochs * fold0.n_samples
    assert z[0, 0, 1] == hdp_mechanisms(fold0)["passive"].noise_multiplier
    assert z[0, 0, 1] == pytest.approx(lattice_noise_multiplier(s["sigma_passive"], s["sensitivity_passive"]),
                                       rel=1e-15)
    assert cv.fold_coordinates[0, 0] == s["coordinates"]
    sp = search_privacy(cv, 1e-5)
    assert sp.runs_per_record == 4 * 6 + 1
    # 25 runs at the worst (smallest) multiplier bound the composition; the
    # multipliers differ by the sigma grid's steps (<= 0.39%).
    bound = compose_gaussian_epsilon([float(z.min())] * 25, 1e-5)
    assert sp.epsilon <= bound * (1 + 1e-9)
    assert sp.epsilon == pytest.approx(compose_gaussian_epsilon([z0] * 25, 1e-5), rel=2.0**-6)
    assert set(sp.epsilon_by_party) == {"active", "passive"}
    no_refit = search_privacy(cv, 1e-5, include_refit=False)
    assert no_refit.runs_per_record == 24 and no_refit.epsilon < sp.epsilon
    # With a candidate that adds no noise the search has no finite epsilon.
    mixed = cv_select(parts, y, cands[:2] + [dataclasses.replace(cands[0], noise=False)], n_folds=3)
    assert mixed.n_private_fits == 6 and search_privacy(mixed, 1e-5).epsilon == math.inf


def test_cv_select_bad_inputs(data):
    parts, y = data
    with pytest.raises(ValueError, match="n_samples"):
        cv_select(parts, y, [_base(n_samples=N - 1)])
    with pytest.raises(ValueError, match="n_folds"):
        cv_select(parts, y, [_base()], n_folds=1)
    with pytest.raises(ValueError, match="fold 0 has"):
        cv_select(parts, y, [dataclasses.replace(_base(), batch_size=350)], n_folds=5)
    with pytest.raises(ValueError, match="loss"):
        cv_select(parts, y, [_base(), dataclasses.replace(_base(), loss="svm")])
    with pytest.raises(ValueError, match="one label per row"):
        cv_select(parts, y[:-1], [_base()])
    with pytest.raises(TypeError, match="fold_seed"):
        cv_select(parts, y, [_base()], fold_seed=-1)
    with pytest.raises(TypeError, match="CVResult"):
        search_privacy("cv", 1e-5)


# -- private selection --------------------------------------------------------------
def test_private_select_accounting_and_reproducibility(data):
    parts, y = data
    cands = grid_jobs(_base(), epochs=[1, 3], k=[0.3, 1.0])
    rep = PoissonRepetitions(6.0)
    a = private_select(parts, y, cands, rep, delta=1e-6, seed=7)
    b = private_select(parts, y, cands, rep, delta=1e-6, seed=7)
    assert a.index == b.index and a.drawn == b.drawn and a.noisy_accuracy == b.noisy_accuracy
    for u, v in zip(a.coef, b.coef):
        np.testing.assert_array_equal(u, v)
    assert a.n_runs == len(a.drawn) >= 1 and a.index in a.drawn and a.job == cands[a.index]
    assert [c.shape for c in a.coef] == [(5,), (4,)]
    # Every run's (lattice-effective) multiplier is about the one (1, 1e-5) needs;
    # the score noise defaults to the smallest of them.
    from vflsec.dp.gaussian import _analytic_ratio

    z0 = lattice_noise_multiplier(gaussian_sigma(1.0, 1e-5, 1.0), 1.0)
    p = a.privacy
    z = p.noise_multiplier_by_party["active"]
    assert z >= (1.0 / _analytic_ratio(1.0, 1e-5)) * (1 - 1e-12) and z == pytest.approx(z0, rel=2.0**-7)
    assert p.epsilon == pytest.approx(selection_epsilon(z, rep, 1e-6)[0], rel=1e-12)
    assert "Theorem 6" in p.theorem
    assert p.transcript_epsilon_by_party["passive"] == pytest.approx(
        compose_gaussian_epsilon([z0] * a.n_runs, 1e-6), rel=2.0**-6)
    # A noisier validation count does not change the bound (training dominates);
    # a less noisy one makes scoring the weakest link.
    louder = private_select(parts, y, cands, rep, delta=1e-6, seed=7, score_noise_multiplier=10 * z)
    assert louder.privacy.epsilon == pytest.approx(p.epsilon)
    quiet = private_select(parts, y, cands, rep, delta=1e-6, seed=7, score_noise_multiplier=z / 4)
    assert quiet.privacy.epsilon > p.epsilon
    geo = private_select(parts, y, cands, TruncatedNegativeBinomialRepetitions.geometric(0.3), delta=1e-6)
    assert "Theorem 2" in geo.privacy.theorem and geo.n_runs >= 1


def test_private_select_with_no_run_releases_nothing(data):
    parts, y = data
    out = private_select(parts, y, [_base()], PoissonRepetitions(1e-9), delta=1e-6, seed=1)
    assert out.n_runs == 0 and out.index is None and out.coef is None and out.noisy_accuracy is None
    assert out.privacy.transcript_epsilon_by_party == {"active": 0.0, "passive": 0.0}


def test_private_select_refuses_what_it_cannot_account(data):
    parts, y = data
    rep = PoissonRepetitions(3.0)
    with pytest.raises(ValueError, match="not a private run"):
        private_select(parts, y, [dataclasses.replace(_base(), protocol="plain")], rep, delta=1e-6)
    with pytest.raises(ValueError, match="not a private run"):
        private_select(parts, y, [dataclasses.replace(_base(), noise=False)], rep, delta=1e-6)
    with pytest.raises(ValueError, match="classification"):
        private_select(parts, np.clip(y, -3, 3), [dataclasses.replace(_base(), loss="least_squares", lr=0.2)],
                       rep, delta=1e-6)
    with pytest.raises(TypeError, match="repetitions"):
        private_select(parts, y, [_base()], 5, delta=1e-6)
    with pytest.raises(ValueError, match="validation_fraction"):
        private_select(parts, y, [_base()], rep, delta=1e-6, validation_fraction=1.0)
    with pytest.raises(TypeError, match="seed"):
        private_select(parts, y, [_base()], rep, delta=1e-6, seed=1.5)


def test_cv_with_seeded_candidates_is_reproducible(data):
    # An int noise_seed is replaced per fold by one derived from (seed, fold):
    # the same candidate twice gives the same scores, and reruns repeat.
    parts, y = data
    job = _base(noise_seed=5)
    cv = cv_select(parts, y, [job, job], n_folds=3)
    np.testing.assert_array_equal(cv.fold_scores[:, 0], cv.fold_scores[:, 1])
    np.testing.assert_array_equal(cv.fold_scores, cv_select(parts, y, [job], n_folds=3).fold_scores[:, [0, 0]])
