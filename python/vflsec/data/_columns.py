"""The column work behind :class:`vflsec.data.PartyPreprocessor`.

Raw columns -> the numbers the encoder takes (numeric values, date features,
categories as text), the per-column state learned from the training rows
(imputation values, bounds, categories, indicators) as plain JSON values, and
the scikit-learn ``ColumnTransformer`` rebuilt from that state. Every mistake
in the data or the parameters is a ``ValueError``/``TypeError`` naming the
column (and the row) with the fix.
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy.sparse import issparse

from ..errors import require_extra
from ._cardinality import check_limit, check_names, checked_texts

COLUMN_TYPES = ("numeric", "categorical", "date", "id", "label", "drop")
EXCLUDED_TYPES = ("id", "label", "drop")
SCALINGS = ("zscore_clip", "clip_only")
IMPUTATIONS = ("median", "mean", "midpoint")
DATE_FEATURES = ("days", "year", "month", "day", "day_of_week")
# Public ranges of the calendar features (no declaration needed).
CALENDAR_BOUNDS = {"month": (1.0, 12.0), "day": (1.0, 31.0), "day_of_week": (0.0, 6.0)}
MISSING_CATEGORY = "(missing)"
OTHER_CATEGORY = "(other)"
# A text column with a different value in each of at least this many training
# rows is probably an ID: warn before one-hot encoding it.
_ID_LIKE_ROWS = 20


def pandas() -> Any:
    """pandas (the ``data`` extra), or CommandError with the install hint."""
    require_extra("pandas")
    import pandas as pd

    return pd


def as_frame(X: Any, pd: Any, names: Optional[List[str]]) -> Tuple[Any, bool]:
    """``(DataFrame, X was a DataFrame)``; another 2-D array of numbers gets
    the column ``names`` (default ``x0``, ``x1``, ...)."""
    if isinstance(X, pd.DataFrame):
        odd = [c for c in X.columns if not isinstance(c, str)]
        if odd:
            raise TypeError(f"X's column names must be strings, got {odd[0]!r} -- "
                            "e.g. X.columns = X.columns.astype(str)")
        if X.columns.has_duplicates:
            twice = sorted(set(X.columns[X.columns.duplicated()]))
            raise ValueError(f"X has the column(s) {twice} more than once -- give every column its own name")
        return X, True
    if issparse(X):
        raise TypeError("Sparse data was passed for X, but dense data is required -- pass X.toarray() or a "
                        "DataFrame")
    if isinstance(X, (str, bytes, dict)) or X is None:
        raise TypeError(f"X must be a pandas DataFrame or a 2-D array of numbers, got {type(X).__name__}")
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x columns), got a {array.ndim}-D array -- Reshape your data, e.g. "
                         "X.reshape(-1, 1) for one column or X.reshape(1, -1) for one row")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError("Complex data not supported -- pass the real parts")
    if names is None:
        names = [f"x{i}" for i in range(array.shape[1])]
    elif len(names) != array.shape[1]:
        raise ValueError(f"X has {array.shape[1]} features, but PartyPreprocessor is expecting {len(names)} "
                         f"features as input ({names}) -- pass a DataFrame or the same columns")
    if array.dtype == object:  # numbers in an object array stay numbers (text stays text)
        return pd.DataFrame(array, columns=names).infer_objects(), False
    if not (array.dtype == bool or np.issubdtype(array.dtype, np.number)):
        raise TypeError(f"an array X must hold numbers, got dtype {array.dtype} -- pass a pandas DataFrame for "
                        "text or date columns")
    return pd.DataFrame(array, columns=names), False


# -- single values and columns -----------------------------------------------------

def category_text(value: Any) -> str:
    """A category as text: strings as they are, whole numbers without a
    fraction (``5`` and ``5.0`` -> ``"5"``), booleans as ``"1"``/``"0"``
    (a boolean column with a missing cell is read as float 1.0/0.0/NaN),
    anything else ``str``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        real = float(value)
        return str(int(real)) if math.isfinite(real) and real.is_integer() else repr(real)
    return str(value)


def _row(series: Any, at: int) -> str:
    return f"row {series.index[at]!r}"


def category_texts(series: Any, name: str) -> np.ndarray:
    """One column's categories as text (object array), missing values as
    ``MISSING_CATEGORY``."""
    missing = np.asarray(series.isna().to_numpy(), dtype=bool)
    values = series.to_numpy(dtype=object)
    texts = np.asarray([MISSING_CATEGORY if gone else category_text(v) for v, gone in zip(values, missing)],
                       dtype=object)
    for reserved in (MISSING_CATEGORY, OTHER_CATEGORY):
        hit = np.flatnonzero((texts == reserved) & ~missing)
        if hit.size:
            raise ValueError(f"column {name!r}, {_row(series, int(hit[0]))}: the value {reserved!r} is reserved "
                             "(missing and pooled categories) -- rename it")
    return texts


def _first_bad(series: Any, bad: np.ndarray) -> Tuple[str, str]:
    """Where the first bad cell is, and its value as the user wrote it."""
    at = int(np.flatnonzero(bad)[0])
    value = series.iloc[at]
    return _row(series, at), repr(value.item() if isinstance(value, np.generic) else value)


def numeric_values(series: Any, name: str, pd: Any) -> np.ndarray:
    """One numeric column as float64 with NaN for missing values (text that
    is not a number, and infinities, are errors)."""
    from pandas.api import types as pdt

    if pdt.is_datetime64_any_dtype(series) or pdt.is_timedelta64_dtype(series):
        raise ValueError(f"column {name!r} holds dates/times ({series.dtype}), not numbers -- "
                         f"declare it 'date' (column_types={{{name!r}: 'date'}}) or 'drop'")
    if pdt.is_complex_dtype(series):
        raise ValueError(f"column {name!r} holds complex numbers -- drop it or pass its real parts")
    if pdt.is_bool_dtype(series) or (pdt.is_numeric_dtype(series) and not isinstance(series.dtype,
                                                                                       pd.CategoricalDtype)):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        converted = pd.to_numeric(series.astype(object), errors="coerce")
        bad = np.asarray(converted.isna().to_numpy() & series.notna().to_numpy(), dtype=bool)
        if bad.any():
            row, value = _first_bad(series, bad)
            raise ValueError(f"column {name!r}, {row}: {value} is not a number -- fix the cell, leave it "
                             "empty (missing) or declare the column 'categorical'")
        values = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        row, value = _first_bad(series, infinite)
        raise ValueError(f"column {name!r}, {row}: {value} is not a finite number -- fix the cell or leave "
                         "it empty (missing)")
    return np.asarray(values, dtype=np.float64)


def date_values(series: Any, name: str, pd: Any) -> Any:
    """One date column as naive datetime64 (UTC for time-zone aware values),
    NaT for missing values; text that is not a date is an error."""
    from pandas.api import types as pdt

    if pdt.is_datetime64_any_dtype(series):
        if getattr(series.dt, "tz", None) is not None:
            return series.dt.tz_convert("UTC").dt.tz_localize(None)
        return series
    if pdt.is_bool_dtype(series) or pdt.is_numeric_dtype(series):
        raise ValueError(f"column {name!r} holds numbers ({series.dtype}), not dates -- declare it 'numeric', "
                         "or pass dates or ISO date strings (2024-01-31)")
    parsed = pd.to_datetime(series.astype(object), errors="coerce", utc=True)
    bad = np.asarray(parsed.isna().to_numpy() & series.notna().to_numpy(), dtype=bool)
    if bad.any():
        row, value = _first_bad(series, bad)
        raise ValueError(f"column {name!r}, {row}: {value} is not a date -- fix the cell (e.g. 2024-01-31), "
                         "leave it empty (missing) or declare the column 'categorical'")
    return parsed.dt.tz_localize(None)


def _days(dates: Any, reference: Any, pd: Any) -> Any:
    return (dates - reference) / pd.Timedelta(days=1)


def date_feature(dates: Any, feature: str, reference: Any, pd: Any) -> np.ndarray:
    """One date feature of a date column (float64, NaN where missing)."""
    if feature == "days":
        values = _days(dates, reference, pd)
    else:
        values = getattr(dates.dt, feature)
    return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)


def timestamp(value: Any, pd: Any, what: str) -> Any:
    """``value`` as a naive pandas Timestamp (UTC for aware ones)."""
    if isinstance(value, (bool, np.bool_, numbers.Number)):
        raise TypeError(f"{what} must be a date or an ISO date string, got {value!r}")
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {value!r} is not a date ({exc}) -- e.g. '2024-01-31'") from None
    if stamp is pd.NaT:
        raise ValueError(f"{what} must be a date, got a missing value")
    return stamp.tz_convert("UTC").tz_localize(None) if stamp.tz is not None else stamp


def infer_type(series: Any, name: str, pd: Any) -> str:
    """A column's type from its dtype (PartyPreprocessor's ``column_types``)."""
    from pandas.api import types as pdt

    if isinstance(series.dtype, pd.CategoricalDtype):
        return "categorical"
    if pdt.is_bool_dtype(series) or (pdt.is_numeric_dtype(series) and not pdt.is_complex_dtype(series)):
        return "numeric"
    if pdt.is_datetime64_any_dtype(series):
        return "date"
    if pdt.is_string_dtype(series) or pdt.is_object_dtype(series):
        return "categorical"
    raise ValueError(f"cannot infer the type of column {name!r} (dtype {series.dtype}) -- declare it: "
                     f"column_types={{{name!r}: ...}} with one of {COLUMN_TYPES}")


# -- parameters ----------------------------------------------------------------------

def _mapping(value: Any, what: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping column -> value (dict) or None, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"{what}: column names are strings, got {key!r}")
    return dict(value)


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_list(value: Any) -> bool:
    """A list, tuple or 1-D array (not a string)."""
    return (isinstance(value, Sequence) and not isinstance(value, (str, bytes))) or (
        isinstance(value, np.ndarray) and value.ndim == 1)


@dataclass(frozen=True)
class Params:
    """PartyPreprocessor's parameters, checked (:func:`check_params`)."""

    scaling: str
    column_types: Dict[str, str]
    bounds: Dict[str, Tuple[Any, Any]]  # floats, or naive Timestamps for date columns
    categories: Dict[str, List[str]]
    max_categories: Optional[int]
    cardinality_limit: Optional[int]
    high_cardinality: Tuple[str, ...]
    date_features: Tuple[str, ...]
    reference: Any
    reference_text: str
    impute: str
    impute_given: Optional[str]

    def as_json(self) -> Dict[str, Any]:
        """The parameters as JSON values (``PartyPreprocessor(**these)``)."""
        def bound(value: Any) -> Any:
            return value if _real(value) else value.isoformat()

        return {
            "column_types": dict(self.column_types) or None,
            "scaling": self.scaling,
            "bounds": {k: [bound(lo), bound(hi)] for k, (lo, hi) in self.bounds.items()} or None,
            "categories": {k: list(v) for k, v in self.categories.items()} or None,
            "max_categories": self.max_categories,
            "cardinality_limit": self.cardinality_limit,
            "high_cardinality": list(self.high_cardinality) or None,
            "date_features": list(self.date_features),
            "reference_date": self.reference_text,
            "impute": self.impute_given,
        }


def check_params(model: Any, pd: Any) -> Params:
    """The model's parameters checked and normalised (errors say the fix)."""
    scaling = model.scaling
    if not isinstance(scaling, str) or scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    column_types = _mapping(model.column_types, "column_types")
    for name, kind in column_types.items():
        if not isinstance(kind, str) or kind not in COLUMN_TYPES:
            raise ValueError(f"column_types[{name!r}] = {kind!r} is not a column type -- use one of {COLUMN_TYPES}")
    bounds: Dict[str, Tuple[Any, Any]] = {}
    for name, pair in _mapping(model.bounds, "bounds").items():
        if not _is_list(pair) or len(pair) != 2:
            raise TypeError(f"bounds[{name!r}] must be a pair (low, high), got {pair!r}")
        low, high = pair
        if _real(low) and _real(high):
            low, high = float(low), float(high)
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"bounds[{name!r}] must be finite, got {pair!r}")
        else:
            low = timestamp(low, pd, f"bounds[{name!r}]")
            high = timestamp(high, pd, f"bounds[{name!r}]")
        if not low < high:
            raise ValueError(f"bounds[{name!r}] = {pair!r} needs low < high")
        bounds[name] = (low, high)
    categories: Dict[str, List[str]] = {}
    for name, values in _mapping(model.categories, "categories").items():
        if not _is_list(values) or len(values) == 0:
            raise TypeError(f"categories[{name!r}] must be a non-empty list of values, got {values!r}")
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
            raise ValueError(f"categories[{name!r}] holds a missing value -- leave it out: a missing value is "
                             "always a category of its own")
        texts = [category_text(v) for v in values]
        twice = sorted(t for t, n in Counter(texts).items() if n > 1)
        if twice:
            raise ValueError(f"categories[{name!r}] lists {twice[0]!r} twice (values are compared as text)")
        reserved = [t for t in texts if t in (MISSING_CATEGORY, OTHER_CATEGORY)]
        if reserved:
            raise ValueError(f"categories[{name!r}]: {reserved[0]!r} is reserved -- leave it out")
        categories[name] = texts
    max_categories = model.max_categories
    if max_categories is not None:
        if not isinstance(max_categories, numbers.Integral) or isinstance(max_categories, (bool, np.bool_)):
            raise TypeError(f"max_categories must be an int >= 2 or None, got {max_categories!r}")
        if max_categories < 2:
            raise ValueError(f"max_categories must be >= 2 (one kept category and '(other)'), got {max_categories}")
        max_categories = int(max_categories)
    features = model.date_features
    if not _is_list(features) or len(features) == 0:
        raise TypeError(f"date_features must be a non-empty list drawn from {DATE_FEATURES}, e.g. ('days',), "
                        f"got {features!r}")
    for feature in features:
        if feature not in DATE_FEATURES:
            raise ValueError(f"date_features: {feature!r} is not one of {DATE_FEATURES}")
    if len(set(features)) != len(features):
        raise ValueError(f"date_features lists a feature twice: {list(features)}")
    reference = timestamp(model.reference_date, pd, "reference_date")
    impute = model.impute
    if impute is not None and impute not in IMPUTATIONS:
        raise ValueError(f"impute must be one of {IMPUTATIONS} or None, got {impute!r}")
    if scaling == "clip_only" and impute in ("median", "mean"):
        raise ValueError(f"impute={impute!r} reads a statistic of the training rows, which scaling='clip_only' "
                         "never does -- use impute='midpoint' (or None)")
    return Params(
        scaling=scaling, column_types=column_types, bounds=bounds, categories=categories,
        max_categories=max_categories, cardinality_limit=check_limit(model.cardinality_limit),
        high_cardinality=tuple(check_names(model.high_cardinality)), date_features=tuple(features), reference=reference,
        reference_text=model.reference_date if isinstance(model.reference_date, str) else reference.isoformat(),
        impute=impute or ("median" if scaling == "zscore_clip" else "midpoint"), impute_given=impute)


# -- learning the per-column state ------------------------------------------------------

def column_values(series: Any, column: Dict[str, Any], pd: Any) -> List[np.ndarray]:
    """A numeric or date column's value columns (float64, NaN where missing),
    clipped to their bounds."""
    if column["type"] == "numeric":
        raw = [numeric_values(series, column["name"], pd)]
    else:
        dates = date_values(series, column["name"], pd)
        reference = pd.Timestamp(column["reference"])
        raw = [date_feature(dates, f, reference, pd) for f in column["features"]]
    return [v if b is None else np.clip(v, b[0], b[1]) for v, b in zip(raw, column["bounds"])]


def _value_bounds(name: str, kind: str, params: Params, pd: Any, boolean: bool) -> List[Optional[List[float]]]:
    declared = params.bounds.get(name)
    if kind == "numeric":
        if declared is not None and not _real(declared[0]):
            raise ValueError(f"bounds[{name!r}] are dates, but column {name!r} is numeric -- give numbers")
        if declared is None and boolean:
            return [[0.0, 1.0]]  # a boolean dtype's values are 0/1: public bounds without a declaration
        return [None if declared is None else [declared[0], declared[1]]]
    if declared is not None and _real(declared[0]):
        raise ValueError(f"bounds[{name!r}] are numbers, but column {name!r} is a date column -- give dates "
                         "(e.g. ('2000-01-01', '2030-12-31'))")
    out: List[Optional[List[float]]] = []
    for feature in params.date_features:
        if feature in CALENDAR_BOUNDS:
            out.append(list(CALENDAR_BOUNDS[feature]))
        elif declared is None:
            out.append(None)
        elif feature == "days":
            out.append([float(_days(d, params.reference, pd)) for d in declared])
        else:
            out.append([float(declared[0].year), float(declared[1].year)])
    return out


def _is_boolean(series: Any) -> bool:
    from pandas.api import types as pdt

    return bool(pdt.is_bool_dtype(series))


def _learn_values(series: Any, name: str, kind: str, params: Params, pd: Any) -> Dict[str, Any]:
    from sklearn.impute import SimpleImputer

    column: Dict[str, Any] = {"name": name, "type": kind}
    if kind == "date":
        column["features"] = list(params.date_features)
        column["reference"] = params.reference.isoformat()
    column["bounds"] = _value_bounds(name, kind, params, pd, kind == "numeric" and _is_boolean(series))
    unbounded = column["bounds"].count(None)
    if unbounded and (params.scaling == "clip_only" or params.impute == "midpoint"):
        why = "scaling='clip_only'" if params.scaling == "clip_only" else "impute='midpoint'"
        example = "(low, high)" if kind == "numeric" else "('2000-01-01', '2030-12-31')"
        raise ValueError(f"{why} needs public bounds for column {name!r} -- declare bounds={{{name!r}: {example}}} "
                         "(values are clipped to them)")
    values = column_values(series, column, pd)
    gone = np.isnan(values[0])
    if params.impute == "midpoint":
        column["fill"] = [0.5 * (b[0] + b[1]) for b in column["bounds"]]
    else:
        if gone.all():
            raise ValueError(f"column {name!r} has no value in the {gone.size} training rows -- drop it "
                             f"(column_types={{{name!r}: 'drop'}})")
        imputer = SimpleImputer(strategy=params.impute).fit(np.column_stack(values))
        column["fill"] = [float(v) for v in imputer.statistics_]
    column["indicator"] = params.scaling == "clip_only" or bool(gone.any())
    return column


def _learn_categorical(series: Any, name: str, params: Params, texts: Optional[np.ndarray]) -> Dict[str, Any]:
    """``texts``: the column's :func:`category_texts`, if already made."""
    from sklearn.preprocessing import OneHotEncoder

    if name in params.categories:
        category_texts(series, name)  # the reserved values are refused in training rows too
        return {"name": name, "type": "categorical", "categories": params.categories[name] + [MISSING_CATEGORY],
                "other": [], "declared": True}
    if params.scaling == "clip_only":
        raise ValueError(f"scaling='clip_only' reads no statistics of the training rows, but column {name!r}'s "
                         f"categories would be learned from them -- declare them (categories={{{name!r}: [...]}}) "
                         "or drop the column")
    if texts is None:
        texts = category_texts(series, name)
    if texts.size >= _ID_LIKE_ROWS and name not in params.high_cardinality and len(set(texts)) == texts.size:
        warnings.warn(f"column {name!r} has a different value in each of the {texts.size} training rows, as an ID "
                      f"has: one-hot encoding makes {texts.size} columns -- if it is an ID, declare "
                      f"column_types={{{name!r}: 'id'}}", UserWarning, stacklevel=4)
    encoder = OneHotEncoder(handle_unknown="ignore", max_categories=params.max_categories,
                            sparse_output=False).fit(texts.reshape(-1, 1))
    seen = [str(c) for c in encoder.categories_[0]]
    rare = encoder.infrequent_categories_[0] if params.max_categories is not None else None
    other = sorted(str(c) for c in rare) if rare is not None else []
    pooled = set(other)
    kept = [c for c in seen if c not in pooled] + ([OTHER_CATEGORY] if other else [])
    return {"name": name, "type": "categorical", "categories": kept, "other": other, "declared": False}


def learn_columns(frame: Any, pd: Any, params: Params) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """Every input column's type and, per feature column, the state learned
    from the training rows ``frame``."""
    names = list(frame.columns)
    declared = list(dict.fromkeys([*params.column_types, *params.bounds, *params.categories,
                                   *params.high_cardinality]))
    absent = [c for c in declared if c not in frame.columns]
    if absent:
        raise ValueError(f"column(s) {absent} are declared (column_types/bounds/categories/high_cardinality) but X "
                         f"has no such column; X's columns: {names}")
    types = {n: params.column_types.get(n) or infer_type(frame[n], n, pd) for n in names}
    for name in params.bounds:
        if types[name] not in ("numeric", "date"):
            how = "declared" if name in params.column_types else f"inferred from its dtype {frame[name].dtype}"
            raise ValueError(f"bounds[{name!r}]: column {name!r} is {types[name]!r} ({how}); only numeric and date "
                             f"columns take bounds -- declare its type (column_types={{{name!r}: 'date'}} or "
                             "'numeric') or leave out its bounds")
    for name in params.categories:
        if types[name] != "categorical":
            raise ValueError(f"categories[{name!r}]: column {name!r} is {types[name]!r}, not 'categorical' -- "
                             f"declare column_types={{{name!r}: 'categorical'}}")
    for name in params.high_cardinality:
        if types[name] != "categorical":
            raise ValueError(f"high_cardinality names column {name!r}, which is {types[name]!r}, not 'categorical' "
                             f"-- leave it out of high_cardinality (or declare column_types={{{name!r}: "
                             "'categorical'}})")
    features = [n for n in names if types[n] not in EXCLUDED_TYPES]
    if not features:
        raise ValueError("X has no feature column: every column is declared 'id', 'label' or 'drop'")
    learned = [n for n in features if types[n] == "categorical" and n not in params.categories
               and n not in params.high_cardinality and params.scaling != "clip_only"]
    texts = checked_texts(frame, learned, params.cardinality_limit, category_texts)
    columns = []
    for name in features:  # a loop, not a comprehension: the ID warning's stacklevel reaches fit's caller
        if types[name] == "categorical":
            columns.append(_learn_categorical(frame[name], name, params, texts.get(name)))
        else:
            columns.append(_learn_values(frame[name], name, types[name], params, pd))
    twice = sorted(n for n, k in Counter(output_names(columns)).items() if k > 1)
    if twice:
        raise ValueError(f"two output columns would be named {twice[0]!r} (an input column's name clashes with a "
                         "one-hot, date-feature or '_missing' name) -- rename one of the input columns")
    return types, columns


def privacy_note(params: Params, columns: List[Dict[str, Any]]) -> str:
    """What the fitted transform read from the training rows, in words."""
    if params.scaling == "clip_only":
        return ("scaling='clip_only': nothing was read from the training rows (bounds, categories and imputation "
                "values are declared and public; every numeric and date column has a missing indicator), so a "
                "row's transform depends on that row alone.")
    read = ["the mean and standard deviation of every output column (zscore_clip)"]
    valued = [c["name"] for c in columns if c["type"] != "categorical"]
    if valued and params.impute != "midpoint":
        read.append(f"the {params.impute} of {valued} (imputation)")
    if valued:
        read.append("which of them had a missing value (the indicator columns)")
    learned = [c["name"] for c in columns if c["type"] == "categorical" and not c["declared"]]
    if learned:
        frequencies = " and their frequencies (max_categories)" if params.max_categories is not None else ""
        read.append(f"the categories seen in {learned}{frequencies}")
    return ("NOT covered by epsilon: " + "; ".join(read) + ". These are statistics of this party's own training "
            "rows; they stay with the party and its saved model, but a DP guarantee of the model covers the rows "
            "after this data-dependent preprocessing only. For an end-to-end guarantee use scaling='clip_only' "
            "with public bounds and categories.")


# -- the encoder of the fitted state ------------------------------------------------------

def prepared_frame(frame: Any, columns: List[Dict[str, Any]], pd: Any) -> Any:
    """The encoder's input: value columns ``v{i}_{j}`` (float64 with NaN)
    and categorical columns ``c{i}`` (text, pooled categories as ``(other)``)."""
    index = pd.RangeIndex(frame.shape[0])
    data: Dict[str, Any] = {}
    for i, column in enumerate(columns):
        series = frame[column["name"]]
        if column["type"] == "categorical":
            texts = category_texts(series, column["name"])
            if column["other"]:
                pooled = set(column["other"])
                texts = np.asarray([OTHER_CATEGORY if t in pooled else t for t in texts], dtype=object)
            data[f"c{i}"] = pd.Series(texts, index=index, dtype=object)
        else:
            for j, values in enumerate(column_values(series, column, pd)):
                data[f"v{i}_{j}"] = pd.Series(values, index=index, dtype=np.float64)
    return pd.DataFrame(data, index=index)


def column_transformer(columns: List[Dict[str, Any]], pd: Any) -> Any:
    """The scikit-learn ColumnTransformer of the fitted state, every part with
    explicit parameters (constant imputation values, given categories, missing
    indicators on every row), so fitting it learns nothing from data: it is
    fitted on one prototype row, the same way after ``fit`` and after ``load``."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import MissingIndicator, SimpleImputer
    from sklearn.preprocessing import OneHotEncoder

    parts: List[Tuple[str, Any, List[str]]] = []
    prototype: Dict[str, Any] = {}
    for i, column in enumerate(columns):
        if column["type"] == "categorical":
            key = f"c{i}"
            encoder = OneHotEncoder(categories=[np.asarray(column["categories"], dtype=object)],
                                    handle_unknown="ignore", sparse_output=False, dtype=np.float64)
            parts.append((key, encoder, [key]))
            prototype[key] = pd.Series(np.asarray(column["categories"][:1], dtype=object), dtype=object)
            continue
        keys = [f"v{i}_{j}" for j in range(len(column["fill"]))]
        for key, fill in zip(keys, column["fill"]):
            parts.append((key, SimpleImputer(strategy="constant", fill_value=fill), [key]))
            # A value, not NaN: scikit-learn drops a column it saw no value of.
            prototype[key] = pd.Series([fill], dtype=np.float64)
        if column["indicator"]:
            parts.append((f"m{i}", MissingIndicator(features="all"), keys[:1]))
    return ColumnTransformer(parts, sparse_threshold=0.0).fit(pd.DataFrame(prototype))


def output_names(columns: List[Dict[str, Any]]) -> List[str]:
    """The output column names (PartyPreprocessor.get_feature_names_out)."""
    names: List[str] = []
    for column in columns:
        name = column["name"]
        if column["type"] == "categorical":
            names.extend(f"{name}_{c}" for c in column["categories"])
            continue
        if column["type"] == "numeric":
            names.append(name)
        else:
            names.extend(f"{name}_{f}" for f in column["features"])
        if column["indicator"]:
            names.append(f"{name}_missing")
    return names


def layout(columns: List[Dict[str, Any]]) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per output column: whether it is 0/1 (one-hot, indicator), the midpoint
    and half-width of its bounds (0 and 1 where it has none; a zero width
    gives 1); and the attribute count for the row division (a numeric column
    with its indicator 1, a categorical column 1, a date column one per
    feature)."""
    binary: List[bool] = []
    mid: List[float] = []
    half: List[float] = []
    n_attributes = 0
    for column in columns:
        if column["type"] == "categorical":
            width = len(column["categories"])
            binary += [True] * width
            mid += [0.0] * width
            half += [1.0] * width
            n_attributes += 1
            continue
        for bounds in column["bounds"]:
            binary.append(False)
            low, high = bounds if bounds is not None else (0.0, 0.0)
            mid.append(0.5 * (low + high))
            half.append(0.5 * (high - low) if high > low else 1.0)
        n_attributes += len(column["bounds"])
        if column["indicator"]:
            binary.append(True)
            mid.append(0.0)
            half.append(1.0)
    return (np.asarray(binary, dtype=bool), np.asarray(mid, dtype=np.float64), np.asarray(half, dtype=np.float64),
            n_attributes)
