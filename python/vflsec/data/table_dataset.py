"""A table file of the user's own as a :class:`~.dataset.Dataset`: the
``"csv:PATH"`` and ``"parquet:PATH"`` names of :func:`vflsec.data.load_dataset`.

A name is ``csv:PATH`` or ``parquet:PATH`` (the prefix must match the file's
suffix: ``.csv``/``.csv.gz``, ``.parquet``/``.pq``), optionally followed by
``#`` and ``key=value`` options joined by ``&``, e.g.
``csv:bank.csv#label=income&positive=>50K&id=customer&drop=name,notes``:

* ``label=COLUMN`` -- the label column; without it, **the file's last column**;
* ``id=COLUMN`` -- an ID column: checked (no empty or repeated ID), not a feature;
* ``positive=VALUE`` -- the label value coded 1 (needed for text labels);
* ``drop=A,B`` -- columns left out;
* ``missing=error|drop`` -- a missing cell in a numeric or date column is an
  error (default) or drops its row.

The same options are keywords of ``load_dataset`` (``label_column=``,
``id_column=``, ``positive_label=``, ``drop=``, ``missing=``); an option given
both ways is refused. A relative PATH is looked up in the current directory,
then in ``data_dir`` (``--data-dir``/``VFLSEC_DATA``).

Encoding (every column one attribute, so a vertical split keeps a one-hot
group together): numbers as float64; booleans as 0/1; dates and timestamps as
days since 1970-01-01 (UTC); durations in seconds; text and categorical
columns one-hot, one column ``name=value`` per distinct value in sorted
order, a missing cell its own value ``name=(missing)``, at most
:data:`MAX_CATEGORIES` values (more -- an identifier, free text -- is an
error: drop the column). This is the fixed encoding the benchmarks need;
:mod:`vflsec.data.preprocess` is the fitted, saved per-party transform.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._table_files import open_table_source
from .dataset import Dataset, _search_dirs
from .tables import TableError, TableFileNotFoundError, read_table, table_columns

__all__ = ["MAX_CATEGORIES", "TABLE_PREFIXES", "is_table_name", "load_table_dataset"]

TABLE_PREFIXES = ("csv:", "parquet:")
MAX_CATEGORIES = 200
MISSING_LEVEL = "(missing)"
_OPTIONS = {"label": "label_column", "id": "id_column", "positive": "positive_label", "drop": "drop",
            "missing": "missing"}
_MISSING = ("error", "drop")


def is_table_name(name: Any) -> bool:
    """True for a ``csv:...``/``parquet:...`` dataset name."""
    return isinstance(name, str) and name.startswith(TABLE_PREFIXES)


def _parse(name: str) -> Tuple[str, str, Dict[str, Any]]:
    """``(prefix, path text, options)`` of a ``csv:PATH#key=value&...`` name."""
    prefix, _, rest = name.partition(":")
    path_text, _, fragment = rest.partition("#")
    if not path_text.strip():
        raise ValueError(f"dataset name {name!r} has no file path -- write {prefix}:PATH, e.g. {prefix}:bank.{prefix}")
    options: Dict[str, Any] = {}
    for part in filter(None, fragment.split("&")):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in _OPTIONS or not value:
            raise ValueError(f"dataset name {name!r}: cannot read the option {part!r} -- the options after '#' are "
                             f"{', '.join(k + '=' for k in _OPTIONS)} joined by '&' (e.g. "
                             f"{prefix}:bank.csv#label=income&positive=yes)")
        options[_OPTIONS[key.strip()]] = [v for v in value.split(",") if v] if key.strip() == "drop" else value
    return prefix, path_text, options


def _resolve(path_text: str, data_dir: Any) -> Path:
    path = Path(path_text).expanduser()
    if path.is_absolute() or path.exists():
        return path
    folders = _search_dirs(data_dir)
    for folder in folders:
        if (folder / path).exists():
            return folder / path
    if not folders:
        return path  # read_table says it is not there
    where = ", ".join(str(p) for p in [Path.cwd(), *folders])
    raise TableFileNotFoundError(path, "no such file", f"looked in {where}; check the path")


def load_table_dataset(name: str, *, data_dir: Any = None, label_column: Optional[str] = None,
                       id_column: Optional[str] = None, positive_label: Any = None,
                       drop: Sequence[str] = (), missing: str = "error") -> Dataset:
    """The :class:`Dataset` of a ``csv:PATH``/``parquet:PATH`` name (see the
    module docstring for the options and the encoding). ``Dataset.name`` is
    ``name`` as given. Mistakes in the file are :class:`~.tables.TableError`
    (a ``ValueError``) naming the file, row and column."""
    prefix, path_text, options = _parse(name)
    given = {"label_column": label_column, "id_column": id_column, "positive_label": positive_label,
             "drop": ([drop] if isinstance(drop, str) else list(drop)) if drop else None,
             "missing": None if missing == "error" else missing}
    for key, value in given.items():
        if value is not None:
            if key in options:
                raise ValueError(f"dataset {name!r}: {key} is given both in the name and as a keyword -- give it once")
            options[key] = value
    missing = options.get("missing", "error")
    if missing not in _MISSING:
        raise ValueError(f"dataset {name!r}: missing={missing!r} -- choose one of {', '.join(_MISSING)}")
    path = _resolve(path_text, data_dir)
    header = table_columns(path)  # also checks the format (suffix, magic bytes)
    kind = "parquet" if path.name.lower().endswith((".parquet", ".pq")) else "csv"
    if prefix != kind:
        raise ValueError(f"dataset {name!r}: {path} is a {kind} file -- name it {kind}:{path_text}")
    id_column = options.get("id_column")
    label_column = options.get("label_column") or header[-1]
    if label_column == id_column:
        raise ValueError(f"dataset {name!r}: the label column would be the ID column {id_column!r} -- name the label "
                         "column with #label=COLUMN")
    dropped = list(options.get("drop") or [])
    for column in dropped:
        if column not in header:
            raise TableError(path, f"no column {column!r} to drop", f"the columns are {', '.join(map(repr, header))}")
    features = [c for c in header if c not in dropped and c not in (id_column, label_column)]
    if not features:
        raise TableError(path, "has no feature columns besides the ID and label columns",
                         "keep at least one feature column (check the options label=, id= and drop=)")
    table = read_table(path, id_column=id_column, label_column=label_column,
                       positive_label=options.get("positive_label"), columns=features)
    X, feature_names, attributes, complete = _encode(path, table.features, missing)
    y = np.asarray(table.labels, dtype=np.int64)  # a label column was read: never None
    if complete is not None:
        if not complete.any():
            raise TableError(path, "every row has a missing numeric value", "fill them in, or leave the emptiest "
                             "columns out with the option drop=")
        X, y = X[complete], y[complete]
    return Dataset(X=np.ascontiguousarray(X), y=np.ascontiguousarray(y, dtype=np.int64),
                   feature_names=tuple(feature_names), attributes=tuple(attributes), name=name)


def _encode(path: Path, frame: Any, missing: str) -> Tuple[np.ndarray, List[str], List[Tuple[str, Tuple[int, ...]]],
                                                           Optional[np.ndarray]]:
    """``(X, feature names, attributes, rows kept)`` of the feature frame;
    rows kept is None when every row is (``missing="error"``, or nothing missing)."""
    import pandas as pd

    n = len(frame)
    blocks: List[np.ndarray] = []
    names: List[str] = []
    attributes: List[Tuple[str, Tuple[int, ...]]] = []
    incomplete = np.zeros(n, dtype=bool)
    for column in frame.columns:
        series = frame[column]
        start = len(names)
        values = _numeric(path, str(column), series, pd)
        if values is not None:
            gaps = np.isnan(values)
            if gaps.any() and missing == "error":
                first = int(np.flatnonzero(gaps)[0]) + 1
                line = open_table_source(path, 1).line_of(first)
                raise TableError(path, f"the value is missing ({int(gaps.sum())} missing in this column)",
                                 "a csv:/parquet: dataset needs every numeric and date cell: fill them in, or add "
                                 f"the option missing=drop (drops those rows) or drop={column} (leaves the column "
                                 "out) to the name, e.g. csv:PATH#missing=drop", row=first, line=line,
                                 column=str(column))
            incomplete |= gaps
            blocks.append(values.reshape(-1, 1))
            names.append(str(column))
        else:
            block, levels = _one_hot(path, str(column), series)
            blocks.append(block)
            names.extend(f"{column}={level}" for level in levels)
        attributes.append((str(column), tuple(range(start, len(names)))))
    X = np.hstack(blocks) if blocks else np.zeros((n, 0))
    if incomplete.any():
        X = np.where(np.isnan(X), 0.0, X)  # the rows with gaps are dropped below
        return X, names, attributes, ~incomplete
    return X, names, attributes, None


def _numeric(path: Path, name: str, series: Any, pd: Any) -> Optional[np.ndarray]:
    """The column as float64 (NaN where missing), or None for a text/categorical column."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                             and not isinstance(dtype, pd.CategoricalDtype)):
        return np.asarray(series.astype("float64"), dtype=np.float64)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        if getattr(dtype, "tz", None) is not None:
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        days = (series - pd.Timestamp(0)) / pd.Timedelta(days=1)
        return np.asarray(days.astype("float64"), dtype=np.float64)
    if pd.api.types.is_timedelta64_dtype(dtype):
        return np.asarray(series.dt.total_seconds().astype("float64"), dtype=np.float64)
    if pd.api.types.is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
        present = series.dropna()
        if all(isinstance(v, str) for v in present.head(1000)):
            return None
    try:  # an object column of other values (Parquet decimals, ...)
        return np.asarray(pd.to_numeric(series).astype("float64"), dtype=np.float64)
    except (TypeError, ValueError):
        kinds = sorted({type(v).__name__ for v in series.dropna().head(1000)})
        raise TableError(path, f"the column holds {', '.join(kinds)} values, neither numbers nor text",
                         f"leave it out with the option drop={name} (csv:PATH#drop={name}), or convert it to "
                         "numbers or text", column=name) from None


def _one_hot(path: Path, name: str, series: Any) -> Tuple[np.ndarray, List[str]]:
    text = series.astype(object).where(series.notna(), MISSING_LEVEL).astype(str).to_numpy()
    levels, codes = np.unique(text, return_inverse=True)
    if len(levels) > MAX_CATEGORIES:
        raise TableError(path, f"{len(levels)} distinct text values: one-hot encoding would make {len(levels)} "
                         f"columns (at most {MAX_CATEGORIES})",
                         f"leave it out with the option drop={name} (csv:PATH#drop={name}; an ID? #id={name}), "
                         "or encode it yourself",
                         column=name)
    block = np.zeros((len(text), len(levels)), dtype=np.float64)
    block[np.arange(len(text)), codes.reshape(-1)] = 1.0
    return block, [str(level) for level in levels]
