"""vflsec.glm.model: the vertical GLM's one design (blocks, row normalisation, intercept), label encoding,
metric and privacy report, and the `vflsec party` GLM kind built on it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vflsec.glm.job import GLMJob
from vflsec.glm.model import LSQ_TARGET_CLIP, GLMDesign, LabelEncoding, glm_metric, privacy_spent, privacy_text
from vflsec.runtime.kinds import get_job_kind


def _worst_rows(n=50, d=3, seed=0):
    """Rows from tiny to huge (1e-300 .. 1e300 norms), one all-zero, one on the unit sphere."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.logspace(-300, 300, n)[:, None]
    X[0] = 0.0
    X[1] = np.ones(d) / math.sqrt(d)
    return X


@pytest.mark.parametrize("c", [0.05, 0.5, 0.999])
def test_active_block_keeps_the_row_bound_with_its_constant_column(c):
    design = GLMDesign(intercept_scaling=c)
    X = _worst_rows()
    active = design.block(X, "active")
    assert active.shape == (50, 4)
    np.testing.assert_array_equal(active[:, -1], c)  # exactly the constant
    assert np.all(np.linalg.norm(active, axis=1) <= 1.0)
    assert design.active_radius == math.sqrt(1 - c * c)
    assert np.all(np.linalg.norm(active[:, :-1], axis=1) <= design.active_radius)
    passive = design.block(X, "passive")
    assert passive.shape == X.shape and np.all(np.linalg.norm(passive, axis=1) <= 1.0)
    assert design.width(3, "active") == 4 and design.width(3, "passive") == 3
    assert design.widths({"a": 3, "p": 2}, "a") == {"a": 4, "p": 2}


def test_design_without_intercept_or_row_norm():
    X = _worst_rows()
    free = GLMDesign(fit_intercept=False)
    np.testing.assert_array_equal(free.block(X, "active"), free.block(X, "passive"))
    assert free.block(X, "active").shape == X.shape and free.active_radius == 1.0
    raw = GLMDesign(row_norm=None)
    np.testing.assert_array_equal(raw.block(X, "active")[:, :-1], X)  # as given, plus the constant
    assert free.split_coef(np.array([1.0, 2.0]), "active")[1] == 0.0


def test_split_coef_and_decision_function_are_the_blocks_scores():
    rng = np.random.default_rng(1)
    design = GLMDesign(intercept_scaling=0.4)
    parts = [rng.normal(size=(20, 3)), rng.normal(size=(20, 2))]
    blocks = design.blocks(parts)
    w = [rng.normal(size=4), rng.normal(size=2)]
    (features, intercept), (passive, none) = design.split_coef(w[0], "active"), design.split_coef(w[1], "passive")
    assert intercept == 0.4 * w[0][-1] and none is None
    np.testing.assert_array_equal(features, w[0][:3])
    np.testing.assert_allclose(design.decision_function(parts, [features, passive], intercept),
                               blocks[0] @ w[0] + blocks[1] @ w[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs, exc, needle", [
    (dict(intercept_scaling=0.0), ValueError, "intercept_scaling"),
    (dict(intercept_scaling=1.0), ValueError, "intercept_scaling"),
    (dict(intercept_scaling=float("nan")), ValueError, "intercept_scaling"),
    (dict(intercept_scaling="0.5"), TypeError, "intercept_scaling"),
    (dict(fit_intercept="yes"), TypeError, "fit_intercept must be a bool"),
    (dict(row_norm="l2"), ValueError, "row_norm"),
    (dict(loss="hinge"), ValueError, "loss"),
])
def test_bad_design_parameters(kwargs, exc, needle):
    with pytest.raises(exc, match=needle):
        GLMDesign(**kwargs)


def test_bad_role():
    with pytest.raises(ValueError, match="role"):
        GLMDesign().block(np.ones((2, 2)), "coordinator")


def test_two_classes_of_any_kind_become_minus_one_and_plus_one():
    labels = LabelEncoding.fit("logistic", ["no", "yes", "yes"])
    np.testing.assert_array_equal(labels.encode(["no", "yes", "yes"]), [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(labels.predict(np.array([-0.1, 0.0, 2.0])), ["no", "no", "yes"])
    assert labels.describe() == {"classes": ["no", "yes"]}
    assert LabelEncoding.fit("svm", np.array([4.0, 2.0])).describe() == {"classes": [2.0, 4.0]}
    for y, needle in (([1, 1, 1], "got 1"), ([0, 1, 2], "got 3"), ([0.0, np.nan], "NaN"), ([[0, 1]], "1-dim")):
        with pytest.raises(ValueError, match=needle):
            LabelEncoding.fit("logistic", y)


def test_least_squares_targets_are_standardised_and_clipped():
    y = np.concatenate([np.zeros(99), [1e6]])  # one huge outlier
    labels = LabelEncoding.fit("least_squares", y)
    targets = labels.encode(y)
    assert labels.mean == pytest.approx(1e4) and labels.scale == pytest.approx(y.std())
    assert np.max(np.abs(targets)) == LSQ_TARGET_CLIP  # HDP-VFL's |y| <= k_y holds for any labels
    np.testing.assert_allclose(labels.predict(np.array([0.0, 1.0])), [labels.mean, labels.mean + labels.scale])
    assert LabelEncoding.fit("least_squares", np.full(3, 7.0)).scale == 1.0  # constant labels: no division by 0
    counts = LabelEncoding.fit("poisson", [0, 3, 1])
    np.testing.assert_array_equal(counts.encode([0, 3, 1]), [0.0, 3.0, 1.0])
    assert counts.predict(np.array([0.0]))[0] == 1.0 and counts.describe() == {}


def test_metric():
    labels = LabelEncoding.fit("logistic", np.array([0.0, 1.0]))
    out = glm_metric("logistic", np.array([1.0, -1.0, -1.0, 2.0]), np.array([1.0, 0.0, 1.0, 1.0]), labels)
    assert out["value"] == 0.75 and out["baseline"] == 0.75 and out["n"] == 4
    identity = LabelEncoding.fit("poisson", [1.0])
    assert glm_metric("least_squares", np.ones(3), np.full(3, 2.0), LabelEncoding("least_squares"))["value"] is None
    assert glm_metric("poisson", np.log([1.0, 2.0]), np.array([1.0, 2.0]), identity)["value"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        glm_metric("logistic", np.ones(3), np.ones(2), labels)


def test_privacy_report():
    base = dict(n_samples=100, active="a", passives=("b",), epsilon=2.0, delta=1e-5)
    hdp = GLMJob(protocol="hdp", **base)
    spent = privacy_spent(hdp, "passive")
    assert 1.9 < spent.epsilon <= 2.0 and privacy_text(hdp, "passive") == str(spent)
    assert "over 3 releases" in privacy_text(hdp, "active", releases=3)
    assert privacy_spent(GLMJob(protocol="plain", **base), "active") is None
    assert privacy_spent(GLMJob(protocol="hdp", noise=False, **base), "active") is None
    assert privacy_spent(hdp, "coordinator") is None


# -- the `vflsec party` GLM kind on the model ----------------------------------------------

FIELDS = dict(protocol="plain", active="a", passives=["b"], batch_size=4)


def test_glm_kind_widths_count_csv_columns_and_the_job_counts_the_intercept():
    kind = get_job_kind("glm")
    assert {"fit_intercept", "intercept_scaling"} <= kind.job_fields()
    job = kind.make_job({**FIELDS, "widths": {"a": 3, "b": 2}}, n_samples=10)
    assert job.widths == {"a": 4, "b": 2}
    free = kind.make_job({**FIELDS, "widths": {"a": 3, "b": 2}, "fit_intercept": False}, n_samples=10)
    assert free.widths == {"a": 3, "b": 2}
    with pytest.raises(ValueError, match="widths"):
        kind.make_job({**FIELDS, "widths": {"a": 3}}, n_samples=10)
    with pytest.raises(ValueError, match="intercept_scaling"):
        kind.make_job({**FIELDS, "intercept_scaling": 2.0}, n_samples=10)


def test_glm_kind_builds_the_estimators_blocks_and_labels():
    kind = get_job_kind("glm")
    fields = {**FIELDS, "intercept_scaling": 0.3}
    job = kind.make_job(fields, n_samples=50)
    X = _worst_rows()
    rows = kind.party_rows(job, fields, "clip", "a", X)
    np.testing.assert_array_equal(rows, GLMDesign(intercept_scaling=0.3).block(X, "active"))
    y = np.where(np.arange(50) % 3 == 0, 4.0, 2.0)
    data = kind.party_data(job, fields, "a", rows, y, None)
    np.testing.assert_array_equal(data.y, np.where(y == 4.0, 1.0, -1.0))
    kind.check_party(job, fields, "a", rows, y)
    raw = kind.party_rows(job, {**FIELDS, "fit_intercept": False}, "none", "b", X)
    np.testing.assert_array_equal(raw, X)


def test_held_out_labels_outside_the_training_classes_are_refused():
    from vflsec.runtime.glm_kind import glm_metrics

    labels = LabelEncoding.fit("logistic", np.array([2.0, 4.0]))
    assert glm_metrics("logistic", np.array([1.0, -1.0]), np.array([4.0, 2.0]), labels)["value"] == 1.0
    with pytest.raises(ValueError, match="not among the training labels' classes"):
        glm_metrics("logistic", np.array([1.0, -1.0]), np.array([4.0, 3.0]), labels)
