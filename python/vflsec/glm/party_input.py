"""The feature input of the GLM estimators: per-party blocks, or one table and a party-column mapping.

Two forms are accepted by :class:`~vflsec.glm.VerticalLogisticRegression`
(and, joined, by :class:`~vflsec.glm.CentralDPLogisticRegression`):

* **a list of per-party blocks**, active party first, rows aligned: each a 2-D
  array or a pandas DataFrame;
* **one 2-D table** (array or DataFrame) **and a** ``party_columns`` mapping
  ``{party name: column names or indices}``, active party first (the mapping's
  order); an index is a column position, as in scikit-learn's
  ``ColumnTransformer``, and a name needs a DataFrame. This is the form scikit-learn's tools hand an estimator
  (``cross_val_score``, ``GridSearchCV``, a ``Pipeline``'s last step), which
  split and transform one 2-D ``X``. Every column belongs to exactly one party:
  a column named twice, or left out, is refused (drop it from the table, or
  give it to a party), so no feature is silently lost or shared.

A DataFrame's columns must be numeric (bool, strings, categories and dates are
refused naming the column: encode them first, e.g. with the per-party
preprocessor of :mod:`vflsec.data`); NaN is refused naming the column (unless the
estimator reads it as a missing value: ``allow_nan``, the vertical trees), infinity
always. When
every block is a DataFrame with string column names, the names are kept
(``feature_names_in_``: the table's columns, or the blocks' columns joined in
party order) and prediction selects columns by name, so a DataFrame with its
columns in another order is read correctly. The rules follow scikit-learn's
(``n_features_in_``, ``feature_names_in_``, a warning when names are given to a
model fitted without them or missing at a model fitted with them).

pandas is not imported here: a DataFrame is recognised by its attributes.
"""
from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .._arrays import as_float_array

__all__ = [
    "PartyInput",
    "default_party_names",
    "frame_to_array",
    "is_block_list",
    "is_frame",
    "join_blocks",
    "read_parties",
    "read_parties_for",
    "read_table_for",
    "resolve_party_columns",
]


def is_frame(X: Any) -> bool:
    """True for a pandas DataFrame (decided without importing pandas)."""
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc") and getattr(X, "ndim", 0) == 2


def default_party_names(n_parties: int) -> Tuple[str, ...]:
    """``("active", "passive_0", "passive_1", ...)``: the parties of a list of blocks."""
    return ("active", *(f"passive_{i}" for i in range(n_parties - 1)))


def _string_names(frame: Any) -> Optional[np.ndarray]:
    """The frame's column names as an object array when every one is a str, else None
    (scikit-learn keeps feature names only then)."""
    names = list(frame.columns)
    if names and all(isinstance(name, str) for name in names):
        return np.asarray(names, dtype=object)
    return None


def frame_to_array(frame: Any, what: str, *, allow_nan: bool = False) -> np.ndarray:
    """A DataFrame's values as a 2-D float64 array; non-numeric, bool or NaN (unless ``allow_nan``: a
    missing value) or infinite columns refused by name."""
    import pandas as pd

    columns = []
    for position, name in enumerate(frame.columns):
        column = frame.iloc[:, position]
        dtype = column.dtype
        label = f"column {name!r} of {what}"
        if pd.api.types.is_bool_dtype(dtype):
            raise TypeError(f"{label} is boolean -- convert it to 0/1 first (e.g. .astype(int))")
        if not pd.api.types.is_numeric_dtype(dtype):
            raise TypeError(f"{label} has dtype {dtype}, not a number -- encode it first (one-hot, ordinal or "
                            "a date as a number), e.g. with vflsec.data's per-party preprocessor")
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isinf(values) if allow_nan else ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            if allow_nan:
                raise ValueError(f"{label} has an infinite value (first at row {row}) -- clip or drop it first (NaN "
                                 "is read as a missing value, infinity is not)")
            raise ValueError(f"{label} has a missing or infinite value (first at row {row}) -- impute or drop it "
                             "first")
        columns.append(values)
    if not columns:
        raise ValueError(f"{what} has no columns")
    return np.column_stack(columns)


def _as_table(X: Any, what: str, allow_nan: bool = False) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """A 2-D float64 array and its string column names (None unless a DataFrame has them); NaN only
    with ``allow_nan``, never infinity."""
    if is_frame(X):
        names = _string_names(X)
        if names is not None and len(set(names)) != len(names):
            repeated = sorted({name for name in names if list(names).count(name) > 1})
            raise ValueError(f"{what} has repeated column names ({', '.join(repeated[:10])}) -- rename them")
        return frame_to_array(X, what, allow_nan=allow_nan), names
    table = as_float_array(X, what, ndim=2, dtype=np.float64, check_finite=not allow_nan)[0]
    if allow_nan and np.isinf(table).any():
        row, column = (int(v[0]) for v in np.nonzero(np.isinf(table)))
        raise ValueError(f"{what} has an infinite value (first at row {row}, column {column}) -- NaN is read as a "
                         "missing value, infinity is not: clip or drop it first")
    return table, None


def _ndim(part: Any) -> int:
    try:
        return int(np.ndim(part))
    except ValueError:  # a ragged nested list: not a block (as_float_array words the error)
        return -1


def is_block_list(X: Any) -> bool:
    """True when ``X`` is a list or tuple of 2-D blocks (arrays or DataFrames)."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and all(is_frame(part) or _ndim(part) == 2 for part in X)


def resolve_party_columns(party_columns: Any, n_columns: int, names: Optional[np.ndarray]) -> Dict[str, List[int]]:
    """``party_columns`` as ``{party: column positions}`` in the table (``n_columns`` wide,
    ``names`` its string column names or None): a Mapping of at least two parties, each a
    non-empty list of column names (a DataFrame's) or non-negative indices; every column in
    exactly one party. ValueError/TypeError naming the mistake."""
    if not isinstance(party_columns, Mapping):
        raise TypeError(f"party_columns must be a mapping party name -> column names or indices (active party "
                        f"first), got {type(party_columns).__name__}")
    if len(party_columns) < 2:
        raise ValueError(f"party_columns needs at least 2 parties (active first, then passive), got "
                         f"{len(party_columns)}")
    position_of = {name: i for i, name in enumerate(names)} if names is not None else {}
    owner: Dict[int, str] = {}
    resolved: Dict[str, List[int]] = {}
    for party, columns in party_columns.items():
        if not isinstance(party, str) or not party:
            raise TypeError(f"party_columns keys must be non-empty party names (str), got {party!r}")
        if isinstance(columns, (str, bytes)) or not hasattr(columns, "__iter__"):
            raise TypeError(f"party_columns[{party!r}] must be a list of column names or indices, got "
                            f"{type(columns).__name__}")
        entries = list(columns)
        if not entries:
            raise ValueError(f"party_columns[{party!r}] is empty: every party holds at least one column")
        positions = []
        for column in entries:
            if isinstance(column, str):
                if names is None:
                    raise ValueError(f"party_columns[{party!r}] names column {column!r}, but X has no column "
                                     "names -- give column indices, or pass a DataFrame")
                if column not in position_of:
                    raise ValueError(f"party_columns[{party!r}] names column {column!r}, which X does not have "
                                     f"-- X's columns: {', '.join(map(str, names[:20]))}"
                                     f"{' ...' if len(names) > 20 else ''}")
                position = position_of[column]
            elif isinstance(column, numbers.Integral) and not isinstance(column, (bool, np.bool_)):
                position = int(column)
                if not 0 <= position < n_columns:
                    raise ValueError(f"party_columns[{party!r}] has column index {position}, X has columns "
                                     f"0..{n_columns - 1}")
            else:
                raise TypeError(f"party_columns[{party!r}] entries must be column names (str) or indices (int), "
                                f"got {column!r}")
            if position in owner:
                label = names[position] if names is not None else position
                raise ValueError(f"column {label!r} is given to both {owner[position]!r} and {party!r}: each "
                                 "column belongs to one party")
            owner[position] = party
            positions.append(position)
        resolved[party] = positions
    unassigned = [i for i in range(n_columns) if i not in owner]
    if unassigned:
        labels = [str(names[i]) if names is not None else str(i) for i in unassigned]
        raise ValueError(f"X has {len(unassigned)} column(s) no party holds ({', '.join(labels[:10])}"
                         f"{' ...' if len(labels) > 10 else ''}) -- drop them from X or add them to party_columns")
    return resolved


@dataclass(frozen=True)
class PartyInput:
    """One input split into parties: ``parts`` (float64 blocks, active first), the
    ``party_names``, ``feature_names`` (joined in input order, or None) and
    ``n_features`` (columns in all)."""

    parts: List[np.ndarray]
    party_names: Tuple[str, ...]
    feature_names: Optional[np.ndarray]
    n_features: int
    party_columns: Optional[Dict[str, List[int]]] = None


def _check_rows(parts: Sequence[np.ndarray]) -> None:
    rows = [X.shape[0] for X in parts]
    if len(set(rows)) != 1:
        raise ValueError(f"parties have different row counts {rows}; rows must be aligned")


def _read_blocks(X: Sequence[Any], allow_nan: bool = False) -> Tuple[List[np.ndarray], Optional[np.ndarray]]:
    """Per-party blocks as float64 arrays (rows checked) and their names joined in
    order when every block has string column names (else None)."""
    parts: List[np.ndarray] = []
    names: List[np.ndarray] = []
    for i, part in enumerate(X):
        table, table_names = _as_table(part, f"X[{i}]", allow_nan)
        parts.append(table)
        if table_names is not None:
            names.append(table_names)
    _check_rows(parts)
    return parts, (np.concatenate(names) if len(names) == len(parts) else None)


def read_parties(X: Any, party_columns: Any = None, *, allow_nan: bool = False) -> PartyInput:
    """Split a training input (module docstring) into its parties; NaN is refused unless ``allow_nan``."""
    if party_columns is None:
        # A list that is not one rectangular table is read as blocks, so a bad block is named.
        if not is_block_list(X) and not (isinstance(X, (list, tuple)) and len(X) > 0 and _ndim(X) != 2):
            if is_frame(X) or _ndim(X) == 2:
                raise TypeError("X is one 2-D table: say which columns each party holds with party_columns="
                                "{'bank': [...], 'insurer': [...]} (active party first), or pass a list of "
                                "per-party blocks")
            raise TypeError(f"X must be a list of per-party feature blocks (active party first), or one 2-D table "
                            f"with party_columns, got {type(X).__name__}")
        if len(X) < 2:
            raise ValueError(f"X needs at least 2 parties (active + passive), got {len(X)}")
        parts, joined = _read_blocks(X, allow_nan)
        return PartyInput(parts, default_party_names(len(parts)), joined, sum(p.shape[1] for p in parts))
    if is_block_list(X) and len(X) > 1:
        raise TypeError("party_columns selects the columns of one 2-D table, but X is a list of per-party blocks "
                        "-- leave party_columns=None, or pass the joined table")
    table, names = _as_table(X, "X", allow_nan)
    resolved = resolve_party_columns(party_columns, table.shape[1], names)
    # C order, as a block given on its own would be (a column selection may come back in F order,
    # and a product over another layout rounds differently).
    parts = [np.ascontiguousarray(table[:, positions]) for positions in resolved.values()]
    return PartyInput(parts, tuple(resolved), names, table.shape[1], resolved)


def _select_names(frame: Any, wanted: np.ndarray, what: str) -> Any:
    """``frame``'s columns ``wanted`` in that order (ValueError naming missing or unexpected ones)."""
    have = list(frame.columns)
    missing = [name for name in wanted if name not in have]
    extra = [name for name in have if name not in set(wanted)]
    if missing or extra:
        detail = "; ".join(part for part in (
            f"missing {', '.join(map(str, missing[:10]))}" if missing else "",
            f"not seen at fit {', '.join(map(str, extra[:10]))}" if extra else "") if part)
        raise ValueError(f"the columns of {what} differ from those the model was fitted on ({detail}) -- give the "
                         "same columns (in any order)")
    return frame.loc[:, list(wanted)]


def _warn_names(fitted_names: Optional[np.ndarray], given_names: Optional[np.ndarray], who: str) -> None:
    """scikit-learn's warnings when feature names are present at only one of fit and predict."""
    if fitted_names is not None and given_names is None:
        warnings.warn(f"X does not have valid feature names, but {who} was fitted with feature names; its columns "
                      "are taken in the fitted order", UserWarning, stacklevel=4)
    elif fitted_names is None and given_names is not None:
        warnings.warn(f"X has feature names, but {who} was fitted without feature names; its columns are taken "
                      "by position", UserWarning, stacklevel=4)


def read_parties_for(X: Any, widths: Sequence[int], *, feature_names: Optional[np.ndarray],
                     party_columns: Optional[Mapping[str, Sequence[int]]], who: str,
                     allow_nan: bool = False) -> List[np.ndarray]:
    """Split a prediction input the way a model fitted with per-party ``widths`` (active first),
    ``feature_names`` (joined, or None) and resolved ``party_columns`` (or None) reads it: a list
    of blocks (by names where the model has them), or one table (by the fitted party columns)."""
    n_features = int(sum(widths))
    if is_block_list(X) and len(X) > 1 or party_columns is None:
        if not is_block_list(X):
            raise TypeError(f"X must be a list of per-party feature blocks (active party first), as at fit; got "
                            f"{type(X).__name__}")
        if len(X) != len(widths):
            raise ValueError(f"the model was fitted with {len(widths)} parties, got {len(X)}")
        if feature_names is None:
            party_names: List[Optional[np.ndarray]] = [None] * len(widths)
        elif party_columns is not None:  # the table's names, each party's in its order
            party_names = [feature_names[list(positions)] for positions in party_columns.values()]
        else:
            bounds = np.cumsum([0, *widths])
            party_names = [feature_names[bounds[i]:bounds[i + 1]] for i in range(len(widths))]
        parts = []
        for i, part in enumerate(X):
            names = party_names[i]
            given = _string_names(part) if is_frame(part) else None
            if names is not None and given is not None:
                part = _select_names(part, names, f"X[{i}]")
            else:
                _warn_names(names, given, who)
            table, _ = _as_table(part, f"X[{i}]", allow_nan)
            if table.shape[1] != widths[i]:
                raise ValueError(f"X[{i}] has {table.shape[1]} features, the model expects {widths[i]}")
            parts.append(table)
        _check_rows(parts)
        return parts
    table = _one_table_for(X, n_features, feature_names, who, allow_nan)
    return [np.ascontiguousarray(table[:, list(positions)]) for positions in party_columns.values()]


def _one_table_for(X: Any, n_features: int, feature_names: Optional[np.ndarray], who: str,
                   allow_nan: bool = False) -> np.ndarray:
    """One 2-D prediction table, its DataFrame columns selected by the fitted names."""
    given = _string_names(X) if is_frame(X) else None
    if feature_names is not None and given is not None:
        X = _select_names(X, feature_names, "X")
    else:
        _warn_names(feature_names, given, who)
    table, _ = _as_table(X, "X", allow_nan)
    if table.shape[1] != n_features:
        raise ValueError(f"X has {table.shape[1]} features, the model expects {n_features}")
    return table


def join_blocks(X: Any) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """One 2-D float64 table and its string column names (or None): ``X`` itself, or a
    list of per-party blocks joined by columns (names joined when every block has them)."""
    if not is_block_list(X):
        return _as_table(X, "X")
    parts, joined = _read_blocks(X)
    return np.hstack(parts), joined


def read_table_for(X: Any, n_features: int, *, feature_names: Optional[np.ndarray], who: str) -> np.ndarray:
    """A prediction input of a model fitted on one joined table of ``n_features`` columns
    (``feature_names`` or None): one table (DataFrame columns by name) or a list of blocks
    (joined; their names must then be the fitted ones, in order)."""
    if not is_block_list(X):
        return _one_table_for(X, n_features, feature_names, who)
    table, given = join_blocks(X)
    if feature_names is not None and given is not None:
        if not np.array_equal(given, feature_names):
            raise ValueError("the blocks' columns differ from those the model was fitted on -- give the same "
                             "columns in the same order")
    else:
        _warn_names(feature_names, given, who)
    if table.shape[1] != n_features:
        raise ValueError(f"X has {table.shape[1]} features, the model expects {n_features}")
    return table
