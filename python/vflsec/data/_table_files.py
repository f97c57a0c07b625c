"""The bytes of a party's table file: its format checked, its columns read in
batches with pyarrow, and every failure located in the file (row, CSV line,
column) as a :class:`TableError`.

:mod:`.tables` builds on this; nothing here looks at what the columns mean
(IDs, labels, features).
"""
from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SUFFIXES", "TableError", "TableFileNotFoundError", "TableSource", "open_table_source"]

SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_SAMPLE_BYTES = 1 << 20  # what the CSV block size is estimated from
_MAX_LISTED = 20  # column names an error lists before "... (N more)"
_NOT_UTF8_FIX = ("save the file as UTF-8 (spreadsheets: 'CSV UTF-8'; or iconv -f cp1252 -t utf-8 FILE > NEW.csv)")


class TableError(ValueError):
    """A mistake in a party's table file, located and with its fix.

    ``path``: the file; ``row``: the 1-based data row (the header is not a
    row) or None; ``line``: the CSV line (1 = the header) or None;
    ``column``: the column's name or None; ``what`` and ``fix``: the two
    halves of the one-line message ``<where>: <what> -- <fix>``.
    """

    def __init__(self, path: Any, what: str, fix: str, *, row: Optional[int] = None, line: Optional[int] = None,
                 column: Optional[str] = None) -> None:
        self.path = Path(path)
        self.row = row
        self.line = line
        self.column = column
        self.what = what
        self.fix = fix
        where = str(path)
        if row is not None:
            where += f": row {row}" + (f" (line {line})" if line is not None else "")
        elif line is not None:
            where += f": line {line}"
        if column is not None:
            where += (", " if row is not None or line is not None else ": ") + f"column {column!r}"
        super().__init__(" ".join(f"{where}: {what} -- {fix}".split()))


class TableFileNotFoundError(TableError, FileNotFoundError):
    """The table file is not there (both a :class:`TableError` and a ``FileNotFoundError``)."""


def column_list(names: Sequence[str]) -> str:
    """``'a', 'b', 'c'`` (the first few, then how many more)."""
    shown = ", ".join(repr(n) for n in names[:_MAX_LISTED])
    return shown + (f" ... ({len(names) - _MAX_LISTED} more)" if len(names) > _MAX_LISTED else "")


# --------------------------------------------------------------------- format

def table_kind(path: Path) -> str:
    """``"csv"`` or ``"parquet"`` from the file name's suffix."""
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    suffix = "".join(path.suffixes[-2:]) or "no suffix"
    raise TableError(path, f"cannot tell the file's format from its name ({suffix})",
                     f"vflsec reads {', '.join(SUFFIXES)} files: export the table as CSV or Parquet and name it so")


def _open_bytes(path: Path) -> Any:  # a binary file object (GzipFile for .gz)
    """The file's content (decompressed for ``.gz``)."""
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _check_file(path: Path, kind: str) -> None:
    """That the file is there, readable, and holds what its name says."""
    if not path.exists():
        raise TableFileNotFoundError(path, "no such file", f"check the path (a relative path starts at "
                                                          f"{Path.cwd()})")
    if path.is_dir():
        raise TableError(path, "is a directory, not a table file", "pass the CSV or Parquet file itself")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise TableError(path, f"cannot be read ({exc.strerror or exc})", "check the file's permissions") from None
    gz = path.name.lower().endswith(".gz")
    if kind == "parquet":
        if head != _PARQUET_MAGIC:
            text = bool(head) and all(32 <= b < 127 or b in b"\t\r\n" for b in head)
            looks = "it looks like text (CSV?): name it .csv" if text else "export the table as Parquet or CSV again"
            raise TableError(path, "is not a Parquet file (it does not start with PAR1)", looks)
        return
    if head == _PARQUET_MAGIC:
        raise TableError(path, "is a Parquet file, not CSV", "rename it to .parquet (or export it as CSV)")
    if head == _ZIP_MAGIC:
        raise TableError(path, "is a zip archive (an Excel workbook?), not CSV",
                         "export the sheet as CSV UTF-8, or unzip it")
    if gz and head[:2] != _GZIP_MAGIC:
        raise TableError(path, "is not gzip-compressed although its name ends in .gz", "rename it to .csv")
    if not gz and head[:2] == _GZIP_MAGIC:
        raise TableError(path, "is gzip-compressed", "rename it to .csv.gz (or decompress it)")
    if not head:
        raise TableError(path, "is empty (no header line)", "the first line must name the columns, e.g. id,age,income")


# --------------------------------------------------------------------- sources

class TableSource:
    """One table file: its column names, then its wanted columns in batches."""

    path: Path
    kind: str

    def column_names(self) -> List[str]:
        raise NotImplementedError

    def read_batches(self, wanted: Sequence[str], string_columns: Sequence[str]) -> List["pa.RecordBatch"]:
        """Every row of the ``wanted`` columns (in that order), in batches;
        ``string_columns`` are read as text whatever they look like (IDs:
        ``007`` stays ``007``)."""
        raise NotImplementedError

    def line_of(self, row: int) -> Optional[int]:
        """The file line of 1-based data row ``row`` (None: no lines)."""
        return None

    def error(self, what: str, fix: str, *, row: Optional[int] = None, column: Optional[str] = None) -> TableError:
        """A :class:`TableError` for this file, with the CSV line of ``row``."""
        line = self.line_of(row) if row is not None else None
        return TableError(self.path, what, fix, row=row, line=line, column=column)


def open_table_source(path: Path, batch_rows: int) -> TableSource:
    """The file's reader (CSV or Parquet by suffix), after the format checks."""
    kind = table_kind(path)
    _check_file(path, kind)
    return _CsvSource(path, batch_rows) if kind == "csv" else _ParquetSource(path, batch_rows)


class _ParquetSource(TableSource):
    kind = "parquet"

    def __init__(self, path: Path, batch_rows: int) -> None:
        self.path = path
        self.batch_rows = batch_rows

    def _open(self) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as exc:
            raise self.error(f"cannot be read as Parquet ({_first_line(exc)})",
                             "export the table as Parquet again (or as CSV)") from None

    def column_names(self) -> List[str]:
        pf = self._open()
        try:
            schema = pf.schema_arrow
        finally:
            pf.close()
        meta = schema.pandas_metadata or {}
        # pandas' to_parquet stores a DataFrame's index as extra columns; they are not the user's columns
        index_columns = {c for c in meta.get("index_columns", []) if isinstance(c, str)}
        return [name for name in schema.names if name not in index_columns]

    def read_batches(self, wanted: Sequence[str], string_columns: Sequence[str]) -> List["pa.RecordBatch"]:
        import pyarrow as pa

        pf = self._open()
        try:
            return list(pf.iter_batches(batch_size=self.batch_rows, columns=list(wanted), use_pandas_metadata=False))
        except (pa.ArrowException, OSError) as exc:
            raise self.error(f"cannot be read as Parquet ({_first_line(exc)})",
                             "export the table as Parquet again (or as CSV)") from None
        finally:
            pf.close()


class _CsvSource(TableSource):
    """A comma-separated file with a header line, UTF-8, optionally gzip'ed.

    Read with ``pyarrow.csv.open_csv``, which infers each column's type from
    the first block only; a later value that does not fit (``abc`` in a
    column of numbers) widens that column (int -> float -> text, date ->
    timestamp -> text) and the file is read again, so the result is the
    type a whole-file inference gives.
    """

    kind = "csv"

    def __init__(self, path: Path, batch_rows: int) -> None:
        self.path = path
        self.block_size = self._estimate_block_size(batch_rows)

    # ---- sizes and lines

    def _estimate_block_size(self, batch_rows: int) -> int:
        """Bytes per pyarrow block for about ``batch_rows`` rows, from the
        line lengths of the file's first MiB (at least twice its longest line:
        a row must fit in a block)."""
        with _open_bytes(self.path) as fh:
            try:
                sample = fh.read(_SAMPLE_BYTES)
            except (OSError, EOFError) as exc:
                raise TableError(self.path, f"cannot be decompressed ({_first_line(exc)})",
                                 "compress it again with gzip, or pass the plain .csv") from None
        if not sample.strip():
            raise TableError(self.path, "is empty (no header line)",
                             "the first line must name the columns, e.g. id,age,income")
        lines = sample.split(b"\n")
        longest = max(len(line) for line in lines) + 1
        mean = len(sample) / max(1, sample.count(b"\n"))
        return max(int(mean * (batch_rows + 1)), 2 * longest, 256)

    def _raw_lines(self) -> Iterator[Tuple[int, bytes]]:
        with _open_bytes(self.path) as fh:
            for number, raw in enumerate(fh, start=1):
                yield number, raw.rstrip(b"\r\n")

    def line_of(self, row: int) -> Optional[int]:
        """pyarrow skips empty lines; data row ``row`` is the ``row``-th
        non-empty line after the header (no line breaks inside values)."""
        seen = -1  # the header is the first non-empty line
        for number, raw in self._raw_lines():
            if raw:
                seen += 1
                if seen == row:
                    return number
        return None

    # ---- reading

    def _options(self, column_types: Dict[str, "pa.DataType"]) -> Dict[str, Any]:
        import pyarrow.csv as pcsv

        return dict(read_options=pcsv.ReadOptions(block_size=self.block_size),
                    convert_options=pcsv.ConvertOptions(column_types=column_types, strings_can_be_null=True))

    def column_names(self) -> List[str]:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        self._check_header_bytes()
        while True:
            try:
                reader = pcsv.open_csv(self.path, **self._options({}))
                break
            except (pa.ArrowException, OSError) as exc:
                self._retry_or_raise(exc, None)
        names = list(reader.schema.names)
        reader.close()
        return names

    def read_batches(self, wanted: Sequence[str], string_columns: Sequence[str]) -> List["pa.RecordBatch"]:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        header = self.column_names()
        keep = set(wanted)
        # Columns not asked for are taken as raw bytes: no conversion to fail, nothing decoded.
        types: Dict[str, pa.DataType] = {name: pa.binary() for name in header if name not in keep}
        types.update({name: pa.string() for name in string_columns})
        while True:
            reader = None
            batches: List[pa.RecordBatch] = []
            try:
                reader = pcsv.open_csv(self.path, **self._options(types))
                for batch in reader:
                    batches.append(pa.RecordBatch.from_arrays([batch.column(n) for n in wanted], names=list(wanted)))
                if any(pa.types.is_binary(reader.schema.field(n).type) for n in wanted):
                    raise self._not_utf8_error()  # pyarrow reads text that is not UTF-8 as bytes
                return batches
            except (pa.ArrowException, OSError) as exc:
                batches.clear()
                self._retry_or_raise(exc, (reader, header, types))
            finally:
                if reader is not None:
                    reader.close()

    def _retry_or_raise(self, exc: Exception, state: Optional[Tuple[Any, List[str], Dict[str, Any]]]) -> None:
        """Adjust the read after pyarrow's ``exc`` (a larger block, a wider
        column type) or raise the located :class:`TableError`."""
        message = _first_line(exc)
        if "straddl" in message or "cannot infer number of columns" in message:
            if self.block_size > 1 << 30:
                raise self.error(f"has a line pyarrow cannot fit in one block ({message})",
                                 "check that the file is a CSV with one row per line") from None
            self.block_size *= 2
            return
        if "invalid UTF8" in message or "invalid utf8" in message.lower():
            raise self._not_utf8_error() from None
        expected = re.search(r"Expected (\d+) columns, got (\d+)", message)
        if expected:
            raise self._field_count_error(int(expected.group(1))) from None
        conversion = re.search(r"column #(\d+): CSV conversion error", message)
        if conversion and state is not None:
            reader, header, types = state
            index = int(conversion.group(1))
            if index < len(header):
                name = header[index]
                current = types.get(name)
                if current is None and reader is not None:
                    current = reader.schema.field(index).type
                wider = _wider_type(current) if current is not None else None
                if wider is not None:
                    types[name] = wider
                    return
        raise self.error(f"cannot be read as CSV ({message})",
                         "check that it is a comma-separated UTF-8 file with a header line") from None

    # ---- locating problems (only on the error path: the file is scanned again)

    def _check_header_bytes(self) -> None:
        for number, raw in self._raw_lines():
            if not raw:
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TableError(self.path, "the header line is not UTF-8 text", _NOT_UTF8_FIX,
                                 line=number) from None
            for sep, name in ((";", "semicolons"), ("\t", "tabs")):
                if "," not in text and sep in text:
                    raise TableError(self.path, f"the header separates the columns with {name}, not commas",
                                     "save the file as comma-separated CSV", line=number)
            return

    def _header_fields(self) -> List[str]:
        for _, raw in self._raw_lines():
            if raw:
                return next(csv.reader([raw.decode("utf-8", errors="replace")]))
        return []

    def _not_utf8_error(self) -> TableError:
        header = self._header_fields()
        row = -1
        for number, raw in self._raw_lines():
            if not raw:
                continue
            row += 1
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                fields = next(csv.reader([raw.decode("latin-1")]))
                column = None
                for j, value in enumerate(fields):
                    try:
                        value.encode("latin-1").decode("utf-8")
                    except UnicodeDecodeError:
                        column = header[j] if j < len(header) else None
                        break
                return TableError(self.path, "the text is not UTF-8", _NOT_UTF8_FIX, row=row or None,
                                  line=number, column=column)
        return TableError(self.path, "the text is not UTF-8", _NOT_UTF8_FIX)

    def _field_count_error(self, n_header: int) -> TableError:
        row = -1
        for number, raw in self._raw_lines():
            if not raw:
                continue
            row += 1
            fields = next(csv.reader([raw.decode("utf-8", errors="replace")]))
            if row and len(fields) != n_header:
                return TableError(self.path, f"{len(fields)} fields, the header has {n_header}",
                                  "give every row one value per column (quote a value that holds a comma, "
                                  "leave a missing value empty: a,,c)", row=row, line=number)
        return TableError(self.path, f"a row has another number of fields than the header ({n_header})",
                          "give every row one value per column")


def _wider_type(current: "pa.DataType") -> Optional["pa.DataType"]:
    """The next type to try for a CSV column whose ``current`` type failed
    on a later value (None: nothing wider than text)."""
    import pyarrow as pa

    if pa.types.is_null(current):
        return pa.int64()
    if pa.types.is_integer(current):
        return pa.float64()
    if pa.types.is_date(current):
        return pa.timestamp("s")
    if pa.types.is_string(current) or pa.types.is_large_string(current) or pa.types.is_binary(current):
        return None
    return pa.string()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
