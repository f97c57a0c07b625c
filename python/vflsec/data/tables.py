"""A party's own table file (CSV or Parquet) read into typed columns, and the
in-process alignment of several parties' tables by ID.

:func:`read_table` reads one party's file: an ID column, optionally a label
column, and feature columns with the types pyarrow infers (numbers, text,
dates and timestamps, booleans; a Parquet text column of ISO dates becomes a
date column, as the same CSV column does: :func:`text_dates`). Missing feature values stay missing
(NaN/None: the preprocessor imputes them); every other mistake in the data is
a :class:`TableError` (a ``ValueError``) whose one-line message names the
file, the row (and CSV line) and the column, and says what to do.

:func:`align` is what PSI does between processes, done in one process for
experiments: the rows of the IDs every party holds, in one common order.

pyarrow and pandas are the ``data`` extra (``pip install "vflsec[data]"``).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .._arrays import check_positive_int
from ..errors import require_extra
from ._table_files import (
    SUFFIXES,
    TableError,
    TableFileNotFoundError,
    TableSource,
    column_list,
    open_table_source,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["SUFFIXES", "Alignment", "PartyTable", "TableError", "TableFileNotFoundError", "align", "read_table",
           "table_columns"]

_SHOWN_CLASSES = 8  # distinct label values an error lists


@dataclass(frozen=True, eq=False)
class PartyTable:
    """One party's table as :func:`read_table` returns it.

    ``ids``: numpy array of str, one per row, unique (row numbers "1", "2",
    ... when the file has no ID column); ``features``: pandas DataFrame of
    the other columns, original names and order, with the dtypes pyarrow
    inferred (int64/float64, bool, pandas' string dtype, datetime64 for dates
    and timestamps -- also for a Parquet text column of ISO dates, as for the
    same CSV column --, category for a Parquet dictionary column); an int column
    with missing cells is float64 with NaN, a bool column with missing cells
    float64 1.0/0.0/NaN (as pandas does for ints); ``labels``: int64 0/1 per
    row, or None without a label column; ``label_classes``: the original
    label values coded 0 and 1, ``(negative, positive)`` -- set when
    ``positive_label`` was used (always for text labels); None when the
    column already held 0/1 or booleans; the negative class is None when no
    row has it.
    """

    path: Path
    ids: np.ndarray
    features: "pd.DataFrame"
    id_column: Optional[str]
    label_column: Optional[str] = None
    labels: Optional[np.ndarray] = None
    label_classes: Optional[Tuple[Any, Any]] = None

    @property
    def n_rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def feature_names(self) -> Tuple[str, ...]:
        return tuple(str(c) for c in self.features.columns)


def _as_path(path: Any) -> Path:
    if isinstance(path, Path):
        return path
    if isinstance(path, str) or hasattr(path, "__fspath__"):
        return Path(path)
    raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")


def _check_name(value: Any, arg: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{arg} must be a non-empty str or None, got {value!r}")


def table_columns(path: Any, *, batch_rows: int = 65536) -> List[str]:
    """The column names of a CSV/Parquet table file, in file order (reads
    only the header; e.g. to pick the last column as the label)."""
    require_extra("pyarrow")
    source = open_table_source(_as_path(path), check_positive_int(batch_rows, "batch_rows"))
    names = source.column_names()
    _check_header(source, names)
    return names


def read_table(path: Any, *, id_column: Optional[str], label_column: Optional[str] = None,
               positive_label: Any = None, columns: Optional[Sequence[str]] = None,
               batch_rows: int = 65536) -> PartyTable:
    """Read one party's table file into a :class:`PartyTable`.

    The format comes from the name: ``.csv``, ``.csv.gz`` (comma-separated,
    UTF-8, a header line naming the columns; empty cells and ``NA``/``NaN``/
    ``null`` are missing values, as in pandas) or ``.parquet``/``.pq``.

    ``id_column``: the column linking the parties' rows (read as text:
    ``007`` stays ``007``; no cell empty, no ID twice); None when the file has
    none (the IDs are then the row numbers). ``label_column``: the active
    party's label (0/1, booleans, or two classes named by
    ``positive_label``, the value coded 1); None for a party without labels.
    ``columns``: the feature columns to read (default: all but the ID and
    label columns); ``batch_rows``: rows per batch read.

    Streaming: the file is read ``batch_rows`` rows at a time (for CSV, a
    block size in bytes estimated from the line lengths of its first MiB;
    Parquet: ``ParquetFile.iter_batches``); the batches are gathered into
    one pyarrow Table without copying, and that Table is converted to the
    pandas DataFrame once, with ``self_destruct`` so each Arrow column is
    released as it is converted: the file's data is never held twice. The
    result is a DataFrame (not the Arrow Table) because the preprocessor and
    scikit-learn take DataFrames. A CSV column whose type changes after the
    first block (``abc`` below a thousand numbers) is widened and the file
    read again.

    Dates are read the same way from both formats: a CSV column of ISO dates
    (``2024-01-31``, ``2024-01-31 10:00:00``) is inferred a date or
    timestamp column by pyarrow, and a Parquet text column of the same cells
    is converted to the same type (:func:`text_dates`; pandas writes a
    column it read from CSV without ``parse_dates`` as text). A Parquet
    date or timestamp column stays one; other Parquet text stays text (a
    Parquet file's writer chose its numbers' types).

    Raises :class:`TableError` (a ``ValueError``; for a missing file also a
    ``FileNotFoundError``) naming the file, row, CSV line and column, with
    the fix.
    """
    require_extra("pyarrow", "pandas")
    path = _as_path(path)
    _check_name(id_column, "id_column")
    _check_name(label_column, "label_column")
    if label_column is not None and label_column == id_column:
        raise ValueError(f"label_column and id_column are both {label_column!r}; they must be two columns")
    if positive_label is not None and label_column is None:
        raise ValueError("positive_label needs label_column (the column whose value it names)")
    if columns is not None:
        if isinstance(columns, (str, bytes)) or not all(isinstance(c, str) for c in columns):
            raise TypeError("columns must be a sequence of column names (str)")
    batch_rows = check_positive_int(batch_rows, "batch_rows")

    source = open_table_source(path, batch_rows)
    header = source.column_names()
    _check_header(source, header)
    for role, name, arg in (("ID", id_column, "id_column"), ("label", label_column, "label_column")):
        if name is not None and name not in header:
            raise _missing_column(source, header, name, f"no {role} column {name!r}", arg)
    special = {id_column, label_column}
    if columns is None:
        features = [n for n in header if n not in special]
    else:
        for name in columns:
            if name not in header:
                raise _missing_column(source, header, name, f"no column {name!r} (named in columns=)", "columns")
        features = list(dict.fromkeys(n for n in columns if n not in special))
    wanted = [n for n in (id_column, label_column) if n is not None] + features
    batches = source.read_batches(wanted, [id_column] if id_column is not None else [])
    n_rows = sum(b.num_rows for b in batches)
    if n_rows == 0:
        raise source.error(f"has no data rows (only the header: {column_list(header)})",
                           "the file needs one row per ID below the header")
    return _build(source, batches, id_column, label_column, positive_label, features)


def _check_header(source: TableSource, header: List[str]) -> None:
    if not header:
        raise source.error("has no columns", "the first line must name the columns, e.g. id,age,income")
    seen: Dict[str, int] = {}
    for j, name in enumerate(header, start=1):
        if not name.strip():
            raise TableError(source.path, f"column {j} of the header has no name", "name every column",
                             line=1 if source.kind == "csv" else None)
        if name in seen:
            raise TableError(source.path, f"the header names column {name!r} twice (columns {seen[name]} and {j})",
                             "rename one of them", line=1 if source.kind == "csv" else None)
        seen[name] = j


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _missing_column(source: TableSource, header: List[str], wanted: str, what: str, arg: str) -> TableError:
    if source.kind == "csv" and all(_is_number(n) for n in header):  # (numbers name columns only in odd files)
        return TableError(source.path, f"the first line ({','.join(header)}) looks like data, not a header",
                          "add a first line naming the columns, e.g. id,age,income", line=1)
    close = [n for n in header if n.strip().lower() == wanted.strip().lower()]
    hint = f"did you mean {close[0]!r}? " if close else ""
    return source.error(what, f"{hint}the columns are {column_list(header)}: pass {arg}= one of them")


def _build(source: TableSource, batches: List["pa.RecordBatch"], id_column: Optional[str],
           label_column: Optional[str], positive_label: Any, features: List[str]) -> PartyTable:
    import pyarrow as pa

    table = pa.Table.from_batches(batches)
    batches.clear()  # the Table holds the data now; no second reference stays behind
    n_rows = table.num_rows
    if id_column is not None:
        ids = _ids(source, table.column(id_column), id_column)
    else:
        ids = np.arange(1, n_rows + 1).astype(str)
    labels, classes = (None, None) if label_column is None else _labels(source, table.column(label_column),
                                                                       label_column, positive_label)
    feature_table = table.select(features)
    del table
    for j, field in enumerate(feature_table.schema):
        column = feature_table.column(j)
        if pa.types.is_null(field.type) or (pa.types.is_boolean(field.type) and column.null_count):
            feature_table = feature_table.set_column(j, field.name, column.cast(pa.float64()))
        elif source.kind == "parquet" and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            dates = text_dates(column)
            if dates is not None:
                feature_table = feature_table.set_column(j, field.name, dates)
    frame = feature_table.to_pandas(self_destruct=True, split_blocks=True, date_as_object=False,
                                    ignore_metadata=True)
    del feature_table
    return PartyTable(path=source.path, ids=ids, features=frame, id_column=id_column, label_column=label_column,
                      labels=labels, label_classes=classes)


# --------------------------------------------------------------------- dates in text

# The types pyarrow's CSV reader infers for a column of dates and times, in the order it tries
# them; a zone offset (``Z``, ``+02:00``) in every value gives the UTC ones.
_DATE_TYPES = ("date32", "s", "ns", "s-utc", "ns-utc")
_DATE_SAMPLE = 64  # cells cast first: a text column of categories fails on them, not on every row


def _date_type(name: str) -> "pa.DataType":
    import pyarrow as pa

    if name == "date32":
        return pa.date32()
    unit, _, zone = name.partition("-")
    return pa.timestamp(unit, tz="UTC" if zone else None)


def text_dates(column: Any) -> Any:
    """A text column (pyarrow string) as the date or timestamp column that
    pyarrow's CSV reader infers from the same cells, or None when it would
    keep it text: the cells CSV reads as missing (empty, ``NA``, ``null``,
    ...: ``pyarrow.csv.ConvertOptions().null_values``) are missing, every
    other cell must parse as an ISO 8601 date (``2024-01-31``: date32) or
    date and time (``2024-01-31 10:00:00``, ``T``, fractions of a second, a
    zone offset: timestamp, UTC where the cells carry an offset), and at
    least one cell must hold one. A Parquet file's text column of dates thus
    becomes a date column, as the same column of a CSV file does."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    missing = pc.is_in(column, value_set=pa.array(pcsv.ConvertOptions().null_values, type=column.type))
    values = pc.if_else(missing, pa.scalar(None, type=column.type), column)
    if values.null_count == len(values):
        return None
    # A failed cast of a long column costs about a second: the first cells decide which casts are tried.
    head = values.drop_null().slice(0, _DATE_SAMPLE)
    for name in _DATE_TYPES:
        for cells in (head, values):
            try:
                dates = cells.cast(_date_type(name))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                break
        else:
            return dates
    return None


# --------------------------------------------------------------------- IDs

def _first(mask: Any) -> Optional[int]:
    """Index of the first true value of a boolean (chunked) Arrow array or numpy array."""
    values = mask if isinstance(mask, np.ndarray) else mask.to_numpy(zero_copy_only=False)
    hits = np.flatnonzero(np.asarray(values, dtype=bool))
    return int(hits[0]) if hits.size else None


def _blank(column: Any) -> Any:
    """Per cell: missing, or text that is empty or only spaces."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.equal(pc.utf8_trim_whitespace(column), ""), True)


def _ids(source: TableSource, column: Any, name: str) -> np.ndarray:
    import pyarrow as pa

    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        try:
            column = column.cast(pa.string())
        except (pa.ArrowException, NotImplementedError):
            raise source.error(f"the ID column holds {column.type} values", "IDs must be text or integers",
                               column=name) from None
    empty = _first(_blank(column))
    if empty is not None:
        raise source.error("the ID is empty", "give every row an ID (it links the parties' rows) or drop the row",
                           row=empty + 1, column=name)
    ids = np.asarray(column.to_numpy(zero_copy_only=False), dtype=str)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeated.size:
        second_rows = order[repeated + 1]
        k = int(np.argmin(second_rows))
        first, second = int(order[repeated[k]]) + 1, int(second_rows[k]) + 1
        line = source.line_of(first)
        raise source.error(f"ID {str(ids[second - 1])!r} is also in row {first}" + (f" (line {line})" if line else ""),
                           "IDs must be unique in a party's file: remove or merge the repeated row",
                           row=second, column=name)
    return ids


# --------------------------------------------------------------------- labels

def _show(values: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in values[:_SHOWN_CLASSES])
    return shown + (f" ... ({len(values)} in all)" if len(values) > _SHOWN_CLASSES else "")


def _by_appearance(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct values in the order they first appear, and those first rows (0-based)."""
    distinct, first = np.unique(values, return_index=True)
    order = np.argsort(first, kind="stable")
    return distinct[order], first[order]


def _labels(source: TableSource, column: Any, name: str, positive_label: Any) -> Tuple[np.ndarray, Any]:
    import pyarrow as pa

    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    empty = _first(_blank(column) if text else column.is_null())
    if empty is not None:
        raise source.error("the label is empty", "fill in the label or drop the row (a party without labels "
                           "leaves the label column out)", row=empty + 1, column=name)
    if text:
        return _text_labels(source, np.asarray(column.to_numpy(zero_copy_only=False), dtype=str), name,
                            positive_label)
    if not (pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise source.error(f"the label column holds {kind} values",
                           "labels are 0/1, true/false, or two text classes with positive_label", column=name)
    values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    bad = _first(~np.isfinite(values))
    if bad is not None:
        raise source.error(f"the label is {values[bad]}", "a label is 0 or 1 (or one of two classes): "
                           "correct or drop the row", row=bad + 1, column=name)
    native = bool if pa.types.is_boolean(kind) else (int if pa.types.is_integer(kind) else float)
    return _number_labels(source, values, name, positive_label, native)


def _native(value: Any, native: Any) -> Any:
    """A label value as the column's Python type (2, not 2.0, from an int column)."""
    return native(value)


def _third_class(source: TableSource, classes: Sequence[Any], firsts: np.ndarray, name: str) -> TableError:
    return source.error(f"label {classes[2]!r} is a third class (the column holds {len(classes)} values: "
                        f"{_show(list(classes))})", "a binary label takes two values: correct or drop the row, "
                        "or choose the right label column", row=int(firsts[2]) + 1, column=name)


def _number_labels(source: TableSource, values: np.ndarray, name: str, positive_label: Any,
                   native: Any) -> Tuple[np.ndarray, Any]:
    distinct, firsts = _by_appearance(values)
    classes = [_native(v, native) for v in distinct]
    if positive_label is None:
        bad = _first((values != 0) & (values != 1))
        if bad is None:
            return values.astype(np.int64), None
        value = _native(values[bad], native)
        if len(classes) <= 2:
            fix = (f"recode the column as 0/1, or pass positive_label={max(classes)!r} to say which of "
                   f"{_show(sorted(classes))} is the class coded 1")
        else:
            fix = "a binary label is 0 or 1: correct or drop the row, or choose the right label column"
        raise source.error(f"label {value!r} is not 0 or 1 (the column holds {_show(classes)})", fix,
                           row=bad + 1, column=name)
    if len(classes) > 2:
        raise _third_class(source, classes, firsts, name)
    positive = _number_or_none(positive_label)
    if positive is None or positive not in distinct:
        raise source.error(f"positive_label {positive_label!r} is not among the labels ({_show(classes)})",
                           f"pass positive_label= one of {_show(classes)} (the class coded 1)", column=name)
    negative = next((c for c, v in zip(classes, distinct) if v != positive), None)
    return (values == positive).astype(np.int64), (negative, _native(positive, native))


def _number_or_none(value: Any) -> Optional[float]:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return 1.0 if text == "true" else 0.0
        try:
            return float(text)
        except ValueError:
            return None
    if isinstance(value, (bool, numbers.Real)):
        return float(value)
    return None


def _text_labels(source: TableSource, values: np.ndarray, name: str, positive_label: Any) -> Tuple[np.ndarray, Any]:
    classes, firsts = _by_appearance(values)
    found = [str(c) for c in classes]
    if len(found) > 2:
        raise _third_class(source, found, firsts, name)
    if positive_label is None:
        raise source.error(f"the labels are text ({_show(found)})",
                           f"pass positive_label= the class coded 1, e.g. positive_label={found[-1]!r}", column=name)
    positive = str(positive_label)
    if positive not in found:
        close = [c for c in found if c.strip().lower() == positive.strip().lower()]
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise source.error(f"positive_label {positive!r} is not among the labels ({_show(found)})",
                           f"{hint}pass positive_label= one of {_show(found)} (the class coded 1)", column=name)
    negative = next((c for c in found if c != positive), None)
    return (values == positive).astype(np.int64), (negative, positive)


# --------------------------------------------------------------------- align

@dataclass(frozen=True, eq=False)
class Alignment:
    """What :func:`align` returns.

    ``frames``: party name -> that party's frame (DataFrame or
    :class:`PartyTable`, as given) holding only the common IDs, every frame
    in the same row order (the order of ``ids``), index reset to 0..n-1;
    ``ids``: the common IDs, sorted as text (str); ``rows_before``: party ->
    its number of rows before alignment.
    """

    frames: Dict[str, Any]
    ids: np.ndarray
    rows_before: Dict[str, int]

    @property
    def n_common(self) -> int:
        return int(self.ids.shape[0])

    @property
    def dropped(self) -> Dict[str, int]:
        """Party -> its rows whose ID some other party does not hold."""
        return {name: n - self.n_common for name, n in self.rows_before.items()}


def _frame_ids(name: str, frame: Any, id_column: Optional[str]) -> np.ndarray:
    if isinstance(frame, PartyTable):
        return np.asarray(frame.ids, dtype=str)
    if not (hasattr(frame, "columns") and hasattr(frame, "iloc")):
        raise TypeError(f"party {name!r}: expected a pandas DataFrame or a PartyTable, got {type(frame).__name__}")
    if id_column is None:
        raise ValueError(f"party {name!r} is a DataFrame: pass id_column= the column that holds the IDs")
    if id_column not in frame.columns:
        raise ValueError(f"party {name!r}: no ID column {id_column!r} -- the columns are "
                         f"{column_list([str(c) for c in frame.columns])}: pass id_column= one of them")
    column = frame[id_column]
    blank = np.asarray(column.isna(), dtype=bool) | np.asarray(column.astype(str).str.strip() == "", dtype=bool)
    empty = _first(blank)
    if empty is not None:
        raise ValueError(f"party {name!r}: row {empty + 1} has no ID (column {id_column!r}) -- give every row an "
                         "ID or drop the row")
    ids = np.asarray(column.astype(str).to_numpy(), dtype=str)
    order = np.argsort(ids, kind="stable")
    repeated = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if repeated.size:
        second = order[repeated + 1]
        k = int(np.argmin(second))
        raise ValueError(f"party {name!r}: ID {str(ids[second[k]])!r} is in rows {int(order[repeated[k]]) + 1} and "
                         f"{int(second[k]) + 1} (column {id_column!r}) -- IDs must be unique per party: drop or merge "
                         f"the repeated rows (e.g. frame.drop_duplicates(subset={id_column!r}))")
    return ids


def _take(frame: Any, rows: np.ndarray) -> Any:
    if isinstance(frame, PartyTable):
        return replace(frame, ids=frame.ids[rows], features=frame.features.iloc[rows].reset_index(drop=True),
                       labels=None if frame.labels is None else frame.labels[rows])
    return frame.iloc[rows].reset_index(drop=True)


def align(frames: Mapping[str, Any], id_column: Optional[str] = None) -> Alignment:
    """Keep the rows of the IDs every party holds, in one order: what PSI
    does between processes (:mod:`vflsec.federation.psi`), in one process.

    ``frames``: party name -> pandas DataFrame (its IDs in ``id_column``) or
    :class:`PartyTable` (its ``ids``). IDs are compared as text (``str`` of
    each value, as they cross PSI: ``7`` and ``"7"`` match, ``"007"`` does
    not), and the rows are ordered by sorted ID (Python's string order, the
    order PSI gives). Returns an :class:`Alignment` (``frames``, ``ids``,
    ``rows_before``, ``n_common``, ``dropped``).

    ValueError naming the party for a missing ID column, an empty or
    repeated ID, and when no ID is held by every party.
    """
    if not isinstance(frames, Mapping) or not frames:
        raise ValueError("frames must be a non-empty mapping of party name -> DataFrame or PartyTable")
    _check_name(id_column, "id_column")
    ids = {str(name): _frame_ids(str(name), frame, id_column) for name, frame in frames.items()}
    common = reduce(lambda a, b: np.intersect1d(a, b, assume_unique=True), ids.values())
    if common.size == 0:
        from ..federation.id_format import IdFormat, format_hints  # what `vflsec party` says, too

        examples = "; ".join(f"{name}: {_show(sorted(v[:3].tolist()))} ({IdFormat.of(v.tolist()).describe()})"
                             for name, v in ids.items())
        hints = format_hints({f"party {name!r}": IdFormat.of(v.tolist()) for name, v in ids.items()})
        fix = ("make every party write the same text: " + "; ".join(hints) if hints else
               "the IDs are written alike, so the parties hold different customers: check the ID column and the "
               "rows of each party ('007' and '7' differ)")
        raise ValueError(f"no ID is held by every party ({examples}) -- {fix}")
    aligned: Dict[str, Any] = {}
    for name, frame in frames.items():
        own = ids[str(name)]
        order = np.argsort(own, kind="stable")
        aligned[str(name)] = _take(frame, order[np.searchsorted(own[order], common)])
    return Alignment(frames=aligned, ids=common, rows_before={name: int(v.shape[0]) for name, v in ids.items()})
