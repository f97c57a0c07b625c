"""One meaning for the DP parameters of the GLM estimators (issue 27, item 5): epsilon is the
whole run's budget, delta defaults to min(1e-5, 1/(10 n)) with a warning for delta >= 1/n,
and a DP model that predicts one class for every training row says so."""
import warnings

import numpy as np
import pytest

from vflsec.dp import PrivacyWarning, default_delta
from vflsec.glm import CentralDPLogisticRegression, VerticalLogisticRegression

HE_DP = dict(k=2.0, batch_size=0.25, epochs=5, lr=5.0, noise_seed=3)


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = (X[:, 0] + X[:, 2] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return [X[:, :2], X[:, 2:]], y


@pytest.mark.parametrize("protection, extra", [("hdp", dict(noise_seed=0)), ("taylor_dp", HE_DP)])
def test_default_delta_is_the_shared_rule_and_epsilon_the_whole_run(protection, extra):
    parts, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default delta never warns
        model = VerticalLogisticRegression(protection, epsilon=8.0, **extra).fit(parts, y)
    assert model.delta is None and model.delta_ == default_delta(len(y)) == 1e-5
    for spent in model.privacy_spent_.values():
        # The guarantee of every epoch together (releases: 1 IR sequence for hdp, one per epoch for HE-DP).
        assert spent.delta == model.delta_ and 7.9 < spent.epsilon <= 8.0
    longer = VerticalLogisticRegression(protection, epsilon=8.0, **{**extra, "epochs": 10}).fit(parts, y)
    assert all(7.9 < spent.epsilon <= 8.0 for spent in longer.privacy_spent_.values())  # more epochs, same total


def test_default_delta_shrinks_with_many_rows():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20_000, 3))
    y = (X[:, 0] > 0).astype(int)
    model = CentralDPLogisticRegression("output_perturbation", epsilon=1.0, noise_seed=0).fit(X, y)
    assert model.delta_ == default_delta(20_000) == 1.0 / 200_000
    assert model.privacy_spent_.delta == model.delta_
    assert CentralDPLogisticRegression("output_perturbation", epsilon=1.0, noise_seed=0).fit(
        X[:500], y[:500]).delta_ == 1e-5


def test_an_explicit_delta_of_at_least_one_over_n_warns_but_is_used():
    parts, y = _data(n=50)
    with pytest.warns(PrivacyWarning, match=r"delta=0.05 is at least 1/n = 0.02 for n=50 rows"):
        model = VerticalLogisticRegression("hdp", epsilon=4.0, delta=0.05, noise_seed=0).fit(parts, y)
    assert model.delta_ == 0.05 and model.privacy_spent_["active"].delta == 0.05
    with pytest.warns(PrivacyWarning, match="at least 1/n"):
        CentralDPLogisticRegression("output_perturbation", delta=0.05, noise_seed=0).fit(np.hstack(parts), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        VerticalLogisticRegression("hdp", epsilon=4.0, delta=1e-3, noise_seed=0).fit(parts, y)  # below 1/n
        # No DP release: delta means nothing, so nothing to warn about.
        VerticalLogisticRegression("plain", delta=0.05).fit(parts, y)
        VerticalLogisticRegression("hdp", noise=False, delta=0.05).fit(parts, y)
    with pytest.raises(ValueError, match="delta"):
        VerticalLogisticRegression("hdp", delta=1.5).fit(parts, y)
    with pytest.raises(ValueError, match="delta"):
        CentralDPLogisticRegression(delta=0.0).fit(np.hstack(parts), y)


def _no_signal(n=200):
    """Features that carry nothing (all zero) and 80% positives: a model can only learn the base rate."""
    y = (np.arange(n) % 5 != 0).astype(int)
    return [np.zeros((n, 2)), np.zeros((n, 2))], y


def test_a_dp_model_predicting_one_class_like_the_reference_does_not_blame_the_noise():
    parts, y = _no_signal()  # nothing to learn: scikit-learn predicts the majority class too
    model = VerticalLogisticRegression("hdp", epsilon=1.0, noise_seed=0)
    with pytest.warns(PrivacyWarning, match=r"predicts the single class 1 for every training row \(its accuracy "
                                            r"0.8000 is the majority-class model's\), and so does the non-private "
                                            r"scikit-learn LogisticRegression on the same rows, so the DP noise "
                                            r"\(epsilon=1.0\) is not the cause.*class_weight='balanced'"):
        model.fit(parts, y)
    assert np.unique(model.predict(parts)).size == 1


def test_the_single_class_warning_blames_the_noise_where_the_reference_predicts_both_classes():
    from vflsec.glm.checks import warn_single_class

    y = np.array(["No"] * 6 + ["Yes"] * 4)
    with pytest.warns(PrivacyWarning, match=r"predicts the single class 'No' for every training row \(its accuracy "
                                            r"0.6000 is the majority-class model's\): at epsilon=0.5 the DP noise "
                                            r"has drowned the signal \(the reference predicts both classes on the "
                                            r"same rows\)"):
        warn_single_class(np.array(["No"] * 10), "model", 0.5, y=y, reference=("the reference", y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        warn_single_class(y, "model", 0.5, y=y, reference=("the reference", y))  # two classes: no warning


def test_a_dp_model_predicting_the_minority_class_blames_the_noise():
    parts, y = _no_signal()  # scikit-learn predicts the majority class 1; this noisy model the minority class 0
    model = VerticalLogisticRegression("taylor_dp", epsilon=1.0, **HE_DP)
    with pytest.warns(PrivacyWarning, match=r"predicts the single class 0 for every training row \(the minority "
                                            r"class: its accuracy is 0.2000\): at epsilon=1.0 the DP noise has "
                                            r"drowned the signal \(scikit-learn LogisticRegression predicts 1 on the "
                                            r"same rows\)"):
        model.fit(parts, y)


def test_a_central_dp_model_predicting_one_class_warns():
    parts, y = _no_signal()
    X = np.hstack(parts)
    with pytest.warns(PrivacyWarning, match=r"predicts the single class \d for every training row: at epsilon=1.0"):
        CentralDPLogisticRegression("output_perturbation", epsilon=1.0, noise_seed=0).fit(X, y)


def test_no_single_class_warning_without_dp_or_with_a_real_model():
    parts, y = _no_signal()
    signal_parts, signal_y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        plain = VerticalLogisticRegression("plain").fit(parts, y)  # no DP: a base-rate model is the user's call
        assert np.unique(plain.predict(parts)).size == 1
        VerticalLogisticRegression("hdp", noise=False).fit(parts, y)
        private = VerticalLogisticRegression("hdp", epsilon=8.0, noise_seed=0).fit(signal_parts, signal_y)
    assert np.unique(private.predict(signal_parts)).size == 2


def test_a_job_without_delta_gets_the_default_rule_from_its_rows():
    # What a `vflsec party` job file without delta means: the rule of the estimators, from the aligned rows.
    from vflsec.dp import default_delta
    from vflsec.glm import GLMJob

    for n in (260, 10_000, 2_000_000):
        assert GLMJob("hdp", n_samples=n).delta == default_delta(n)
    assert GLMJob("hdp", n_samples=260, delta=0.001).delta == 0.001
