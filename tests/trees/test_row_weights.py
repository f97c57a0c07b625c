"""Row weights in the vertical trees (issue 37): ``class_weight`` and ``sample_weight`` as scikit-learn's
HistGradientBoostingClassifier defines them (the same model on the same bins), SecureBoost growing the plain
weighted trees bit for bit with weights above 1, "label_dp" weighting the labels it released, the refusals of
the protections that cannot take weights, and the DP single-class warning."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier

from vflsec.dp import PrivacyWarning
from vflsec.trees import FeatureBins, VerticalGradientBoostingClassifier
from vflsec.trees.weights import WEIGHT_REFUSALS, power_of_two_at_least, row_weights, weight_scale


def _blocks(n=1500, seed=0, positive=0.25):
    X, y = make_classification(n_samples=n, n_features=9, n_informative=6, n_redundant=1, random_state=seed,
                               flip_y=0.05, weights=[1.0 - positive])
    return [X[:, :4], X[:, 4:7], X[:, 7:]], y


def _rare(n=2000, seed=0):
    """A label with about 6% positives and a weak signal: unweighted boosting predicts almost only negatives."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    logit = -3.3 + 0.9 * X[:, 0] + 0.6 * X[:, 3]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    return [X[:, :3], X[:, 3:]], y


def _codes(parts, fitted_on):
    bins = [FeatureBins().fit(P) for P in fitted_on]
    return np.hstack([b.transform(P) for b, P in zip(bins, parts)]).astype(np.float64)


# -- the weights themselves ------------------------------------------------------------------------------

def test_row_weights_are_scikit_learns_sample_weights():
    from sklearn.utils.class_weight import compute_sample_weight

    y = np.array([0, 0, 0, 1, 0, 1, 0, 0], dtype=np.float64)
    sample = np.linspace(0.5, 2.0, len(y))
    np.testing.assert_array_equal(row_weights(y, None, "balanced"), compute_sample_weight("balanced", y))
    np.testing.assert_array_equal(row_weights(y, sample, "balanced"), sample * compute_sample_weight("balanced", y))
    np.testing.assert_array_equal(row_weights(y, sample, (1.0, 4.0)), sample * np.where(y == 1, 4.0, 1.0))
    assert row_weights(y, None, None) is None
    assert [weight_scale(w) for w in (None, [0.3, 1.0], [1.01], [4.0], [4.5, 0.1])] == [1.0, 1.0, 2.0, 4.0, 8.0]
    assert power_of_two_at_least(0.0) == 1.0


# -- the same model as scikit-learn's booster with the same weights --------------------------------------

@pytest.mark.parametrize("class_weight, with_sample_weight", [
    (None, True), ("balanced", False), ("balanced", True), ({"yes": 7.5}, False), ({"no": 0.5, "yes": 3.0}, True),
])
def test_weighted_trees_are_the_centralized_booster_with_the_same_weights(class_weight, with_sample_weight):
    parts, y = _blocks(positive=0.15)
    labels = np.where(y == 1, "yes", "no")
    train, test = slice(0, 1200), slice(1200, None)
    sample_weight = np.random.default_rng(1).uniform(0.0, 3.0, 1200) if with_sample_weight else None
    params = dict(max_iter=15, max_leaf_nodes=15, l2_regularization=0.5)
    model = VerticalGradientBoostingClassifier(class_weight=class_weight, **params).fit(
        [P[train] for P in parts], labels[train], sample_weight=sample_weight)
    # scikit-learn's booster looks a dict's labels up among its encoded classes (0, 1): key it so.
    encoded = {["no", "yes"].index(k): v for k, v in class_weight.items()} if isinstance(class_weight, dict) \
        else class_weight
    reference = HistGradientBoostingClassifier(early_stopping=False, class_weight=encoded, **params).fit(
        _codes([P[train] for P in parts], [P[train] for P in parts]), labels[train], sample_weight=sample_weight)
    test_codes = _codes([P[test] for P in parts], [P[train] for P in parts])
    np.testing.assert_allclose(model.decision_function([P[test] for P in parts]),
                               reference.decision_function(test_codes), rtol=0, atol=1e-9)
    assert [t.n_leaves for t in model.trees_] == [p[0].get_n_leaf_nodes() for p in reference._predictors]
    unweighted = VerticalGradientBoostingClassifier(**params).fit([P[train] for P in parts], labels[train])
    assert not np.allclose(unweighted.decision_function([P[test] for P in parts]),
                           model.decision_function([P[test] for P in parts]))  # the weights changed the model


def test_unit_weights_give_the_unweighted_model():
    parts, y = _blocks(n=600)
    plain = VerticalGradientBoostingClassifier(max_iter=5).fit(parts, y)
    ones = VerticalGradientBoostingClassifier(max_iter=5, class_weight={0: 1.0, 1: 1.0}).fit(
        parts, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(plain.decision_function(parts), ones.decision_function(parts))
    assert plain.train_loss_ == ones.train_loss_


def test_balanced_weights_make_a_rare_label_predicted():
    parts, y = _rare()
    assert 0.04 < y.mean() < 0.08
    plain = VerticalGradientBoostingClassifier(max_iter=10).fit(parts, y)
    balanced = VerticalGradientBoostingClassifier(max_iter=10, class_weight="balanced").fit(parts, y)
    predicted = balanced.predict(parts)
    assert set(np.unique(predicted)) == {0, 1}
    # Balanced weights predict the rare class far more often than the unweighted model does.
    assert np.mean(predicted) > 5 * max(np.mean(plain.predict(parts)), 1.0 / len(y))
    reference = HistGradientBoostingClassifier(max_iter=10, early_stopping=False, class_weight="balanced").fit(
        _codes(parts, parts), y)
    np.testing.assert_array_equal(predicted, reference.predict(_codes(parts, parts)))


@pytest.mark.parametrize("weights", ["above_one", "below_one"])
def test_secureboost_grows_the_plain_weighted_trees_bit_for_bit(plain_and_secureboost, weights):
    pytest.importorskip("gmpy2")
    rng = np.random.default_rng(2)
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=3, weights=[0.8])
    parts = [X[:, :3], X[:, 3:]]
    if weights == "above_one":  # balanced weights of a 20% label (about 2.5) times weights up to 3
        options = {"class_weight": "balanced"}
        sample_weight = rng.uniform(0.0, 3.0, len(y))
    else:
        options = {}
        sample_weight = rng.uniform(0.0, 1.0, len(y))
    common = dict(max_iter=2, max_bins=16, max_leaf_nodes=5, min_samples_leaf=10)
    plain = VerticalGradientBoostingClassifier(**common, **options).fit(parts, y, sample_weight=sample_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        secure = VerticalGradientBoostingClassifier("secureboost", **common, **options).fit(
            parts, y, sample_weight=sample_weight)
    for a, b in zip(plain.trees_, secure.trees_):
        for key in ("owner", "record", "left", "right", "value"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert [t.to_dict() for t in plain.lookups_] == [t.to_dict() for t in secure.lookups_]
    assert plain.baseline_ == secure.baseline_
    unweighted = VerticalGradientBoostingClassifier(**common).fit(parts, y)
    assert not np.array_equal(unweighted.trees_[0].value, plain.trees_[0].value)


# -- label_dp: class weights of the released labels ------------------------------------------------------

def test_label_dp_weights_the_labels_it_released():
    pytest.importorskip("dp_accounting")
    parts, y = _rare(n=1000)
    # At epsilon 60 randomized response keeps every label (flip probability ~1e-26): the plain balanced model.
    released = VerticalGradientBoostingClassifier("label_dp", max_iter=5, class_weight="balanced", epsilon=60.0,
                                                  noise_seed=1).fit(parts, y)
    plain = VerticalGradientBoostingClassifier(max_iter=5, class_weight="balanced").fit(parts, y)
    np.testing.assert_array_equal(released.decision_function(parts), plain.decision_function(parts))
    noisy = VerticalGradientBoostingClassifier("label_dp", max_iter=5, class_weight={1: 4.0}, epsilon=1.0,
                                               noise_seed=1).fit(parts, y)
    assert noisy.privacy_spent_.epsilon <= 1.0


# -- refusals ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protection, privacy, weight", [
    ("dp", {"epsilon": 1.0, "delta": 1e-5}, "sample_weight"),
    ("dp", {"epsilon": 1.0, "delta": 1e-5}, "class_weight"),
    ("label_dp", {"epsilon": 1.0}, "sample_weight"),
])
def test_a_protection_that_cannot_take_a_weight_refuses_it_naming_why(protection, privacy, weight):
    parts, y = _blocks(n=200)
    options = {"class_weight": "balanced"} if weight == "class_weight" else {}
    fit_weight = np.ones(len(y)) if weight == "sample_weight" else None
    model = VerticalGradientBoostingClassifier(protection, max_iter=2, **options, **privacy)
    with pytest.raises(ValueError, match=re.escape(f"protection {protection!r} does not take {weight}: "
                                                   f"{WEIGHT_REFUSALS[protection][weight]}")):
        model.fit(parts, y, sample_weight=fit_weight)
    assert not hasattr(model, "trees_")


def test_the_dp_release_refuses_weights_given_past_the_estimator():
    pytest.importorskip("dp_accounting")
    from vflsec.trees.dp import DPGradientRelease

    with pytest.raises(ValueError, match="protection 'dp' does not take row weights"):
        DPGradientRelease().gradients(np.full(3, 0.5), np.array([0.0, 1.0, 0.0]), None, np.ones(3))


@pytest.mark.parametrize("class_weight, sample_weight, error", [
    ({"maybe": 2.0}, None, "'maybe', which is not a class of y"),
    ({1: -1.0}, None, "class_weight of class 1 must be a finite non-negative number"),
    ({1: float("nan")}, None, "finite non-negative"),
    ("balance", None, "class_weight must be None, 'balanced' or a dict"),
    (None, "short", r"one weight per row \(200\)"),
    (None, "negative", "row 3 has -1.0"),
    (None, "nan", "finite and non-negative"),
    (None, "zeros", "sums to 0"),
])
def test_bad_weights_are_refused_saying_what_is_wrong(class_weight, sample_weight, error):
    parts, y = _blocks(n=200)
    weights = {None: None, "short": np.ones(199), "negative": np.where(np.arange(200) == 3, -1.0, 1.0),
               "nan": np.where(np.arange(200) == 3, np.nan, 1.0), "zeros": np.zeros(200)}[sample_weight]
    with pytest.raises(ValueError, match=error):
        VerticalGradientBoostingClassifier(max_iter=2, class_weight=class_weight).fit(parts, y, sample_weight=weights)


# -- the DP single-class warning --------------------------------------------------------------------------

@pytest.mark.parametrize("noise_seed, predicted, says", [
    (0, 0, r"0 is the majority class \(94\.8% of the rows\).*try protection 'label_dp' with class_weight='balanced'"),
    (4, 1, r"1 is the minority class \(5\.2% of the rows\).*the DP noise has drowned the signal -- raise epsilon"),
])
def test_a_dp_model_that_predicts_one_class_warns(noise_seed, predicted, says):
    pytest.importorskip("dp_accounting")
    parts, y = _rare(n=600)
    with pytest.warns(PrivacyWarning, match="predicts the single class .* for every training row") as record:
        model = VerticalGradientBoostingClassifier("dp", max_iter=2, epsilon=0.05, delta=1e-5,
                                                   noise_seed=noise_seed).fit(parts, y)
    assert set(model.predict(parts)) == {predicted}
    messages = [str(w.message) for w in record if issubclass(w.category, PrivacyWarning)]
    assert any(re.search(says, m) for m in messages), messages
    accuracy = np.mean(model.predict(parts) == y)
    assert any(f"(accuracy {accuracy:.3f})" in m for m in messages)


def test_label_dp_that_predicts_the_majority_suggests_balanced_weights_and_plain_never_warns():
    pytest.importorskip("dp_accounting")
    parts, y = _rare(n=600)
    with pytest.warns(PrivacyWarning, match="try class_weight='balanced' or a larger epsilon"):
        VerticalGradientBoostingClassifier("label_dp", max_iter=2, epsilon=0.5, noise_seed=0).fit(parts, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        plain = VerticalGradientBoostingClassifier(max_iter=2).fit(parts, y)  # one class, but no DP: no warning
        assert set(plain.predict(parts)) == {0}
        noisy = VerticalGradientBoostingClassifier("label_dp", max_iter=5, class_weight="balanced", epsilon=60.0,
                                                   noise_seed=0).fit(parts, y)
        assert set(noisy.predict(parts)) == {0, 1}
