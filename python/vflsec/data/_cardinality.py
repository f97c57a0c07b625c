"""Categorical columns with too many distinct values to one-hot encode unasked.

A text column of dates, IDs or free text read as categorical becomes one
one-hot column per distinct value: thousands of columns that mean nothing to
a model (a Parquet file's dates as text gave 2,888). :class:`PartyPreprocessor
<vflsec.data.PartyPreprocessor>` refuses such a column with a
:class:`HighCardinalityError` unless the party says what it is: its type
(``column_types``: ``"date"``, ``"numeric"``, ``"id"``, ``"drop"``), its
categories (``categories``), or that it is a categorical column of many
values on purpose (``high_cardinality``).

A column whose categories are learned from the training rows is
high-cardinality when it has more than ``cardinality_limit`` distinct values
(default :data:`CARDINALITY_LIMIT`, 100), or at least
:data:`MIN_FLAGGED_DISTINCT` (20) of them and on average fewer than
:data:`MIN_ROWS_PER_VALUE` (2) rows per value (what an ID, a date or free text
gives in a small table). Missing cells are not a value.
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["CARDINALITY_LIMIT", "HighCardinality", "HighCardinalityError", "high_cardinality"]

CARDINALITY_LIMIT = 100
MIN_FLAGGED_DISTINCT = 20
MIN_ROWS_PER_VALUE = 2
_SAMPLE = 50  # distinct values looked at to say what the column looks like
_OTHER_DATES = "other-dates"
_DATE_LIKE = re.compile(r"^\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*$")


@dataclass(frozen=True)
class HighCardinality:
    """One refused column: its ``name``, ``n_distinct`` values (missing not
    counted) in ``n_rows`` training rows, the ``limit`` it exceeded (None:
    it exceeded the rows-per-value rule) and what its values ``look_like``:
    ``"date"`` (text a declared date column reads), ``"numeric"``, ``"id"``
    (a different value in every row), ``"other-dates"`` (dates in a form a
    date column does not read, such as day/month/year) or None."""

    name: str
    n_distinct: int
    n_rows: int
    limit: Optional[int]
    looks_like: Optional[str]

    def reason(self) -> str:
        """Why the column is refused, in words (no parameter names)."""
        counts = f"{self.n_distinct} distinct values in {self.n_rows} training rows"
        if self.looks_like == "id":
            return f"{counts}: a different value in each row, as an ID has"
        if self.limit is not None:
            return f"{counts} (more than the limit of {self.limit})"
        return f"{counts} (fewer than {MIN_ROWS_PER_VALUE} rows per value)"


class HighCardinalityError(ValueError):
    """Categorical columns refused for their number of distinct values.

    ``columns``: a :class:`HighCardinality` per refused column. The message
    names each column, its distinct values and rows, and the
    ``PartyPreprocessor`` parameters that retype or accept it;
    :meth:`describe` and :meth:`fix` word them for another interface (the
    command line's options, a party file's ``[preprocess]`` keys).
    """

    def __init__(self, columns: Sequence[HighCardinality]) -> None:
        self.columns = list(columns)
        super().__init__(f"{self.describe()} -- " + self.fix(lambda types: f"column_types={types!r}",
                                                             lambda names: f"high_cardinality={names!r}"))

    def __reduce__(self) -> Any:  # pickled with its columns (joblib workers raise it in another process)
        return (type(self), (self.columns,))

    def describe(self) -> str:
        """What is refused, without parameter names."""
        return ("; ".join(f"column {c.name!r} has {c.reason()}" for c in self.columns)
                + ": one-hot encoding would make a column per value")

    def fix(self, declare: Callable[[Dict[str, str]], str], accept: Callable[[List[str]], str],
            pool: str = "max_categories") -> str:
        """The fix, with ``declare(column -> type)`` and ``accept(columns)``
        spelling a declaration of column types and of high-cardinality
        columns in the caller's terms, and ``pool`` naming ``max_categories``."""
        names = [c.name for c in self.columns]
        them = "it" if len(names) == 1 else "them"
        typed = {c.name: c.looks_like for c in self.columns if c.looks_like not in (None, _OTHER_DATES)}
        parts = [f"declare {'its' if len(names) == 1 else 'the'} type ({declare(typed)})"] if typed else []
        other_dates = {c.name: "date" for c in self.columns if c.looks_like == _OTHER_DATES}
        if other_dates:
            parts.append(f"write the dates as 2024-01-31 (ISO 8601) and declare the type ({declare(other_dates)})")
        parts.append(f"leave {them} out ({declare({n: 'drop' for n in names})})")
        parts.append(f"one-hot encode {them} anyway ({accept(names)}; {pool} pools the rarest values)")
        return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]


def _looks_like(texts: np.ndarray, n_distinct: int, n_values: int) -> Optional[str]:
    if n_distinct == n_values:
        return "id"
    sample = [str(t) for t in texts[:_SAMPLE]]
    if all(_DATE_LIKE.match(t) for t in sample):
        import pandas as pd

        # as a declared date column reads them (vflsec.data._columns.date_values)
        parsed = pd.to_datetime(pd.Series(texts, dtype=object), errors="coerce", utc=True)
        return _OTHER_DATES if parsed.isna().any() else "date"
    try:
        [float(t) for t in sample]
    except ValueError:
        return None
    return "numeric"


def high_cardinality(name: str, texts: np.ndarray, present: np.ndarray,
                     limit: Optional[int]) -> Optional[HighCardinality]:
    """The column's :class:`HighCardinality`, or None when it is not one
    (module docstring); ``texts``: its values as text, ``present``: which are
    not missing; ``limit``: ``cardinality_limit`` (None: no column is)."""
    if limit is None:
        return None
    values = texts[present]
    distinct = np.unique(values.astype(str)) if values.size else values
    n_distinct, n_rows = int(distinct.size), int(texts.size)
    over_limit = n_distinct > limit
    per_row = n_distinct >= MIN_FLAGGED_DISTINCT and n_distinct * MIN_ROWS_PER_VALUE > n_rows
    if not (over_limit or per_row):
        return None
    return HighCardinality(name=name, n_distinct=n_distinct, n_rows=n_rows, limit=limit if over_limit else None,
                           looks_like=_looks_like(distinct, n_distinct, int(values.size)))


def checked_texts(frame: Any, names: Sequence[str], limit: Optional[int],
                  texts_of: Callable[[Any, str], np.ndarray]) -> Dict[str, np.ndarray]:
    """Column name -> ``texts_of(frame[name], name)`` (its categories as text)
    for the categorical columns ``names`` whose categories are learned, after
    refusing with one :class:`HighCardinalityError` every one of them that is
    high-cardinality under ``limit`` (None: none is, nothing is made)."""
    texts: Dict[str, np.ndarray] = {}
    if limit is None:
        return texts
    refused = []
    for name in names:
        series = frame[name]
        texts[name] = texts_of(series, name)
        present = ~np.asarray(series.isna().to_numpy(), dtype=bool)
        found = high_cardinality(name, texts[name], present, limit)
        if found is not None:
            refused.append(found)
    if refused:
        raise HighCardinalityError(refused)
    return texts


def check_limit(value: Any) -> Optional[int]:
    """``cardinality_limit`` checked: an int >= 1 or None."""
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)) or value < 1:
        raise ValueError(f"cardinality_limit must be an int >= 1 or None (no limit), got {value!r}")
    return int(value)


def check_names(value: Any) -> List[str]:
    """``high_cardinality`` checked: column names (a list or tuple of str), none twice."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
            isinstance(v, str) for v in value):
        raise TypeError(f"high_cardinality must be a list of column names (str), got {value!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"high_cardinality names a column twice: {list(value)}")
    return list(value)
