"""Label-DP vertical boosting (issue 29): "dp" (Gaussian gradient release, the trees grown from the
released gradients) and "label_dp" (randomized response with a prior): the guarantee's bookkeeping,
its preconditions checked in code, what the passive party learns, the audit cases, bad parameters."""
from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from sklearn.datasets import make_classification

pytest.importorskip("dp_accounting")

from vflsec.attacks.tree_leakage import label_leakage, passive_tree_view  # noqa: E402
from vflsec.dp import PLDAccountant, RandomizedResponseMechanism  # noqa: E402
from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.kernels import NoiseGenerator  # noqa: E402
from vflsec.trees import FeatureBins, TreeJob, TreePartyData, VerticalGradientBoostingClassifier  # noqa: E402
from vflsec.trees.dp import (  # noqa: E402
    LABEL_NEIGHBOURS,
    gradient_mechanism,
    label_gradients,
    label_mechanism,
    noise_generator,
    privacy_spent,
    rr_with_prior_labels,
    stage_rows,
)
from vflsec.trees.histogram import best_split, build_histogram, leaf_value  # noqa: E402
from vflsec.trees.protocol import TAG_GRADIENTS, active_program, passive_program  # noqa: E402
from vflsec.trees.tree import LEAF, lookup_walker  # noqa: E402
from vflsec.vfl.runner import run_programs  # noqa: E402


def _blocks(n=2000, seed=1):
    X, y = make_classification(n_samples=n, n_features=8, n_informative=6, random_state=seed, flip_y=0.02)
    return [X[:, :4], X[:, 4:]], y


def _job(n=100, **kw):
    params = dict(n_samples=n, active="a", passives=("b",), n_bins=((4,), (4,)), protection="dp", max_iter=10,
                  epsilon=1.0, delta=1e-5)
    params.update(kw)
    return TreeJob(**params)


def _run(parts, y, **kw):
    """A two-party job on 32 bins per feature, the transcript kept: (job, run, codes)."""
    bins = [FeatureBins(32).fit(P) for P in parts]
    codes = [b.transform(P) for b, P in zip(bins, parts)]
    job = TreeJob(n_samples=len(y), active="a", passives=("b",), n_bins=tuple(tuple(b.n_bins_) for b in bins),
                  **kw)
    data = {"a": TreePartyData(codes[0], y.astype(np.float64)), "b": TreePartyData(codes[1])}
    run = run_programs(job, {"active": active_program, "passive": passive_program}, data,
                       InMemoryHub(keep_payloads=True))
    return job, run, codes


# -- the guarantee's bookkeeping ---------------------------------------------------------------

def test_sigma_grows_with_max_iter_as_the_composition_needs():
    sigmas = [gradient_mechanism(_job(max_iter=t)).sigma for t in (1, 7, 199)]
    assert sigmas[0] < sigmas[1] < sigmas[2]
    # Adaptive Gaussian releases compose as one with mu^2 summed: sigma grows as the square root of the
    # releases, max_iter rounds and the positive count (2, 8 and 200 here).
    assert sigmas[1] / sigmas[0] == pytest.approx(2.0, rel=0.01)
    assert sigmas[2] / sigmas[0] == pytest.approx(10.0, rel=0.01)


@pytest.mark.parametrize("max_iter", [1, 30])
def test_privacy_spent_is_the_accountants_composition_and_within_epsilon(max_iter):
    job = _job(n=500, max_iter=max_iter, epsilon=2.0)
    spent = privacy_spent(job)
    mechanism = gradient_mechanism(job)
    accountant = PLDAccountant()
    for _ in range(max_iter + 1):  # the rounds and the positive count behind the baseline
        accountant.step(mechanism.accounting())
    assert spent.epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    assert 0.99 * 2.0 <= spent.epsilon <= 2.0
    assert spent.releases == max_iter + 1 and spent.delta == 1e-5 and spent.accountant == "pld"
    assert spent.neighbours == LABEL_NEIGHBOURS == "replace_one_label"
    assert mechanism.sensitivity == 1.0 and mechanism.coordinates == 500
    assert "features" in spent.caveat and "seeded" not in spent.caveat


def test_label_dp_reports_pure_epsilon():
    spent = privacy_spent(_job(protection="label_dp", epsilon=1.5, delta=None))
    assert (spent.epsilon, spent.delta, spent.releases, spent.neighbours) == (1.5, 0.0, 1, "replace_one_label")
    assert privacy_spent(_job(protection="plain", epsilon=None, delta=None)) is None


# -- "dp": the preconditions ------------------------------------------------------------------------

def test_a_replaced_label_moves_exactly_one_gradient_by_exactly_one():
    job = _job(n=1000)
    p = np.random.default_rng(0).random(1000)
    g0, h0 = label_gradients(p, np.zeros(1000), job)
    g1, h1 = label_gradients(p, np.ones(1000), job)
    np.testing.assert_array_equal(g0 - g1, 1.0)  # every row's worst case, exactly
    np.testing.assert_array_equal(h0, h1)  # the hessians read no label


@pytest.mark.parametrize("labels", [np.array([0.0, 2.0, 1.0]), np.array([0.0, 0.5, 1.0]), np.array([-1, 1, 1])])
def test_labels_other_than_0_and_1_are_refused(labels):
    with pytest.raises(ValueError, match="0 or 1"):
        label_gradients(np.full(3, 0.5), labels, _job(n=3))


def test_the_active_party_grows_every_tree_from_the_released_gradients():
    parts, y = _blocks(n=600)
    job, run, codes = _run(parts, y, protection="dp", max_iter=4, epsilon=2.0, delta=1e-5, noise_seed=5,
                           l2_regularization=1.0, max_leaf_nodes=4)
    # As the passive party reads them: float64 (an array of float32 values travels as float32, exactly).
    released = [(p["g"].astype(np.float64), p["h"].astype(np.float64)) for r, p in run.hub.transcript
                if r.tag == TAG_GRADIENTS]
    active = run.results["a"]
    assert len(released) == len(active.trees) == 4
    walk = lookup_walker([active.lookup, run.results["b"].lookup], codes)
    layouts = [job.layout("a"), job.layout("b")]
    exact_differs = 0
    # The baseline: the log-odds of the released positive count (a noisy count, not the labels' rate).
    assert active.baseline != 0.0 and abs(active.baseline - np.log(y.mean() / (1 - y.mean()))) < 1.0
    raw = np.full(len(y), active.baseline)
    for tree, (g_noisy, h) in zip(active.trees, released):
        g_exact, h_exact = label_gradients(1.0 / (1.0 + np.exp(-raw)), y, job)
        np.testing.assert_array_equal(h, h_exact)
        # The root's split is the best one the released gradients give over both parties' histograms.
        rows = np.arange(len(y))
        totals = (float(g_noisy.sum()), float(h.sum()), len(y))
        choices = [best_split(build_histogram(c, rows, g_noisy, h, lay), lay, totals, l2=1.0,
                              min_samples_leaf=job.min_samples_leaf, min_hessian=job.min_hessian)
                   for c, lay in zip(codes, layouts)]
        owner = max(range(2), key=lambda i: (choices[i].gain, -i))
        assert tree.owner[0] == owner
        table = [active.lookup, run.results["b"].lookup][owner]
        assert (table.feature[tree.record[0]], table.code[tree.record[0]]) == (choices[owner].feature,
                                                                             choices[owner].code)
        # Every leaf's value is the released gradients' Newton step over its rows.
        for leaf in np.flatnonzero(tree.owner == LEAF):
            members = _rows_of_leaf(tree, leaf, len(y), walk)
            expected = job.learning_rate * leaf_value(g_noisy[members].sum(), h[members].sum(), 1.0)
            assert tree.value[leaf] == pytest.approx(expected, rel=1e-9, abs=1e-12)
            exact = job.learning_rate * leaf_value(g_exact[members].sum(), h[members].sum(), 1.0)
            exact_differs += not math.isclose(exact, expected, rel_tol=1e-3)
        for leaf in np.flatnonzero(tree.owner == LEAF):
            raw[_rows_of_leaf(tree, leaf, len(y), walk)] += tree.value[leaf]
    assert exact_differs > 0  # the exact gradients would have grown other leaves: the check can fail


def _rows_of_leaf(tree, leaf, n, walk):
    marker = np.zeros(len(tree.owner))
    marker[leaf] = 1.0
    from vflsec.trees.tree import Tree, tree_output

    probe = Tree(tree.owner, tree.record, tree.left, tree.right, marker)
    return np.flatnonzero(tree_output(probe, n, walk) == 1.0)


def test_dp_learns_at_a_large_epsilon_like_plain():
    parts, y = _blocks()
    train, test = slice(0, 1600), slice(1600, None)
    options = dict(max_iter=20, l2_regularization=1.0)
    plain = VerticalGradientBoostingClassifier(**options).fit([P[train] for P in parts], y[train])
    dp = VerticalGradientBoostingClassifier("dp", epsilon=100.0, delta=1e-5, noise_seed=1, **options).fit(
        [P[train] for P in parts], y[train])
    plain_score = plain.score([P[test] for P in parts], y[test])
    assert dp.score([P[test] for P in parts], y[test]) >= plain_score - 0.03
    assert dp.privacy_spent_.epsilon <= 100.0 and "noise_seed=1" in dp.privacy_spent_.caveat


def test_dp_at_a_tiny_epsilon_leaves_the_passive_party_near_chance():
    parts, y = _blocks()
    job, run, _ = _run(parts, y, protection="dp", max_iter=10, epsilon=0.01, delta=1e-5, noise_seed=3,
                       l2_regularization=1.0)
    leak = label_leakage(passive_tree_view(run.hub.transcript, job), y, features=parts[1])
    assert abs(leak["gradients"]["auc"] - 0.5) < 0.06
    # The leaves say no more than the passive party's own features do (their splits follow noise).
    assert leak["instance_space"]["auc"] < leak["own_features"]["auc"]
    job, run, _ = _run(parts, y, protection="plain", max_iter=10, l2_regularization=1.0)
    assert label_leakage(passive_tree_view(run.hub.transcript, job), y)["gradients"]["auc"] == 1.0  # the contrast


def test_the_noise_is_the_csprngs_unless_a_seed_is_given():
    assert noise_generator(_job()).is_secure
    seeded = noise_generator(_job(noise_seed=7))
    assert not seeded.is_secure and "seeded" in repr(seeded)
    parts, y = _blocks(n=400)
    fits = [VerticalGradientBoostingClassifier("dp", epsilon=5.0, delta=1e-5, noise_seed=seed, max_iter=3,
                                               l2_regularization=1.0).fit(parts, y) for seed in (7, 7, 8)]
    scores = [m.decision_function(parts) for m in fits]
    np.testing.assert_array_equal(scores[0], scores[1])
    assert not np.array_equal(scores[0], scores[2])
    assert "seeded generator (noise_seed=7)" in fits[0].privacy_spent_.caveat


# -- "label_dp": randomized response with a prior ----------------------------------------------------

def test_the_keep_probability_is_within_e_to_the_epsilon_exactly():
    for epsilon in (1e-6, 0.5, 2.0, 30.0, 60.0):
        m = RandomizedResponseMechanism("trees_label_rr", epsilon)
        keep = Fraction(m.keep_words, 2 ** 64)
        assert Fraction(1, 2) <= keep < 1
        assert keep / (1 - keep) <= Fraction(Context(prec=80).exp(Decimal(epsilon)))  # e^eps to 80 digits
        assert float(keep) == pytest.approx(math.exp(epsilon) / (1 + math.exp(epsilon)), rel=1e-12)
    m = RandomizedResponseMechanism("trees_label_rr", 1.0)
    released = m.release(np.zeros(200_000, dtype=int), generator=NoiseGenerator(1))
    assert released.mean() == pytest.approx(1 / (1 + math.e), abs=0.004)
    top = m.release(np.array([0, 1, 0, 1]), np.array([0.9, 0.9, 0.1, 0.5]), generator=NoiseGenerator(2))
    assert list(top[:3]) == [1, 1, 0]  # a confident prior (>= keep) answers its top label, whatever the label


def test_a_rows_prior_never_reads_its_own_label():
    parts, y = _blocks(n=400)
    bins = FeatureBins(32).fit(parts[0])
    codes = bins.transform(parts[0])
    job = _job(n=400, protection="label_dp", epsilon=1.0, delta=None, noise_seed=4,
               n_bins=(tuple(bins.n_bins_), (4,)))
    first, second = stage_rows(400, job.seed)
    assert len(first) == 200 and not np.intersect1d(first, second).size
    base, facts = rr_with_prior_labels(y, codes, job, label_mechanism(job), noise_generator(job))
    assert facts["answered_by_prior"] > 0  # the prior is used: an informative own feature
    for row in second[:5]:
        flipped = y.copy()
        flipped[row] = 1 - flipped[row]
        other, _ = rr_with_prior_labels(flipped, codes, job, label_mechanism(job), noise_generator(job))
        keep = np.arange(400) != row
        np.testing.assert_array_equal(other[keep], base[keep])  # the same noise: only its own output may move


def test_label_dp_at_a_huge_epsilon_is_plain():
    parts, y = _blocks(n=800)
    options = dict(max_iter=5, max_leaf_nodes=8)
    plain = VerticalGradientBoostingClassifier(**options).fit(parts, y)
    labelled = VerticalGradientBoostingClassifier("label_dp", epsilon=50.0, **options).fit(parts, y)
    np.testing.assert_array_equal(labelled.decision_function(parts), plain.decision_function(parts))
    assert labelled.privacy_spent_.epsilon == 50.0 and labelled.privacy_spent_.delta == 0.0


def test_label_dp_learns_at_a_moderate_epsilon():
    parts, y = _blocks()
    train, test = slice(0, 1600), slice(1600, None)
    model = VerticalGradientBoostingClassifier("label_dp", epsilon=2.0, noise_seed=0, max_iter=20).fit(
        [P[train] for P in parts], y[train])
    assert model.score([P[test] for P in parts], y[test]) > 0.8


# -- bad parameters ------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,error", [
    ({"protection": "dp", "epsilon": 0.0, "delta": 1e-5}, "epsilon"),
    ({"protection": "dp", "epsilon": -1.0, "delta": 1e-5}, "epsilon"),
    ({"protection": "dp", "epsilon": math.inf, "delta": 1e-5}, "epsilon"),
    ({"protection": "dp", "delta": 1e-5}, "epsilon"),
    ({"protection": "dp", "epsilon": 1.0}, "delta"),
    ({"protection": "dp", "epsilon": 1.0, "delta": 0.0}, "delta"),
    ({"protection": "dp", "epsilon": 1.0, "delta": 1.0}, "delta"),
    ({"protection": "label_dp", "epsilon": 1.0, "delta": 1e-5}, "delta"),
    ({"protection": "label_dp"}, "epsilon"),
    ({"protection": "plain", "epsilon": 1.0}, "epsilon"),
    ({"protection": "plain", "noise_seed": 3}, "noise_seed"),
    ({"protection": "dp", "epsilon": 1.0, "delta": 1e-5, "noise_seed": -1}, "noise_seed"),
    ({"protection": "dp", "epsilon": "1", "delta": 1e-5}, "epsilon"),
])
def test_bad_privacy_parameters_are_refused_by_name(params, error):
    parts, y = _blocks(n=200)
    with pytest.raises((ValueError, TypeError), match=error):
        VerticalGradientBoostingClassifier(**params).fit(parts, y)


# -- the audit cases ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,runs,floor", [
    ("trees_gradient[one round]", 200_000, 0.5),
    ("trees_label_rr[stage one]", 50_000, 0.9),
    ("trees_gradient[3 rounds, whole protocol]", 60, 0.0),
    ("trees_label_rr[stage two, whole release]", 100, 0.3),
])
def test_the_audit_cases_hold_and_claim_the_products_epsilon(name, runs, floor):
    pytest.importorskip("torch")  # the audit's case modules import it
    from vflsec.audit.cases import load_cases
    from vflsec.audit.runner import audit_case, violations

    row = audit_case(load_cases()[name], runs=runs, seed=0)
    assert not violations([row]), violations([row])
    if name == "trees_gradient[one round]":  # one release of a run of two (the count and one round)
        assert 1.0 < row["claimed_epsilon"] < 0.99 * 2.0
    else:
        assert 0.99 * 2.0 <= row["claimed_epsilon"] <= 2.0
    assert row["neighbours"] == "replace_one_label"
    assert row["delta"] == (0.0 if "label_rr" in name else 1e-5)
    assert row["lower_bound_over_claim"] >= floor
