"""save(path) / load(path) of the GLM estimators (issue 27, item 4): one JSON file, no pickle,
no noise seed; a reloaded model predicts exactly as the saved one."""
import json
import os
import stat
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from vflsec.glm import CentralDPLogisticRegression, VerticalLogisticRegression
from vflsec.glm.persistence import FORMAT


def _data(n=240, seed=0, labels=("no", "yes")):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    signal = X[:, 0] + X[:, 3] + 0.3 * rng.standard_normal(n) > 0
    return [X[:, :3], X[:, 3:]], np.where(signal, labels[1], labels[0])


HE_DP = dict(epsilon=10.0, delta=1e-5, k=2.0, batch_size=0.25, epochs=5, lr=5.0, noise_seed=3)
VERTICAL = {
    "plain": dict(protection="plain"),
    "plain-svm": dict(protection="plain", loss="svm", lr=0.5),
    "plain-no-intercept": dict(protection="plain", fit_intercept=False, row_norm=None),
    "hdp": dict(protection="hdp", epsilon=4.0, noise_seed=1, random_state=5),
    "taylor": dict(protection="taylor", epochs=3),
    "taylor_dp": dict(protection="taylor_dp", **HE_DP),
    "centralized": dict(protection="centralized"),
    "single_party": dict(protection="single_party"),
}


def _same_prediction(a, b, X):
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    predicted = a.predict(X)
    np.testing.assert_array_equal(predicted, b.predict(X))
    assert predicted.dtype == b.predict(X).dtype


@pytest.mark.parametrize("case", sorted(VERTICAL))
def test_vertical_model_reloads_and_predicts_identically(tmp_path, case):
    parts, y = _data()
    model = VerticalLogisticRegression(**VERTICAL[case]).fit(parts, y)
    path = tmp_path / "model.json"
    model.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    loaded = VerticalLogisticRegression.load(path)
    test_parts, _ = _data(n=100, seed=1)
    _same_prediction(model, loaded, test_parts)
    if model.loss == "logistic":
        np.testing.assert_array_equal(model.predict_proba(test_parts), loaded.predict_proba(test_parts))
    for got, want in zip(loaded.coef_, model.coef_):
        np.testing.assert_array_equal(got, want)
    assert loaded.intercept_ == model.intercept_ and loaded.classes_.tolist() == ["no", "yes"]
    assert loaded.privacy_spent_ == model.privacy_spent_
    assert (loaded.delta_, loaded.batch_size_, loaded.batch_seed_, loaded.party_names_, loaded.n_features_in_) == (
        model.delta_, model.batch_size_, model.batch_seed_, model.party_names_, model.n_features_in_)
    assert loaded.design_ == model.design_ and loaded.score(parts, y) == model.score(parts, y)
    # The parameters come back, except the noise seed, which is never saved.
    expected = {**model.get_params(), "noise_seed": None}
    assert loaded.get_params() == expected
    assert clone(loaded).get_params() == expected
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT and document["params"]["noise_seed"] is None
    assert "history_" not in document["fitted"] and "noise seeds" in document["not_saved"]
    if case in ("hdp", "taylor_dp"):
        assert all(spent is not None and spent.epsilon <= model.epsilon for spent in loaded.privacy_spent_.values())


def test_least_squares_model_reloads_its_target_scaling(tmp_path):
    parts, _ = _data()
    target = 3.0 * parts[0][:, 0] - parts[1][:, 1] + 10.0
    model = VerticalLogisticRegression("plain", loss="least_squares", lr=0.5).fit(parts, target)
    model.save(tmp_path / "ls.json")
    loaded = VerticalLogisticRegression.load(tmp_path / "ls.json")
    _same_prediction(model, loaded, parts)
    assert (loaded.y_mean_, loaded.y_scale_) == (model.y_mean_, model.y_scale_) and not hasattr(loaded, "classes_")


def test_a_dataframe_model_with_party_columns_reloads_with_its_names(tmp_path):
    pd = pytest.importorskip("pandas")
    parts, y = _data()
    X = pd.DataFrame(np.hstack(parts), columns=["age", "income", "balance", "claims", "premium"])
    columns = {"insurer": ["claims", "premium"], "bank": ["age", "income", "balance"]}
    model = VerticalLogisticRegression("plain", party_columns=columns, random_state=np.random.RandomState(0))
    model.fit(X, y)
    model.save(tmp_path / "frame.json")
    loaded = VerticalLogisticRegression.load(tmp_path / "frame.json")
    _same_prediction(model, loaded, X)
    _same_prediction(model, loaded, X[X.columns[::-1]])
    assert list(loaded.feature_names_in_) == list(X.columns) and loaded.party_columns_ == model.party_columns_
    assert loaded.party_columns == columns and loaded.random_state == model.batch_seed_  # the draw, as an int
    # Refitting the reloaded estimator reproduces the model: the same batch order.
    refit = clone(loaded).fit(X, y)
    for got, want in zip(refit.coef_, model.coef_):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("method", ["dp_sgd", "output_perturbation", "objective_perturbation"])
def test_central_model_reloads_and_predicts_identically(tmp_path, method):
    parts, y = _data(labels=(0, 1))
    extra = dict(epochs=3, batch_size=1.0) if method == "dp_sgd" else {}
    model = CentralDPLogisticRegression(method, epsilon=5.0, noise_seed=2, **extra).fit(parts, y)
    model.save(tmp_path / "central.json")
    assert stat.S_IMODE(os.stat(tmp_path / "central.json").st_mode) == 0o600
    loaded = CentralDPLogisticRegression.load(tmp_path / "central.json")
    test_parts, _ = _data(n=100, seed=1)
    _same_prediction(model, loaded, test_parts)
    np.testing.assert_array_equal(model.predict_proba(test_parts), loaded.predict_proba(test_parts))
    assert loaded.privacy_spent_ == model.privacy_spent_ and loaded.delta_ == model.delta_ == 1e-5
    assert (loaded.lam_, loaded.steps_, loaded.n_features_in_) == (model.lam_, model.steps_, 5)
    assert loaded.classes_.dtype == model.classes_.dtype and loaded.get_params()["noise_seed"] is None
    assert not hasattr(loaded, "mechanism_")


def test_load_refuses_what_is_not_its_model(tmp_path):
    parts, y = _data(n=60)
    with pytest.raises(NotFittedError):
        VerticalLogisticRegression("plain").save(tmp_path / "unfitted.json")
    VerticalLogisticRegression("plain").fit(parts, y).save(tmp_path / "vertical.json")
    with pytest.raises(ValueError, match=r"vertical.json holds a 'VerticalLogisticRegression' model -- load it with"):
        CentralDPLogisticRegression.load(tmp_path / "vertical.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"junk.json: not a saved vflsec GLM model \(invalid JSON"):
        VerticalLogisticRegression.load(tmp_path / "junk.json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="other.json: not a saved vflsec GLM model"):
        VerticalLogisticRegression.load(tmp_path / "other.json")
    (tmp_path / "binary.json").write_bytes(b"\x80\x04\x95")  # e.g. a pickle
    with pytest.raises(ValueError, match="not UTF-8"):
        VerticalLogisticRegression.load(tmp_path / "binary.json")
    document = json.loads((tmp_path / "vertical.json").read_text())
    future = dict(document, version=99)
    (tmp_path / "future.json").write_text(json.dumps(future))
    with pytest.raises(ValueError, match="format version 99"):
        VerticalLogisticRegression.load(tmp_path / "future.json")
    damaged = dict(document, fitted={k: v for k, v in document["fitted"].items() if k != "coef"})
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    with pytest.raises(ValueError, match="damaged.json: the saved model is incomplete or damaged"):
        VerticalLogisticRegression.load(tmp_path / "damaged.json")
    wrong = dict(document, fitted={**document["fitted"], "n_features_in": 9})
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="the weights cover 5 features"):
        VerticalLogisticRegression.load(tmp_path / "wrong.json")
    # What no fit produces is refused, not loaded to predict nonsense later.
    fitted = document["fitted"]
    for name, change, match in [
        ("nan", {"coef": [[{"__float__": "nan"}, 0.0, 0.0], fitted["coef"][1]]}, "finite 1-D blocks"),
        ("nested", {"coef": [[w] for w in fitted["coef"]]}, "finite 1-D blocks"),
        ("classes", {"labels": {**fitted["labels"], "classes": {"values": ["no", "yes", "maybe"], "dtype": "<U5"}}},
         "two distinct classes"),
        ("parties", {"party_names": ["active"]}, "1 party names for 2 weight blocks"),
    ]:
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(document, fitted={**fitted, **change})))
        with pytest.raises(ValueError, match=f"{name}.json: the saved model is incomplete or damaged .*{match}"):
            VerticalLogisticRegression.load(tmp_path / f"{name}.json")
    with pytest.raises(FileNotFoundError):
        VerticalLogisticRegression.load(tmp_path / "missing.json")


def test_save_never_writes_through_a_symlink_and_keeps_non_finite_parameters(tmp_path):
    parts, y = _data(n=60)
    model = VerticalLogisticRegression("plain", k=float("inf")).fit(parts, y)
    target = tmp_path / "elsewhere.json"
    target.write_text("keep")
    (tmp_path / "link.json").symlink_to(target)
    with pytest.raises(ValueError, match="symlink"):
        model.save(tmp_path / "link.json")
    assert target.read_text() == "keep"
    model.save(tmp_path / "inf.json")
    assert "Infinity" not in (tmp_path / "inf.json").read_text()  # strict JSON
    assert VerticalLogisticRegression.load(tmp_path / "inf.json").k == float("inf")


def test_privacy_spent_is_keyed_by_the_party_columns_names_and_reloads_so(tmp_path):
    pd = pytest.importorskip("pandas")
    parts, y = _data()
    X = pd.DataFrame(np.hstack(parts), columns=["age", "income", "balance", "claims", "premium"])
    columns = {"bank": ["age", "income", "balance"], "insurer": ["claims", "premium"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the few rows' delta and single-class warnings
        model = VerticalLogisticRegression("hdp", epsilon=4.0, party_columns=columns, noise_seed=1).fit(X, y)
    assert list(model.privacy_spent_) == list(model.party_names_) == ["bank", "insurer"]
    assert all(spent.epsilon <= 4.0 for spent in model.privacy_spent_.values())
    model.save(tmp_path / "names.json")
    loaded = VerticalLogisticRegression.load(tmp_path / "names.json")
    assert loaded.privacy_spent_ == model.privacy_spent_
