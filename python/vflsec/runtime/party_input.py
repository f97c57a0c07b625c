"""``vflsec party-data --input FILE``: check one party's own table and prepare it for ``vflsec party``.

Reads the party's CSV or Parquet file (:func:`vflsec.data.read_table`: streaming, typed columns; a
data mistake is one line naming the file, row and column, exit 2), fits a
:class:`vflsec.data.PartyPreprocessor` on its rows (``--column-type`` declares types,
``--scaling`` picks the per-party scaling), and prints what a party would train on: rows, the label
classes, each column's type and missing cells, and the ``[party]`` / ``[preprocess]`` lines for its
party file. With ``--out DIR`` it also writes ``<name>.csv`` (ID, label, the preprocessed numeric
columns: the file ``vflsec party`` reads without ``[preprocess]``) and ``<name>.preprocessor.json``
(the fitted transform, for the party's held-out and future rows). Nothing leaves the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["add_input_arguments", "run_input"]

COLUMN_TYPES = ("numeric", "categorical", "date", "id", "label", "drop")
_POOL = "[preprocess] max_categories in the party file"


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a party's own table (--input; the dataset options above are then unused)")
    group.add_argument("--input", default=None, metavar="FILE", help="the party's own .csv or .parquet file")
    group.add_argument("--id-column", default="id", help="its ID column (default: id)")
    group.add_argument("--label-column", default=None, help="its label column (the active party only)")
    group.add_argument("--positive-label", default=None, help="the label value coded 1 (text labels)")
    group.add_argument("--column-type", action="append", default=[], metavar="COLUMN=TYPE",
                       help=f"declare a column's type ({', '.join(COLUMN_TYPES)}); repeatable")
    group.add_argument("--high-cardinality", action="append", default=[], metavar="COLUMN",
                       help="a categorical column to one-hot encode whatever its number of distinct values "
                            "([preprocess] high_cardinality); repeatable")
    group.add_argument("--cardinality-limit", type=int, default=None, metavar="N",
                       help="distinct values above which a categorical column is refused unless declared "
                            "([preprocess] cardinality_limit; default 100)")
    group.add_argument("--scaling", default="zscore_clip", choices=("zscore_clip", "clip_only"),
                       help="per-party scaling (zscore_clip: statistics of these rows, not covered by epsilon)")
    group.add_argument("--name", default=None, help="the party's name for the written files (default: the "
                                                    "file's stem)")


def _column_types(items: List[str]) -> Dict[str, str]:
    from ..errors import CommandError

    out: Dict[str, str] = {}
    for item in items:
        column, sep, kind = item.partition("=")
        if not sep or not column or kind not in COLUMN_TYPES:
            raise CommandError(f"--column-type {item!r} is not COLUMN=TYPE",
                               f"e.g. --column-type opened=date (types: {', '.join(COLUMN_TYPES)})")
        out[column] = kind
    return out


def _positive(value: Optional[str]) -> Any:
    """A numeric-looking --positive-label also matches numeric labels (1 for a 0/1 column)."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() else number


def _cli_option(verb: Optional[str], keyword: str, value: Optional[str]) -> str:
    option = "--" + keyword.replace("_", "-")
    return (f"{verb} " if verb else "") + option + ("" if value is None else f" {shlex.quote(value)}")


def _cli_mapping(keyword: str, value: Any) -> str:
    if keyword == "column_types" and isinstance(value, dict):
        return _column_type_options(value)
    items = value if isinstance(value, list) else [value]
    return " ".join(f"--high-cardinality {shlex.quote(str(v))}" for v in items)


def _high_cardinality_options(names: List[str]) -> str:
    return _cli_mapping("high_cardinality", names)


def _column_type_options(types: Dict[str, str]) -> str:
    return " ".join(f"--column-type {shlex.quote(f'{c}={t}')}" for c, t in types.items())


def cli_fix(text: str) -> str:
    """A message of :func:`vflsec.data.read_table` or :class:`vflsec.data.PartyPreprocessor` with
    its Python keywords as this command's options (``pass id_column=`` -> ``pass --id-column``)."""
    from .party_table import reword_keywords

    return reword_keywords(text, _cli_option, _cli_mapping)


def _command_error(exc: Exception, default_fix: str) -> Any:
    from ..errors import CommandError

    what, _, fix = cli_fix(" ".join(str(exc).split())).partition(" -- ")
    return CommandError(what, fix or default_fix)


def _fit(features: Any, args: argparse.Namespace, declared: Dict[str, str],
         path: str) -> Tuple[Any, np.ndarray, List[Any]]:
    """The fitted preprocessor, the rows and the refused high-cardinality columns: each is warned
    about on stderr (one line: the column, its distinct values, the fix) and left out, so that
    the check goes on and never one-hot encodes thousands of columns."""
    from ..data import HighCardinalityError, PartyPreprocessor
    from ..data.preprocess import CARDINALITY_LIMIT

    limit = CARDINALITY_LIMIT if args.cardinality_limit is None else args.cardinality_limit
    refused: List[Any] = []
    while True:
        types = {**declared, **{c.name: "drop" for c in refused}}
        prep = PartyPreprocessor(column_types=types or None, scaling=args.scaling,
                                 cardinality_limit=limit,
                                 high_cardinality=list(args.high_cardinality) or None)
        try:
            return prep, np.ascontiguousarray(prep.fit_transform(features), dtype=np.float64), refused
        except HighCardinalityError as exc:
            if refused:  # (dropping columns makes no column high-cardinality)
                raise _command_error(exc, "") from None
            refused = exc.columns
            for column in refused:
                one = HighCardinalityError([column])
                sys.stderr.write(f"vflsec party-data: warning: {path}: {one.describe()}; vflsec party refuses it "
                                 f"-- {one.fix(_column_type_options, _high_cardinality_options, _POOL)}\n")
        except ValueError as exc:
            raise _command_error(exc, "declare the column's type with --column-type") from None


def run_input(args: argparse.Namespace) -> None:
    from ..data import read_table
    from ..errors import CommandError, require_extra
    from .party_csv import write_csv

    require_extra("pyarrow", "pandas")
    types = _column_types(args.column_type)
    if args.cardinality_limit is not None and args.cardinality_limit < 1:
        raise CommandError(f"--cardinality-limit must be >= 1, got {args.cardinality_limit}",
                           "leave it out for the default (100)")
    shown = os.path.normpath(args.input)
    path = Path(shown)
    try:
        table = read_table(path, id_column=args.id_column, label_column=args.label_column,
                           positive_label=_positive(args.positive_label))
    except FileNotFoundError as exc:
        raise CommandError(str(exc).split(" -- ")[0], "check the --input path") from None
    except ValueError as exc:
        raise _command_error(exc, "correct the file") from None
    features = table.features
    if features.shape[1] == 0:
        raise CommandError(f"{shown} has no feature columns besides {args.id_column!r}",
                           "give the party's file with its feature columns")
    declared = {c: t for c, t in types.items() if c in features.columns}
    unknown = sorted(set(types) - set(features.columns) - {args.id_column, args.label_column})
    unknown += sorted(set(args.high_cardinality) - set(features.columns))
    if unknown:
        option = "--column-type" if unknown[0] in types else "--high-cardinality"
        raise CommandError(f"{option} names {unknown[0]!r}, which {shown} does not have",
                           f"use one of its columns: {', '.join(map(str, features.columns[:8]))}")
    prep, X, refused = _fit(features, args, declared, shown)
    refused_names = {c.name: c for c in refused}
    print(f"{shown}: {len(table.ids)} rows, ID column {args.id_column!r}"
          + (f", label {args.label_column!r}: {_label_text(table)}" if table.labels is not None else ""))
    for column in features.columns:
        missing = int(features[column].isna().sum())
        kind = prep.column_types_.get(column, "drop")
        if column in refused_names:
            kind = (f"categorical, {refused_names[column].n_distinct} distinct values: refused (see the warning), "
                    "left out below")
        elif kind == "categorical":
            kind += f", {features[column].nunique(dropna=True)} distinct values"
        print(f"  {column}: {kind}" + (f", {missing} missing ({missing / len(features):.1%})" if missing else ""))
    print(f"  -> {X.shape[1]} numeric columns after preprocessing ({args.scaling}; {prep.privacy_note_})")
    print("party file lines:\n  [party]\n  data = " + json.dumps(shown)
          + ("" if os.path.isabs(shown) else "  # relative to the party file's folder")
          + "\n  id_column = " + json.dumps(args.id_column))
    if args.label_column:
        print(f"  label_column = {json.dumps(args.label_column)}")
        if args.positive_label is not None:
            print(f"  positive_label = {json.dumps(args.positive_label)}")
    print(f"  [preprocess]\n  scaling = \"{args.scaling}\"")
    if declared:
        print("  column_types = { " + ", ".join(f"{json.dumps(c)} = {json.dumps(t)}" for c, t in declared.items())
              + " }")
    if args.cardinality_limit is not None:
        print(f"  cardinality_limit = {args.cardinality_limit}")
    if args.high_cardinality:
        print(f"  high_cardinality = {json.dumps(list(args.high_cardinality))}")
    if args.out is None:
        return
    out = Path(os.path.normpath(args.out))
    out.mkdir(parents=True, exist_ok=True)
    name = args.name or path.name.split(".")[0]
    write_csv(out / f"{name}.csv", [str(v) for v in table.ids], X,
              None if table.labels is None else np.asarray(table.labels, dtype=np.float64),
              id_column=args.id_column, label_column=args.label_column or "y",
              feature_names=prep.get_feature_names_out())
    prep.save(out / f"{name}.preprocessor.json")
    without = f" without {', '.join(map(repr, refused_names))} (refused, see the warning)" if refused else ""
    print(f"wrote {out / f'{name}.csv'} (numeric, for [party] data without [preprocess]){without} and "
          f"{out / f'{name}.preprocessor.json'} (the fitted transform)")


def _label_text(table: Any) -> str:
    labels = np.asarray(table.labels)
    positive = float(np.mean(labels == 1)) if labels.size else 0.0
    classes = table.label_classes
    named = f"{classes[1]!r} coded 1, {classes[0]!r} coded 0" if classes is not None else "0/1"
    return f"{named}; {positive:.1%} positive"
