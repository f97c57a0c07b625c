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
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["add_input_arguments", "run_input"]

COLUMN_TYPES = ("numeric", "categorical", "date", "id", "label", "drop")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a party's own table (--input; the dataset options above are then unused)")
    group.add_argument("--input", default=None, metavar="FILE", help="the party's own .csv or .parquet file")
    group.add_argument("--id-column", default="id", help="its ID column (default: id)")
    group.add_argument("--label-column", default=None, help="its label column (the active party only)")
    group.add_argument("--positive-label", default=None, help="the label value coded 1 (text labels)")
    group.add_argument("--column-type", action="append", default=[], metavar="COLUMN=TYPE",
                       help=f"declare a column's type ({', '.join(COLUMN_TYPES)}); repeatable")
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


def run_input(args: argparse.Namespace) -> None:
    from ..data import PartyPreprocessor, read_table
    from ..errors import CommandError, require_extra
    from .party_csv import write_csv

    require_extra("pyarrow", "pandas")
    types = _column_types(args.column_type)
    path = Path(args.input)
    try:
        table = read_table(path, id_column=args.id_column, label_column=args.label_column,
                           positive_label=_positive(args.positive_label))
    except FileNotFoundError as exc:
        raise CommandError(str(exc).split(" -- ")[0], "check the --input path") from None
    except ValueError as exc:
        what, _, fix = str(exc).partition(" -- ")
        raise CommandError(what, fix or "correct the file") from None
    features = table.features
    if features.shape[1] == 0:
        raise CommandError(f"{path} has no feature columns besides {args.id_column!r}",
                           "give the party's file with its feature columns")
    declared = {c: t for c, t in types.items() if c in features.columns}
    unknown = sorted(set(types) - set(features.columns) - {args.id_column, args.label_column})
    if unknown:
        raise CommandError(f"--column-type names {unknown[0]!r}, which {path} does not have",
                           f"use one of its columns: {', '.join(map(str, features.columns[:8]))}")
    try:
        prep = PartyPreprocessor(column_types=declared or None, scaling=args.scaling)
        X = np.ascontiguousarray(prep.fit_transform(features), dtype=np.float64)
    except ValueError as exc:
        what, _, fix = str(exc).partition(" -- ")
        raise CommandError(f"{path}: {what}", fix or "declare the column's type with --column-type") from None
    print(f"{path}: {len(table.ids)} rows, ID column {args.id_column!r}"
          + (f", label {args.label_column!r}: {_label_text(table)}" if table.labels is not None else ""))
    for column in features.columns:
        missing = int(features[column].isna().sum())
        print(f"  {column}: {prep.column_types_.get(column, 'drop')}"
              + (f", {missing} missing ({missing / len(features):.1%})" if missing else ""))
    print(f"  -> {X.shape[1]} numeric columns after preprocessing ({args.scaling}; {prep.privacy_note_})")
    print("party file lines:\n  [party]\n  data = \"" + path.name + "\"\n  id_column = \"" + args.id_column + "\"")
    if args.label_column:
        print(f"  label_column = \"{args.label_column}\"")
        if args.positive_label is not None:
            print(f"  positive_label = \"{args.positive_label}\"")
    print(f"  [preprocess]\n  scaling = \"{args.scaling}\"")
    if declared:
        print("  column_types = { " + ", ".join(f'"{c}" = "{t}"' for c, t in declared.items()) + " }")
    if args.out is None:
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.name or path.name.split(".")[0]
    write_csv(out / f"{name}.csv", [str(v) for v in table.ids], X,
              None if table.labels is None else np.asarray(table.labels, dtype=np.float64),
              id_column=args.id_column, label_column=args.label_column or "y")
    prep.save(out / f"{name}.preprocessor.json")
    print(f"wrote {out / f'{name}.csv'} (numeric, for [party] data without [preprocess]) and "
          f"{out / f'{name}.preprocessor.json'} (the fitted transform)")


def _label_text(table: Any) -> str:
    labels = np.asarray(table.labels)
    positive = float(np.mean(labels == 1)) if labels.size else 0.0
    classes = table.label_classes
    named = f"{classes[1]!r} coded 1, {classes[0]!r} coded 0" if classes is not None else "0/1"
    return f"{named}; {positive:.1%} positive"
