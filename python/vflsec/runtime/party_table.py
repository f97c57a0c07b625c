"""A data party's own table (CSV or Parquet, any column types) as the numeric rows a job trains on.

``vflsec party`` reads ``[party] data`` (and ``test_data``) in one of two ways:

* **numeric CSV, no** ``[preprocess]`` -- the file ``vflsec party-data`` writes: an ID column, the
  active party's label column, numeric features (:func:`.party_csv.read_party_csv`, unchanged);
* **a raw table** -- a Parquet file, or any file when the party file has a ``[preprocess]`` table:
  read with :func:`vflsec.data.read_table` (typed columns; every data mistake one line naming the
  file, row and column), text labels coded by ``[party] positive_label``, then the features through
  :class:`vflsec.data.PartyPreprocessor` (``[preprocess]``'s keys are its parameters: column_types,
  scaling, bounds, categories, max_categories, cardinality_limit, high_cardinality, date_features,
  reference_date, impute) **fitted on
  this party's own training file only** and applied unchanged to its held-out file. The fitted
  preprocessor is saved beside the party's output (``<output>.preprocessor.json``) so the same
  transform applies to new rows later. With ``scaling = "zscore_clip"`` (the default) its statistics
  are of the party's own rows and are not covered by epsilon (``privacy_note_``); ``"clip_only"``
  reads none. A categorical column of too many distinct values (a date or an ID read as text) is
  refused unless ``[preprocess]`` declares it (``column_types``, ``categories`` or
  ``high_cardinality``): :class:`vflsec.data.HighCardinalityError`.

The errors speak the party file: a fix names ``[party] id_column`` or ``[preprocess] column_types =
{ "opened" = "date" }``, not the Python keywords of :func:`vflsec.data.read_table` and
:class:`vflsec.data.PartyPreprocessor` (:func:`reword_keywords`, also used by ``vflsec party-data``
for its options).

Everything here runs before the party contacts any peer.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

__all__ = ["PreparedTable", "party_file_fix", "preprocessor_path", "read_party_table", "reword_keywords",
           "uses_table_reader"]

# What read_table's and PartyPreprocessor's fixes name: `pass id_column= ...`, `positive_label='yes'`,
# `column_types={'opened': 'date'}`, `high_cardinality=['city']`.
_OPTION = re.compile(r"(?:\b(pass|declare) )?\b(id_column|label_column|positive_label)=('[^']*'|\"[^\"]*\"|[^\s,;)]+)?")
_MAPPING = re.compile(r"\b(column_types|high_cardinality)=(\{[^{}]*\}|\[[^\[\]]*\])")
_PREPROCESS_KEYS = ("column_types, scaling, bounds, categories, max_categories, cardinality_limit, high_cardinality, "
                    "date_features, reference_date, impute")


@dataclass(frozen=True)
class PreparedTable:
    """A file's rows as a job needs them, and the preprocessor that made them (None: numeric CSV);
    ``label_names``: the label values coded 0 and 1, as the file has them (text labels, or
    numbers coded by ``positive_label``), else None."""

    ids: List[str]
    X: np.ndarray
    y: Optional[np.ndarray]
    feature_names: Tuple[str, ...]
    preprocessor: Any = None
    label_names: Optional[Tuple[Any, Any]] = None


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
    from ..data import HighCardinalityError, PartyPreprocessor, read_table

    try:
        table = read_table(path, id_column=id_column, label_column=label_column, positive_label=positive_label)
    except ValueError as exc:
        raise _reworded(exc) from None
    features = table.features
    if features.shape[1] == 0:
        if not allow_no_features:
            raise ValueError(f"{path} has no feature columns -- add the party's feature columns to the file")
        X = np.zeros((len(table.ids), 0))
        return PreparedTable([str(v) for v in table.ids], X, _labels(table), (), None, table.label_classes)
    if fitted is None:
        options = dict(preprocess or {})
        try:
            fitted = PartyPreprocessor(**options)
        except TypeError as exc:
            raise ValueError(f"[preprocess]: {exc} -- use the parameters of vflsec.data.PartyPreprocessor "
                             f"({_PREPROCESS_KEYS})") from None
        try:
            X = fitted.fit_transform(features)
        except HighCardinalityError as exc:
            raise ValueError(f"{path}: {exc.describe()} -- in [preprocess] "
                             + exc.fix(_toml_types, lambda names: f"high_cardinality = {json.dumps(names)}")) from None
        except ValueError as exc:
            raise _reworded(exc) from None
    else:
        X = fitted.transform(features)
    X = np.ascontiguousarray(X, dtype=np.float64)
    names = tuple(str(v) for v in fitted.get_feature_names_out())
    return PreparedTable([str(v) for v in table.ids], X, _labels(table), names, fitted, table.label_classes)


def _labels(table: Any) -> Optional[np.ndarray]:
    return None if table.labels is None else np.asarray(table.labels, dtype=np.float64)


# -- the fixes in the party file's words ---------------------------------------------------

def reword_keywords(text: str, option: Callable[[Optional[str], str, Optional[str]], str],
                    mapping: Callable[[str, Any], str]) -> str:
    """``text`` with the Python keywords of a fix spelled another way:
    ``option(verb, keyword, value)`` for ``[pass ]id_column=[value]`` (verb
    "pass", "declare" or None; value the Python literal's value as text, or
    None) and ``mapping(keyword, value)`` for ``column_types={...}`` and
    ``high_cardinality=[...]`` (value: the dict or list)."""
    def one_option(match: "re.Match[str]") -> str:
        literal = match.group(3)
        value = None
        if literal is not None:
            try:
                value = str(ast.literal_eval(literal))
            except (ValueError, SyntaxError):
                value = literal
        return option(match.group(1), match.group(2), value)

    def one_mapping(match: "re.Match[str]") -> str:
        try:
            value = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            return match.group(0)
        return mapping(match.group(1), value)

    return _OPTION.sub(one_option, _MAPPING.sub(one_mapping, text))


def _toml_value(value: str) -> str:
    try:
        float(value)
    except ValueError:
        return json.dumps(value)
    return value


def _toml_types(types: Dict[str, str]) -> str:
    return "column_types = { " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in types.items()) + " }"


def _party_option(verb: Optional[str], keyword: str, value: Optional[str]) -> str:
    if value is None:
        return f"set [party] {keyword} to" if verb else f"[party] {keyword}"
    return f"{'set ' if verb else ''}[party] {keyword} = {_toml_value(value)}"


def _preprocess_mapping(keyword: str, value: Any) -> str:
    if keyword == "column_types" and isinstance(value, dict):
        return "[preprocess] " + _toml_types({str(k): str(v) for k, v in value.items()})
    return f"[preprocess] {keyword} = {json.dumps(value)}"


def party_file_fix(text: str) -> str:
    """A message of :func:`vflsec.data.read_table` or :class:`vflsec.data.PartyPreprocessor`
    with its Python keywords as the party file's keys (``pass id_column= one of them`` ->
    ``set [party] id_column to one of them``)."""
    return reword_keywords(text, _party_option, _preprocess_mapping)


def _reworded(exc: ValueError) -> ValueError:
    """``exc`` in the party file's words (the same exception when no keyword is in it)."""
    text = party_file_fix(str(exc))
    return exc if text == str(exc) else ValueError(text)
