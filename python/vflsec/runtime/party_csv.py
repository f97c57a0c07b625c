"""The per-party CSV files ``vflsec party`` reads and ``vflsec party-data``
writes: a header row, an ID column, the active party's label column, then
numeric feature columns."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

__all__ = ["read_party_csv", "write_csv"]


def read_party_csv(path: Path, id_column: str, label_column: Optional[str], *, allow_no_features: bool = False):
    """``(ids, X, y, feature_names)`` from a CSV with a header row; every
    column other than the ID and label columns is a numeric feature.
    ``allow_no_features``: a file with only IDs (and labels) gives an
    ``(n, 0)`` X (a split-learning active party without features).

    ValueError naming the file (and the line where there is one) for: no
    header, no data rows, a missing ID or label column, a row with another
    number of fields than the header, an empty or repeated ID
    (:func:`vflsec.federation.psi.check_ids`), a cell that is not a number,
    NaN or inf."""
    from ..federation.psi import check_ids

    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path} is empty") from None
        if id_column not in header:
            raise ValueError(f"{path}: no ID column {id_column!r} in header {header}")
        if label_column is not None and label_column not in header:
            raise ValueError(f"{path}: no label column {label_column!r} in header {header}")
        id_at = header.index(id_column)
        label_at = header.index(label_column) if label_column is not None else None
        feature_at = [i for i in range(len(header)) if i not in (id_at, label_at)]
        if not feature_at and not allow_no_features:
            raise ValueError(f"{path} has no feature columns")
        ids: List[str] = []
        rows: List[List[float]] = []
        labels: List[float] = []
        lines: List[int] = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{line_no}: {len(row)} fields, header has {len(header)}")
            if not row[id_at].strip():
                raise ValueError(f"{path}:{line_no}: empty ID in column {id_column!r}")
            ids.append(row[id_at])
            lines.append(line_no)
            try:
                rows.append([float(row[i]) for i in feature_at])
                if label_at is not None:
                    labels.append(float(row[label_at]))
            except ValueError as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from None
    if not ids:
        raise ValueError(f"{path} has a header but no data rows")
    check_ids(ids, f"{path}: the ID column {id_column!r}")
    X = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(feature_at))
    y = np.asarray(labels, dtype=np.float64) if label_at is not None else None
    for values, what in ((X, "features contain"), (y, f"the label column {label_column!r} holds")):
        if values is not None and not np.all(np.isfinite(values)):
            first = int(np.flatnonzero(~np.isfinite(values.reshape(len(ids), -1)).all(axis=1))[0])
            raise ValueError(f"{path}:{lines[first]}: {what} NaN or inf")
    return ids, X, y, [header[i] for i in feature_at]


def write_csv(path: Path, ids: Sequence[str], X: np.ndarray, y: Optional[np.ndarray] = None,
              *, id_column: str = "id", label_column: str = "y") -> None:
    """Write one party's CSV; floats with ``repr`` precision (exact round trip)."""
    X = np.asarray(X, dtype=np.float64)
    header = [id_column] + ([label_column] if y is not None else []) + [f"x{j}" for j in range(X.shape[1])]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(",".join(header) + "\n")
        for i, ident in enumerate(ids):
            fields = [ident] + ([repr(float(y[i]))] if y is not None else []) + [repr(float(v)) for v in X[i]]
            fh.write(",".join(fields) + "\n")
