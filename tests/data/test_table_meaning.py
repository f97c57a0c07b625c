"""Tables keep their meaning (issue 37, item 3): a column of dates is a date column whether the
party's file is CSV or Parquet, and a categorical column of too many distinct values (a date or an
ID read as text) is refused by the preprocessor unless declared."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from vflsec.data import HighCardinalityError, PartyPreprocessor, read_table  # noqa: E402

N_DATES = 2888  # the outside user's Parquet date column


def _dated(n=400, seed=0):
    """A party's table whose dates are text, as pandas reads them from a CSV without parse_dates."""
    rng = np.random.default_rng(seed)
    opened = pd.Timestamp("2012-01-01") + pd.to_timedelta(rng.integers(0, 4000, n), unit="D")
    seen = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10 ** 7, n), unit="s")
    frame = pd.DataFrame({
        "customer": [f"C{i:05d}" for i in range(n)],
        "opened": opened.strftime("%Y-%m-%d").astype(object),
        "last_seen": seen.strftime("%Y-%m-%d %H:%M:%S").astype(object),
        "region": rng.choice(["north", "south", "east"], n).astype(object),
        "born": (pd.Timestamp("1950-01-01") + pd.to_timedelta(rng.integers(0, 18000, n), unit="D")),
        "x": rng.normal(size=n),
    })
    frame.loc[rng.random(n) < 0.05, "opened"] = None
    return frame


def _write_both(frame, tmp_path):
    """The same table as CSV (pandas) and as Parquet (pyarrow: text stays text, datetimes timestamps)."""
    csv_path, parquet_path = tmp_path / "party.csv", tmp_path / "party.parquet"
    frame.to_csv(csv_path, index=False, date_format="%Y-%m-%d")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet_path)
    return csv_path, parquet_path


def test_text_dates_read_the_same_from_csv_and_parquet(tmp_path):
    frame = _dated()
    csv_path, parquet_path = _write_both(frame, tmp_path)
    assert pa.types.is_string(pq.read_schema(parquet_path).field("opened").type)  # text in the file
    tables = [read_table(p, id_column="customer") for p in (csv_path, parquet_path)]
    for table in tables:
        features = table.features
        # the dates are the text's dates (pandas' own parse as the reference), missing cells missing
        for column in ("opened", "last_seen"):
            assert pd.api.types.is_datetime64_any_dtype(features[column].dtype), column
            expected = pd.to_datetime(frame[column])
            np.testing.assert_array_equal(features[column].isna().to_numpy(), expected.isna().to_numpy())
            assert (features[column].dropna().astype("datetime64[s]").tolist()
                    == expected.dropna().astype("datetime64[s]").tolist())
        assert pd.api.types.is_datetime64_any_dtype(features["born"].dtype)  # a native Parquet date stays one
        assert pd.api.types.is_string_dtype(features["region"].dtype)
    preps = [PartyPreprocessor(date_features=("days", "year", "month")).fit(t.features) for t in tables]
    assert preps[0].column_types_ == preps[1].column_types_ == {
        "opened": "date", "last_seen": "date", "region": "categorical", "born": "date", "x": "numeric"}
    names = preps[0].get_feature_names_out().tolist()
    assert names == preps[1].get_feature_names_out().tolist()
    assert {"opened_days", "opened_year", "opened_missing", "last_seen_days", "born_month"} <= set(names)
    np.testing.assert_allclose(preps[0].transform(tables[0].features), preps[1].transform(tables[1].features),
                               rtol=0, atol=1e-12)


def test_a_native_parquet_date_column_gives_what_its_csv_gives(tmp_path):
    days = np.random.default_rng(1).integers(0, 9000, 50)
    dates = pa.array(days.astype("int32"), type=pa.date32())
    table = pa.table({"id": [f"u{i}" for i in range(50)], "joined": dates, "x": np.arange(50.0)})
    pq.write_table(table, tmp_path / "p.parquet")
    table.to_pandas().to_csv(tmp_path / "p.csv", index=False)
    read = [read_table(tmp_path / f"p.{fmt}", id_column="id").features for fmt in ("csv", "parquet")]
    preps = [PartyPreprocessor().fit(f) for f in read]
    assert [p.get_feature_names_out().tolist() for p in preps] == [["joined_days", "x"]] * 2
    np.testing.assert_array_equal(preps[0].transform(read[0]), preps[1].transform(read[1]))
    # days since 1970-01-01 are the date32 values themselves
    np.testing.assert_allclose(preps[1].feature_columns_[0]["fill"], [np.median(days)])


@pytest.mark.parametrize("cells, kind", [
    (["2024-01-31", "NA", "", None, "2024-02-01"], "date"),  # CSV's missing-value words are missing
    (["2024-01-31T10:00:00Z", "2024-01-31T10:00:00+02:00"], "date"),  # zone offsets: UTC
    (["2024-01-31", "soon"], "categorical"),  # one cell that is no date: text, in CSV too
    (["31/01/2024", "01/02/2024"], "categorical"),  # not ISO: pyarrow's CSV reader keeps it text
    (["7", "8"], "categorical"),  # Parquet text numbers stay text: the file's writer chose the type
])
def test_which_parquet_text_is_a_date(tmp_path, cells, kind):
    n = len(cells)
    pq.write_table(pa.table({"id": [str(i) for i in range(n)], "c": pa.array(cells, pa.string()),
                             "x": np.arange(float(n))}), tmp_path / "t.parquet")
    features = read_table(tmp_path / "t.parquet", id_column="id").features
    assert PartyPreprocessor(cardinality_limit=None).fit(features).column_types_["c"] == kind
    if kind == "date":
        expected = pd.to_datetime(pd.Series(cells).replace({"NA": None, "": None}), utc=True, format="ISO8601")
        got = features["c"]
        assert got.isna().tolist() == expected.isna().tolist()
        got = got.dt.tz_convert("UTC") if got.dt.tz is not None else got.dt.tz_localize("UTC")
        assert got.dropna().tolist() == expected.dropna().tolist()


# ------------------------------------------------------------------ high cardinality

def _text_dates(n=6000, distinct=N_DATES, seed=0, form="%Y-%m-%d"):
    """A DataFrame whose ``signup`` dates are text (pandas' read_csv without parse_dates), ``distinct`` of them."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.permutation(np.arange(n) % distinct), unit="D")
    return pd.DataFrame({"signup": days.strftime(form).astype(object), "x": rng.normal(size=n),
                         "region": rng.choice(["north", "south"], n).astype(object)})


def test_a_2888_value_text_column_is_refused_naming_the_fix():
    frame = _text_dates()
    gaps = pd.DataFrame({"signup": [None] * 100, "x": 0.0, "region": "north"})
    frame = pd.concat([frame, gaps], ignore_index=True)  # missing cells are no value
    with pytest.raises(HighCardinalityError) as err:
        PartyPreprocessor().fit(frame)
    assert isinstance(err.value, ValueError)
    [column] = err.value.columns
    assert (column.name, column.n_distinct, column.n_rows) == ("signup", frame["signup"].nunique(), len(frame))
    assert column.n_distinct == N_DATES and column.looks_like == "date"
    text = str(err.value)
    assert "'signup' has 2888 distinct values in 6100 training rows" in text
    assert "column_types={'signup': 'date'}" in text and "high_cardinality=['signup']" in text
    assert "column_types={'signup': 'drop'}" in text and " -- " in text
    again = pickle.loads(pickle.dumps(err.value))  # as joblib's workers hand it back
    assert str(again) == text and again.columns == err.value.columns


def test_each_declaration_accepts_the_column():
    frame = _text_dates()
    as_date = PartyPreprocessor(column_types={"signup": "date"}).fit(frame)
    assert as_date.get_feature_names_out().tolist() == ["signup_days", "x", "region_north", "region_south"]
    dropped = PartyPreprocessor(column_types={"signup": "drop"}).fit(frame)
    assert "signup" not in "".join(dropped.get_feature_names_out())
    accepted = PartyPreprocessor(high_cardinality=["signup"]).fit(frame)
    assert sum(n.startswith("signup_") for n in accepted.get_feature_names_out()) == N_DATES
    pooled = PartyPreprocessor(high_cardinality=["signup"], max_categories=10).fit(frame)
    assert sum(n.startswith("signup_") for n in pooled.get_feature_names_out()) == 10
    listed = PartyPreprocessor(categories={"signup": ["2015-01-01", "2015-01-02"]}).fit(frame)
    assert sum(n.startswith("signup_") for n in listed.get_feature_names_out()) == 3  # and "(missing)"
    PartyPreprocessor(cardinality_limit=None).fit(frame)
    PartyPreprocessor(cardinality_limit=N_DATES).fit(frame)


@pytest.mark.parametrize("n_rows, n_distinct, limit, refused", [
    (1000, 100, 100, False),  # at the limit
    (1000, 101, 100, True),  # above it
    (1000, 6, 5, True),
    (40, 20, 100, False),  # two rows per value
    (39, 20, 100, True),  # fewer than two rows per value
    (30, 19, 100, False),  # under 20 values: a small table's categories
])
def test_the_limit_and_the_rows_per_value(n_rows, n_distinct, limit, refused):
    values = np.array([f"v{i}" for i in np.arange(n_rows) % n_distinct], dtype=object)
    frame = pd.DataFrame({"c": values, "x": np.arange(float(n_rows))})
    assert frame["c"].nunique() == n_distinct
    fit = lambda: PartyPreprocessor(cardinality_limit=limit).fit(frame)  # noqa: E731
    if refused:
        with pytest.raises(HighCardinalityError, match=f"'c' has {n_distinct} distinct values in {n_rows}"):
            fit()
    else:
        fit()


def test_day_month_year_text_is_refused_asking_for_iso_dates():
    frame = _text_dates(form="%d/%m/%Y")
    with pytest.raises(HighCardinalityError, match=r"write the dates as 2024-01-31 \(ISO 8601\) and declare the "
                                                  r"type \(column_types=\{'signup': 'date'\}\)") as err:
        PartyPreprocessor().fit(frame)
    assert err.value.columns[0].looks_like == "other-dates"
    with pytest.raises(ValueError, match="is not a date"):  # what the declaration alone would do
        PartyPreprocessor(column_types={"signup": "date"}).fit(frame)


def test_every_refused_column_is_named_at_once_with_what_it_looks_like():
    rng = np.random.default_rng(3)
    n = 500
    frame = pd.DataFrame({"customer": [f"C{i}" for i in range(n)],
                          "postcode": rng.integers(10000, 99999, n).astype(str).astype(object),
                          "note": rng.choice([f"text {i}" for i in range(300)], n).astype(object),
                          "region": rng.choice(["a", "b"], n).astype(object)})
    with pytest.raises(HighCardinalityError) as err:
        PartyPreprocessor().fit(frame)
    found = {c.name: c.looks_like for c in err.value.columns}
    assert found == {"customer": "id", "postcode": "numeric", "note": None}
    assert "column_types={'customer': 'id', 'postcode': 'numeric'}" in str(err.value)


@pytest.mark.parametrize("kw, error, match", [
    ({"high_cardinality": ["nope"]}, ValueError, r"\['nope'\] are declared"),
    ({"high_cardinality": ["x"]}, ValueError, "'x', which is 'numeric'"),
    ({"high_cardinality": "c"}, TypeError, "list of column names"),
    ({"high_cardinality": ["c", "c"]}, ValueError, "twice"),
    ({"cardinality_limit": 0}, ValueError, "int >= 1 or None"),
    ({"cardinality_limit": 2.5}, ValueError, "int >= 1 or None"),
])
def test_bad_parameters(kw, error, match):
    with pytest.raises(error, match=match):
        PartyPreprocessor(**kw).fit(pd.DataFrame({"c": ["a", "b"], "x": [1.0, 2.0]}))


def test_the_parameters_are_saved_and_loaded(tmp_path):
    frame = _text_dates(n=3000, distinct=150)
    pre = PartyPreprocessor(cardinality_limit=120, high_cardinality=["signup"]).fit(frame)
    pre.save(tmp_path / "p.json")
    loaded = PartyPreprocessor.load(tmp_path / "p.json")
    assert loaded.get_params()["cardinality_limit"] == 120 and loaded.get_params()["high_cardinality"] == ["signup"]
    np.testing.assert_array_equal(loaded.transform(frame), pre.transform(frame))
