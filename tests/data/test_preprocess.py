"""PartyPreprocessor: one party's raw table (numbers, text categories, missing
values, dates, an ID) to rows of norm <= 1, fitted on its training rows only,
the same transform after a JSON save/load, and scikit-learn's contract."""
from __future__ import annotations

import json
import os
import stat
import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from sklearn.base import clone  # noqa: E402 - after the importorskip
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from vflsec.data import PartyPreprocessor, load_dataset, read_table, vertical_split  # noqa: E402

TYPES = {"customer": "id", "churned": "label"}
NORM_TOL = 1e-12


def _bank(n=400, seed=0):
    """A bank's table: four Breast columns (real numbers), a text category
    that carries signal, a date, an ID, a label, and missing cells."""
    data = load_breast_cancer()
    rng = np.random.default_rng(seed)
    rows = rng.choice(data.data.shape[0], size=n, replace=True)
    label = data.target[rows]
    city = np.where(rng.random(n) < 0.7, np.where(label == 1, "lyon", "paris"),
                    rng.choice(["lyon", "paris", "nice", "metz", "brest"], size=n))
    frame = pd.DataFrame({
        "customer": [f"C{i:05d}" for i in rng.permutation(n)],
        "radius": data.data[rows, 0],
        "texture": data.data[rows, 1],
        "area": data.data[rows, 3],
        "city": city,
        "opened": pd.Timestamp("2012-01-01") + pd.to_timedelta(rng.integers(0, 4000, n), unit="D"),
        "churned": label,
    })
    frame.loc[rng.random(n) < 0.1, "texture"] = np.nan
    frame.loc[rng.random(n) < 0.05, "city"] = None
    frame.loc[rng.random(n) < 0.05, "opened"] = pd.NaT
    return frame


def _norms(Z):
    return np.sqrt(np.einsum("ij,ij->i", Z, Z))


def _clip_only(**kw):
    params = dict(column_types=TYPES, scaling="clip_only",
                  bounds={"radius": (5, 30), "texture": (9, 40), "area": (140, 2600),
                          "opened": ("2010-01-01", "2025-12-31")},
                  categories={"city": ["lyon", "paris", "nice", "metz"]})
    params.update(kw)
    return PartyPreprocessor(**params)


# ------------------------------------------------------------------ fitting

def test_types_inferred_and_declared_and_the_output_columns():
    frame = _bank()
    pre = PartyPreprocessor(column_types=TYPES).fit(frame)
    assert pre.column_types_ == {"customer": "id", "radius": "numeric", "texture": "numeric", "area": "numeric",
                                 "city": "categorical", "opened": "date", "churned": "label"}
    assert pre.n_features_in_ == 7 and pre.feature_names_in_.tolist() == list(frame.columns)
    assert pre.get_feature_names_out().tolist() == [
        "radius", "texture", "texture_missing", "area", "city_(missing)", "city_brest", "city_lyon",
        "city_metz", "city_nice", "city_paris", "opened_days", "opened_missing"]
    Z = pre.transform(frame)
    assert Z.dtype == np.float64 and Z.flags.c_contiguous and Z.shape == (400, 12)
    assert _norms(Z).max() <= 1 + NORM_TOL
    # one-hot and indicator columns stay 0/1 up to the row division by sqrt(3 + 1 + 1 attributes)
    # (in the rows the projection onto the unit ball left alone)
    inside = _norms(Z) < 1 - 1e-9
    assert inside.mean() > 0.5
    city = Z[inside][:, 4:10] * np.sqrt(5.0)
    assert set(np.round(city, 12).ravel()) == {0.0, 1.0}
    np.testing.assert_allclose(city.sum(axis=1), 1.0)  # exactly one city (or "(missing)") per row
    np.testing.assert_array_equal(Z[:, 2] > 0, frame["texture"].isna().to_numpy())


def test_text_that_looks_numeric_stays_categorical_unless_declared():
    frame = pd.DataFrame({"zip": ["01000", "02000", "01000", "75000"] * 5, "x": np.arange(20.0)})
    pre = PartyPreprocessor().fit(frame)
    assert pre.column_types_["zip"] == "categorical"
    assert "zip_01000" in pre.get_feature_names_out()
    declared = PartyPreprocessor(column_types={"zip": "numeric"}).fit(frame)
    assert declared.get_feature_names_out().tolist() == ["zip", "x"]


def test_fitted_on_the_training_rows_only():
    frame = _bank()
    train, new = frame.iloc[:300], frame.iloc[300:].copy()
    pre = PartyPreprocessor(column_types=TYPES).fit(train)
    texture = pre.feature_columns_[1]
    assert texture["name"] == "texture" and texture["fill"] == [float(train["texture"].median())]
    state = json.dumps(pre.to_dict())
    new.loc[new.index[:50], "texture"] = 1e9  # extreme new rows change nothing fitted
    Z_new = pre.transform(new)
    assert json.dumps(pre.to_dict()) == state
    assert _norms(Z_new).max() <= 1 + NORM_TOL
    # each row's transform is its own: the same row alone or among others
    np.testing.assert_array_equal(pre.transform(new.iloc[[7]]), Z_new[[7]])
    # the scaling statistics are the training rows' (radius has no missing cell: encoded as it is)
    mean = pre.to_dict()["fitted"]["zscore"]["mean"][0]
    assert mean == pytest.approx(train["radius"].mean()) and mean != pytest.approx(frame["radius"].mean())


def test_zscore_clip_is_vertical_splits_scaling_bit_for_bit():
    dataset = load_dataset("breast")
    split = vertical_split(dataset, [10, 20], seed=4)
    for party in range(2):
        names = list(split.feature_names[party])
        train = pd.DataFrame(dataset.X[split.train_index][:, split.columns[party]], columns=names)
        test = pd.DataFrame(dataset.X[split.test_index][:, split.columns[party]], columns=names)
        pre = PartyPreprocessor().fit(train)
        np.testing.assert_array_equal(pre.transform(train), split.X_train[party])
        np.testing.assert_array_equal(pre.transform(test), split.X_test[party])


def test_new_rows_with_unseen_categories_and_missing_values():
    frame = _bank()
    pre = PartyPreprocessor(column_types=TYPES).fit(frame.iloc[:300])
    names = pre.get_feature_names_out().tolist()
    city = [i for i, n in enumerate(names) if n.startswith("city_")]
    new = frame.iloc[300:304].drop(columns=["customer", "churned"]).copy()  # new rows: no ID, no label
    new["city"] = ["toulouse", None, "lyon", "lyon"]
    new["texture"] = [np.nan, 15.0, 15.0, 15.0]
    new["radius"] = [np.nan, 12.0, 12.0, 12.0]  # no missing radius in training: imputed, no indicator
    Z = pre.transform(new[list(reversed(new.columns))])  # any column order
    assert not Z[0, city].any()  # unseen category: all-zero block
    assert Z[1, names.index("city_(missing)")] > 0
    assert Z[0, names.index("texture_missing")] > 0 and Z[1, names.index("texture_missing")] == 0
    assert "radius_missing" not in names
    filled = new.fillna({"radius": pre.feature_columns_[0]["fill"][0]})
    np.testing.assert_array_equal(Z[0, names.index("radius")], pre.transform(filled)[0, names.index("radius")])


def test_rare_categories_pooled_into_other_and_unseen_ones_stay_zero():
    city = ["a"] * 10 + ["b"] * 6 + ["c"] * 2 + ["d"]
    pre = PartyPreprocessor(max_categories=3).fit(pd.DataFrame({"city": city, "x": np.arange(19.0)}))
    assert pre.get_feature_names_out().tolist() == ["city_a", "city_b", "city_(other)", "x"]
    assert pre.feature_columns_[0]["other"] == ["c", "d"]
    Z = pre.transform(pd.DataFrame({"city": ["d", "zzz"], "x": [1.0, 1.0]}))
    assert Z[0, 2] > 0 and not Z[1, :3].any()


def test_int_categories_match_when_read_back_as_float():
    pre = PartyPreprocessor(column_types={"branch": "categorical"}).fit(
        pd.DataFrame({"branch": [1, 2, 3, 2] * 5, "x": np.arange(20.0)}))
    assert pre.feature_columns_[0]["categories"] == ["1", "2", "3"]
    Z = pre.transform(pd.DataFrame({"branch": [2.0, np.nan], "x": [0.0, 0.0]}))
    assert Z[0, 1] > 0 and not Z[1, :3].any()


def test_boolean_categories_match_when_read_back_as_float():
    # read_table gives a boolean column with a missing cell as float 1.0/0.0/NaN
    pre = PartyPreprocessor(column_types={"flag": "categorical"}).fit(
        pd.DataFrame({"flag": [True, False] * 10, "x": np.arange(20.0)}))
    assert pre.get_feature_names_out().tolist() == ["flag_0", "flag_1", "x"]
    Z = pre.transform(pd.DataFrame({"flag": [1.0, 0.0, np.nan], "x": [0.0, 0.0, 0.0]}))
    assert Z[0, 1] > 0 and Z[0, 0] == 0 and Z[1, 0] > 0 and Z[1, 1] == 0 and not Z[2, :2].any()


def test_clip_only_takes_a_boolean_columns_bounds_as_0_1():
    frame = pd.DataFrame({"flag": [True, False] * 10, "x": np.arange(20.0)})
    pre = PartyPreprocessor(scaling="clip_only", bounds={"x": (0, 20)}).fit(frame)
    assert pre.get_feature_names_out().tolist() == ["flag", "flag_missing", "x", "x_missing"]
    Z = pre.transform(frame.iloc[:2]) * np.sqrt(2.0)
    np.testing.assert_allclose(Z[:, 0], [1.0, -1.0])  # True -> +1, False -> -1
    with pytest.raises(ValueError, match="needs public bounds for column 'flag'"):  # as float: not known 0/1
        PartyPreprocessor(scaling="clip_only", bounds={"x": (0, 20)}).fit(frame.astype({"flag": float}))


def test_date_features_and_date_text():
    frame = pd.DataFrame({"opened": ["2024-01-31", "2023-06-04", None], "x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="declare"):  # text is categorical unless declared
        PartyPreprocessor(scaling="clip_only", bounds={"opened": ("2020-01-01", "2030-01-01")}).fit(frame)
    pre = PartyPreprocessor(column_types={"opened": "date"}, scaling="clip_only",
                            bounds={"opened": ("2020-01-01", "2030-01-01"), "x": (0, 4)},
                            date_features=("days", "year", "month", "day_of_week"),
                            reference_date="2020-01-01").fit(frame)
    names = pre.get_feature_names_out().tolist()
    assert names == ["opened_days", "opened_year", "opened_month", "opened_day_of_week", "opened_missing",
                     "x", "x_missing"]
    Z = pre.transform(frame) * np.sqrt(5.0)  # 4 date features + x
    days_2030 = (pd.Timestamp("2030-01-01") - pd.Timestamp("2020-01-01")).days

    def unscale(z, low, high):
        return z * (high - low) / 2 + (high + low) / 2

    assert unscale(Z[0, 0], 0, days_2030) == pytest.approx((pd.Timestamp("2024-01-31")
                                                            - pd.Timestamp("2020-01-01")).days)
    assert unscale(Z[0, 1], 2020, 2030) == pytest.approx(2024)
    assert unscale(Z[0, 2], 1, 12) == pytest.approx(1)
    assert unscale(Z[1, 3], 0, 6) == pytest.approx(6)  # 2023-06-04 was a Sunday
    np.testing.assert_array_equal(Z[2, :4], 0.0)  # missing date: the bounds' midpoints
    assert Z[2, 4] == pytest.approx(1.0) and Z[0, 4] == 0.0


def test_time_zone_aware_dates_are_taken_in_utc():
    aware = pd.Series(pd.to_datetime(["2024-01-01 23:30"] * 20)).dt.tz_localize("America/New_York")
    frame = pd.DataFrame({"t": aware, "x": np.arange(20.0)})
    pre = PartyPreprocessor(date_features=("day",), scaling="clip_only", bounds={"x": (0, 20)}).fit(frame)
    Z = pre.transform(frame) * np.sqrt(2.0)
    assert Z[0, 0] * 15 + 16 == pytest.approx(2)  # 04:30 UTC on the 2nd


def test_numpy_input_names_columns_x0_x1():
    X = np.random.default_rng(1).normal(size=(50, 3))
    X[0, 1] = np.nan
    pre = PartyPreprocessor(column_types={"x2": "drop"}).fit(X)
    assert pre.n_features_in_ == 3 and not hasattr(pre, "feature_names_in_")
    assert pre.get_feature_names_out().tolist() == ["x0", "x1", "x1_missing"]
    np.testing.assert_array_equal(pre.transform(X), pre.transform(pd.DataFrame(X, columns=["x0", "x1", "x2"])))


def test_reads_a_partys_csv_through_read_table(tmp_path):
    frame = _bank(n=120)
    path = tmp_path / "bank.csv"
    frame.to_csv(path, index=False)
    table = read_table(path, id_column="customer", label_column="churned")
    pre = PartyPreprocessor().fit(table.features)
    assert pre.column_types_ == {"radius": "numeric", "texture": "numeric", "area": "numeric",
                                 "city": "categorical", "opened": "date"}
    from_frame = PartyPreprocessor(column_types=TYPES).fit(frame)
    assert pre.get_feature_names_out().tolist() == from_frame.get_feature_names_out().tolist()
    np.testing.assert_allclose(pre.transform(table.features), from_frame.transform(frame), atol=1e-12)


# ------------------------------------------------------------------ scaling

@pytest.mark.parametrize("scaling", ["zscore_clip", "clip_only"])
def test_rows_inside_the_unit_ball_also_for_outlying_new_rows(scaling):
    frame = _bank()
    pre = (_clip_only() if scaling == "clip_only" else PartyPreprocessor(column_types=TYPES)).fit(frame)
    wild = frame.copy()
    wild["radius"] = wild["radius"] * 1e6
    wild["opened"] = pd.Timestamp("2090-01-01")
    for rows in (frame, wild):
        norms = _norms(pre.transform(rows))
        assert norms.max() <= 1 + NORM_TOL
    assert np.median(_norms(pre.transform(frame))) > 0.3  # not shrunk to nothing


def test_clip_only_reads_no_statistics():
    frame = _bank()
    other = _bank(seed=5)
    other["radius"] = other["radius"] * 0.5  # other rows, other distribution, other missing cells
    a = _clip_only().fit(frame)
    b = _clip_only().fit(other.iloc[:40])
    assert a.to_dict() == b.to_dict()
    row = frame.iloc[[3]]
    np.testing.assert_array_equal(a.transform(row), b.transform(row))
    alone = _clip_only().fit(row)
    np.testing.assert_array_equal(alone.transform(row), a.transform(row))
    assert "nothing was read from the training rows" in a.privacy_note_
    # the row's transform is the declared formula: x -> (x - mid) / half, / sqrt(5 attributes)
    radius = row["radius"].iloc[0]
    assert a.transform(row)[0, 0] == pytest.approx((radius - 17.5) / 12.5 / np.sqrt(5.0))


def test_zscore_clip_says_what_it_read():
    pre = PartyPreprocessor(column_types=TYPES, max_categories=4).fit(_bank())
    note = pre.privacy_note_
    assert note.startswith("NOT covered by epsilon") and "mean and standard deviation" in note
    assert "median" in note and "categories seen in ['city'] and their frequencies" in note


@pytest.mark.parametrize("kw, match", [
    ({"bounds": {"radius": (5, 30), "texture": (9, 40), "opened": ("2010-01-01", "2025-12-31")}},
     "needs public bounds for column 'area'"),
    ({"categories": {}}, "declare them"),
    ({"impute": "median"}, "reads a statistic"),
])
def test_clip_only_refuses_what_would_read_the_data(kw, match):
    with pytest.raises(ValueError, match=match):
        _clip_only(**kw).fit(_bank())


# ------------------------------------------------------------------ saving

@pytest.mark.parametrize("scaling", ["zscore_clip", "clip_only"])
def test_saved_and_loaded_transforms_bit_identically(tmp_path, scaling):
    frame = _bank()
    kw = dict(max_categories=4, date_features=("days", "month")) if scaling == "zscore_clip" else {}
    pre = (_clip_only(**kw) if scaling == "clip_only" else PartyPreprocessor(column_types=TYPES, **kw))
    pre.fit(frame.iloc[:300])
    path = tmp_path / "bank.preprocessor.json"
    pre.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(path.read_text())  # plain JSON, numbers as lists
    assert data["format"] == "vflsec.PartyPreprocessor"
    if scaling == "zscore_clip":
        assert isinstance(data["fitted"]["zscore"]["mean"], list)
    loaded = PartyPreprocessor.load(path)
    new = frame.iloc[300:].copy()
    new.loc[new.index[:5], "city"] = "unseen"
    assert loaded.transform(new).tobytes() == pre.transform(new).tobytes()
    assert loaded.get_feature_names_out().tolist() == pre.get_feature_names_out().tolist()
    assert loaded.get_params() == PartyPreprocessor.from_dict(pre.to_dict()).get_params()
    assert loaded.privacy_note_ == pre.privacy_note_ and loaded.column_types_ == pre.column_types_
    assert loaded.to_dict() == pre.to_dict()


def test_unfitted_round_trip_and_damaged_files(tmp_path):
    pre = PartyPreprocessor(column_types=TYPES, max_categories=5)
    again = PartyPreprocessor.from_dict(json.loads(json.dumps(pre.to_dict())))
    assert again.get_params() == pre.get_params() and not hasattr(again, "feature_columns_")
    fitted = PartyPreprocessor(column_types=TYPES).fit(_bank())
    data = fitted.to_dict()
    data["fitted"]["zscore"]["mean"].pop()
    data["fitted"]["columns"][0]["fill"] = ["x"]
    assert fitted.to_dict() != data  # a copy: the fitted state is untouched
    with pytest.raises(ValueError, match="damaged"):
        PartyPreprocessor.from_dict(data)
    data = fitted.to_dict()
    data["fitted"]["zscore"]["mean"].pop()
    with pytest.raises(ValueError, match=r"damaged \(zscore needs 'mean' and 'std' lists of 12 numbers\)"):
        PartyPreprocessor.from_dict(data)
    path = tmp_path / "p.json"
    path.write_text("not json")
    with pytest.raises(ValueError, match=str(path)):
        PartyPreprocessor.load(path)
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a saved PartyPreprocessor"):
        PartyPreprocessor.load(path)


# ------------------------------------------------------------------ scikit-learn

def test_clone_get_params_and_not_fitted():
    pre = PartyPreprocessor(column_types=TYPES, scaling="zscore_clip", max_categories=3)
    params = pre.get_params()
    assert params["column_types"] is TYPES and params["max_categories"] == 3
    assert set(params) == {"column_types", "scaling", "bounds", "categories", "max_categories", "cardinality_limit",
                           "high_cardinality", "date_features", "reference_date", "impute"}
    for method in (pre.transform, pre.get_feature_names_out):
        with pytest.raises(NotFittedError):
            method(*([_bank()] if method == pre.transform else []))
    pre.fit(_bank())
    copy = clone(pre)
    assert copy.get_params() == params and not hasattr(copy, "feature_columns_")
    assert copy.set_params(max_categories=4).max_categories == 4
    with pytest.raises(TypeError):
        PartyPreprocessor({"a": "id"})  # keyword-only


def test_in_a_pipeline_with_cross_validation_and_pandas_output():
    frame = _bank()
    y = frame["churned"].to_numpy()
    pipe = make_pipeline(PartyPreprocessor(column_types=TYPES), LogisticRegression(C=10.0))
    scores = cross_val_score(pipe, frame, y, cv=5)
    majority = max(y.mean(), 1 - y.mean())
    assert scores.mean() > majority + 0.15  # the features (and the city) carry the signal
    out = PartyPreprocessor(column_types=TYPES).set_output(transform="pandas").fit_transform(frame)
    assert isinstance(out, pd.DataFrame) and out.columns[0] == "radius" and out.index.equals(frame.index)


def test_passes_scikit_learns_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # checks skipped for lack of optional back-ends say so
        check_estimator(PartyPreprocessor())


def test_an_undeclared_id_column_is_refused_or_without_a_limit_draws_a_warning():
    with pytest.raises(ValueError, match=r"'customer' has 400 distinct values.*column_types=\{'customer': 'id'\}"):
        PartyPreprocessor(column_types={"churned": "label"}).fit(_bank())
    with pytest.warns(UserWarning, match="'customer'.*declare column_types"):
        PartyPreprocessor(column_types={"churned": "label"}, cardinality_limit=None).fit(_bank())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PartyPreprocessor(column_types=TYPES).fit(_bank())


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("X, kw, error, match", [
    (pd.DataFrame({"a": []}), {}, ValueError, "no rows"),
    (pd.DataFrame(index=range(3)), {}, ValueError, "no columns"),
    ("a,b\n1,2", {}, TypeError, "DataFrame or a 2-D array"),
    (np.zeros((2, 2, 2)), {}, ValueError, "2-D"),
    (np.array([["a"]]), {}, TypeError, "must hold numbers"),
    (np.ones((2, 2), dtype=complex), {}, ValueError, "Complex data"),
    (pd.DataFrame({"a": [1.0]}), {"column_types": {"a": "text"}}, ValueError, "not a column type"),
    (pd.DataFrame({"a": [1.0]}), {"column_types": {"b": "id"}}, ValueError, r"\['b'\] are declared"),
    (pd.DataFrame({"a": [1.0]}), {"bounds": {"zz": (0, 1)}}, ValueError, "X has no such column"),
    (pd.DataFrame({"a": [1.0]}), {"column_types": {"a": "id"}}, ValueError, "no feature column"),
    (pd.DataFrame({"a": [1.0]}), {"scaling": "minmax"}, ValueError, "scaling must be one of"),
    (pd.DataFrame({"a": [1.0]}), {"bounds": {"a": (2, 1)}}, ValueError, "low < high"),
    (pd.DataFrame({"a": ["x"]}), {"bounds": {"a": (0, 1)}}, ValueError, "only numeric and date"),
    (pd.DataFrame({"a": [1.0]}), {"date_features": "days"}, TypeError, "non-empty list"),
    (pd.DataFrame({"a": [1.0]}), {"max_categories": 1}, ValueError, ">= 2"),
    (pd.DataFrame({"a": [np.nan, np.nan]}), {}, ValueError, "no value in the 2 training rows"),
    (pd.DataFrame({"a": ["1", "2x"]}), {"column_types": {"a": "numeric"}}, ValueError,
     r"column 'a', row 1: '2x' is not a number"),
    (pd.DataFrame({"a": [1.0, np.inf]}), {}, ValueError, "row 1: inf is not a finite number"),
    (pd.DataFrame({"a": [1e200, -1e200, 3.0]}), {}, ValueError, "'a': its values are too large"),
    (pd.DataFrame({"d": ["2024-01-01", "soon"]}), {"column_types": {"d": "date"}}, ValueError,
     "row 1: 'soon' is not a date"),
    (pd.DataFrame({"c": ["x", "(missing)"]}), {}, ValueError, "reserved"),
    (pd.DataFrame({0: [1.0]}), {}, TypeError, "column names must be strings"),
    (pd.DataFrame({"t": pd.to_timedelta([1, 2], unit="D")}), {}, ValueError, "cannot infer the type"),
])
def test_bad_input_gives_a_clear_error(X, kw, error, match):
    with pytest.raises(error, match=match):
        PartyPreprocessor(**kw).fit(X)


def test_transform_needs_the_fitted_feature_columns():
    pre = PartyPreprocessor(column_types=TYPES).fit(_bank())
    with pytest.raises(ValueError, match=r"lacks the feature column\(s\) \['city'\]"):
        pre.transform(_bank().drop(columns=["city"]))
    with pytest.raises(ValueError, match="not a number"):
        pre.transform(_bank().assign(radius="big"))
    with pytest.raises(ValueError, match="expecting 7 features"):
        pre.transform(np.zeros((2, 3)))
    assert pre.transform(_bank().iloc[:0]).shape == (0, 12)
