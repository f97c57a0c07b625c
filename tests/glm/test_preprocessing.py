"""VerticalLogisticRegression: intercept, batch-size handling and defaults
(the preprocessing that makes plain VFL match centralized logistic regression)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

from vflsec.data import PAPER_SPLITS, load_breast, vertical_split
from vflsec.glm import GLMJob, PartyData, VerticalLogisticRegression, run_job
from vflsec.glm import estimator as estimator_module


def _unit_rows(X):
    return X / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", X, X)))[:, None]


def _base_rate_problem(n=600, rate=0.85, seed=0):
    """Labels independent of the (centred) features: only an intercept helps."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(size=(n, 3)) / 2, rng.normal(size=(n, 2)) / 2]
    y = (rng.random(n) < rate).astype(int)
    return parts, y


@pytest.fixture
def captured(monkeypatch):
    """Records the PartyData each fit hands to the protocol, and its result."""
    calls = []

    def spy(job, data, **kw):
        out = run_job(job, data, **kw)
        calls.append((job, data, out))
        return out

    monkeypatch.setattr(estimator_module, "run_job", spy)
    return calls


def test_intercept_learns_the_base_rate():
    parts, y = _base_rate_problem()
    test_parts, y_test = _base_rate_problem(seed=1)
    with_icpt = VerticalLogisticRegression("plain").fit(parts, y)
    without = VerticalLogisticRegression("plain", fit_intercept=False).fit(parts, y)
    assert with_icpt.intercept_ > 1.0  # logit(0.85) = 1.73
    assert without.intercept_ == 0.0
    majority = max(np.mean(y_test), 1 - np.mean(y_test))
    assert with_icpt.score(test_parts, y_test) >= majority - 0.01
    assert with_icpt.score(test_parts, y_test) > without.score(test_parts, y_test) + 0.1
    for protection in ("centralized", "single_party"):
        ref = VerticalLogisticRegression(protection).fit(parts, y)
        assert ref.intercept_ == pytest.approx(math.log(0.85 / 0.15), abs=0.3)
        assert ref.score(test_parts, y_test) >= majority - 0.01


def test_active_block_gets_constant_column_and_stays_in_unit_ball(captured):
    parts, y = _base_rate_problem(n=200)
    parts[0][::7] *= 1e6  # huge rows: projected
    parts[1][::5] *= 1e6
    c = 0.6
    model = VerticalLogisticRegression("hdp", intercept_scaling=c, noise_seed=0, epochs=2).fit(parts, y)
    job, data, out = captured[-1]
    active = np.asarray(data[job.active].X)
    assert active.shape == (200, 4)
    np.testing.assert_array_equal(active[:, -1], c)  # exactly constant
    assert np.all(np.linalg.norm(active, axis=1) <= 1.0)
    assert np.all(np.linalg.norm(active[:, :-1], axis=1) <= math.sqrt(1 - c * c))
    assert np.all(np.linalg.norm(np.asarray(data["passive_0"].X), axis=1) <= 1.0)
    # coef_ holds the feature weights only; intercept_ = c * the constant's weight
    raw = out.results[job.active].coef
    assert [len(w) for w in model.coef_] == [3, 2]
    np.testing.assert_array_equal(model.coef_[0], raw[:-1])
    assert model.intercept_ == pytest.approx(c * raw[-1], rel=1e-15)
    # the intercept weight is clipped with the active block: ||[w_A, w_c]|| <= k
    assert np.linalg.norm(raw) <= model.k * (1 + 1e-12)


def test_decision_function_adds_the_intercept_on_the_fitted_preprocessing():
    parts, y = _base_rate_problem(n=300)
    model = VerticalLogisticRegression("plain", intercept_scaling=0.5).fit(parts, y)
    r = math.sqrt(1 - 0.25)
    active = _unit_rows(parts[0])
    active = active / np.maximum(1.0, np.linalg.norm(active, axis=1) / r)[:, None]
    expected = active @ model.coef_[0] + _unit_rows(parts[1]) @ model.coef_[1] + model.intercept_
    np.testing.assert_allclose(model.decision_function(parts), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(model.predict(parts), np.where(expected > 0, 1, 0))
    before = model.decision_function(parts)
    model.set_params(intercept_scaling=0.9, fit_intercept=False)  # not refitted: no effect
    np.testing.assert_array_equal(model.decision_function(parts), before)


def test_fit_intercept_false_reproduces_the_intercept_free_model():
    parts, y = _base_rate_problem(n=250)
    y_signed = np.where(y == 1, 1.0, -1.0)
    model = VerticalLogisticRegression("plain", fit_intercept=False, lr=1.0, epochs=3, batch_size=64,
                                       k=1.0, seed=4).fit(parts, y)
    clipped = [_unit_rows(X) for X in parts]
    job = GLMJob("plain", n_samples=250, lr=1.0, epochs=3, batch_size=64, k=1.0, seed=4, passives=("passive1",))
    out = run_job(job, {"active": PartyData(clipped[0], y_signed), "passive1": PartyData(clipped[1])})
    np.testing.assert_array_equal(model.coef_[0], out.results["active"].coef)
    np.testing.assert_array_equal(model.coef_[1], out.results["passive1"].coef)
    assert model.intercept_ == 0.0
    np.testing.assert_array_equal(model.decision_function(parts),
                                  clipped[0] @ model.coef_[0] + clipped[1] @ model.coef_[1])


def test_references_use_sklearn_intercept_on_the_same_features():
    parts, y = _base_rate_problem(n=300)
    model = VerticalLogisticRegression("centralized", lam=0.01).fit(parts, y)
    r = math.sqrt(1 - 0.25)
    active = _unit_rows(parts[0])
    active = active / np.maximum(1.0, np.linalg.norm(active, axis=1) / r)[:, None]
    X = np.hstack([active, _unit_rows(parts[1])])
    ref = LogisticRegression(C=1 / (0.01 * 300), max_iter=5000).fit(X, np.where(y == 1, 1.0, -1.0))
    np.testing.assert_allclose(np.concatenate(model.coef_), ref.coef_.ravel(), atol=1e-4)
    assert model.intercept_ == pytest.approx(ref.intercept_[0], abs=1e-4)
    free = VerticalLogisticRegression("centralized", lam=0.01, fit_intercept=False).fit(parts, y)
    assert free.intercept_ == 0.0


@pytest.mark.parametrize("value, exc", [(0.0, ValueError), (1.0, ValueError), (-0.5, ValueError),
                                        (1.5, ValueError), (float("nan"), ValueError), ("0.5", TypeError)])
def test_bad_intercept_scaling(value, exc):
    parts, y = _base_rate_problem(n=50)
    with pytest.raises(exc, match="intercept_scaling"):
        VerticalLogisticRegression("plain", intercept_scaling=value).fit(parts, y)


def test_bad_fit_intercept():
    parts, y = _base_rate_problem(n=50)
    with pytest.raises(TypeError, match="fit_intercept"):
        VerticalLogisticRegression("plain", fit_intercept="yes").fit(parts, y)


def test_batch_size_is_rows_clamped_to_n_or_a_fraction():
    parts, y = _base_rate_problem(n=100)
    fits = [VerticalLogisticRegression("plain", batch_size=b, epochs=2).fit(parts, y)
            for b in (100, 10_000, 1.0)]
    assert [m.batch_size_ for m in fits] == [100, 100, 100]
    for m in fits[1:]:
        for a, b in zip(m.coef_, fits[0].coef_):
            np.testing.assert_array_equal(a, b)
    assert VerticalLogisticRegression("plain", batch_size=0.25, epochs=1).fit(parts, y).batch_size_ == 25
    assert VerticalLogisticRegression("plain", batch_size=0.001, epochs=1).fit(parts, y).batch_size_ == 1
    assert VerticalLogisticRegression("plain", epochs=1).fit(parts, y).batch_size_ == 7  # default 1/16
    for bad in (0, -3, 0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="batch_size"):
            VerticalLogisticRegression("plain", batch_size=bad).fit(parts, y)
    with pytest.raises(TypeError, match="batch_size"):
        VerticalLogisticRegression("plain", batch_size="64").fit(parts, y)


def test_sklearn_conventions_and_not_fitted_error():
    model = VerticalLogisticRegression("plain", intercept_scaling=0.3)
    params = model.get_params()
    assert params["fit_intercept"] is True and params["intercept_scaling"] == 0.3
    copy = clone(model).set_params(fit_intercept=False)
    assert copy.fit_intercept is False and model.fit_intercept is True
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(model))
    parts, _ = _base_rate_problem(n=20)
    with pytest.raises(NotFittedError, match="not fitted"):
        model.predict(parts)
    assert issubclass(NotFittedError, ValueError)


def test_plain_vfl_on_breast_with_defaults():
    split = vertical_split(load_breast(), PAPER_SPLITS["breast"])
    model = VerticalLogisticRegression("plain").fit(split.X_train, split.y_train)
    assert model.score(split.X_test, split.y_test) >= 0.94
    central = VerticalLogisticRegression("centralized").fit(split.X_train, split.y_train)
    assert model.score(split.X_test, split.y_test) >= central.score(split.X_test, split.y_test) - 0.015


def test_privacy_spent_reports_the_calibrated_budget_per_party():
    from vflsec.data import PAPER_SPLITS, load_breast, vertical_split
    from vflsec.glm import VerticalLogisticRegression

    split = vertical_split(load_breast(), PAPER_SPLITS["breast"], seed=0)
    private = VerticalLogisticRegression("hdp", epsilon=0.5, delta=1e-3, noise_seed=1).fit(split.X_train, split.y_train)
    assert set(private.privacy_spent_) == {"active", "passive_0"}
    spent = private.privacy_spent_["passive_0"]
    # The mechanism's own report (PLD), at most the calibrated budget and close to it.
    assert (spent.delta, spent.releases, spent.accountant, spent.neighbours) == (1e-3, 1, "pld", "replace_one")
    assert 0.49 < spent.epsilon <= 0.5 and 0.49 < private.privacy_spent_["active"].epsilon <= 0.5
    plain = VerticalLogisticRegression("plain").fit(split.X_train, split.y_train)
    assert plain.privacy_spent_ == {"active": None, "passive_0": None}
    off = VerticalLogisticRegression("hdp", noise=False).fit(split.X_train, split.y_train)
    assert off.privacy_spent_["active"] is None
