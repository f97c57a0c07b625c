"""scikit-learn habits of the GLM estimators (issue 27, item 6): one 2-D table with a
party-column mapping, so cross_val_score, GridSearchCV and pipelines work; DataFrames and
feature names; classifier/regressor tags; random_state beside seed; sample_weight refused by DP fits."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from vflsec.glm import CentralDPLogisticRegression, VerticalLogisticRegression

pd = pytest.importorskip("pandas")

BANK = ["age", "income", "balance"]
INSURER = ["claims", "premium"]
PARTIES = {"bank": BANK, "insurer": INSURER}


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = np.where(X[:, 0] - X[:, 3] + 0.5 * X[:, 4] + 0.4 * rng.standard_normal(n) > 0, "churn", "stay")
    return pd.DataFrame(X, columns=BANK + INSURER), y


def test_estimators_are_classifiers_and_regression_losses_regressors():
    assert is_classifier(VerticalLogisticRegression()) and not is_regressor(VerticalLogisticRegression())
    assert is_classifier(VerticalLogisticRegression(loss="svm"))
    for loss in ("least_squares", "poisson"):
        model = VerticalLogisticRegression(loss=loss)
        assert is_regressor(model) and not is_classifier(model)
    assert is_classifier(CentralDPLogisticRegression())


def test_cross_val_score_on_one_dataframe_matches_a_manual_five_fold_loop():
    X, y = _table()
    model = VerticalLogisticRegression(protection="plain", party_columns=PARTIES)
    scores = cross_val_score(model, X, y, cv=5)
    manual = []
    for train, test in StratifiedKFold(5).split(X, y):  # what cv=5 means for a classifier
        fold = VerticalLogisticRegression(protection="plain").fit(
            [X.iloc[train][BANK], X.iloc[train][INSURER]], y[train])
        manual.append(fold.score([X.iloc[test][BANK], X.iloc[test][INSURER]], y[test]))
    np.testing.assert_array_equal(scores, manual)
    assert np.mean(scores) > 0.8


def test_cross_val_score_of_a_regression_loss_uses_plain_folds():
    X, _ = _table()
    target = X["age"].to_numpy() - X["claims"].to_numpy()
    model = VerticalLogisticRegression("plain", loss="least_squares", lr=0.5, party_columns=PARTIES)
    scores = cross_val_score(model, X, target, cv=3)
    manual = [clone(model).fit(X.iloc[tr], target[tr]).score(X.iloc[te], target[te])
              for tr, te in KFold(3).split(X)]
    np.testing.assert_array_equal(scores, manual)
    assert np.all(scores > 0.5)


def test_grid_search_over_the_learning_rate():
    X, y = _table()
    search = GridSearchCV(VerticalLogisticRegression("plain", party_columns=PARTIES), {"lr": [0.05, 2.5]}, cv=3)
    search.fit(X, y)
    for i, lr in enumerate(search.cv_results_["param_lr"]):
        expected = cross_val_score(VerticalLogisticRegression("plain", lr=lr, party_columns=PARTIES), X, y, cv=3)
        assert search.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(expected), abs=1e-12)
    assert search.best_params_ == {"lr": 2.5}  # 0.05 is far too small for 10 epochs
    best = search.best_estimator_
    assert best.party_names_ == ("bank", "insurer") and list(best.feature_names_in_) == BANK + INSURER


def test_pipeline_with_a_scaler_by_names_and_by_positions():
    X, y = _table()
    by_name = Pipeline([("scale", StandardScaler().set_output(transform="pandas")),
                        ("glm", VerticalLogisticRegression("plain", party_columns=PARTIES))]).fit(X, y)
    scaled = StandardScaler().fit_transform(X)
    manual = VerticalLogisticRegression("plain").fit([scaled[:, :3], scaled[:, 3:]], y)
    np.testing.assert_array_equal(by_name.predict(X), manual.predict([scaled[:, :3], scaled[:, 3:]]))
    for got, want in zip(by_name[-1].coef_, manual.coef_):
        np.testing.assert_array_equal(got, want)
    by_position = Pipeline([("scale", StandardScaler()),
                            ("glm", VerticalLogisticRegression("plain", party_columns={"a": [0, 1, 2], "b": [3, 4]}))])
    np.testing.assert_array_equal(by_position.fit(X.to_numpy(), y).predict(X.to_numpy()),
                                  manual.predict([scaled[:, :3], scaled[:, 3:]]))


def test_party_columns_fit_equals_the_blocks_fit_and_records_the_input():
    X, y = _table()
    table = VerticalLogisticRegression("plain", party_columns={"insurer": INSURER, "bank": BANK}).fit(X, y)
    blocks = VerticalLogisticRegression("plain").fit([X[INSURER], X[BANK]], y)
    for a, b in zip(table.coef_, blocks.coef_):
        np.testing.assert_array_equal(a, b)
    assert table.n_features_in_ == 5 and list(table.feature_names_in_) == BANK + INSURER
    assert table.party_names_ == ("insurer", "bank") and table.party_columns_ == {"insurer": [3, 4], "bank": [0, 1, 2]}
    assert blocks.party_names_ == ("active", "passive_0") and blocks.party_columns_ is None
    assert list(blocks.feature_names_in_) == INSURER + BANK and blocks.n_features_in_ == 5
    # Columns in another order are read by name; a block list predicts the same.
    shuffled = X[["premium", "balance", "age", "claims", "income"]]
    theta = table.decision_function(X)
    np.testing.assert_array_equal(table.decision_function(shuffled), theta)
    np.testing.assert_array_equal(table.decision_function([X[INSURER], X[BANK]]), theta)
    np.testing.assert_array_equal(blocks.decision_function([X[INSURER[::-1]], X[BANK]]),
                                  blocks.decision_function([X[INSURER], X[BANK]]))
    # Positions on a plain array give the same model.
    array = VerticalLogisticRegression("plain", party_columns={"insurer": [3, 4], "bank": [0, 1, 2]}).fit(
        X.to_numpy(), y)
    np.testing.assert_array_equal(array.coef_[1], table.coef_[1])
    assert not hasattr(array, "feature_names_in_") and array.n_features_in_ == 5


def test_feature_name_mismatches_and_missing_names():
    X, y = _table()
    model = VerticalLogisticRegression("plain", party_columns=PARTIES).fit(X, y)
    with pytest.raises(ValueError, match="missing premium"):
        model.predict(X.drop(columns="premium"))
    with pytest.raises(ValueError, match="not seen at fit extra"):
        model.predict(X.assign(extra=1.0))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(model.predict(X.to_numpy()), model.predict(X))
    positional = VerticalLogisticRegression("plain", party_columns={"a": [0, 1, 2], "b": [3, 4]}).fit(X.to_numpy(), y)
    with pytest.warns(UserWarning, match="fitted without feature names"):
        positional.predict(X)
    with pytest.raises(ValueError, match="X has 4 features, the model expects 5"):
        positional.predict(X.to_numpy()[:, :4])
    refit = clone(model).set_params(party_columns=None).fit([X[BANK].to_numpy(), X[INSURER].to_numpy()], y)
    assert not hasattr(refit, "feature_names_in_")  # a refit without names forgets them


@pytest.mark.parametrize("party_columns, error, match", [
    ({"bank": BANK + ["claims"], "insurer": INSURER}, ValueError, "'claims' is given to both 'bank' and 'insurer'"),
    ({"bank": BANK, "insurer": ["claims"]}, ValueError, r"1 column\(s\) no party holds \(premium\)"),
    ({"bank": BANK, "insurer": ["claims", "premiums"]}, ValueError, "names column 'premiums', which X does not have"),
    ({"bank": BANK + INSURER}, ValueError, "at least 2 parties"),
    ({"bank": BANK, "insurer": []}, ValueError, "is empty"),
    ({"bank": "age", "insurer": INSURER}, TypeError, "list of column names or indices"),
    ({"bank": [0, 1, 2], "insurer": [3, 7]}, ValueError, "column index 7"),
    ({"bank": [0, 1, 2.0], "insurer": [3, 4]}, TypeError, "names .str. or indices .int."),
    ([BANK, INSURER], TypeError, "must be a mapping"),
])
def test_party_columns_mistakes_are_named(party_columns, error, match):
    X, y = _table(n=40)
    with pytest.raises(error, match=match):
        VerticalLogisticRegression("plain", party_columns=party_columns).fit(X, y)


def test_input_form_mistakes_are_named():
    X, y = _table(n=40)
    with pytest.raises(TypeError, match="party_columns="):
        VerticalLogisticRegression("plain").fit(X, y)
    with pytest.raises(TypeError, match="leave party_columns=None"):
        VerticalLogisticRegression("plain", party_columns=PARTIES).fit([X[BANK], X[INSURER]], y)
    with pytest.raises(ValueError, match="names column 'age', but X has no column names"):
        VerticalLogisticRegression("plain", party_columns=PARTIES).fit(X.to_numpy(), y)
    text = X.assign(region=["north", "south"] * 20)
    with pytest.raises(TypeError, match="column 'region' of X.*encode it first"):
        VerticalLogisticRegression("plain", party_columns={"bank": BANK + ["region"], "insurer": INSURER}).fit(text, y)
    gap = X.copy()
    gap.loc[7, "premium"] = np.nan
    with pytest.raises(ValueError, match=r"column 'premium' of X\[1\] has a missing or infinite value .first at row 7"):
        VerticalLogisticRegression("plain").fit([gap[BANK], gap[INSURER]], y)
    twice = pd.concat([X[BANK], X[["age"]]], axis=1)
    with pytest.raises(ValueError, match=r"X\[0\] has repeated column names \(age\)"):
        VerticalLogisticRegression("plain").fit([twice, X[INSURER]], y)
    with pytest.raises(ValueError, match="could not be converted"):
        VerticalLogisticRegression("plain").fit([[[1.0, 2.0], [3.0]], X[INSURER]], y)
    flags = X.assign(flag=True)
    with pytest.raises(TypeError, match="column 'flag' of X is boolean"):
        VerticalLogisticRegression("plain", party_columns={"bank": BANK + ["flag"], "insurer": INSURER}).fit(flags, y)


def test_random_state_is_the_batch_seed_and_seed_still_works():
    X, y = _table()
    parts = [X[BANK].to_numpy(), X[INSURER].to_numpy()]
    default = VerticalLogisticRegression("plain").fit(parts, y)
    assert default.batch_seed_ == 0  # unchanged behaviour: seed 0 unless told otherwise
    by_seed = VerticalLogisticRegression("plain", seed=7).fit(parts, y)
    by_state = VerticalLogisticRegression("plain", random_state=7).fit(parts, y)
    np.testing.assert_array_equal(by_seed.coef_[0], by_state.coef_[0])
    assert by_state.batch_seed_ == 7 and not np.array_equal(by_state.coef_[0], default.coef_[0])
    same = VerticalLogisticRegression("plain", seed=7, random_state=7).fit(parts, y)
    np.testing.assert_array_equal(same.coef_[0], by_seed.coef_[0])
    drawn = VerticalLogisticRegression("plain", random_state=np.random.RandomState(3)).fit(parts, y)
    assert drawn.batch_seed_ == np.random.RandomState(3).randint(2**31 - 1)
    generated = VerticalLogisticRegression("plain", random_state=np.random.default_rng(3)).fit(parts, y)
    assert generated.batch_seed_ == np.random.default_rng(3).integers(2**31 - 1)
    with pytest.raises(ValueError, match="seed=5 and random_state=7 both"):
        VerticalLogisticRegression("plain", seed=5, random_state=7).fit(parts, y)
    for state in (np.random.RandomState(3), np.random.default_rng(3)):  # a draw conflicts with a seed too
        with pytest.raises(ValueError, match=f"seed=5 and random_state={type(state).__name__} both"):
            VerticalLogisticRegression("plain", seed=5, random_state=state).fit(parts, y)
    with pytest.raises(TypeError, match="random_state must be None, an int"):
        VerticalLogisticRegression("plain", random_state="7").fit(parts, y)


def test_clone_round_trips_the_new_parameters():
    model = VerticalLogisticRegression("hdp", random_state=4, party_columns=PARTIES, delta=1e-6)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert copy.party_columns == PARTIES and copy.party_columns is not model.party_columns
    assert set(VerticalLogisticRegression().get_params()) >= {"random_state", "seed", "party_columns", "delta"}
    central = CentralDPLogisticRegression("output_perturbation", epsilon=2.0)
    assert clone(central).get_params() == central.get_params() and central.delta is None


def test_sample_weight_is_refused_by_dp_fits_and_honoured_in_score():
    X, y = _table(n=120)
    parts = [X[BANK], X[INSURER]]
    with pytest.raises(ValueError, match="protocol 'hdp' cannot take sample_weight: its DP sensitivity bounds"):
        VerticalLogisticRegression("hdp").fit(parts, y, sample_weight=np.ones(len(y)))
    with pytest.raises(ValueError, match="does not take sample_weight"):
        CentralDPLogisticRegression("output_perturbation").fit(X, y, sample_weight=np.ones(len(y)))
    model = VerticalLogisticRegression("plain").fit(parts, y, sample_weight=None)
    assert model.score(parts, y, sample_weight=np.ones(len(y))) == pytest.approx(model.score(parts, y))
    right = model.predict(parts) == y
    weights = np.where(right, 1.0, 0.0)
    assert model.score(parts, y, sample_weight=weights) == 1.0


def test_central_estimator_takes_dataframes_and_keeps_their_names():
    X, y = _table()
    model = CentralDPLogisticRegression("output_perturbation", epsilon=5.0, noise_seed=0).fit(X, y)
    assert list(model.feature_names_in_) == BANK + INSURER and model.n_features_in_ == 5
    np.testing.assert_array_equal(model.decision_function(X[INSURER + BANK]), model.decision_function(X))
    np.testing.assert_array_equal(model.decision_function([X[BANK], X[INSURER]]), model.decision_function(X))
    with pytest.raises(ValueError, match="same order"):
        model.decision_function([X[INSURER], X[BANK]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        blocks = CentralDPLogisticRegression("output_perturbation", epsilon=5.0, noise_seed=0).fit(
            [X[BANK], X[INSURER]], y)
    np.testing.assert_array_equal(blocks.coef_, model.coef_)
    scores = cross_val_score(CentralDPLogisticRegression("output_perturbation", epsilon=5.0, noise_seed=0), X, y, cv=3)
    assert np.all(scores > 0.7)
