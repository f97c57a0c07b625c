"""A party's own CSV/Parquet table: typed columns, located errors, streaming,
align() against a pandas merge, and table files as datasets."""
from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from vflsec.data import (  # noqa: E402 - after the importorskips
    DATASETS,
    Dataset,
    PartyTable,
    TableError,
    align,
    dataset_names,
    is_dataset_name,
    load_dataset,
    loaders,
    make_synthetic,
    read_table,
    register_dataset,
    table_columns,
)
from vflsec.data._table_files import open_table_source  # noqa: E402
from vflsec.errors import CommandError  # noqa: E402

FORMATS = ("csv", "parquet")


def _write(frame, tmp_path, fmt, stem="party"):
    path = tmp_path / f"{stem}.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def _typed_frame():
    return pd.DataFrame({
        "customer": ["007", "8", "x-9", "10", "11"],
        "age": [31, 45, 22, 60, 38],
        "balance": [10.5, np.nan, -3.25, 0.0, 1e6],
        "job": ["clerk", None, "nurse", "clerk", "pilot"],
        "member": [True, False, True, True, False],
        "opened": pd.to_datetime(["2020-01-31", "2021-06-01", None, "2019-12-24", "2022-02-02"]),
        "churned": [0, 1, 1, 0, 1],
    })


# --------------------------------------------------------------------- types

@pytest.mark.parametrize("fmt", FORMATS)
def test_typed_columns_round_trip(tmp_path, fmt):
    frame = _typed_frame()
    path = _write(frame, tmp_path, fmt)
    table = read_table(path, id_column="customer", label_column="churned")
    assert isinstance(table, PartyTable) and table.path == path and table.n_rows == 5
    assert table.ids.tolist() == ["007", "8", "x-9", "10", "11"]  # text IDs: the leading zero stays
    assert table.labels.dtype == np.int64 and table.labels.tolist() == [0, 1, 1, 0, 1]
    assert table.label_classes is None
    features = table.features
    assert list(features.columns) == ["age", "balance", "job", "member", "opened"]
    assert features["age"].dtype == np.int64 and features["age"].tolist() == frame["age"].tolist()
    assert features["balance"].dtype == np.float64
    np.testing.assert_array_equal(features["balance"].to_numpy(), frame["balance"].to_numpy())  # NaN kept
    assert pd.api.types.is_string_dtype(features["job"].dtype)
    assert features["job"].isna().tolist() == [False, True, False, False, False]
    assert features["job"].dropna().tolist() == ["clerk", "nurse", "clerk", "pilot"]
    assert features["member"].dtype == np.bool_ and features["member"].tolist() == frame["member"].tolist()
    assert pd.api.types.is_datetime64_any_dtype(features["opened"].dtype)
    assert features["opened"].isna().tolist() == [False, False, True, False, False]
    assert (features["opened"].dropna().dt.strftime("%Y-%m-%d").tolist()
            == ["2020-01-31", "2021-06-01", "2019-12-24", "2022-02-02"])


def test_missing_ints_and_booleans_become_float_with_nan(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,n,flag,empty\na,1,true,\nb,,,\nc,3,false,\n")
    features = read_table(path, id_column="id").features
    assert features["n"].dtype == np.float64 and np.isnan(features["n"][1])
    assert features["flag"].dtype == np.float64
    np.testing.assert_array_equal(features["flag"].to_numpy(), [1.0, np.nan, 0.0])
    assert features["empty"].dtype == np.float64 and features["empty"].isna().all()


def test_columns_picks_features_and_no_id_column_numbers_the_rows(tmp_path):
    path = _write(_typed_frame(), tmp_path, "parquet")
    table = read_table(path, id_column=None, columns=["job", "age"])
    assert list(table.features.columns) == ["job", "age"]
    assert table.ids.tolist() == ["1", "2", "3", "4", "5"] and table.labels is None
    assert table_columns(path) == list(_typed_frame().columns)


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_labels_with_positive_label(tmp_path, fmt):
    frame = _typed_frame().assign(churned=["no", "yes", "yes", "no", "yes"])
    table = read_table(_write(frame, tmp_path, fmt), id_column="customer", label_column="churned",
                       positive_label="yes")
    assert table.labels.tolist() == [0, 1, 1, 0, 1] and table.label_classes == ("no", "yes")


def test_numeric_labels_other_than_0_1_with_positive_label(tmp_path):
    frame = _typed_frame().assign(churned=[1, 2, 2, 1, 2])
    table = read_table(_write(frame, tmp_path, "csv"), id_column="customer", label_column="churned",
                       positive_label="2")  # as a command line passes it
    assert table.labels.tolist() == [0, 1, 1, 0, 1] and table.label_classes == (1, 2)


def test_gzip_csv_and_bom(tmp_path):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\ufeffid,x,y\n1,0.5,1\n2,1.5,0\n")
    table = read_table(path, id_column="id", label_column="y")
    assert table.ids.tolist() == ["1", "2"] and table.features["x"].tolist() == [0.5, 1.5]


# --------------------------------------------------------------------- errors

def _error(path, **kw):
    kw.setdefault("id_column", "id")
    with pytest.raises(TableError) as info:
        read_table(path, **kw)
    message = str(info.value)
    assert "\n" not in message and " -- " in message
    assert str(path) in message
    return info.value


def test_missing_file_is_also_file_not_found(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError) as info:
        read_table(path, id_column="id")
    assert isinstance(info.value, TableError) and isinstance(info.value, ValueError)
    assert str(path) in str(info.value) and "check the path" in str(info.value)


def test_directory_and_unknown_suffix(tmp_path):
    (tmp_path / "d.csv").mkdir()
    assert "directory" in _error(tmp_path / "d.csv").what
    xlsx = tmp_path / "t.xlsx"
    xlsx.write_bytes(b"PK\x03\x04")
    err = _error(xlsx)
    assert ".xlsx" in err.what and all(s in err.fix for s in (".csv", ".csv.gz", ".parquet", ".pq"))


def test_parquet_bytes_named_csv_and_csv_named_parquet(tmp_path):
    parquet_as_csv = tmp_path / "bank.csv"
    _typed_frame().to_parquet(parquet_as_csv)
    err = _error(parquet_as_csv)
    assert "is a Parquet file, not CSV" in str(err) and "rename it to .parquet" in err.fix
    csv_as_parquet = tmp_path / "bank.parquet"
    csv_as_parquet.write_text("id,x\n1,2\n")
    err = _error(csv_as_parquet)
    assert "not a Parquet file" in err.what and ".csv" in err.fix


def test_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "bank.csv"
    path.write_bytes("id,city,x\n1,Paris,1\n2,Bogota,2\n3,M\xfcnchen,3\n".encode("latin-1"))
    err = _error(path)
    assert (err.row, err.line, err.column) == (3, 4, "city")
    assert "row 3 (line 4), column 'city'" in str(err) and "not UTF-8" in err.what and "UTF-8" in err.fix
    header = tmp_path / "header.csv"
    header.write_bytes("id,stra\xdfe\n1,2\n".encode("latin-1"))
    assert _error(header).line == 1


def test_no_header_and_no_rows(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert "empty" in _error(empty).what
    only_header = tmp_path / "header.csv"
    only_header.write_text("id,x\n")
    assert "no data rows" in _error(only_header).what
    data_first = tmp_path / "data.csv"
    data_first.write_text("1,2.5,3\n4,5,6\n")
    err = _error(data_first)
    assert err.line == 1 and "looks like data" in err.what and "naming the columns" in err.fix
    empty_parquet = _write(_typed_frame().iloc[:0], tmp_path, "parquet", "empty")
    assert "no data rows" in _error(empty_parquet, id_column="customer").what


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_id_or_label_column_lists_the_columns(tmp_path, fmt):
    path = _write(_typed_frame(), tmp_path, fmt)
    err = _error(path, id_column="Customer")
    assert "no ID column 'Customer'" in err.what and "'customer', 'age', 'balance'" in err.fix
    assert "did you mean 'customer'" in err.fix and "id_column=" in err.fix
    err = _error(path, id_column="customer", label_column="income")
    assert "no label column 'income'" in err.what and "label_column=" in err.fix and "'churned'" in err.fix


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_id_cell(tmp_path, fmt):
    frame = _typed_frame()
    frame.loc[2, "customer"] = None
    err = _error(_write(frame, tmp_path, fmt), id_column="customer")
    assert (err.row, err.column) == (3, "customer") and err.line == (4 if fmt == "csv" else None)
    assert "row 3" in str(err) and "column 'customer'" in str(err) and "ID is empty" in err.what


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_id_names_both_rows(tmp_path, fmt):
    frame = _typed_frame()
    frame.loc[4, "customer"] = "8"
    err = _error(_write(frame, tmp_path, fmt), id_column="customer")
    assert (err.row, err.column) == (5, "customer")
    assert "ID '8' is also in row 2" in err.what and "unique" in err.fix
    if fmt == "csv":
        assert "row 5 (line 6)" in str(err) and "row 2 (line 3)" in err.what


def test_line_numbers_count_blank_lines(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("id,x,y\n\n1,0.5,0\n\n2,0.7,\n3,0.1,1\n")
    err = _error(path, label_column="y")
    assert (err.row, err.line, err.column) == (2, 5, "y") and "label is empty" in err.what


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_label_cell(tmp_path, fmt):
    frame = _typed_frame().assign(churned=["no", "yes", "", "no", "yes"] if fmt == "parquet" else
                                  [0, 1, None, 0, 1])
    err = _error(_write(frame, tmp_path, fmt), id_column="customer", label_column="churned",
                 positive_label="yes" if fmt == "parquet" else None)
    assert (err.row, err.column) == (3, "churned") and "label is empty" in err.what and "fill in" in err.fix


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_third_label_value_names_its_row(tmp_path, fmt):
    frame = _typed_frame().assign(churned=[0, 1, 1, 2, 0])
    err = _error(_write(frame, tmp_path, fmt), id_column="customer", label_column="churned")
    assert (err.row, err.column) == (4, "churned") and "label 2 is not 0 or 1" in err.what
    assert "row 4" in str(err) and "column 'churned'" in str(err)
    text = _typed_frame().assign(churned=["no", "yes", "maybe", "no", "yes"])
    err = _error(_write(text, tmp_path, fmt, "text"), id_column="customer", label_column="churned",
                 positive_label="yes")
    assert err.row == 3 and "'maybe' is a third class" in err.what


def test_two_numeric_classes_other_than_0_1_ask_for_positive_label(tmp_path):
    frame = _typed_frame().assign(churned=[1, 2, 2, 1, 2])
    err = _error(_write(frame, tmp_path, "csv"), id_column="customer", label_column="churned")
    assert err.row == 2 and "positive_label=2" in err.fix


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_labels_need_a_positive_label_among_them(tmp_path, fmt):
    frame = _typed_frame().assign(churned=["<=50K", ">50K", ">50K", "<=50K", ">50K"])
    path = _write(frame, tmp_path, fmt)
    err = _error(path, id_column="customer", label_column="churned")
    assert err.column == "churned" and "'<=50K', '>50K'" in err.what and "positive_label=" in err.fix
    err = _error(path, id_column="customer", label_column="churned", positive_label=">50k")
    assert "'>50k' is not among the labels" in err.what and "did you mean '>50K'" in err.fix


def test_nan_and_inf_labels(tmp_path):
    parquet = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "y": pa.array([0.0, np.nan, 1.0], from_pandas=False)}),
                   parquet)
    err = _error(parquet, label_column="y")
    assert (err.row, err.column) == (2, "y") and "label is nan" in err.what
    csv_file = tmp_path / "inf.csv"
    csv_file.write_text("id,y\na,0\nb,1\nc,inf\n")
    err = _error(csv_file, label_column="y")
    assert (err.row, err.line, err.column) == (3, 4, "y") and "label is inf" in err.what


def test_csv_shape_mistakes(tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,x\n1,2\n2,3,4\n")
    err = _error(ragged)
    assert (err.row, err.line) == (2, 3) and "3 fields, the header has 2" in err.what
    semicolons = tmp_path / "semi.csv"
    semicolons.write_text("id;x\n1;2\n")
    assert "semicolons" in _error(semicolons).what
    twice = tmp_path / "twice.csv"
    twice.write_text("id,x,x\n1,2,3\n")
    assert "names column 'x' twice" in _error(twice).what


def test_missing_pyarrow_gives_the_install_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what `import pyarrow` meets without the extra
    with pytest.raises(CommandError) as info:
        read_table(tmp_path / "t.csv", id_column="id")
    assert "pyarrow" in info.value.what and "[data]" in info.value.fix


# --------------------------------------------------------------------- streaming

def _big_frame(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": [f"c{i:05d}" for i in range(n)],
        "x": rng.standard_normal(n),
        "k": rng.integers(0, 100, n),
        "cat": rng.choice(["a", "b", "c"], n),
        "y": rng.integers(0, 2, n),
    })


@pytest.mark.parametrize("fmt", FORMATS)
def test_streaming_in_batches_gives_the_one_read_result(tmp_path, fmt):
    path = _write(_big_frame(), tmp_path, fmt)
    batches = open_table_source(path, 64).read_batches(["id", "x"], ["id"])
    assert len(batches) > 5 and sum(b.num_rows for b in batches) == 1000  # it really is read in parts
    small = read_table(path, id_column="id", label_column="y", batch_rows=64)
    whole = read_table(path, id_column="id", label_column="y", batch_rows=10**7)
    np.testing.assert_array_equal(small.ids, whole.ids)
    np.testing.assert_array_equal(small.labels, whole.labels)
    pd.testing.assert_frame_equal(small.features, whole.features)
    pd.testing.assert_frame_equal(whole.features, _big_frame()[["x", "k", "cat"]], check_dtype=False)


def test_a_csv_column_that_changes_type_after_the_first_block(tmp_path):
    frame = _big_frame()
    frame["late_text"] = frame["k"].astype(str)
    frame.loc[900, "late_text"] = "unknown"
    frame["late_float"] = frame["k"].astype(str)
    frame.loc[950, "late_float"] = "2.5"
    path = _write(frame, tmp_path, "csv")
    assert len(open_table_source(path, 16).read_batches(["id"], ["id"])) > 10
    features = read_table(path, id_column="id", batch_rows=16).features
    assert pd.api.types.is_string_dtype(features["late_text"].dtype)
    assert features["late_text"].tolist() == frame["late_text"].tolist()
    assert features["late_float"].dtype == np.float64 and features["late_float"][950] == 2.5
    assert features["k"].dtype == np.int64


# --------------------------------------------------------------------- align

def _parties(seed=1):
    rng = np.random.default_rng(seed)
    universe = np.array([f"id{i}" for i in range(300)])
    frames = {}
    for name, n in (("bank", 200), ("insurer", 180), ("shop", 220)):
        ids = rng.permutation(rng.choice(universe, n, replace=False))
        frames[name] = pd.DataFrame({"id": ids, f"{name}_v": rng.standard_normal(n)})
    return frames


def test_align_matches_a_pandas_merge():
    frames = _parties()
    result = align(frames, "id")
    merged = frames["bank"].merge(frames["insurer"], on="id").merge(frames["shop"], on="id")
    merged = merged.sort_values("id").reset_index(drop=True)
    assert 0 < result.n_common == len(merged) < 180
    assert result.ids.tolist() == merged["id"].tolist() == sorted(merged["id"])
    for name, frame in result.frames.items():
        assert frame["id"].tolist() == merged["id"].tolist()
        np.testing.assert_array_equal(frame[f"{name}_v"].to_numpy(), merged[f"{name}_v"].to_numpy())
        assert result.rows_before[name] == len(frames[name])
        assert result.dropped[name] == len(frames[name]) - len(merged)


def test_align_takes_party_tables_and_matches_ids_as_text(tmp_path):
    bank = pd.DataFrame({"id": ["3", "1", "2", "9"], "a": [30.0, 10.0, 20.0, 90.0], "y": [1, 0, 1, 0]})
    table = read_table(_write(bank, tmp_path, "csv", "bank"), id_column="id", label_column="y")
    insurer = pd.DataFrame({"customer": [2, 3, 4], "b": [0.2, 0.3, 0.4]})  # integer IDs meet text IDs
    result = align({"bank": table, "insurer": insurer}, "customer")
    assert result.ids.tolist() == ["2", "3"]
    aligned_bank = result.frames["bank"]
    assert isinstance(aligned_bank, PartyTable) and aligned_bank.ids.tolist() == ["2", "3"]
    assert aligned_bank.features["a"].tolist() == [20.0, 30.0] and aligned_bank.labels.tolist() == [1, 1]
    assert result.frames["insurer"]["b"].tolist() == [0.2, 0.3]


def test_align_errors_name_the_party():
    frames = _parties()
    renamed = dict(frames, insurer=frames["insurer"].rename(columns={"id": "client"}))
    with pytest.raises(ValueError, match="party 'insurer': no ID column 'id' -- the columns are 'client'"):
        align(renamed, "id")
    frames["shop"].loc[7, "id"] = frames["shop"].loc[2, "id"]
    with pytest.raises(ValueError, match=r"party 'shop': ID '.*' is in rows 3 and 8"):
        align(frames, "id")
    with pytest.raises(ValueError, match="no ID is held by every party"):
        align({"a": pd.DataFrame({"id": ["7"]}), "b": pd.DataFrame({"id": ["007"]})}, "id")


# --------------------------------------------------------------------- datasets

@pytest.fixture
def registry():
    before = dict(loaders._REGISTERED)
    yield
    loaders._REGISTERED.clear()
    loaders._REGISTERED.update(before)


def test_register_dataset(registry):
    calls = []

    def loader(data_dir, **kw):
        calls.append((data_dir, kw))
        return make_synthetic(n_samples=50, seed=3)

    register_dataset("mine", loader)
    assert "mine" in dataset_names() and is_dataset_name("mine") and not is_dataset_name("yours")
    ds = load_dataset("mine", data_dir="somewhere", extra=1)
    assert calls == [("somewhere", {"extra": 1})] and ds.n_samples == 50
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("mine", loader)
    register_dataset("mine", lambda data_dir: "not a dataset", replace=True)
    with pytest.raises(TypeError, match="returned str"):
        load_dataset("mine")
    for bad in ("breast", "csv:x"):
        with pytest.raises(ValueError):
            register_dataset(bad, loader)
    assert DATASETS == ("breast", "adult", "credit", "synthetic", "mnist", "energy", "california_housing",
                        "diabetes")


def test_built_in_names_are_unchanged():
    np.testing.assert_array_equal(load_dataset("synthetic").X, make_synthetic().X)
    with pytest.raises(ValueError, match="unknown dataset 'nosuch'.*csv:PATH"):
        load_dataset("nosuch")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_table_file_as_a_dataset(tmp_path, fmt):
    frame = _typed_frame().assign(churned=["no", "yes", "yes", "no", "yes"])
    frame["balance"] = frame["balance"].fillna(2.0)
    frame = frame.drop(columns=["opened"])
    path = _write(frame, tmp_path, fmt)
    ds = load_dataset(f"{fmt}:{path}#id=customer&positive=yes")  # the label: the last column
    assert isinstance(ds, Dataset) and ds.name == f"{fmt}:{path}#id=customer&positive=yes"
    assert ds.y.tolist() == [0, 1, 1, 0, 1] and ds.X.dtype == np.float64 and ds.X.shape == (5, 7)
    assert ds.feature_names == ("age", "balance", "job=(missing)", "job=clerk", "job=nurse", "job=pilot", "member")
    assert ds.attributes == (("age", (0,)), ("balance", (1,)), ("job", (2, 3, 4, 5)), ("member", (6,)))
    np.testing.assert_array_equal(ds.X[:, 0], frame["age"])
    np.testing.assert_array_equal(ds.X[:, 2:6].sum(axis=1), 1.0)
    np.testing.assert_array_equal(ds.X[:, 6], frame["member"].astype(float))
    same = load_dataset(f"{fmt}:{path.name}", data_dir=tmp_path, id_column="customer", positive_label="yes",
                        drop=["job"])
    assert same.feature_names == ("age", "balance", "member")


def test_table_dataset_missing_values_and_mistakes(tmp_path):
    frame = _typed_frame()  # balance and opened have a gap, the label is named explicitly
    path = _write(frame, tmp_path, "csv")
    with pytest.raises(TableError) as info:
        load_dataset(f"csv:{path}#id=customer&label=churned")
    err = info.value
    assert (err.row, err.line, err.column) == (2, 3, "balance") and "missing=drop" in err.fix
    ds = load_dataset(f"csv:{path}#id=customer&label=churned&missing=drop")
    assert ds.n_samples == 3 and ds.y.tolist() == [0, 0, 1]
    assert ds.X[:, ds.feature_names.index("opened")].tolist() == [18292.0, 18254.0, 19025.0]  # days since 1970
    with pytest.raises(ValueError, match="is a csv file -- name it csv:"):
        load_dataset(f"parquet:{path}")
    with pytest.raises(ValueError, match="cannot read the option 'lable=churned'"):
        load_dataset(f"csv:{path}#lable=churned")
    with pytest.raises(ValueError, match="given both in the name and as a keyword"):
        load_dataset(f"csv:{path}#label=churned", label_column="churned")
    many = pd.DataFrame({"name": [f"n{i}" for i in range(250)], "y": [0, 1] * 125})
    with pytest.raises(TableError, match="250 distinct text values") as info:
        load_dataset(f"csv:{_write(many, tmp_path, 'csv', 'many')}")
    assert info.value.column == "name" and "drop=name" in info.value.fix
    assert is_dataset_name(f"csv:{path}") and is_dataset_name("parquet:x.pq")
