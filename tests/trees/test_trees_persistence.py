"""Saved vertical trees models (issue 37): ``save`` then ``load`` predicts identically on new rows (missing
values included) for every protection, several parties, labels of any dtype and a ``class_weight`` dict;
one JSON file, 0600, no noise seed; a damaged file is refused naming the file and the field."""
from __future__ import annotations

import json
import re
import stat
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError

from vflsec.trees import VerticalGradientBoostingClassifier
from vflsec.trees.persistence import FORMAT


def _blocks(n=700, seed=0, missing=0.1):
    """Three parties' columns, some values missing; the training rows and new rows (more missing values)."""
    X, y = make_classification(n_samples=n, n_features=9, n_informative=6, random_state=seed, flip_y=0.05)
    rng = np.random.default_rng(seed)
    X[rng.random(X.shape) < missing] = np.nan
    X[:, 8] = np.round(X[:, 8])  # a column of few distinct values
    cut = int(0.7 * n)
    split = lambda rows: [X[rows, :3], X[rows, 3:6], X[rows, 6:]]  # noqa: E731
    new = split(slice(cut, None))
    new[1][::5, 0] = np.nan  # missing where training had none too
    return split(slice(0, cut)), y[:cut], new


def _fit(protection, parts, y, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SecureBoost's 2048-bit key, a DP model's single-class warning
        return VerticalGradientBoostingClassifier(protection, **options).fit(parts, y)


CASES = {
    "plain": dict(max_iter=8, class_weight={"yes": 3.0}),
    "plain_int_labels": dict(max_iter=6, class_weight={1: 2.0, 0: 0.5}, max_leaf_nodes=None, max_depth=3),
    "secureboost": dict(max_iter=2, max_bins=16, max_leaf_nodes=4, class_weight="balanced"),
    "dp": dict(max_iter=4, epsilon=4.0, delta=1e-5, noise_seed=7, l2_regularization=1.0),
    "label_dp": dict(max_iter=4, epsilon=2.0, noise_seed=7, class_weight="balanced"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_save_then_load_predicts_identically(case, tmp_path):
    protection = case.split("_int")[0]
    if protection == "secureboost":
        pytest.importorskip("gmpy2")
    if protection in ("dp", "label_dp"):
        pytest.importorskip("dp_accounting")
    parts, y, new = _blocks(n=400 if protection == "secureboost" else 700)
    labels = y if case.endswith("int_labels") else np.where(y == 1, "yes", "no")
    model = _fit(protection, parts, labels, **CASES[case])
    path = tmp_path / "model.json"
    model.save(path)
    loaded = VerticalGradientBoostingClassifier.load(path)
    for rows in (new, parts):
        np.testing.assert_array_equal(loaded.predict_proba(rows), model.predict_proba(rows))
        np.testing.assert_array_equal(loaded.predict(rows), model.predict(rows))
    assert loaded.classes_.dtype == model.classes_.dtype and list(loaded.classes_) == list(model.classes_)
    assert loaded.party_names_ == model.party_names_ and loaded.train_loss_ == model.train_loss_
    assert loaded.privacy_spent_ == model.privacy_spent_
    expected = {**model.get_params(), "noise_seed": None}
    assert loaded.get_params() == expected
    assert clone(loaded).get_params() == expected
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT and document["params"]["noise_seed"] is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded.save(tmp_path / "again.json")  # a loaded model saves the same model again
    assert json.loads((tmp_path / "again.json").read_text())["fitted"] == document["fitted"]


def test_a_table_with_feature_names_round_trips(tmp_path):
    pd = pytest.importorskip("pandas")
    parts, y, new = _blocks()
    columns = [f"c{i}" for i in range(9)]
    table = pd.DataFrame(np.hstack(parts), columns=columns)
    new_table = pd.DataFrame(np.hstack(new), columns=columns)
    party_columns = {"insurer": columns[:3], "bank": columns[3:6], "telco": columns[6:]}
    model = VerticalGradientBoostingClassifier(max_iter=4, party_columns=party_columns).fit(table, y)
    model.save(tmp_path / "m.json")
    loaded = VerticalGradientBoostingClassifier.load(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.predict_proba(new_table), model.predict_proba(new_table))
    assert list(loaded.feature_names_in_) == columns and loaded.party_columns_ == model.party_columns_
    reordered = new_table[columns[::-1]]  # party_columns name the columns: both models pick them by name
    np.testing.assert_array_equal(loaded.predict_proba(reordered), model.predict_proba(reordered))


def test_an_unfitted_model_does_not_save(tmp_path):
    with pytest.raises(NotFittedError):
        VerticalGradientBoostingClassifier().save(tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    parts, y, _ = _blocks(n=500)
    model = VerticalGradientBoostingClassifier(max_iter=3, class_weight={1: 2.0}).fit(parts, y)
    path = tmp_path_factory.mktemp("saved") / "model.json"
    model.save(path)
    return json.loads(path.read_text())


def _set(path, value):
    def change(document):
        *head, last = path
        target = document
        for key in head:
            target = target[key]
        target[last] = value
    return change


def _drop(*path):
    def change(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


DAMAGE = [
    ("format", _set(("format",), "vflsec-glm-model"), "not a saved vflsec trees model"),
    ("version", _set(("version",), 99), "format version 99"),
    ("estimator", _set(("estimator",), "VerticalLogisticRegression"), "load it with VerticalLogisticRegression.load"),
    ("no_trees", _drop("fitted", "trees"), "incomplete (no field 'trees')"),
    ("no_params", _drop("params"), "no params/fitted sections"),
    ("thresholds", lambda d: d["fitted"]["bins"][1]["thresholds"][0].reverse(),
     "party 'passive_0': bins: the thresholds of feature 0"),
    ("has_missing", _set(("fitted", "bins", 0, "has_missing"), [True]), "party 'active': bins: has_missing"),
    ("max_bins", _set(("fitted", "bins", 2, "max_bins"), 999), "party 'passive_1': bins.max_bins"),
    ("lookup_code", lambda d: d["fitted"]["lookups"][0]["code"].__setitem__(0, 999), "which its thresholds do not"),
    ("lookup_length", lambda d: d["fitted"]["lookups"][1]["feature"].pop(), "lookup is not a lookup table"),
    ("tree_child", lambda d: d["fitted"]["trees"][0]["left"].__setitem__(0, 10 ** 6), "tree 0 has a node that"),
    ("tree_arrays", lambda d: d["fitted"]["trees"][1]["value"].pop(), "tree 1's node arrays"),
    ("tree_owner", lambda d: d["fitted"]["trees"][0]["owner"].__setitem__(0, 7), "tree 0 has a node that"),
    ("records", lambda d: d["fitted"]["lookups"][0].update(
        {k: v + v[:1] for k, v in d["fitted"]["lookups"][0].items()}), "lookups: party 'active' holds"),
    ("baseline", _set(("fitted", "baseline"), {"__float__": "nan"}), "baseline is not a finite number"),
    ("classes", _set(("fitted", "classes", "values"), [1, 1]), "classes: a model has two distinct classes"),
    ("features", _set(("fitted", "n_features_in"), 8), "bins: the parties' bins cover 9 features"),
    ("parties", _set(("fitted", "party_names"), ["active", "active", "x"]), "party_names is not"),
    ("class_weight", _set(("params", "class_weight"), {"__items__": [[1]]}), "params.class_weight"),
    ("param", _set(("params", "no_such_parameter"), 1), "no_such_parameter"),
]


@pytest.mark.parametrize("name, change, needle", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_file_is_refused_naming_the_file_and_the_field(saved, tmp_path, name, change, needle):
    document = json.loads(json.dumps(saved))
    change(document)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=re.escape(str(path))) as error:
        VerticalGradientBoostingClassifier.load(path)
    assert needle in str(error.value)


@pytest.mark.parametrize("content, needle", [(b"{not json", "invalid JSON"), (b"\xff\xfe", "not UTF-8"),
                                             (b"[1, 2]", "not a saved vflsec trees model")])
def test_a_file_that_is_not_a_model_is_refused_naming_it(tmp_path, content, needle):
    path = tmp_path / "m.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path))) as error:
        VerticalGradientBoostingClassifier.load(path)
    assert needle in str(error.value)
