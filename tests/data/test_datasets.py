import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from vflsec.data import (
    PAPER_SPLITS,
    PAPER_SPLITS_AS_PUBLISHED,
    SCALINGS,
    Dataset,
    load_adult,
    load_breast,
    load_dataset,
    make_synthetic,
    vertical_split,
)


def _shared_datasets():
    env = os.environ.get("VFLSEC_DATA")
    candidates = ([Path(env)] if env else []) + [
        Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets"]  # tests/data/ -> the checkout
    for d in candidates:
        if (d / "adult" / "adult.data.gz").is_file() or (d / "adult.data").is_file():
            return d.resolve()
    return None


DATA_DIR = _shared_datasets()
needs_files = pytest.mark.skipif(
    DATA_DIR is None,
    reason="shared datasets folder not found (set VFLSEC_DATA to a folder with adult/ and credit_default/)")


@pytest.fixture(scope="module")
def adult():
    if DATA_DIR is None:
        pytest.skip("shared datasets folder not found (set VFLSEC_DATA)")
    return load_adult(data_dir=DATA_DIR)


def _all_rows_in_unit_ball(split):
    for block in split.X_train + split.X_test:
        assert block.dtype == np.float64 and block.flags.c_contiguous
        assert np.all(np.linalg.norm(block, axis=1) <= 1.0)


# ---------------------------------------------------------------- loaders

def test_breast_loads():
    ds = load_breast()
    assert ds.X.shape == (569, 30) and ds.X.dtype == np.float64
    assert set(np.unique(ds.y)) == {0, 1} and np.bincount(ds.y).tolist() == [212, 357]
    assert len(ds.attributes) == 30 and ds.name == "breast" and ds.task == "binary"
    assert load_dataset("breast").X.shape == (569, 30)


@needs_files
def test_adult_loads(adult):
    assert adult.X.shape[0] == 32561
    assert np.bincount(adult.y).tolist() == [24720, 7841]
    assert len(adult.attributes) == 14
    # numeric attributes keep their raw values; one-hot rows sum to one
    age = dict(adult.attributes)["age"]
    assert adult.X[0, age[0]] == 39.0  # first row of adult.data
    for _name, cols in adult.attributes:
        if len(cols) > 1:
            np.testing.assert_array_equal(adult.X[:, list(cols)].sum(axis=1), 1.0)
    workclass = dict(adult.attributes)["workclass"]
    unknown = adult.feature_names.index("workclass=?")
    assert unknown in workclass and adult.X[:, unknown].sum() == 1836
    # attributes cover every column once, in order
    covered = [c for _, cols in adult.attributes for c in cols]
    assert covered == list(range(adult.X.shape[1]))


@needs_files
def test_adult_splits_and_missing_drop():
    test = load_adult(data_dir=DATA_DIR, split="test", missing="drop")
    assert test.X.shape[0] == 15060
    assert not any(n.endswith("=?") for n in test.feature_names)
    both = load_dataset("adult", data_dir=DATA_DIR, split="all")
    assert both.X.shape[0] == 32561 + 16281
    assert both.feature_names == load_adult(data_dir=DATA_DIR).feature_names
    with pytest.raises(ValueError, match="split"):
        load_adult(data_dir=DATA_DIR, split="validation")
    with pytest.raises(ValueError, match="missing"):
        load_adult(data_dir=DATA_DIR, missing="impute")


@needs_files
def test_credit_loads():
    ds = load_dataset("credit", data_dir=DATA_DIR)
    assert ds.X.shape == (30000, 23)
    assert "ID" not in ds.feature_names and "default.payment.next.month" not in ds.feature_names
    assert ds.feature_names[0] == "LIMIT_BAL" and ds.y.sum() == 6636
    np.testing.assert_array_equal(ds.X[0, :5], [20000, 2, 2, 1, 24])


@needs_files
def test_files_found_through_environment_and_flat_layout(tmp_path, monkeypatch):
    with gzip.open(DATA_DIR / "adult" / "adult.data.gz", "rt") as src:
        head = "".join(src.readline() for _ in range(50))
    (tmp_path / "adult.data").write_text(head)  # flat, uncompressed
    monkeypatch.setenv("VFLSEC_DATA", str(tmp_path))
    ds = load_adult()
    assert ds.X.shape[0] == 50
    assert ds.X.shape[1] == load_adult(data_dir=DATA_DIR).X.shape[1]


def test_missing_file_error_names_dataset_and_paths(tmp_path, monkeypatch):
    monkeypatch.delenv("VFLSEC_DATA", raising=False)
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("credit", data_dir=tmp_path)
    msg = str(info.value)
    assert "credit" in msg and "VFLSEC_DATA" in msg and "--data-dir" in msg
    assert str(tmp_path / "credit_default" / "UCI_Credit_Card.csv.gz") in msg
    assert str(tmp_path / "UCI_Credit_Card.csv") in msg
    with pytest.raises(FileNotFoundError, match="adult"):
        load_adult()  # neither data_dir nor VFLSEC_DATA


def test_corrupt_adult_file_is_reported(tmp_path):
    (tmp_path / "adult.data").write_text("39, State-gov, 77516, Bachelors\n")
    with pytest.raises(ValueError, match="fields"):
        load_adult(data_dir=tmp_path)


def test_synthetic():
    ds = load_dataset("synthetic", n_samples=400, features_per_party=[3, 4], seed=5)
    assert ds.X.shape == (400, 7) and ds.coef.shape == (7,)
    assert set(np.unique(ds.y)) == {0, 1}
    again = make_synthetic(400, [3, 4], seed=5)
    np.testing.assert_array_equal(ds.X, again.X)
    np.testing.assert_array_equal(ds.y, again.y)
    # labels follow the known logistic model: its weights beat chance clearly
    acc = np.mean((ds.X @ ds.coef > 0) == ds.y)
    assert acc > 0.7
    split = vertical_split(ds, [3, 4])
    assert split.feature_names[1] == ("p1_x0", "p1_x1", "p1_x2", "p1_x3")
    with pytest.raises(ValueError, match="features_per_party"):
        make_synthetic(100, [3, 0])
    with pytest.raises(ValueError, match="n_samples"):
        make_synthetic(0)


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="breast, adult, credit, synthetic"):
        load_dataset("cifar10")
    with pytest.raises(TypeError, match="name"):
        load_dataset(3)


# ---------------------------------------------------------------- partition

def test_breast_counts_split():
    ds = load_breast()
    split = vertical_split(ds, [11, 19])
    assert [b.shape[1] for b in split.X_train] == [11, 19]
    assert [b.shape[1] for b in split.X_test] == [11, 19]
    assert split.party_names == ("active", "passive1")
    assert split.attributes[0] == ds.attribute_names[:11]
    paper = vertical_split(ds, PAPER_SPLITS["breast"])
    assert [b.shape[1] for b in paper.X_train] == [10, 20]
    # the published counts include the label column: one more than the attributes
    for name in PAPER_SPLITS:
        assert sum(PAPER_SPLITS_AS_PUBLISHED[name]) == sum(PAPER_SPLITS[name]) + 1


def test_three_parties_by_name_and_row_norms():
    ds = load_breast()
    names = list(ds.attribute_names)
    groups = [names[20:], names[:5], names[5:20]]
    split = vertical_split(ds, groups, scaling="standard", seed=3)
    assert split.party_names == ("active", "passive1", "passive2")
    assert [b.shape[1] for b in split.X_train] == [10, 5, 15]
    np.testing.assert_array_equal(split.columns[1], np.arange(5))
    _all_rows_in_unit_ball(split)
    # the divisor comes from training rows, so the largest training row sits on the sphere
    for block in split.X_train:
        assert np.max(np.linalg.norm(block, axis=1)) == pytest.approx(1.0, abs=1e-12)


def test_rows_in_unit_ball_even_for_test_rows_outside_training_range():
    ds = make_synthetic(300, [2, 2], seed=1)
    X = ds.X.copy()
    X[-5:] *= 50.0  # extreme rows; some land in the test part
    extreme = Dataset(X=X, y=ds.y, feature_names=ds.feature_names, attributes=ds.attributes,
                      name="extreme")
    for seed in range(3):
        split = vertical_split(extreme, [2, 2], seed=seed, test_size=0.5)
        _all_rows_in_unit_ball(split)


def test_rows_and_labels_consistent_with_dataset():
    ds = load_breast()
    split = vertical_split(ds, [10, 20], seed=7, scaling="minmax")
    assert len(np.intersect1d(split.train_index, split.test_index)) == 0
    assert len(split.train_index) + len(split.test_index) == 569
    np.testing.assert_array_equal(split.y_train, ds.y[split.train_index])
    np.testing.assert_array_equal(split.y_test, ds.y[split.test_index])
    # min-max then a positive divisor keeps each column's order
    col = split.columns[1][0]
    order = np.argsort(ds.X[split.train_index, col], kind="stable")
    assert np.all(np.diff(split.X_train[1][order, 0]) >= 0)


def test_stratification():
    ds = load_breast()
    split = vertical_split(ds, [10, 20], test_size=0.25, seed=11)
    overall = ds.y.mean()
    assert abs(split.y_train.mean() - overall) < 0.01
    assert abs(split.y_test.mean() - overall) < 0.01
    a = vertical_split(ds, [10, 20], seed=1)
    b = vertical_split(ds, [10, 20], seed=1)
    c = vertical_split(ds, [10, 20], seed=2)
    np.testing.assert_array_equal(a.test_index, b.test_index)
    assert not np.array_equal(a.test_index, c.test_index)


@needs_files
def test_adult_partition_keeps_one_hot_groups(adult):
    split = vertical_split(adult, PAPER_SPLITS["adult"])
    assert split.attributes[0] == ("age", "workclass", "fnlwgt", "education",
                                   "education-num", "marital-status")
    groups = dict(adult.attributes)
    for party, attrs in enumerate(split.attributes):
        expected = [c for a in attrs for c in groups[a]]
        np.testing.assert_array_equal(split.columns[party], expected)
    owner = {int(c): p for p, cols in enumerate(split.columns) for c in cols}
    for name, cols in adult.attributes:
        assert len({owner[c] for c in cols}) == 1, name
    assert sum(b.shape[1] for b in split.X_train) == adult.X.shape[1]
    _all_rows_in_unit_ball(split)


@pytest.mark.parametrize("parties, exc, match", [
    ([10, 10], ValueError, "sum to 20"),
    ([30, 0], ValueError, r"parties\[1\]"),
    ([31, -1], ValueError, r"parties\[1\]"),
    ([], ValueError, "at least one party"),
    ("10,20", TypeError, "parties"),
    ([["mean radius"], ["no such attribute"]], ValueError, "unknown attribute"),
    ([["mean radius"], []], ValueError, "no attributes"),
    ([["mean radius"], ["mean radius"]], ValueError, "given to parties"),
    ([["mean radius"], ["mean texture"]], ValueError, "assigned to no party"),
    ([10, 20.0], TypeError, "parties"),
])
def test_bad_parties(parties, exc, match):
    with pytest.raises(exc, match=match):
        vertical_split(load_breast(), parties)


def test_bad_split_arguments():
    ds = load_breast()
    with pytest.raises(ValueError, match="test_size"):
        vertical_split(ds, [10, 20], test_size=0.0)
    with pytest.raises(ValueError, match="test_size"):
        vertical_split(ds, [10, 20], test_size=1.5)
    with pytest.raises(ValueError, match="seed"):
        vertical_split(ds, [10, 20], seed=-1)
    with pytest.raises(ValueError, match="scaling"):
        vertical_split(ds, [10, 20], scaling="robust")
    with pytest.raises(ValueError, match="scaling"):
        vertical_split(ds, [10, 20], scaling=None)
    with pytest.raises(TypeError, match="dataset"):
        vertical_split(ds.X, [10, 20])


# ------------------------------------------------- per-party "zscore_clip" scaling

def _mixed(n=400, seed=0):
    """Numeric a, a 3-level one-hot attribute, heavy-tailed b, a constant
    column; parties [a, color] and [b, const] (2 attributes each)."""
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 3, size=n)
    X = np.column_stack([rng.normal(5.0, 2.0, n), np.eye(3)[level],
                         rng.lognormal(3.0, 1.5, n), np.full(n, 7.0)])
    y = (X[:, 0] + rng.normal(size=n) > 5.0).astype(np.int64)
    names = ("a", "color=r", "color=g", "color=b", "b", "const")
    attributes = (("a", (0,)), ("color", (1, 2, 3)), ("b", (4,)), ("const", (5,)))
    return Dataset(X=X, y=y, feature_names=names, attributes=attributes, name="mixed")


def test_zscore_clip_is_the_default_and_follows_its_formula():
    ds = _mixed()
    split = vertical_split(ds, [2, 2])
    again = vertical_split(ds, [2, 2], scaling="zscore_clip")
    for a, b in zip(split.X_train + split.X_test, again.X_train + again.X_test):
        np.testing.assert_array_equal(a, b)
    train = ds.X[split.train_index]
    for party, rows in ((0, split.train_index), (0, split.test_index), (1, split.train_index), (1, split.test_index)):
        cols = split.columns[party]
        raw = ds.X[np.ix_(rows, cols)]
        mean, std = train[:, cols].mean(axis=0), train[:, cols].std(axis=0)
        z = np.clip((raw - mean) / np.where(std > 0, std, 1.0), -3.0, 3.0)
        z[:, std == 0] = 0.0
        if party == 0:
            z[:, 1:] = raw[:, 1:]  # one-hot columns untouched
        z /= np.sqrt(2.0)  # two attributes per party, a one-hot one counting once
        expected = z / np.maximum(1.0, np.linalg.norm(z, axis=1))[:, None]
        got = (split.X_train if rows is split.train_index else split.X_test)[party]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # the constant column carries nothing; typical rows have norm ~1 (most not projected)
    np.testing.assert_array_equal(split.X_train[1][:, 1], 0.0)
    norms = np.linalg.norm(split.X_train[0], axis=1)
    assert 0.5 < np.median(norms) <= 1.0 and np.mean(norms < 1.0 - 1e-9) > 0.5


def test_zscore_clip_statistics_come_from_each_partys_own_training_rows():
    ds = _mixed()
    base = vertical_split(ds, [2, 2], seed=4)
    X = ds.X.copy()
    rng = np.random.default_rng(9)
    X[:, base.columns[1]] = rng.normal(1e6, 1e5, size=(len(X), 2))  # another party's data
    changed_test = base.test_index[::2]
    X[np.ix_(changed_test, [0, 4])] *= 1000.0  # test rows, both parties
    other = vertical_split(Dataset(X=X, y=ds.y, feature_names=ds.feature_names,
                                   attributes=ds.attributes, name="mixed"), [2, 2], seed=4)
    np.testing.assert_array_equal(other.train_index, base.train_index)
    # the active party's training rows and its untouched test rows scale exactly as before
    np.testing.assert_array_equal(other.X_train[0], base.X_train[0])
    np.testing.assert_array_equal(other.X_test[0][1::2], base.X_test[0][1::2])
    # and the passive party's own scaling ignores its test rows: train rows identical
    X2 = ds.X.copy()
    X2[np.ix_(base.test_index, [4])] = 1e9
    third = vertical_split(Dataset(X=X2, y=ds.y, feature_names=ds.feature_names,
                                   attributes=ds.attributes, name="mixed"), [2, 2], seed=4)
    np.testing.assert_array_equal(third.X_train[1], base.X_train[1])
    assert not np.array_equal(third.X_test[1], base.X_test[1])


def test_one_hot_columns_stay_indicators():
    ds = _mixed()
    split = vertical_split(ds, [2, 2])
    for block, rows in ((split.X_train[0], split.train_index), (split.X_test[0], split.test_index)):
        indicator = ds.X[np.ix_(rows, [1, 2, 3])]
        onehot = block[:, 1:]
        assert onehot.min() == 0.0  # not centred: zeros stay zeros
        # one shared positive value per row, where the indicator is 1: 1/sqrt(2),
        # shrunk only for rows the projection touched
        hot = onehot[indicator == 1.0]
        np.testing.assert_array_equal(onehot[indicator == 0.0], 0.0)
        inside = np.linalg.norm(block, axis=1) < 1.0 - 1e-9
        np.testing.assert_allclose(onehot[inside] * np.sqrt(2.0), indicator[inside], rtol=0, atol=1e-12)
        assert np.all(hot > 0) and np.all(hot <= 1.0 / np.sqrt(2.0) + 1e-15)


@needs_files
def test_adult_one_hot_columns_stay_indicators(adult):
    split = vertical_split(adult, PAPER_SPLITS["adult"])
    groups = dict(adult.attributes)
    for party, attrs in enumerate(split.attributes):
        scale = 1.0 / np.sqrt(len(attrs))
        position = {int(c): j for j, c in enumerate(split.columns[party])}
        for a in attrs:
            if len(groups[a]) == 1:
                continue
            cols = [position[c] for c in groups[a]]
            block = split.X_train[party][:, cols]
            raw = adult.X[np.ix_(split.train_index, list(groups[a]))]
            np.testing.assert_array_equal(block == 0.0, raw == 0.0)
            assert block.max() <= scale * (1 + 1e-12)
    _all_rows_in_unit_ball(split)


@pytest.mark.parametrize("scaling", SCALINGS)
def test_every_row_in_unit_ball_with_huge_outliers(scaling):
    ds = _mixed(n=300, seed=2)
    X = ds.X.copy()
    X[::37, 0] = 1e15  # huge outliers in train and test rows
    X[5::41, 4] = -1e150
    X[7, :] = np.array([1e150, 1, 0, 0, 1e150, 7.0])
    extreme = Dataset(X=X, y=ds.y, feature_names=ds.feature_names, attributes=ds.attributes, name="x")
    for seed in range(3):
        split = vertical_split(extreme, [2, 2], seed=seed, test_size=0.5, scaling=scaling)
        for block in split.X_train + split.X_test:
            assert np.all(np.isfinite(block))
        _all_rows_in_unit_ball(split)


def test_worst_case_rows_are_projected_exactly_into_the_ball():
    # Every z-score at the +-3 clip: ||x|| = 3 before the projection, for many
    # widths (rounding in the projection must not leave a norm at 1 + 1 ulp).
    rng = np.random.default_rng(0)
    for width in (1, 2, 3, 7, 10, 30):
        n = 200
        X = rng.normal(size=(n, width))
        X[:100] = np.sign(rng.normal(size=(100, width))) * 1e6
        y = np.arange(n) % 2
        names = tuple(f"x{i}" for i in range(width)) + ("other",)
        ds = Dataset(X=np.column_stack([X, rng.normal(size=n)]), y=y, feature_names=names,
                     attributes=tuple((nm, (i,)) for i, nm in enumerate(names)), name="w")
        split = vertical_split(ds, [width, 1], test_size=0.5)
        _all_rows_in_unit_ball(split)
        assert np.max(np.linalg.norm(split.X_train[0], axis=1)) > 1 - 1e-9


def test_clip_only_uses_no_statistics():
    ds = _mixed()
    split = vertical_split(ds, [2, 2], scaling="clip_only")
    for party in range(2):
        raw = ds.X[np.ix_(split.train_index, split.columns[party])]
        norms = np.linalg.norm(raw, axis=1)
        inside = norms <= 1.0
        np.testing.assert_array_equal(split.X_train[party][inside], raw[inside])
        np.testing.assert_allclose(split.X_train[party], raw / np.maximum(1.0, norms)[:, None], rtol=1e-13)
    _all_rows_in_unit_ball(split)
    # a row's output depends on that row only
    X = ds.X.copy()
    X[split.train_index[:50]] *= 1e6
    other = vertical_split(Dataset(X=X, y=ds.y, feature_names=ds.feature_names,
                                   attributes=ds.attributes, name="mixed"), [2, 2], scaling="clip_only")
    np.testing.assert_array_equal(other.X_train[1][50:], split.X_train[1][50:])
