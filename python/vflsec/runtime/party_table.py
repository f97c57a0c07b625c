"""A data party's own table (CSV or Parquet, any column types) as the numeric rows a job trains on.

``vflsec party`` reads ``[party] data`` (and ``test_data``) in one of two ways:

* **numeric CSV, no** ``[preprocess]`` -- the file ``vflsec party-data`` writes: an ID column, the
  active party's label column, numeric features (:func:`.party_csv.read_party_csv`, unchanged);
* **a raw table** -- a Parquet file, or any file when the party file has a ``[preprocess]`` table:
  read with :func:`vflsec.data.read_table` (typed columns; every data mistake one line naming the
  file, row and column), text labels coded by ``[party] positive_label``, then the features through
  :class:`vflsec.data.PartyPreprocessor` (``[preprocess]``'s keys are its parameters: column_types,
  scaling, bounds, categories, max_categories, date_features, reference_date, impute) **fitted on
  this party's own training file only** and applied unchanged to its held-out file. The fitted
  preprocessor is saved beside the party's output (``<output>.preprocessor.json``) so the same
  transform applies to new rows later. With ``scaling = "zscore_clip"`` (the default) its statistics
  are of the party's own rows and are not covered by epsilon (``privacy_note_``); ``"clip_only"``
  reads none.

Everything here runs before the party contacts any peer.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

import numpy as np

__all__ = ["PreparedTable", "preprocessor_path", "read_party_table", "uses_table_reader"]


@dataclass(frozen=True)
class PreparedTable:
    """A file's rows as a job needs them, and the preprocessor that made them (None: numeric CSV)."""

    ids: List[str]
    X: np.ndarray
    y: Optional[np.ndarray]
    feature_names: Tuple[str, ...]
    preprocessor: Any = None


def uses_table_reader(path: Path, preprocess: Optional[Mapping[str, Any]]) -> bool:
    """True when ``path`` is read as a raw table (Parquet, or a ``[preprocess]`` table given)."""
    name = Path(path).name.lower()
    return preprocess is not None or name.endswith((".parquet", ".pq"))


def preprocessor_path(output: Optional[Path]) -> Optional[Path]:
    """Where the fitted preprocessor is saved: beside the party's output file."""
    return None if output is None else Path(output).with_suffix(".preprocessor.json")


def read_party_table(path: Path, *, id_column: str, label_column: Optional[str], positive_label: Any,
                     preprocess: Optional[Mapping[str, Any]], fitted: Any = None,
                     allow_no_features: bool = False) -> PreparedTable:
    """The rows of ``path`` (module docstring). ``fitted``: a preprocessor fitted on the training
    file, applied to this one (the held-out file) instead of fitting a new one. ValueError (with
    `` -- fix``) for any mistake, naming the file."""
    from ..data import PartyPreprocessor, read_table

    table = read_table(path, id_column=id_column, label_column=label_column, positive_label=positive_label)
    features = table.features
    if features.shape[1] == 0:
        if not allow_no_features:
            raise ValueError(f"{path} has no feature columns -- add the party's feature columns to the file")
        X = np.zeros((len(table.ids), 0))
        return PreparedTable([str(v) for v in table.ids], X, _labels(table), (), None)
    if fitted is None:
        options = dict(preprocess or {})
        try:
            fitted = PartyPreprocessor(**options)
        except TypeError as exc:
            raise ValueError(f"[preprocess]: {exc} -- use the parameters of vflsec.data.PartyPreprocessor "
                             "(column_types, scaling, bounds, categories, max_categories, date_features, "
                             "reference_date, impute)") from None
        X = fitted.fit_transform(features)
    else:
        X = fitted.transform(features)
    X = np.ascontiguousarray(X, dtype=np.float64)
    names = tuple(str(v) for v in fitted.get_feature_names_out())
    return PreparedTable([str(v) for v in table.ids], X, _labels(table), names, fitted)


def _labels(table: Any) -> Optional[np.ndarray]:
    return None if table.labels is None else np.asarray(table.labels, dtype=np.float64)
