"""Vertical gradient boosting (issue 29), plain protection: each party's bins, the histograms and the
split rule, the party programs' messages, and the model against scikit-learn's
HistGradientBoostingClassifier fitted on the same bins with the same hyper-parameters."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import NotFittedError

from vflsec.federation.channel import InMemoryHub
from vflsec.trees import FeatureBins, TreeJob, TreePartyData, VerticalGradientBoostingClassifier
from vflsec.trees.histogram import BinLayout, best_split, build_histogram, subtract
from vflsec.trees.protocol import TAG_STEP, active_program, passive_program
from vflsec.vfl.runner import run_programs


def _blocks(n=3000, widths=(5, 4, 3), seed=0):
    total = sum(widths)
    informative = min(8, total - 1)
    X, y = make_classification(n_samples=n, n_features=total, n_informative=informative,
                               n_redundant=min(2, total - informative), random_state=seed, flip_y=0.05)
    bounds = np.cumsum([0, *widths])
    return [X[:, bounds[i]:bounds[i + 1]] for i in range(len(widths))], y


def _reference(parts, y, test_parts, **params):
    """scikit-learn's booster on the same codes (its binning of <= 255 distinct integers is the identity)."""
    bins = [FeatureBins().fit(P) for P in parts]
    codes = np.hstack([b.transform(P) for b, P in zip(bins, parts)]).astype(np.float64)
    test = np.hstack([b.transform(P) for b, P in zip(bins, test_parts)]).astype(np.float64)
    model = HistGradientBoostingClassifier(early_stopping=False, **params).fit(codes, y)
    return model, test


# -- bins ------------------------------------------------------------------

def test_bins_cut_between_distinct_values_and_at_quantiles_beyond_max_bins():
    few = np.array([[3.0], [1.0], [2.0], [2.0], [7.0]])
    bins = FeatureBins().fit(few)
    np.testing.assert_array_equal(bins.thresholds_[0], [1.5, 2.5, 5.0])
    np.testing.assert_array_equal(bins.transform(few)[:, 0], [2, 0, 1, 1, 3])
    # A value equal to a cut goes left (code <= b  <=>  x <= thresholds_[b]).
    np.testing.assert_array_equal(bins.transform(np.array([[1.5], [2.5], [100.0], [-5.0]]))[:, 0], [0, 1, 3, 0])
    many = np.random.default_rng(0).standard_normal((5000, 2))
    fitted = FeatureBins(max_bins=16).fit(many)
    assert list(fitted.n_bins_) == [16, 16]
    counts = np.bincount(fitted.transform(many)[:, 0], minlength=16)
    assert counts.min() >= 5000 / 16 - 2 and counts.max() <= 5000 / 16 + 2  # quantile bins: equal counts


@pytest.mark.parametrize("bad,error", [(np.array([[np.inf]]), ValueError), (np.zeros(3), ValueError),
                                       (np.zeros((3, 0)), ValueError), (np.array([["a"]]), TypeError)])
def test_bins_refuse_bad_rows(bad, error):
    with pytest.raises(error):
        FeatureBins().fit(bad)


@pytest.mark.parametrize("max_bins", [1, 256, 2.5, True])
def test_bins_refuse_a_max_bins_codes_cannot_hold(max_bins):
    with pytest.raises((ValueError, TypeError), match="max_bins"):
        FeatureBins(max_bins=max_bins).fit(np.zeros((4, 1)))


def test_unfitted_bins_say_so():
    with pytest.raises(NotFittedError):
        FeatureBins().transform(np.zeros((2, 2)))


# -- histograms and splits ---------------------------------------------------

def test_histogram_sums_each_bin_and_a_sibling_is_parent_minus_child():
    rng = np.random.default_rng(1)
    codes = np.stack([rng.integers(0, 4, 500), rng.integers(0, 7, 500)], axis=1).astype(np.uint8)
    g, h = rng.standard_normal(500), rng.random(500)
    layout = BinLayout((4, 7))
    rows = rng.permutation(500)[:300]
    hist = build_histogram(codes, rows, g, h, layout)
    for j, offset in enumerate((0, 4)):
        for b in range(layout.n_bins[j]):
            inside = rows[codes[rows, j] == b]
            assert hist.G[offset + b] == pytest.approx(g[inside].sum(), abs=1e-12)
            assert hist.H[offset + b] == pytest.approx(h[inside].sum(), abs=1e-12)
            assert hist.C[offset + b] == len(inside)
    child_rows = rows[:120]
    sibling = subtract(hist, build_histogram(codes, child_rows, g, h, layout))
    direct = build_histogram(codes, rows[120:], g, h, layout)
    np.testing.assert_allclose(sibling.G, direct.G, atol=1e-12)
    np.testing.assert_array_equal(sibling.C, direct.C)


def test_best_split_is_the_brute_force_best_under_the_leaf_limits():
    rng = np.random.default_rng(2)
    codes = np.stack([rng.integers(0, 6, 400), rng.integers(0, 9, 400)], axis=1).astype(np.uint8)
    g = rng.standard_normal(400) + (codes[:, 1] > 4)
    h = rng.random(400) + 0.1
    layout = BinLayout((6, 9))
    rows = np.arange(400)
    hist = build_histogram(codes, rows, g, h, layout)
    totals = (g.sum(), h.sum(), 400)
    choice = best_split(hist, layout, totals, l2=1.0, min_samples_leaf=30, min_hessian=1e-3)

    def score(left):
        GL, HL, GR, HR = g[left].sum(), h[left].sum(), g[~left].sum(), h[~left].sum()
        return GL ** 2 / (HL + 1) + GR ** 2 / (HR + 1) - g.sum() ** 2 / (h.sum() + 1)

    candidates = [(score(codes[:, j] <= b), j, b) for j in range(2) for b in range(layout.n_bins[j] - 1)
                  if 30 <= np.sum(codes[:, j] <= b) <= 370]
    best = max(candidates, key=lambda c: c[0])
    assert (choice.feature, choice.code) == best[1:]
    assert choice.gain == pytest.approx(best[0])
    assert best_split(hist, layout, totals, l2=1.0, min_samples_leaf=201, min_hessian=1e-3) is None


# -- the model -----------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"max_leaf_nodes": 8, "max_depth": 3, "l2_regularization": 1.0,
                                         "learning_rate": 0.3, "min_samples_leaf": 40}])
def test_the_vertical_model_is_the_centralized_booster_on_the_same_bins(params):
    parts, y = _blocks()
    train, test = slice(0, 2400), slice(2400, None)
    model = VerticalGradientBoostingClassifier(max_iter=30, **params).fit([P[train] for P in parts], y[train])
    reference, test_codes = _reference([P[train] for P in parts], y[train], [P[test] for P in parts], max_iter=30,
                                       **params)
    np.testing.assert_allclose(model.decision_function([P[test] for P in parts]),
                               reference.decision_function(test_codes), atol=1e-9)
    assert model.score([P[test] for P in parts], y[test]) > 0.8
    assert [t.n_leaves for t in model.trees_] == [p[0].get_n_leaf_nodes() for p in reference._predictors]
    if "max_depth" in params:
        assert max(t.depth for t in model.trees_) <= 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adult", "credit"])
def test_within_half_a_point_of_the_centralized_booster_on_real_data(name, shared_datasets):
    from vflsec.data import load_dataset

    data = load_dataset(name, data_dir=shared_datasets)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(data.y))
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    k = data.X.shape[1] // 2
    parts = [data.X[:, :k], data.X[:, k:]]
    model = VerticalGradientBoostingClassifier(max_iter=50).fit([P[train] for P in parts], data.y[train])
    reference, test_codes = _reference([P[train] for P in parts], data.y[train], [P[test] for P in parts],
                                       max_iter=50)
    ours = model.score([P[test] for P in parts], data.y[test])
    theirs = reference.score(test_codes, data.y[test])
    assert abs(ours - theirs) <= 0.005, (ours, theirs)


def test_each_split_belongs_to_one_party_and_only_its_owner_holds_it():
    parts, y = _blocks(n=1500)
    model = VerticalGradientBoostingClassifier(max_iter=5).fit(parts, y)
    owners = np.concatenate([t.owner[t.owner >= 0] for t in model.trees_])
    assert set(owners) == {0, 1, 2}  # every party's features split somewhere
    for i, table in enumerate(model.lookups_):
        assert len(table) == int(np.sum(owners == i))  # a party's table holds exactly the splits it owns
        assert max(table.feature) < parts[i].shape[1]
    assert model.train_loss_ == sorted(model.train_loss_, reverse=True)
    assert model.bytes_ > 0 and set(model.timings_) == {"active", "passive_0", "passive_1"}


def test_one_table_with_party_columns_fits_the_same_model_as_blocks():
    parts, y = _blocks(n=1200)
    table = np.hstack(parts)
    columns = {"bank": [0, 1, 2, 3, 4], "shop": [5, 6, 7, 8], "telco": [9, 10, 11]}
    from_table = VerticalGradientBoostingClassifier(max_iter=5, party_columns=columns).fit(table, y)
    from_blocks = VerticalGradientBoostingClassifier(max_iter=5).fit(parts, y)
    np.testing.assert_array_equal(from_table.decision_function(table), from_blocks.decision_function(parts))
    assert from_table.party_names_ == ("bank", "shop", "telco")


def test_scikit_learn_contract():
    model = VerticalGradientBoostingClassifier(max_iter=7, learning_rate=0.2)
    assert clone(model).get_params() == model.get_params()
    with pytest.raises(NotFittedError):
        model.predict([np.zeros((2, 2)), np.zeros((2, 2))])
    parts, y = _blocks(n=600, widths=(2, 2))
    labels = np.where(y == 1, "yes", "no")
    model.fit(parts, labels)
    assert set(model.predict(parts)) <= {"yes", "no"} and list(model.classes_) == ["no", "yes"]
    proba = model.predict_proba(parts)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert not hasattr(VerticalGradientBoostingClassifier(), "trees_")


@pytest.mark.parametrize("params,error", [({"protection": "secret"}, "protection"), ({"max_iter": 0}, "max_iter"),
                                          ({"learning_rate": 0.0}, "learning_rate"),
                                          ({"max_leaf_nodes": 1}, "max_leaf_nodes"),
                                          ({"min_samples_leaf": 0}, "min_samples_leaf"),
                                          ({"l2_regularization": -1.0}, "l2_regularization")])
def test_bad_parameters_are_refused_by_name(params, error):
    parts, y = _blocks(n=200, widths=(2, 2))
    with pytest.raises((ValueError, TypeError), match=error):
        VerticalGradientBoostingClassifier(**params).fit(parts, y)


def test_bad_labels_and_rows_are_refused():
    parts, y = _blocks(n=200, widths=(2, 2))
    with pytest.raises(ValueError, match="2 classes"):
        VerticalGradientBoostingClassifier().fit(parts, np.arange(200) % 3)
    with pytest.raises(ValueError, match="one label per row"):
        VerticalGradientBoostingClassifier().fit(parts, y[:-1])
    bad = [parts[0].copy(), parts[1]]
    bad[0][3, 1] = np.inf
    with pytest.raises(ValueError):
        VerticalGradientBoostingClassifier().fit(bad, y)


# -- the programs' messages ----------------------------------------------------

def _job_and_data(n=400):
    parts, y = _blocks(n=n, widths=(3, 3))
    bins = [FeatureBins(max_bins=32).fit(P) for P in parts]
    job = TreeJob(n_samples=n, active="a", passives=("b",), n_bins=tuple(tuple(b.n_bins_) for b in bins), max_iter=3)
    data = {"a": TreePartyData(bins[0].transform(parts[0]), y), "b": TreePartyData(bins[1].transform(parts[1]))}
    return job, data


def test_a_passive_party_refuses_a_split_it_cannot_make():
    job, data = _job_and_data()
    hub = InMemoryHub(default_timeout=30)
    active, passive = hub.endpoint("a"), hub.endpoint("b")
    active.send("b", TAG_STEP, {"op": "tree"})
    active.send("b", "trees_gradients", {"g": np.zeros(400), "h": np.full(400, 0.25)})
    active.send("b", TAG_STEP, {"op": "split", "node": 0, "feature": 7, "code": 0})
    with pytest.raises(ValueError, match="cannot make"):
        passive_program(passive, job, data["b"])


def test_a_passive_party_refuses_gradients_that_are_not_one_finite_value_per_row():
    job, data = _job_and_data()
    hub = InMemoryHub(default_timeout=30)
    active, passive = hub.endpoint("a"), hub.endpoint("b")
    active.send("b", TAG_STEP, {"op": "tree"})
    active.send("b", "trees_gradients", {"g": np.zeros(399), "h": np.full(400, 0.25)})
    with pytest.raises(ValueError, match="400 finite"):
        passive_program(passive, job, data["b"])


def test_the_programs_agree_on_node_ids_over_a_whole_job():
    job, data = _job_and_data()
    run = run_programs(job, {"active": active_program, "passive": passive_program}, data)
    trees = run.results["a"].trees
    assert len(trees) == 3 and all(t.n_leaves >= 2 for t in trees)
    assert len(run.results["b"].lookup) == sum(int(np.sum(t.owner == 1)) for t in trees)
    assert {r.tag for r in run.records} >= {"trees_step", "trees_gradients", "trees_candidates", "trees_split"}


def test_a_job_refuses_codes_beyond_their_bins():
    job, data = _job_and_data()
    codes = data["b"].codes.copy()
    codes[0, 0] = job.n_bins[1][0]
    with pytest.raises(ValueError, match="beyond"):
        TreePartyData(codes).checked(job, "b", needs_labels=False)
