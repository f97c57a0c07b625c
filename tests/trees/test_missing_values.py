"""Missing values (NaN) in the vertical trees: a bin of their own per feature, each split learns where
they go (both directions scored, as scikit-learn and XGBoost do), and the model is scikit-learn's
booster on the same codes with NaN, on training rows with missing values and on held-out rows with
missing values where training had none; SecureBoost grows the same trees; the cross-party masks give
the same scores; a passive party refuses a missing-value split it cannot make."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from vflsec.federation.channel import InMemoryHub
from vflsec.trees import FeatureBins, TreeJob, TreePartyData, VerticalGradientBoostingClassifier
from vflsec.trees.histogram import BinLayout, best_split, build_histogram
from vflsec.trees.protocol import TAG_STEP, passive_program
from vflsec.trees.tree import LookupTable

NAMES = ("active", "passive_0", "passive_1")


def _blocks(n=3000, seed=0, missing=0.15):
    """Three parties' columns; some columns miss values, in part informatively (the label moves the rate),
    so where a split sends them matters; the last column never misses a value."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 9))
    y = (X[:, 0] + X[:, 3] - X[:, 6] + 0.5 * X[:, 1] * X[:, 4] + 0.5 * rng.normal(size=n) > 0).astype(int)
    for j in (0, 1, 3, 4, 6, 7):
        rate = missing * (1.0 + (y if j % 2 == 0 else 1 - y))  # informative missingness
        X[rng.random(n) < rate, j] = np.nan
    return [X[:, :3], X[:, 3:6], X[:, 6:]], y


def _codes_with_nan(bins, parts):
    """Every party's codes as float, NaN where the value is missing: scikit-learn's booster on them bins
    exactly as the parties did (its binning of <= 255 distinct integers is the identity; NaN its own bin)."""
    out = []
    for b, P in zip(bins, parts):
        codes = b.transform(P).astype(np.float64)
        codes[np.isnan(P)] = np.nan
        out.append(codes)
    return np.hstack(out)


# -- bins ----------------------------------------------------------------------------------------------

def test_a_missing_value_gets_the_code_after_the_value_bins_and_a_bin_only_where_training_had_one():
    X = np.array([[1.0, 5.0, np.nan], [np.nan, 6.0, np.nan], [3.0, 7.0, np.nan], [2.0, 5.0, np.nan]])
    bins = FeatureBins().fit(X)
    np.testing.assert_array_equal(bins.thresholds_[0], [1.5, 2.5])  # the cuts of the values only
    np.testing.assert_array_equal(bins.has_missing_, [True, False, True])
    np.testing.assert_array_equal(bins.n_bins_, [4, 3, 2])  # value bins + the missing bin where training had one
    assert [bins.missing_code(j) for j in range(3)] == [3, 3, 1]
    np.testing.assert_array_equal(bins.transform(X), [[0, 0, 1], [3, 1, 1], [2, 2, 1], [1, 0, 1]])
    # At prediction a feature without missing training values codes NaN past its bins too.
    np.testing.assert_array_equal(bins.transform(np.array([[np.nan, np.nan, 0.0]])), [[3, 3, 0]])


def test_the_missing_code_fits_a_byte_with_max_bins_value_bins():
    X = np.arange(600, dtype=np.float64)[:, None]
    X[::7] = np.nan
    bins = FeatureBins(max_bins=255).fit(X)
    assert bins.n_bins_[0] == 256 and bins.missing_code(0) == 255
    codes = bins.transform(X)
    assert codes[0, 0] == 255 and codes[1:7, 0].max() < 255


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_infinite_values_are_refused_naming_them(bad):
    X = np.zeros((4, 2))
    X[2, 1] = bad
    with pytest.raises(ValueError, match="infinite value .*row 2, column 1"):
        FeatureBins().fit(X)
    parts, y = _blocks(n=200)
    labels = y.astype(np.float64)
    labels[7] = np.nan if bad > 0 else bad
    with pytest.raises(ValueError, match="missing or infinite label .*row 7"):
        VerticalGradientBoostingClassifier(max_iter=2).fit(parts, labels)
    parts[1][5, 0] = bad
    with pytest.raises(ValueError, match="infinite"):
        VerticalGradientBoostingClassifier(max_iter=2).fit(parts, y)


# -- the split ------------------------------------------------------------------------------------------

def test_best_split_scores_both_directions_of_the_missing_values_as_a_brute_force_does():
    rng = np.random.default_rng(3)
    n = 600
    values = np.stack([rng.integers(0, 5, n), rng.integers(0, 7, n)], axis=1)
    missing = rng.random((n, 2)) < [0.2, 0.0]
    codes = np.where(missing, [5, 7], values).astype(np.uint8)  # feature 0: bin 5 holds its missing values
    for trial in range(20):
        g = rng.standard_normal(n) + 1.5 * missing[:, 0] * rng.choice([-1, 1]) + (values[:, 1] > 3)
        h = rng.random(n) + 0.1
        layout = BinLayout((6, 7), (True, False))
        hist = build_histogram(codes, np.arange(n), g, h, layout)
        choice = best_split(hist, layout, (g.sum(), h.sum(), n), l2=1.0, min_samples_leaf=40, min_hessian=1e-3)

        def score(left, g=g, h=h):
            GL, HL, GR, HR = g[left].sum(), h[left].sum(), g[~left].sum(), h[~left].sum()
            return GL ** 2 / (HL + 1) + GR ** 2 / (HR + 1) - g.sum() ** 2 / (h.sum() + 1)

        # scikit-learn's order: per feature, missing right at thresholds ascending (the last value bin too),
        # then missing left at thresholds descending; the first of equal gains.
        candidates = [(0, b, False) for b in range(5)] + [(0, b, True) for b in range(3, -1, -1)] + \
                     [(1, b, False) for b in range(6)]
        scored = []
        for j, b, to_left in candidates:
            left = (values[:, j] <= b) & ~missing[:, j] | (missing[:, j] & to_left)
            if 40 <= left.sum() <= n - 40:
                scored.append((score(left), j, b, to_left, int(left.sum())))
        best = max(scored, key=lambda c: c[0])
        assert (choice.feature, choice.code, choice.n_left) == (best[1], best[2], best[4]), trial
        assert choice.gain == pytest.approx(best[0])
        if choice.feature == 0:
            assert choice.missing_left == best[3]
        else:  # no missing training values: a missing value would go where more rows went
            assert choice.missing_left == (best[4] > n - best[4])


# -- the model ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"max_leaf_nodes": 8, "max_depth": 4, "l2_regularization": 1.0,
                                         "learning_rate": 0.3, "min_samples_leaf": 40}])
def test_with_missing_values_the_vertical_model_is_the_centralized_booster_on_the_same_bins(params):
    parts, y = _blocks()
    train, test = slice(0, 2400), slice(2400, None)
    model = VerticalGradientBoostingClassifier(max_iter=25, **params).fit([P[train] for P in parts], y[train])
    # Held-out rows miss values in every column, the one that never missed at training included.
    held_out = [P[test].copy() for P in parts]
    held_out[2][::5, 2] = np.nan
    reference = HistGradientBoostingClassifier(early_stopping=False, max_iter=25, **params).fit(
        _codes_with_nan(model.bins_, [P[train] for P in parts]), y[train])
    np.testing.assert_allclose(model.decision_function(held_out),
                               reference.decision_function(_codes_with_nan(model.bins_, held_out)), atol=1e-9)
    assert [t.n_leaves for t in model.trees_] == [p[0].get_n_leaf_nodes() for p in reference._predictors]
    assert any(any(t.missing_left) for t in model.lookups_), "no split sent missing values left"
    assert model.score(held_out, y[test]) > 0.75


def test_secureboost_grows_the_plain_trees_with_missing_values_too(plain_and_secureboost):
    parts, y = _blocks(n=500, seed=1, missing=0.2)
    plain, secure = plain_and_secureboost(parts, y, max_iter=3, max_bins=16, max_leaf_nodes=6)
    for a, b in zip(plain.trees_, secure.trees_):
        assert a.to_dict() == b.to_dict()
    assert [t.to_dict() for t in plain.lookups_] == [t.to_dict() for t in secure.lookups_]


def test_the_cross_party_masks_give_the_estimators_scores_on_rows_with_missing_values(masks_scores):
    parts, y = _blocks(n=800, seed=2)
    model = VerticalGradientBoostingClassifier(max_iter=5, max_leaf_nodes=6, min_samples_leaf=10).fit(parts, y)
    test, _ = _blocks(n=57, seed=5, missing=0.3)
    codes = [bins.transform(X) for bins, X in zip(model.bins_, test)]

    np.testing.assert_array_equal(masks_scores(model, codes, NAMES), model.decision_function(test))


def test_a_lookup_table_round_trips_its_missing_directions_and_reads_one_saved_without_them():
    table = LookupTable()
    table.add(0, 2, True, 5)
    table.add(1, 0)
    assert LookupTable.from_dict(table.to_dict()) == table
    old = LookupTable.from_dict({"feature": [0, 1], "code": [2, 0]})  # written before missing values
    assert old.missing_left == [False, False]
    codes = np.array([[5, 0], [1, 3]], dtype=np.uint8)
    np.testing.assert_array_equal(table.goes_left(0, codes), [True, True])
    np.testing.assert_array_equal(old.goes_left(0, codes), [False, True])


# -- a passive party's checks -----------------------------------------------------------------------------

def _job_and_data(n=400):
    parts, y = _blocks(n=n)
    bins = [FeatureBins(max_bins=16).fit(P) for P in parts[:2]]
    job = TreeJob(n_samples=n, active="a", passives=("b",), n_bins=tuple(tuple(b.n_bins_) for b in bins),
                  missing_bins=tuple(tuple(b.has_missing_) for b in bins), max_iter=3)
    data = {"a": TreePartyData(bins[0].transform(parts[0]), y), "b": TreePartyData(bins[1].transform(parts[1]))}
    return job, bins, data


@pytest.mark.parametrize("split", [
    {"code": 15, "missing_left": True},    # the last value bin with missing values left: nothing goes right
    {"code": 16, "missing_left": False},   # the missing bin is not a threshold
    {"code": 3},                           # the direction must be said
    {"code": 3, "missing_left": 1},
])
def test_a_passive_party_refuses_a_missing_value_split_it_cannot_make(split):
    job, bins, data = _job_and_data()
    assert bins[1].has_missing_[0] and bins[1].n_bins_[0] == 17
    hub = InMemoryHub(default_timeout=30)
    active, passive = hub.endpoint("a"), hub.endpoint("b")
    active.send("b", TAG_STEP, {"op": "tree"})
    active.send("b", "trees_gradients", {"g": np.zeros(400), "h": np.full(400, 0.25)})
    active.send("b", TAG_STEP, {"op": "split", "node": 0, "feature": 0, **split})
    with pytest.raises(ValueError, match="cannot make"):
        passive_program(passive, job, data["b"])


@pytest.mark.parametrize("flags,match", [((("x",), (False,)), "one bool per feature"), (((True,),), "one tuple"),
                                         (((True,), (False,)), "needs a value bin")])
def test_a_job_refuses_missing_flags_that_do_not_fit_its_bins(flags, match):
    with pytest.raises(ValueError, match=match):
        TreeJob(n_samples=100, active="a", passives=("b",), n_bins=((1,), (3,)), missing_bins=flags)
