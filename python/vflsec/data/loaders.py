"""Tabular datasets used by the vertical-GLM experiments, encoded as float64.

Breast cancer ships with scikit-learn. Adult and Credit are read from files
(the layout of the shared datasets folder, or a flat folder), found in
``data_dir`` or else the ``VFLSEC_DATA`` environment variable. A synthetic
logistic model with known weights needs nothing. A user's own table file is
a dataset too (``"csv:PATH"``/``"parquet:PATH"``, :mod:`.table_dataset`), and
any other loader can be given a name with :func:`register_dataset`.

Every dataset records its *attributes*: the original columns before
encoding. A categorical attribute one-hot encoded into several columns stays
one attribute, so a vertical split never separates its columns.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._arrays import check_positive_int
from .dataset import Dataset, _find_file, _one_column_attributes, _read_text

__all__ = [
    "DATASETS",
    "Dataset",
    "dataset_names",
    "is_dataset_name",
    "load_adult",
    "load_breast",
    "load_credit",
    "load_dataset",
    "make_synthetic",
    "register_dataset",
]

# The built-in names (registered ones: dataset_names()).
DATASETS = ("breast", "adult", "credit", "synthetic", "mnist", "energy", "california_housing", "diabetes")
_REGISTERED: Dict[str, Callable[..., Dataset]] = {}


# --------------------------------------------------------------------- breast

def load_breast() -> Dataset:
    """Wisconsin diagnostic breast cancer (scikit-learn's bundled copy).

    569 rows, 30 real features (each its own attribute); ``y``: 0 = malignant,
    1 = benign (scikit-learn's coding).
    """
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    names = tuple(str(n) for n in raw.feature_names)
    return Dataset(
        X=np.ascontiguousarray(raw.data, dtype=np.float64),
        y=np.ascontiguousarray(raw.target, dtype=np.int64),
        feature_names=names,
        attributes=_one_column_attributes(names),
        name="breast",
    )


# --------------------------------------------------------------------- adult

# Attribute order and category lists as given in UCI's adult.names. Fixed
# lists keep the columns identical whichever file(s) are loaded.
_ADULT_ATTRIBUTES: Tuple[Tuple[str, Optional[Tuple[str, ...]]], ...] = (
    ("age", None),
    ("workclass", ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
                   "State-gov", "Without-pay", "Never-worked")),
    ("fnlwgt", None),
    ("education", ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
                   "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th",
                   "Doctorate", "5th-6th", "Preschool")),
    ("education-num", None),
    ("marital-status", ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                        "Married-spouse-absent", "Married-AF-spouse")),
    ("occupation", ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
                    "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
                    "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
                    "Armed-Forces")),
    ("relationship", ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative",
                      "Unmarried")),
    ("race", ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")),
    ("sex", ("Female", "Male")),
    ("capital-gain", None),
    ("capital-loss", None),
    ("hours-per-week", None),
    ("native-country", ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China",
                        "Cuba", "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica",
                        "Vietnam", "Mexico", "Portugal", "Ireland", "France", "Dominican-Republic",
                        "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia", "Hungary", "Guatemala",
                        "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                        "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands")),
)
# The attributes in which UCI's files contain '?' (unknown).
_ADULT_MAY_BE_MISSING = ("workclass", "occupation", "native-country")
_ADULT_SPLITS = ("train", "test", "all")
_ADULT_MISSING = ("category", "drop")


def _parse_adult(path: Path) -> Tuple[List[List[str]], List[int]]:
    rows: List[List[str]] = []
    labels: List[int] = []
    n_fields = len(_ADULT_ATTRIBUTES) + 1
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("|"):  # blank tail, adult.test's "|1x3 Cross validator"
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != n_fields:
            raise ValueError(f"{path}:{lineno}: expected {n_fields} comma-separated fields, "
                             f"got {len(fields)}")
        label = fields[-1].rstrip(".")  # adult.test writes '<=50K.'
        if label == ">50K":
            labels.append(1)
        elif label == "<=50K":
            labels.append(0)
        else:
            raise ValueError(f"{path}:{lineno}: unknown income label {fields[-1]!r}")
        rows.append(fields[:-1])
    return rows, labels


def load_adult(*, data_dir: Any = None, split: str = "train", missing: str = "category") -> Dataset:
    """UCI Adult (census income > 50K).

    ``split``: ``"train"`` (default: adult.data, 32,561 rows, the size the
    HDP-VFL paper reports), ``"test"`` (adult.test, 16,281 rows) or ``"all"``
    (both, 48,842 rows). ``missing``: ``"category"`` (default) encodes the
    unknown value '?' of workclass, occupation and native-country as its own
    one-hot column, keeping every row; ``"drop"`` removes rows with any '?'
    (30,162 training rows) and has no '?' columns.

    14 attributes: 6 numeric (raw values; scaling is per party, in
    :func:`vflsec.data.vertical_split`) and 8 categorical, one-hot encoded with
    the category lists of adult.names (105 columns, 108 with ``missing="category"``).
    ``y``: 1 for income > 50K.
    """
    if split not in _ADULT_SPLITS:
        raise ValueError(f"split must be one of {_ADULT_SPLITS}, got {split!r}")
    if missing not in _ADULT_MISSING:
        raise ValueError(f"missing must be one of {_ADULT_MISSING}, got {missing!r}")
    files = {"train": ["adult.data"], "test": ["adult.test"], "all": ["adult.data", "adult.test"]}[split]
    rows: List[List[str]] = []
    labels: List[int] = []
    for basename in files:
        path = _find_file("adult", "adult", basename, data_dir)
        r, lab = _parse_adult(path)
        rows.extend(r)
        labels.extend(lab)
    if missing == "drop":
        keep = [i for i, r in enumerate(rows) if "?" not in r]
        rows = [rows[i] for i in keep]
        labels = [labels[i] for i in keep]

    feature_names: List[str] = []
    attributes: List[Tuple[str, Tuple[int, ...]]] = []
    blocks: List[np.ndarray] = []
    columns = list(zip(*rows)) if rows else [()] * len(_ADULT_ATTRIBUTES)
    for a, (attr, categories) in enumerate(_ADULT_ATTRIBUTES):
        values = columns[a]
        start = len(feature_names)
        if categories is None:
            try:
                block = np.array([float(v) for v in values], dtype=np.float64).reshape(-1, 1)
            except ValueError:
                raise ValueError(f"adult: non-numeric value in numeric attribute {attr!r}") from None
            feature_names.append(attr)
        else:
            levels = list(categories)
            if missing == "category" and attr in _ADULT_MAY_BE_MISSING:
                levels.append("?")
            index = {c: j for j, c in enumerate(levels)}
            codes = np.empty(len(values), dtype=np.int64)
            for i, v in enumerate(values):
                if v not in index:
                    raise ValueError(f"adult: unexpected value {v!r} for attribute {attr!r}")
                codes[i] = index[v]
            block = np.zeros((len(values), len(levels)), dtype=np.float64)
            block[np.arange(len(values)), codes] = 1.0
            feature_names.extend(f"{attr}={c}" for c in levels)
        blocks.append(block)
        attributes.append((attr, tuple(range(start, len(feature_names)))))
    return Dataset(
        X=np.ascontiguousarray(np.hstack(blocks)),
        y=np.asarray(labels, dtype=np.int64),
        feature_names=tuple(feature_names),
        attributes=tuple(attributes),
        name="adult",
    )


# --------------------------------------------------------------------- credit

_CREDIT_LABEL = "default.payment.next.month"


def load_credit(*, data_dir: Any = None) -> Dataset:
    """Default of credit card clients (Taiwan), 30,000 rows.

    ``ID`` is dropped; the 23 remaining columns are numeric attributes taken
    as they are (SEX, EDUCATION, MARRIAGE and PAY_* are integer codes, kept as
    numbers as in the HDP-VFL experiments). ``y``: ``default.payment.next.month``.
    """
    path = _find_file("credit", "credit_default", "UCI_Credit_Card.csv", data_dir)
    reader = csv.reader(io.StringIO(_read_text(path)))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{path}: empty file") from None
    if _CREDIT_LABEL not in header:
        raise ValueError(f"{path}: no {_CREDIT_LABEL!r} column in the header")
    label_col = header.index(_CREDIT_LABEL)
    feature_cols = [j for j, h in enumerate(header) if j != label_col and h != "ID"]
    data = []
    for lineno, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ValueError(f"{path}:{lineno}: expected {len(header)} fields, got {len(row)}")
        try:
            data.append([float(v) for v in row])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: non-numeric value") from None
    table = np.asarray(data, dtype=np.float64).reshape(-1, len(header))
    y = table[:, label_col]
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"{path}: labels in {_CREDIT_LABEL!r} must be 0 or 1")
    names = tuple(header[j] for j in feature_cols)
    return Dataset(
        X=np.ascontiguousarray(table[:, feature_cols]),
        y=y.astype(np.int64),
        feature_names=names,
        attributes=_one_column_attributes(names),
        name="credit",
    )


# --------------------------------------------------------------------- synthetic

def make_synthetic(n_samples: int = 1000, features_per_party: Sequence[int] = (5, 5), seed: int = 0) -> Dataset:
    """A logistic model with known weights, features grouped by party.

    ``X ~ N(0, I)``; true weights ``coef ~ N(0, I) * 3 / sqrt(p)`` (a
    signal strong enough to learn, weak enough not to saturate); labels
    ``y ~ Bernoulli(sigmoid(X coef))``. Feature ``j`` of party ``P`` is named
    ``p<P>_x<j>``; each feature is its own attribute, so
    ``vertical_split(ds, list(features_per_party))`` recovers the parties.
    """
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    if isinstance(features_per_party, (str, bytes)) or not hasattr(features_per_party, "__iter__"):
        raise TypeError("features_per_party must be a sequence of positive ints")
    counts = [check_positive_int(c, f"features_per_party[{i}]") for i, c in enumerate(features_per_party)]
    if not counts:
        raise ValueError("features_per_party must name at least one party")
    seed = check_positive_int(seed, "seed", minimum=0)
    rng = np.random.default_rng(seed)
    p = sum(counts)
    X = rng.standard_normal((n_samples, p))
    coef = rng.standard_normal(p) * (3.0 / np.sqrt(p))
    prob = 1.0 / (1.0 + np.exp(-(X @ coef)))
    y = (rng.random(n_samples) < prob).astype(np.int64)
    names = tuple(f"p{party}_x{j}" for party, c in enumerate(counts) for j in range(c))
    return Dataset(X=X, y=y, feature_names=names, attributes=_one_column_attributes(names),
                   name="synthetic", coef=coef)


# --------------------------------------------------------------------- dispatch

def register_dataset(name: str, loader: Callable[..., Dataset], *, replace: bool = False) -> None:
    """Give ``loader`` a dataset name that :func:`load_dataset` (and so the
    benchmarks' ``--datasets``) accepts.

    ``loader(data_dir, **kw)`` returns a :class:`Dataset` (``data_dir``:
    :func:`load_dataset`'s, possibly None; ``kw``: its extra keywords).
    The built-in names and names with ``:`` (``csv:PATH``) cannot be taken;
    registering a name again needs ``replace=True``. Registration lasts for
    the process.
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"a dataset name is a non-empty string without surrounding spaces, got {name!r}")
    if ":" in name:
        raise ValueError(f"dataset name {name!r}: names with ':' are csv:PATH/parquet:PATH files -- choose a name "
                         "without ':'")
    if name in DATASETS:
        raise ValueError(f"{name!r} is a built-in dataset -- register the loader under another name")
    if not callable(loader):
        raise TypeError(f"loader must be callable (data_dir) -> Dataset, got {type(loader).__name__}")
    if name in _REGISTERED and not replace:
        raise ValueError(f"dataset {name!r} is already registered -- pass replace=True to replace its loader")
    _REGISTERED[name] = loader


def dataset_names() -> Tuple[str, ...]:
    """The built-in dataset names, then the registered ones."""
    return DATASETS + tuple(_REGISTERED)


def is_dataset_name(name: Any) -> bool:
    """True for a name :func:`load_dataset` takes: built in, registered, or
    ``csv:PATH``/``parquet:PATH`` (the file itself is checked when loaded)."""
    from .table_dataset import is_table_name

    return isinstance(name, str) and (name in DATASETS or name in _REGISTERED or is_table_name(name))


def load_dataset(name: str, *, data_dir: Any = None, **kw: Any) -> Dataset:
    """Load a dataset by name: ``"breast"``, ``"adult"``, ``"credit"``,
    ``"synthetic"``, ``"mnist"`` or the regression sets ``"energy"``,
    ``"california_housing"``, ``"diabetes"``; a name given by
    :func:`register_dataset`; or a table file of your own,
    ``"csv:PATH"``/``"parquet:PATH"`` with options after ``#``
    (``"csv:bank.csv#label=income&positive=>50K"``; the label is the last
    column unless named: :mod:`vflsec.data.table_dataset`).

    ``data_dir`` is used by the file-backed datasets (adult, credit; a
    relative table PATH not found in the current directory); extra keywords
    go to the loader (e.g. ``split=`` for adult, ``n_samples=`` for
    synthetic, ``label_column=`` for a table file).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    loader: Callable[..., Dataset]
    if name.startswith(("csv:", "parquet:")):
        from .table_dataset import load_table_dataset

        return load_table_dataset(name, data_dir=data_dir, **kw)
    if name in _REGISTERED:
        data = _REGISTERED[name](data_dir, **kw)
        if not isinstance(data, Dataset):
            raise TypeError(f"the loader registered as {name!r} returned {type(data).__name__}, not a "
                            "vflsec.data.Dataset")
        return data
    if name == "breast":
        loader, takes_dir = load_breast, False
    elif name == "adult":
        loader, takes_dir = load_adult, True
    elif name == "credit":
        loader, takes_dir = load_credit, True
    elif name == "synthetic":
        loader, takes_dir = make_synthetic, False
    elif name == "mnist":
        from .mnist import load_mnist as loader

        takes_dir = True
    elif name in ("energy", "california_housing", "diabetes"):
        from .regression import load_regression_dataset

        return load_regression_dataset(name, data_dir=data_dir, **kw)
    else:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(dataset_names())}, or csv:PATH / "
                         "parquet:PATH for a table file of your own")
    if takes_dir:
        return loader(data_dir=data_dir, **kw)
    return loader(**kw)  # breast and synthetic need no files; data_dir is not used
