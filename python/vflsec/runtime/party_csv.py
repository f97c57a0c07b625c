"""The per-party CSV files ``vflsec party`` reads and ``vflsec party-data``
writes: a header row, an ID column, the active party's label column, then
numeric feature columns.

:func:`read_party_csv` reads the numbers with pyarrow when it is installed
(the ``data`` extra): the file streamed batch by batch into one float64 array
allocated once (a first pass counts the lines), so the table takes its own
size beside the IDs, not a Python float per cell. Without pyarrow (the ``net``
extra alone), for a file pyarrow does not read as plain numbers (a bad cell, a
ragged row, a number only Python reads such as ``1_000``, a header over
several lines), the rows are read with Python's ``csv`` module into the same
kind of array. Either way the errors are the same, one line naming the file,
the line and the column or cell: the ``csv`` reader's, whose line numbers
count the records after the header from 2.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["read_party_csv", "write_csv"]

# CSV bytes per pyarrow batch: its reader holds about 35 such blocks in flight (read ahead,
# parsed, converted), so this bounds its memory beside the table; a row longer than this
# goes to the csv reader.
_BLOCK_BYTES = 1 << 20
# An ID that str.strip() leaves empty: nothing but the characters str.isspace() accepts (RE2 syntax).
_BLANK = (r"^[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
          r"\x{202f}\x{205f}\x{3000}]*$")


@dataclass(frozen=True)
class _Header:
    """The header row of a party CSV and where its columns are."""

    path: Path
    names: List[str]
    id_column: str
    label_column: Optional[str]
    id_at: int
    label_at: Optional[int]
    feature_at: List[int]
    lines: int  # physical lines the header row takes


@dataclass
class _Rows:
    """The rows as read: IDs, the features (n, d) and the labels (None without
    a label column). ``by_csv``: read by the ``csv`` reader, which raised
    every mistake of a line already; else read by pyarrow, with the first row
    holding an empty ID (``first_empty_id``) and whether any cell is NaN or inf."""

    ids: Sequence[str]  # a list (the csv reader) or an IdColumn (pyarrow)
    X: np.ndarray
    y: Optional[np.ndarray]
    by_csv: bool
    first_empty_id: Optional[int] = None
    non_finite: bool = False


class _OtherRows(Exception):
    """The ``csv`` reader's records are not the rows pyarrow read (a line
    number cannot be given for them): the file is read again by the ``csv``
    reader."""


def read_party_csv(path: Path, id_column: str, label_column: Optional[str], *, allow_no_features: bool = False):
    """``(ids, X, y, feature_names)`` from a CSV with a header row; every
    column other than the ID and label columns is a numeric feature.
    ``allow_no_features``: a file with only IDs (and labels) gives an
    ``(n, 0)`` X (a split-learning active party without features).

    ValueError naming the file (and the line where there is one) for: no
    header, no data rows, a missing ID or label column, a row with another
    number of fields than the header, an empty or repeated ID
    (:func:`vflsec.federation.psi.check_ids`), a cell that is not a number,
    NaN or inf. Of several mistakes, the one the ``csv`` reader meets first:
    the lines in order, then the IDs, then NaN/inf."""
    header = _read_header(path, id_column, label_column, allow_no_features)
    capacity = _count_lines(path)
    rows = _read_arrow(header, capacity) if header.lines == 1 else None
    if rows is not None:
        try:
            return _checked(header, rows)
        except _OtherRows:
            del rows
    return _checked(header, _read_python(header, capacity))


def _checked(header: _Header, rows: _Rows):
    """``read_party_csv``'s result from the rows read, after the checks the
    ``csv`` reader makes after the lines (no rows, the IDs, NaN/inf)."""
    from ..federation.psi import check_ids

    path = header.path
    if not rows.by_csv:
        _raise_line_mistake(header, rows)
    if not rows.ids:
        raise ValueError(f"{path} has a header but no data rows")
    ids = check_ids(rows.ids, f"{path}: the ID column {header.id_column!r}")
    for values, what in ((rows.X, "features contain"), (rows.y, f"the label column {header.label_column!r} holds")):
        if values is not None:
            first = _first_non_finite_row(values.reshape(len(rows.ids), -1))
            if first is not None:
                raise ValueError(f"{path}:{_line_of_row(header, rows, first)}: {what} NaN or inf")
    return ids, rows.X, rows.y, [header.names[i] for i in header.feature_at]


def _read_header(path: Path, id_column: str, label_column: Optional[str], allow_no_features: bool) -> _Header:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            names = next(reader)
        except StopIteration:
            raise ValueError(f"{path} is empty") from None
        lines = reader.line_num
    if id_column not in names:
        raise ValueError(f"{path}: no ID column {id_column!r} in header {names}")
    if label_column is not None and label_column not in names:
        raise ValueError(f"{path}: no label column {label_column!r} in header {names}")
    id_at = names.index(id_column)
    label_at = names.index(label_column) if label_column is not None else None
    feature_at = [i for i in range(len(names)) if i not in (id_at, label_at)]
    if not feature_at and not allow_no_features:
        raise ValueError(f"{path} has no feature columns")
    return _Header(path, names, id_column, label_column, id_at, label_at, feature_at, lines)


def _count_lines(path: Path) -> int:
    """Newlines in the file plus one: at least the data rows (the arrays are
    allocated for that many rows, then trimmed to the rows read)."""
    count = 1
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                return count
            count += chunk.count(b"\n")


class _Table:
    """The float64 arrays the rows are written into: allocated once for
    ``capacity`` rows, grown in place if a file has more rows than newlines
    (lone carriage returns end its lines), trimmed in place to the rows read."""

    def __init__(self, header: _Header, capacity: int):
        self.X = np.empty((capacity, len(header.feature_at)))
        self.y = np.empty(capacity) if header.label_at is not None else None
        self.ids: List[str] = []  # the csv reader's
        self.id_parts: List[Any] = []  # pyarrow's: the ID column of each batch
        self.n_rows = 0

    def reserve(self, rows: int) -> None:
        if rows > self.X.shape[0]:
            self._resize(max(rows, 2 * self.X.shape[0]))

    def _resize(self, rows: int) -> None:
        # In place (realloc): nothing else refers to these arrays while they are filled.
        self.X.resize((rows, self.X.shape[1]), refcheck=False)
        if self.y is not None:
            self.y.resize(rows, refcheck=False)

    def rows(self, *, by_csv: bool) -> _Rows:
        ids: Sequence[str] = self.ids
        if not by_csv:  # one Arrow array: the UTF-8 bytes and an offset per ID, not a Python str each
            import pyarrow as pa

            from ..federation.ids import IdColumn

            ids = IdColumn(pa.concat_arrays(self.id_parts) if self.id_parts else pa.array([], pa.large_string()))
            self.id_parts = []
        if len(ids) < self.X.shape[0]:
            self._resize(len(ids))
        return _Rows(ids, self.X, self.y, by_csv)


def _read_arrow(header: _Header, capacity: int) -> Optional[_Rows]:
    """The rows through pyarrow's streaming CSV reader, each batch written
    into the table; None when pyarrow is not installed or does not read the
    file as plain numbers (the ``csv`` reader then reads it and words the
    mistake)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    names = [f"c{i}" for i in range(len(header.names))]  # the header's own names may repeat
    numeric = header.feature_at + ([header.label_at] if header.label_at is not None else [])
    table = _Table(header, capacity)
    first_empty_id: Optional[int] = None
    non_finite = False
    try:
        reader = pacsv.open_csv(
            header.path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={names[header.id_at]: pa.large_string(), **{names[i]: pa.float64() for i in numeric}},
                null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False))
        for number, batch in enumerate(reader):
            if number % 16 == 15:  # the parser's freed blocks back to the system as it goes, not at the end
                pa.default_memory_pool().release_unused()
            start, count = table.n_rows, batch.num_rows
            ids = batch.column(header.id_at)
            if first_empty_id is None:
                blank = pc.match_substring_regex(ids, _BLANK)  # what str.strip() empties
                if pc.any(blank).as_py():
                    first_empty_id = start + int(pc.index(blank, True).as_py())
            table.id_parts.append(pa.concat_arrays([ids]))  # a copy: the column alone keeps the whole block
            table.n_rows += count
            table.reserve(start + count)
            if any(batch.column(at).null_count for at in numeric):
                return None  # none with null_values=[]; the csv reader reads such a file
            for j, at in enumerate(header.feature_at):
                values = _float_values(batch.column(at))
                non_finite = non_finite or not np.isfinite(values).all()
                table.X[start:start + count, j] = values
            if table.y is not None:
                values = _float_values(batch.column(header.label_at))
                non_finite = non_finite or not np.isfinite(values).all()
                table.y[start:start + count] = values
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    finally:
        reader = batch = None
        # The reader's freed blocks stay with pyarrow's allocator otherwise (tens of MB).
        pa.default_memory_pool().release_unused()
    rows = table.rows(by_csv=False)
    rows.first_empty_id, rows.non_finite = first_empty_id, non_finite
    return rows


def _float_values(column) -> np.ndarray:
    """A pyarrow float64 column without nulls as a numpy view of its buffer
    (``to_numpy`` would import pandas: tens of MB)."""
    return np.frombuffer(column.buffers()[1], dtype=np.float64, count=len(column), offset=column.offset * 8)


def _raise_line_mistake(header: _Header, rows: _Rows) -> None:
    """For rows pyarrow read: the first mistake of a line the ``csv`` reader
    raises, in line order: an empty ID, or a cell Python's ``float`` refuses
    that pyarrow read as NaN (such as ``nan(1)``). NaN and inf that ``float``
    reads too are left to the checks after the IDs."""
    limit = len(rows.ids) if rows.first_empty_id is None else rows.first_empty_id
    suspects = set(_non_finite_rows(rows, limit)) if rows.non_finite else set()
    if suspects:
        last = max(suspects)
        for row, line_no, fields in _records(header.path):
            if row > last:
                break
            if row not in suspects:
                continue
            if fields[header.id_at] != rows.ids[row]:
                raise _OtherRows
            cells = [(rows.X[row, j], fields[at]) for j, at in enumerate(header.feature_at)]
            if rows.y is not None and header.label_at is not None:
                cells.append((rows.y[row], fields[header.label_at]))
            for value, text in cells:
                if not np.isfinite(value):
                    try:
                        float(text)
                    except ValueError as exc:
                        raise ValueError(f"{header.path}:{line_no}: {exc}") from None
    if rows.first_empty_id is not None:
        raise ValueError(f"{header.path}:{_line_of_row(header, rows, rows.first_empty_id)}: empty ID in column "
                         f"{header.id_column!r}")


def _chunk_rows(width: int) -> int:
    return max(1, (1 << 20) // max(1, width))


def _non_finite_rows(rows: _Rows, limit: int) -> Iterator[int]:
    """The rows below ``limit`` with a NaN or inf feature or label, in order."""
    step = _chunk_rows(rows.X.shape[1])
    for start in range(0, limit, step):
        stop = min(limit, start + step)
        bad = ~np.isfinite(rows.X[start:stop]).all(axis=1)
        if rows.y is not None:
            bad |= ~np.isfinite(rows.y[start:stop])
        yield from (start + int(i) for i in np.flatnonzero(bad))


def _first_non_finite_row(values: np.ndarray) -> Optional[int]:
    """The first row of the 2-D ``values`` with NaN or inf (None if none), read in chunks."""
    step = _chunk_rows(values.shape[1])
    for start in range(0, values.shape[0], step):
        bad = np.flatnonzero(~np.isfinite(values[start:start + step]).all(axis=1))
        if bad.size:
            return start + int(bad[0])
    return None


def _records(path: Path) -> Iterator[Tuple[int, int, List[str]]]:
    """``(row, line, fields)`` of every data row as the ``csv`` reader numbers
    them: rows from 0, lines from 2 (the header's record is line 1; a blank
    record counts as a line and is no row)."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        row = 0
        for line_no, fields in enumerate(reader, start=2):
            if fields:
                yield row, line_no, fields
                row += 1


def _line_of_row(header: _Header, rows: _Rows, row: int) -> int:
    """The line (as the ``csv`` reader numbers them) of data row ``row``;
    :class:`_OtherRows` when the ``csv`` reader's row there is another."""
    for found, line_no, fields in _records(header.path):
        if found == row:
            if fields[header.id_at] != rows.ids[row]:
                raise _OtherRows
            return line_no
    raise _OtherRows


def _read_python(header: _Header, capacity: int) -> _Rows:
    """The rows through Python's ``csv`` module; the first mistake of a line
    (its number of fields, an empty ID, a cell ``float`` refuses) raised with
    the file and the line."""
    path, id_at, label_at, feature_at = header.path, header.id_at, header.label_at, header.feature_at
    table = _Table(header, capacity)
    ids = table.ids
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header.names):
                raise ValueError(f"{path}:{line_no}: {len(row)} fields, header has {len(header.names)}")
            if not row[id_at].strip():
                raise ValueError(f"{path}:{line_no}: empty ID in column {header.id_column!r}")
            at = len(ids)
            table.reserve(at + 1)
            try:
                table.X[at] = [float(row[i]) for i in feature_at]
                if table.y is not None and label_at is not None:
                    table.y[at] = float(row[label_at])
            except ValueError as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from None
            ids.append(row[id_at])
    return table.rows(by_csv=True)


def write_csv(path: Path, ids: Sequence[str], X: np.ndarray, y: Optional[np.ndarray] = None,
              *, id_column: str = "id", label_column: str = "y",
              feature_names: Optional[Sequence[str]] = None) -> None:
    """Write one party's CSV; floats with ``repr`` precision (exact round trip).

    ``feature_names``: the header of the feature columns (a preprocessor's
    ``get_feature_names_out()``, a dataset's column names); default ``x0``,
    ``x1``, .... A name or ID holding a comma, a quote or a line break is
    quoted (as :func:`read_party_csv` reads it back)."""
    X = np.asarray(X, dtype=np.float64)
    if feature_names is None:
        names = [f"x{j}" for j in range(X.shape[1])]
    else:
        names = [str(n) for n in feature_names]
        if len(names) != X.shape[1]:
            raise ValueError(f"{len(names)} feature names for {X.shape[1]} feature columns")
    header = [id_column] + ([label_column] if y is not None else []) + names
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        for i, ident in enumerate(ids):
            writer.writerow([ident] + ([repr(float(y[i]))] if y is not None else []) + [repr(float(v)) for v in X[i]])
