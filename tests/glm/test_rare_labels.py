"""Rare labels are first-class for the vertical GLM (issue 37, item 2): ``class_weight`` and
``sample_weight`` with scikit-learn's semantics where the protocol can apply them (and a refusal
naming why where it cannot), a decision threshold saved with the model, and the ranking metrics
(ROC AUC, PR AUC) a summary shows beside accuracy."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.utils.class_weight import compute_class_weight

from vflsec.glm import VerticalLogisticRegression, get_protocol
from vflsec.glm.classification import choose_threshold, parse_threshold_rule, ranking_metrics
from vflsec.glm.job import GLMJob
from vflsec.glm.model import GLMDesign, LabelEncoding, glm_metric
from vflsec.glm.persistence import decode_labels, encode_labels


def rare_credit_table(data_dir, positive_rate=0.06, n_negative=4000, seed=0):
    """Credit default (Taiwan) with its positives subsampled to ``positive_rate``, split between
    two parties (12 and 11 columns) by ``vflsec.data.vertical_split`` (train / held-out 80/20,
    stratified): ``(train blocks, y_train, held-out blocks, y_test)``."""
    from vflsec.data import load_credit, vertical_split

    data = load_credit(data_dir=data_dir)
    rng = np.random.default_rng(seed)
    positives, negatives = np.flatnonzero(data.y == 1), np.flatnonzero(data.y == 0)
    n_positive = round(positive_rate * n_negative / (1 - positive_rate))
    keep = np.sort(np.concatenate([rng.choice(negatives, n_negative, replace=False),
                                   rng.choice(positives, n_positive, replace=False)]))
    split = vertical_split(dataclasses.replace(data, X=data.X[keep], y=data.y[keep]), [12, 11], seed=seed)
    return split.X_train, split.y_train, split.X_test, split.y_test


@pytest.fixture(scope="module")
def rare_table(shared_datasets):
    return rare_credit_table(shared_datasets)


def _synthetic(n=600, rate=0.1, seed=0):
    """Two parties' blocks (rows within the unit ball) and labels with about ``rate`` positives."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6))
    logit = X[:, 0] - X[:, 3] + 0.5 * X[:, 4] + math.log(rate / (1 - rate)) - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    X = X / (2 * np.sqrt(3))
    return [X[:, :3], X[:, 3:]], y


def test_balanced_weights_on_a_6_percent_credit_table_match_scikit_learn(rare_table):
    train, y_train, test, y_test = rare_table
    assert 0.055 < y_train.mean() < 0.065
    plain = VerticalLogisticRegression("plain").fit(train, y_train)
    assert np.unique(plain.predict(test)).tolist() == [0]  # unweighted: every customer "ties" the majority rate
    balanced = VerticalLogisticRegression("plain", class_weight="balanced").fit(train, y_train)
    predicted = balanced.predict(test)
    assert set(np.unique(predicted)) == {0, 1}
    assert 0.05 < predicted.mean() < 0.6
    sklearn = LogisticRegression(class_weight="balanced", max_iter=5000).fit(np.hstack(train), y_train)
    auc = roc_auc_score(y_test, balanced.decision_function(test))
    assert abs(auc - roc_auc_score(y_test, sklearn.decision_function(np.hstack(test)))) < 0.01
    assert auc > 0.65  # a useful model, not only one equal to the reference


def test_class_weight_is_a_per_row_loss_weight_as_in_scikit_learn():
    parts, y = _synthetic()
    balanced = compute_class_weight("balanced", classes=np.array([0, 1]), y=y)
    by_class = VerticalLogisticRegression("plain", class_weight="balanced").fit(parts, y)
    by_dict = VerticalLogisticRegression("plain", class_weight={0: balanced[0], 1: balanced[1]}).fit(parts, y)
    by_row = VerticalLogisticRegression("plain").fit(parts, y, sample_weight=balanced[y])
    for other in (by_dict, by_row):
        for mine, theirs in zip(by_class.coef_, other.coef_):
            np.testing.assert_array_equal(mine, theirs)
    both = VerticalLogisticRegression("plain", class_weight={1: 3.0}).fit(parts, y, sample_weight=np.full(len(y), 2.0))
    rows = VerticalLogisticRegression("plain").fit(parts, y, sample_weight=np.where(y == 1, 6.0, 2.0))
    np.testing.assert_array_equal(np.concatenate(both.coef_), np.concatenate(rows.coef_))
    unweighted = VerticalLogisticRegression("plain").fit(parts, y)
    assert not np.allclose(np.concatenate(unweighted.coef_), np.concatenate(by_class.coef_), atol=1e-3)


def test_weighted_centralized_reference_is_scikit_learns_weighted_fit():
    parts, y = _synthetic()
    model = VerticalLogisticRegression("centralized", class_weight="balanced", lam=0.01).fit(parts, y)
    design = GLMDesign()
    joined = np.hstack([design.features(parts[0], "active"), design.features(parts[1], "passive")])
    sklearn = LogisticRegression(class_weight="balanced", C=1 / (0.01 * len(y)), max_iter=5000).fit(joined, y)
    np.testing.assert_allclose(np.concatenate(model.coef_), sklearn.coef_.ravel(), atol=1e-3)
    assert model.intercept_ == pytest.approx(sklearn.intercept_[0], abs=1e-3)


def _weighted_taylor_descent(job, blocks, y_signed, weights):
    """The HE flow's plaintext descent with each row's Taylor residual times its weight."""
    from vflsec.glm import he_vfl
    from vflsec.glm.penalties import clip_norm, penalized_step

    ws = [np.zeros(X.shape[1]) for X in blocks]
    for _, _, idx in he_vfl.he_batches(job):
        theta = sum(X[idx] @ w for X, w in zip(blocks, ws))
        d = weights[idx] * (theta / 4 - y_signed[idx] / 2)
        ws = [clip_norm(penalized_step(job.penalty, w, d @ X[idx] / job.batch_size, job.lr, job.lam, job.mu), job.k)
              for X, w in zip(blocks, ws)]
    return ws


def test_the_he_flow_weights_the_taylor_residual_and_paillier_computes_it_under_encryption():
    parts, y = _synthetic(n=240)
    settings = dict(class_weight={1: 4.0}, epochs=2, batch_size=60, key_bits=2048)
    taylor = VerticalLogisticRegression("taylor", **settings).fit(parts, y)
    design = GLMDesign()
    blocks = design.blocks(parts)
    job = GLMJob("taylor", len(y), lr=2.5, epochs=2, batch_size=60, k=5.0, lam=0.001, passives=("passive_0",),
                 coordinator="coordinator")
    signed = np.where(y == 1, 1.0, -1.0)
    expected = _weighted_taylor_descent(job, blocks, signed, np.where(y == 1, 4.0, 1.0))
    np.testing.assert_allclose(np.append(taylor.coef_[0], taylor.intercept_ / 0.5), expected[0], atol=1e-12)
    np.testing.assert_allclose(taylor.coef_[1], expected[1], atol=1e-12)
    with pytest.warns(UserWarning, match="2048"):
        paillier = VerticalLogisticRegression("paillier", **settings).fit(parts, y)
    np.testing.assert_allclose(np.concatenate(paillier.coef_), np.concatenate(taylor.coef_), atol=1e-9)
    assert "loss" not in paillier.history_  # the encrypted loss is off for a weighted fit
    with pytest.raises(ValueError, match="cannot compute the encrypted loss of a weighted fit"):
        VerticalLogisticRegression("taylor", he_options={"encrypted_loss": True}, **settings).fit(parts, y)


@pytest.mark.parametrize("protection, why", [
    ("hdp", "its DP sensitivity bounds assume every row weighs 1"),
    ("taylor_dp", "its DP sensitivity bounds assume every row weighs 1"),
    ("paillier_dp", "'balanced' weights are computed from the labels the DP protects"),
])
def test_dp_protocols_refuse_weights_naming_why(protection, why):
    parts, y = _synthetic(n=120)
    with pytest.raises(ValueError, match=f"protocol '{protection}' cannot take class_weight: .*{why}"):
        VerticalLogisticRegression(protection, class_weight="balanced").fit(parts, y)
    with pytest.raises(ValueError, match=f"protocol '{protection}' cannot take sample_weight"):
        VerticalLogisticRegression(protection).fit(parts, y, sample_weight=np.ones(len(y)))
    assert get_protocol(protection).weight_refusal is not None
    assert get_protocol("plain").weight_refusal is None and get_protocol("paillier").weight_refusal is None


def test_ckks_refuses_weights_naming_why():
    pytest.importorskip("tenseal")
    parts, y = _synthetic(n=120)
    with pytest.raises(ValueError, match="protocol 'ckks' cannot take class_weight: its CKKS parameters leave one "
                                         "multiplicative level"):
        VerticalLogisticRegression("ckks", class_weight="balanced").fit(parts, y)


@pytest.mark.parametrize("kwargs, fit, match", [
    (dict(class_weight="even"), {}, "class_weight must be None, 'balanced' or a dict"),
    (dict(class_weight={2: 1.0}), {}, r"class_weight names \[2\], which are not among the classes"),
    (dict(class_weight={1: -1.0}), {}, r"class_weight\[1\] must be a finite number >= 0"),
    (dict(class_weight="balanced", loss="least_squares"), {}, "class_weight needs a classification loss"),
    ({}, dict(sample_weight=np.ones(5)), r"sample_weight has shape \(5,\), expected"),
    ({}, dict(sample_weight="negative"), "could not convert|sample_weight"),
    (dict(threshold=1.0), {}, r"threshold must be a probability in \(0, 1\)"),
    (dict(threshold=0.3, loss="svm"), {}, "a decision threshold other than 0.5 needs loss 'logistic'"),
])
def test_weight_and_threshold_mistakes_are_clear_errors(kwargs, fit, match):
    parts, y = _synthetic(n=120)
    with pytest.raises(ValueError, match=match):
        VerticalLogisticRegression("plain", **kwargs).fit(parts, y, **fit)


def test_negative_sample_weights_are_refused():
    parts, y = _synthetic(n=120)
    with pytest.raises(ValueError, match="sample_weight must hold finite weights >= 0"):
        VerticalLogisticRegression("plain").fit(parts, y, sample_weight=-np.ones(len(y)))


def test_threshold_decides_predict_and_score_and_is_saved(tmp_path):
    parts, y = _synthetic()
    model = VerticalLogisticRegression("plain", threshold=0.2, class_weight={0: 1.0, 1: 1.5}).fit(parts, y)
    probability = model.predict_proba(parts)[:, 1]
    np.testing.assert_array_equal(model.predict(parts), np.where(probability > 0.2, 1, 0))
    assert model.score(parts, y) == pytest.approx(np.mean((probability > 0.2) == y))
    default = VerticalLogisticRegression("plain", class_weight={0: 1.0, 1: 1.5}).fit(parts, y)
    assert model.predict(parts).sum() > default.predict(parts).sum()  # a lower threshold: more positives
    model.save(tmp_path / "model.json")
    loaded = VerticalLogisticRegression.load(tmp_path / "model.json")
    assert loaded.threshold == 0.2 and loaded.labels_.threshold == 0.2
    assert loaded.get_params() == model.get_params() and loaded.class_weight == {0: 1.0, 1: 1.5}
    np.testing.assert_array_equal(loaded.predict(parts), model.predict(parts))
    model.set_params(threshold=0.5)  # the current parameter decides, as scikit-learn's would after set_params
    np.testing.assert_array_equal(model.predict(parts), default.predict(parts))


def test_label_encoding_keeps_its_threshold_through_json():
    labels = LabelEncoding.fit("logistic", np.array(["No", "Yes", "No"])).with_threshold(0.125)
    again = decode_labels(encode_labels(labels))
    assert again.threshold == 0.125 and again.classes.tolist() == ["No", "Yes"]
    theta = np.array([-3.0, -1.0, 0.1])  # sigmoid: 0.047, 0.269, 0.525
    assert again.predict(theta).tolist() == ["No", "Yes", "Yes"]
    old = encode_labels(labels)
    del old["threshold"]  # a model saved before thresholds decides at 0.5
    assert decode_labels(old).predict(theta).tolist() == ["No", "No", "Yes"]


def test_ranking_metrics_are_scikit_learns_and_pr_auc_only_for_rare_positives():
    rng = np.random.default_rng(3)
    score = rng.standard_normal(500)
    rare = rng.random(500) < 0.05 + 0.1 * (score > 1)
    metrics = ranking_metrics(score, rare)
    assert metrics["auc"] == roc_auc_score(rare, score)
    assert metrics["pr_auc"] == average_precision_score(rare, score)
    assert metrics["positive_rate"] == rare.mean() < 0.2
    common = score + rng.standard_normal(500) > 0
    assert "pr_auc" not in ranking_metrics(score, common)
    assert ranking_metrics(score, np.zeros(500, dtype=bool))["auc"] is None
    metric = glm_metric("logistic", score, rare.astype(int), LabelEncoding.fit("logistic", [0, 1]))
    assert metric["auc"] == metrics["auc"] and metric["pr_auc"] == metrics["pr_auc"] and metric["threshold"] == 0.5


@pytest.mark.parametrize("target, value", [("recall", 0.5), ("recall", 1.0), ("precision", 0.3), ("precision", 0.2)])
def test_a_chosen_threshold_reaches_its_target_and_is_the_best_that_does(target, value):
    rng = np.random.default_rng(4)
    probability = rng.random(400)
    positive = rng.random(400) < 0.4 * probability
    choice = choose_threshold(probability, positive, target, value)
    predicted = probability > choice["threshold"]
    recall = (predicted & positive).sum() / positive.sum()
    precision = (predicted & positive).sum() / predicted.sum()
    assert choice["recall"] == pytest.approx(recall) and choice["precision"] == pytest.approx(precision)
    assert choice["reached"] and (recall if target == "recall" else precision) >= value
    # The best threshold reaching it: one distinct score further (fewer positives for recall, more for
    # precision) misses the target, or gives less recall.
    scores = np.unique(probability)
    if target == "recall":
        above = scores[scores > choice["threshold"]]
        fewer = probability >= above.min() + 1e-12
        assert (fewer & positive).sum() / positive.sum() < value
    else:
        below = scores[scores < choice["threshold"]]
        if below.size:
            more = probability >= below.max()
            assert (more & positive).sum() / more.sum() < value


def test_an_unreachable_precision_gives_the_most_precise_threshold():
    probability = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    positive = np.array([False, True, False, True, False])
    choice = choose_threshold(probability, positive, "precision", 0.9)
    assert not choice["reached"] and choice["precision"] == 0.5 and choice["recall"] == 1.0
    with pytest.raises(ValueError, match="both classes"):
        choose_threshold(probability, np.zeros(5, dtype=bool), "recall", 0.5)


@pytest.mark.parametrize("rule, parsed", [(0.3, 0.3), ("recall:0.5", ("recall", 0.5)),
                                          ("precision: 0.25", ("precision", 0.25))])
def test_threshold_rules(rule, parsed):
    assert parse_threshold_rule(rule) == parsed


@pytest.mark.parametrize("rule", ["recall", "f1:0.5", "recall:1.5", "precision:0", 1.0, True])
def test_bad_threshold_rules_name_the_forms(rule):
    with pytest.raises((ValueError, TypeError), match="threshold must be"):
        parse_threshold_rule(rule)
