"""A party's public preprocessor: its own raw table -> the rows the protocols train on.

:class:`PartyPreprocessor` is a scikit-learn transformer that one party fits on
its own training rows and applies, unchanged, to any later rows (next month's
customers, the rows to score). It does three things, in order:

1. **Column types**, declared (``column_types``) or inferred from the dtypes,
   turn the table into numbers: numeric columns as they are, categorical
   columns one-hot, date columns into date features; ID, label and dropped
   columns are left out.
2. **Missing values and unseen categories**: a missing numeric value is
   imputed (the training median by default) and flagged in a 0/1 indicator
   column; a missing category is a category of its own; a category never seen
   in training becomes an all-zero one-hot block.
3. **Per-party scaling** to row norms ``<= 1`` (HDP-VFL's bound), with the
   code of :func:`vflsec.data.vertical_split` (:mod:`.scaling`):
   ``"zscore_clip"`` from statistics of the party's training rows (not covered
   by the DP epsilon, see ``privacy_note_``), or the data-independent
   ``"clip_only"`` from declared public bounds and categories.

The fitted state is plain numbers and strings: :meth:`PartyPreprocessor.save`
writes it as JSON (no pickle) next to the party's model, and a loaded
preprocessor transforms rows bit-identically to the one that was fitted. The
column conversions live in :mod:`._columns`.
"""
from __future__ import annotations

import copy
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._cardinality import CARDINALITY_LIMIT, HighCardinalityError
from ._columns import (
    COLUMN_TYPES,
    DATE_FEATURES,
    EXCLUDED_TYPES,
    IMPUTATIONS,
    MISSING_CATEGORY,
    OTHER_CATEGORY,
    SCALINGS,
    as_frame,
    check_params,
    column_transformer,
    layout,
    learn_columns,
    output_names,
    pandas,
    prepared_frame,
    privacy_note,
)
from .scaling import ZScoreClip, unit_rows

__all__ = ["CARDINALITY_LIMIT", "COLUMN_TYPES", "DATE_FEATURES", "IMPUTATIONS", "MISSING_CATEGORY",
           "OTHER_CATEGORY", "PREPROCESSOR_SCALINGS", "HighCardinalityError", "PartyPreprocessor"]

PREPROCESSOR_SCALINGS = SCALINGS
FILE_FORMAT = "vflsec.PartyPreprocessor"
FILE_VERSION = 1


class PartyPreprocessor(TransformerMixin, BaseEstimator):
    """One party's preprocessing, fitted on its own training rows only.

    ``fit(X)`` takes a pandas DataFrame (or a 2-D numeric numpy array, whose
    columns are then named ``x0``, ``x1``, ...); ``transform(X)`` returns a
    float64 numpy array whose every row has L2 norm ``<= 1``, columns named by
    :meth:`get_feature_names_out`. Rows to transform need the feature columns
    (any order; other columns are ignored, so ID, label and dropped columns
    may be absent).

    Parameters
    ----------
    column_types : mapping column -> type, optional
        ``"numeric"``, ``"categorical"``, ``"date"``, ``"id"``, ``"label"`` or
        ``"drop"``; the last three are left out of the features. Undeclared
        columns are inferred from their dtype: numbers and booleans ->
        numeric; text (object, string) and pandas ``category`` -> categorical;
        ``datetime64`` -> date; any other dtype is an error asking for a
        declaration. Nothing is inferred from the values: a text column whose
        values all look like numbers (``"007"``, ZIP codes) stays categorical
        unless declared ``"numeric"``, and a text column of dates must be
        declared ``"date"`` (:func:`vflsec.data.read_table` reads ISO dates
        of a CSV or Parquet file as dates). ID and label columns are never
        inferred: declare them (a text column with a different value in every
        training row is refused as high-cardinality, see ``cardinality_limit``).
    scaling : ``"zscore_clip"`` (default) or ``"clip_only"``
        ``"zscore_clip"`` -- as :func:`vflsec.data.vertical_split`'s: every
        output column z-scored with the mean and standard deviation of the
        training rows and winsorized at +-3 (0/1 columns kept as they are),
        each row divided by ``sqrt(number of attributes)`` and projected onto
        the unit ball. These statistics, and the medians, categories and
        missing-value columns learned, are *not* covered by the DP epsilon:
        ``privacy_note_`` lists them. ``"clip_only"`` -- data-independent: no
        statistic of the training rows is read. Every numeric column needs
        declared ``bounds`` (values clipped to them and mapped to [-1, 1];
        a boolean-dtype column has (0, 1) without one; a boolean column read
        as float because of a missing cell needs ``bounds={col: (0, 1)}``),
        every categorical column declared ``categories``; missing values get
        the bounds' midpoint (0 after scaling) and every numeric and date
        column a missing indicator. Each attribute then adds at most 1 to
        ``||x||^2``, so the division by ``sqrt(number of attributes)`` alone
        keeps ``||x|| <= 1``, and the transform of a row depends on that row
        only. (``vertical_split``'s ``"clip_only"``, having no bounds, only
        projects the rows.)
    bounds : mapping column -> (low, high), optional
        Public bounds of numeric columns (numbers) or date columns (dates or
        ISO date strings). Values are clipped to them under either scaling;
        ``"clip_only"`` needs them.
    categories : mapping column -> list of values, optional
        Public categories of categorical columns, used instead of the ones
        seen in training (other values count as unseen); a ``"(missing)"``
        category is added to each.
    max_categories : int >= 2, optional
        For categories learned from the training rows: at most this many
        one-hot columns per column, the rarest categories pooled into one
        ``"(other)"`` column (scikit-learn's ``OneHotEncoder(max_categories=)``).
    cardinality_limit : int >= 1 or None, default 100
        A categorical column whose categories are learned from the training
        rows is refused (:class:`~vflsec.data.HighCardinalityError`, a
        ValueError naming every such column, its distinct values and the fix)
        when it has more than this many distinct values, or at least 20 and
        on average fewer than 2 training rows per value: a text column of
        dates, IDs or free text one-hot encodes into a column per value.
        Declare what it is: its type (``column_types``: ``"date"``,
        ``"numeric"``, ``"id"``, ``"drop"``), its ``categories``, or list it
        in ``high_cardinality``. None: no column is refused (a column with a
        different value in every row then draws a warning). Missing cells
        are not a value.
    high_cardinality : list of column names, optional
        Categorical columns one-hot encoded whatever their number of distinct
        values (``cardinality_limit`` does not apply to them); combine with
        ``max_categories`` to pool the rarest values.
    date_features : sequence of ``"days"``, ``"year"``, ``"month"``, ``"day"``, ``"day_of_week"``
        What each date column becomes. Default ``("days",)``: days since
        ``reference_date``, one continuous, monotone feature (an account's
        age, a customer's recency) that a linear model uses directly and that
        carries over to next month's rows; calendar numbers (month 1-12,
        weekday 0-6) impose an order a linear model misreads (December is
        next to January), so they are opt-in.
    reference_date : date or ISO string, default ``"1970-01-01"``
        The origin of ``"days"``: a public constant (under ``"zscore_clip"``
        its value does not matter, z-scoring removes the shift).
    impute : ``"median"``, ``"mean"``, ``"midpoint"`` or None
        What a missing numeric value (or date feature) becomes: the training
        rows' median or mean, or the midpoint of the column's bounds. None
        (default): ``"median"`` under ``"zscore_clip"``, ``"midpoint"`` under
        ``"clip_only"`` (which reads no statistics, so accepts only that).

    Attributes
    ----------
    n_features_in_ : number of columns of the fitted X (IDs and labels included).
    feature_names_in_ : their names (only when X was a DataFrame, as in scikit-learn).
    column_types_ : dict, every input column's type (declared or inferred).
    feature_columns_ : list of dict, the state learned per feature column (plain values).
    privacy_note_ : str, what the fitted transform read from the training rows.

    Notes
    -----
    A missing numeric or date value is imputed and flagged in a 0/1
    ``<column>_missing`` column, added where the column had a missing value in
    the training rows (under ``"clip_only"`` always: deciding it would read
    the data). A category not seen in training (nor declared) gives an
    all-zero one-hot block for that column, not an error. Categorical values
    are compared as text (a whole float such as ``5.0`` as ``"5"``, booleans
    as ``"1"``/``"0"``, so an int or boolean column read as float because of
    a missing cell still matches);
    ``"(missing)"`` and ``"(other)"`` are reserved. For the row division a
    numeric column (with its indicator) counts as one attribute, a categorical
    column as one, a date column as one per date feature.

    Using an unfitted preprocessor raises ``sklearn.exceptions.NotFittedError``.
    """

    def __init__(self, *, column_types: Optional[Dict[str, str]] = None, scaling: str = "zscore_clip",
                 bounds: Optional[Dict[str, Any]] = None, categories: Optional[Dict[str, Any]] = None,
                 max_categories: Optional[int] = None, cardinality_limit: Optional[int] = CARDINALITY_LIMIT,
                 high_cardinality: Optional[List[str]] = None, date_features: Any = ("days",),
                 reference_date: Any = "1970-01-01", impute: Optional[str] = None) -> None:
        self.column_types = column_types
        self.scaling = scaling
        self.bounds = bounds
        self.categories = categories
        self.max_categories = max_categories
        self.cardinality_limit = cardinality_limit
        self.high_cardinality = high_cardinality
        self.date_features = date_features
        self.reference_date = reference_date
        self.impute = impute

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    def fit(self, X: Any, y: Any = None) -> "PartyPreprocessor":
        """Learn the column types, imputation values, categories and (for
        ``"zscore_clip"``) the scaling statistics from ``X``, this party's
        training rows. ``y`` is ignored. :class:`HighCardinalityError` for a
        categorical column of too many distinct values (``cardinality_limit``)."""
        pd = pandas()
        frame, from_frame = as_frame(X, pd, None)
        if frame.shape[1] == 0:
            raise ValueError(f"X has no columns: 0 feature(s) (shape={frame.shape}) while a minimum of 1 is "
                             "required -- pass the party's table with its feature columns")
        if frame.shape[0] == 0:
            raise ValueError(f"X has no rows: 0 sample(s) (shape={frame.shape}) while a minimum of 1 is required "
                             "-- fit on the party's training rows")
        params = check_params(self, pd)
        column_types, columns = learn_columns(frame, pd, params)
        zscore = None
        if params.scaling == "zscore_clip":
            encoded = _encode(column_transformer(columns, pd), frame, columns, pd)
            zscore = _zscore_stats(encoded, output_names(columns))
        self._set_state(_FittedState(column_types=column_types, from_frame=from_frame, columns=columns,
                                     scaling=params.scaling, zscore=zscore,
                                     privacy_note=privacy_note(params, columns)), pd)
        return self

    def _set_state(self, state: "_FittedState", pd: Any) -> None:
        self.n_features_in_ = len(state.column_types)
        if state.from_frame:
            self.feature_names_in_ = np.asarray(list(state.column_types), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.column_types_ = dict(state.column_types)
        self.feature_columns_ = state.columns
        self.privacy_note_ = state.privacy_note
        self._state = state
        self._encoder = column_transformer(state.columns, pd)
        binary, mid, half, n_attributes = layout(state.columns)
        self._zscore: Optional[ZScoreClip] = None
        if state.zscore is not None:
            self._zscore = ZScoreClip.from_stats(np.asarray(state.zscore["mean"], dtype=np.float64),
                                                 np.asarray(state.zscore["std"], dtype=np.float64),
                                                 binary, n_attributes)
        self._bounds_map = (binary, mid, half, n_attributes)

    def transform(self, X: Any) -> np.ndarray:
        """The rows of ``X`` preprocessed and scaled as fitted: float64, every
        row of L2 norm ``<= 1``."""
        check_is_fitted(self, "feature_columns_")
        pd = pandas()
        frame, _ = as_frame(X, pd, list(self.column_types_))
        absent = [c["name"] for c in self.feature_columns_ if c["name"] not in frame.columns]
        if absent:
            raise ValueError(f"X lacks the feature column(s) {absent} the preprocessor was fitted with -- "
                             "pass rows with the training table's columns")
        if frame.shape[0] == 0:
            return np.zeros((0, len(output_names(self.feature_columns_))), dtype=np.float64)
        encoded = _encode(self._encoder, frame, self.feature_columns_, pd)
        if self._zscore is not None:
            return np.ascontiguousarray(self._zscore.transform(encoded))
        # clip_only: bounded columns from [low, high] to [-1, 1]; 0/1 columns as they are.
        binary, mid, half, n_attributes = self._bounds_map
        scaled = np.where(binary, encoded, (encoded - mid) / half)
        return np.ascontiguousarray(unit_rows(scaled, n_attributes))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output columns: ``age``, ``age_missing``,
        ``opened_days``, ``job_clerk``, ``job_(missing)``, ``job_(other)``, ..."""
        check_is_fitted(self, "feature_columns_")
        if input_features is not None and [str(f) for f in input_features] != list(self.column_types_):
            raise ValueError(f"input_features {list(input_features)} are not the fitted columns "
                             f"{list(self.column_types_)}")
        return np.asarray(output_names(self.feature_columns_), dtype=object)

    # -- saving ------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """The parameters and (if fitted) the fitted state as JSON-ready plain
        values; :meth:`from_dict` rebuilds the preprocessor from them."""
        params = check_params(self, pandas()).as_json()
        fitted = self._state.as_json() if hasattr(self, "feature_columns_") else None
        return {"format": FILE_FORMAT, "version": FILE_VERSION, "params": params, "fitted": fitted}

    @classmethod
    def from_dict(cls, data: Any) -> "PartyPreprocessor":
        """The preprocessor :meth:`to_dict` described (``ValueError`` when
        ``data`` is not one)."""
        pd = pandas()
        if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
            raise ValueError(f'not a saved PartyPreprocessor (no "format": "{FILE_FORMAT}")')
        if data.get("version") != FILE_VERSION:
            raise ValueError(f"saved PartyPreprocessor version {data.get('version')!r} is not supported (this "
                             f"vflsec reads version {FILE_VERSION}) -- fit and save it again")
        params = data.get("params")
        if not isinstance(params, dict):
            raise ValueError('saved PartyPreprocessor has no "params" object')
        if isinstance(params.get("date_features"), list):
            params = {**params, "date_features": tuple(params["date_features"])}  # JSON has no tuples
        try:
            model = cls(**params)
            check_params(model, pd)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"saved PartyPreprocessor has bad params: {exc}") from None
        if data.get("fitted") is not None:
            model._set_state(_FittedState.from_json(data["fitted"]), pd)
        return model

    def save(self, path: Any) -> None:
        """Write :meth:`to_dict` as JSON to ``path``, atomically and with mode
        0600 (the statistics are private to this party)."""
        from ..federation.private_files import write_private_bytes

        text = json.dumps(self.to_dict(), indent=1, allow_nan=False)
        write_private_bytes(path, (text + "\n").encode("utf-8"))

    @classmethod
    def load(cls, path: Any) -> "PartyPreprocessor":
        """The preprocessor :meth:`save` wrote to ``path`` (``ValueError``
        naming the file when it is not one)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a saved PartyPreprocessor (not JSON: {exc}) -- pass the file "
                             "PartyPreprocessor.save wrote") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _zscore_stats(encoded: np.ndarray, names: List[str]) -> Dict[str, List[float]]:
    """The training rows' per-column mean and standard deviation (as
    :meth:`ZScoreClip.fit` computes them), finite or a ValueError: an
    overflowing statistic would z-score the column to 0 and cannot be saved."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = encoded.mean(axis=0)
        std = encoded.std(axis=0)
    finite = np.isfinite(mean) & np.isfinite(std)
    if not finite.all():
        name = names[int(np.flatnonzero(~finite)[0])]
        raise ValueError(f"output column {name!r}: its values are too large for zscore_clip's statistics (the "
                         "standard deviation overflows float64) -- rescale the column or declare bounds for it "
                         "(values are clipped to them)")
    return {"mean": mean.tolist(), "std": std.tolist()}


def _encode(encoder: Any, frame: Any, columns: List[Dict[str, Any]], pd: Any) -> np.ndarray:
    return np.asarray(encoder.transform(prepared_frame(frame, columns, pd)), dtype=np.float64)


# -- the fitted state and its JSON form -------------------------------------------------

@dataclass(frozen=True)
class _FittedState:
    column_types: Dict[str, str]
    from_frame: bool
    columns: List[Dict[str, Any]]
    scaling: str
    zscore: Optional[Dict[str, List[float]]]
    privacy_note: str

    def as_json(self) -> Dict[str, Any]:
        """A copy: changing it changes no fitted preprocessor."""
        return copy.deepcopy({"column_types": self.column_types, "from_frame": self.from_frame,
                              "columns": self.columns, "scaling": self.scaling, "zscore": self.zscore,
                              "privacy_note": self.privacy_note})

    @classmethod
    def from_json(cls, data: Any) -> "_FittedState":
        """Checked: a damaged file is a ValueError, never a wrong transform."""
        _require(isinstance(data, dict), "fitted state is not an object")
        data = copy.deepcopy(data)  # the caller's dict stays the caller's
        types = data.get("column_types")
        _require(isinstance(types, dict) and bool(types)
                 and all(isinstance(k, str) and v in COLUMN_TYPES for k, v in types.items()), "column_types")
        columns = data.get("columns")
        _require(isinstance(columns, list) and bool(columns), "columns")
        names = [_check_column(c, types) for c in columns]
        _require(names == [n for n, t in types.items() if t not in EXCLUDED_TYPES], "columns do not match column_types")
        scaling = data.get("scaling")
        _require(scaling in SCALINGS, "scaling")
        zscore = data.get("zscore")
        width = len(output_names(columns))
        if scaling == "zscore_clip":
            _require(isinstance(zscore, dict) and all(_reals(zscore.get(k), width) for k in ("mean", "std")),
                     f"zscore needs 'mean' and 'std' lists of {width} numbers")
            zscore = {k: [float(v) for v in zscore[k]] for k in ("mean", "std")}
        else:
            _require(zscore is None, "zscore is set for scaling='clip_only'")
        _require(isinstance(data.get("from_frame"), bool), "from_frame")
        _require(isinstance(data.get("privacy_note"), str), "privacy_note")
        return cls(column_types=dict(types), from_frame=data["from_frame"], columns=columns, scaling=scaling,
                   zscore=zscore, privacy_note=data["privacy_note"])


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"saved PartyPreprocessor is damaged ({what}) -- fit and save it again")


def _reals(values: Any, n: Optional[int] = None) -> bool:
    return (isinstance(values, list) and (n is None or len(values) == n)
            and all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in values))


def _check_column(column: Any, types: Dict[str, str]) -> str:
    _require(isinstance(column, dict) and isinstance(column.get("name"), str), "a column without a name")
    name = column["name"]
    kind = column.get("type")
    _require(types.get(name) == kind, f"column {name!r}: type")
    if kind == "categorical":
        for key in ("categories", "other"):
            values = column.get(key)
            _require(isinstance(values, list) and all(isinstance(v, str) for v in values), f"column {name!r}: {key}")
        _require(bool(column["categories"]) and len(set(column["categories"])) == len(column["categories"]),
                 f"column {name!r}: categories")
        _require(isinstance(column.get("declared"), bool), f"column {name!r}: declared")
        return name
    n = 1
    if kind == "date":
        features = column.get("features")
        _require(isinstance(features, list) and bool(features) and all(f in DATE_FEATURES for f in features),
                 f"column {name!r}: features")
        _require(isinstance(column.get("reference"), str), f"column {name!r}: reference")
        n = len(features)
    _require(_reals(column.get("fill"), n), f"column {name!r}: fill")
    bounds = column.get("bounds")
    _require(isinstance(bounds, list) and len(bounds) == n
             and all(b is None or (_reals(b, 2) and b[0] <= b[1]) for b in bounds), f"column {name!r}: bounds")
    _require(isinstance(column.get("indicator"), bool), f"column {name!r}: indicator")
    return name
