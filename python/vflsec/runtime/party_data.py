"""``vflsec party-data``: per-party CSV files for trying multi-process jobs.

(With ``--input FILE`` it checks and prepares one party's own table instead: :mod:`.party_input`.
With ``--raw`` it writes raw tables of a bank and an insurer instead -- text categories, missing
cells, dates, text labels, training / held-out / next month's customers, CSV or Parquet
(``--format``) -- from ``--dataset synthetic`` (built in) or ``adult``:
:mod:`vflsec.data.demo_tables`, what the "your own data" guide starts from.)

Splits a dataset vertically (:func:`vflsec.data.vertical_split`, per-party
``zscore_clip`` scaling to row norms <= 1, statistics from each party's own
training rows) and writes one CSV
per party: an ``id`` column, the active party's ``y`` label column (0/1),
then the party's feature columns under the dataset's column names (Adult's
one-hot columns as ``<attribute>=<value>``). To mimic un-aligned data, each party keeps
a random ``--keep`` fraction of the rows, in its own random order, so the
parties must align them by private set intersection before training. IDs
are opaque strings derived from the row number through a keyed permutation
(``--seed``), the same for every party.

Beside each ``<name>.csv`` it writes ``<name>-test.csv``: the split's held-out
rows (every one, in the party's own random order, with IDs of their own), for
a job with ``evaluate = true`` (``[party] test_data``). The training files do
not depend on them: the same arguments give the same ``<name>.csv`` as before
the test files existed.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["add_arguments", "make_party_frames", "run"]


Frames = Dict[str, Tuple[List[str], np.ndarray, Optional[np.ndarray], Tuple[str, ...]]]


def make_party_frames(dataset: str = "adult", attribute_counts: Sequence[int] = (6, 4, 4),
                      names: Optional[Sequence[str]] = None, *, keep: float = 0.95, seed: int = 0,
                      rows: Optional[int] = None, data_dir=None, test: bool = False) -> Frames:
    """``name -> (ids, X, y or None, feature names)`` of every party.

    ``"synthetic"``: the built-in 10-feature set when ``attribute_counts``
    split 10 features, otherwise a synthetic set with exactly these features
    per party (:func:`vflsec.data.make_synthetic`, enough rows for ``rows``).
    ``test=True``: the split's held-out rows instead (``keep`` and ``rows``
    do not apply; every party holds every row, in its own random order, under
    IDs drawn apart from the training rows').
    """
    return _party_frames(dataset, attribute_counts, names, keep=keep, seed=seed, rows=rows, data_dir=data_dir,
                         parts=("test",) if test else ("train",))["test" if test else "train"]


def _party_frames(dataset: str, attribute_counts: Sequence[int], names: Optional[Sequence[str]], *, keep: float,
                  seed: int, rows: Optional[int], data_dir, parts: Sequence[str]) -> Dict[str, Frames]:
    """``{"train": frames, "test": frames}`` (those in ``parts``) from one load and split."""
    from ..data import load_dataset, make_synthetic, vertical_split

    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    if dataset == "synthetic" and sum(attribute_counts) != len(load_dataset("synthetic").feature_names):
        # vertical_split keeps 80% for training: generate enough for `rows` training rows
        data = make_synthetic(n_samples=max(1000, -(-5 * (rows or 1000) // 4) + 1),
                              features_per_party=list(attribute_counts), seed=seed)
    else:
        kw = {"data_dir": data_dir} if dataset in ("adult", "credit") else {}
        data = load_dataset(dataset, **kw)
    split = vertical_split(data, list(attribute_counts), seed=seed)
    n = len(split.y_train)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(n, size=rows, replace=False)) if rows is not None and rows < n else np.arange(n)
    names = list(names) if names is not None else list(split.party_names)
    if len(names) != split.n_parties:
        raise ValueError(f"{len(names)} names for {split.n_parties} parties")
    out: Dict[str, Frames] = {}
    tokens = rng.permutation(10 * n)[:n]
    ids_all = np.array([f"u{t:08d}" for t in tokens])
    frames: Frames = {}
    for p, name in enumerate(names):
        kept = chosen[rng.random(len(chosen)) < keep]
        kept = rng.permutation(kept)
        y = split.y_train[kept].astype(np.float64) if p == 0 else None
        frames[name] = (ids_all[kept].tolist(), split.X_train[p][kept], y, split.feature_names[p])
    if "train" in parts:
        out["train"] = frames
    if "test" in parts:
        # A generator of its own: the training files stay what they were before the test files existed.
        test_rng = np.random.default_rng([seed, 1])
        m = len(split.y_test)
        test_ids = np.array([f"t{t:08d}" for t in test_rng.permutation(10 * m)[:m]])
        out["test"] = {}
        for p, name in enumerate(names):
            order = test_rng.permutation(m)
            y = split.y_test[order].astype(np.float64) if p == 0 else None
            out["test"][name] = (test_ids[order].tolist(), split.X_test[p][order], y, split.feature_names[p])
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="adult", help="adult (default), credit, breast or synthetic")
    parser.add_argument("--parties", default="6,4,4",
                        help="attributes per party, active first (default 6,4,4 for Adult's 14)")
    parser.add_argument("--names", default=None, help="party names (default active,passive1,...)")
    parser.add_argument("--keep", type=float, default=0.95, help="fraction of rows each party keeps")
    parser.add_argument("--rows", type=int, default=None, help="use only this many training rows")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the split, the kept rows, their order and the IDs")
    parser.add_argument("--data-dir", default=None, help="dataset folder (default: $VFLSEC_DATA)")
    parser.add_argument("--out", default=None, help="output folder (default: data; with --input: none, "
                                                    "only the check is printed)")
    parser.add_argument("--raw", action="store_true",
                        help="write a bank's and an insurer's raw tables instead (--dataset synthetic or adult): "
                             "bank.csv, insurer.csv, their -test and -next tables")
    parser.add_argument("--format", default="csv", choices=("csv", "parquet"),
                        help="the --raw tables' file format (default csv)")
    from .party_input import add_input_arguments

    add_input_arguments(parser)


def _write_raw(args) -> None:
    from ..data.demo_tables import DEMO_ID, DEMO_LABELS, DEMO_SOURCES, write_bank_insurer_tables
    from ..errors import CommandError, missing_dataset

    if args.dataset not in DEMO_SOURCES:
        raise CommandError(f"--raw writes tables from {' or '.join(DEMO_SOURCES)}, not {args.dataset!r}",
                           "use --dataset synthetic (built in) or --dataset adult")
    if args.rows is not None and args.rows < 100:
        raise CommandError(f"--rows must be >= 100 with --raw, got {args.rows}", "leave it out for the default")
    try:
        written = write_bank_insurer_tables(args.out, args.dataset, fmt=args.format, seed=args.seed, rows=args.rows,
                                            data_dir=args.data_dir)
    except FileNotFoundError as exc:
        raise missing_dataset(exc) from exc
    label, positive = DEMO_LABELS[args.dataset]
    for path in written.values():
        print(os.path.normpath(path))
    print(f"ID column {DEMO_ID!r}; the bank's label column {label!r} (positive label {positive!r}); "
          "-next tables have no label")


def run(args) -> None:
    from ..data import DATASETS
    from ..errors import CommandError, missing_dataset
    from .party_csv import write_csv

    if getattr(args, "input", None) is not None:
        from .party_input import run_input

        run_input(args)
        return
    if args.out is None:
        args.out = "data"
    if getattr(args, "raw", False):
        _write_raw(args)
        return

    # Every argument is checked before the dataset is read.
    if args.dataset not in DATASETS:
        raise CommandError(f"unknown dataset {args.dataset!r}", f"choose one of {', '.join(DATASETS)}")
    try:
        counts = [int(c) for c in args.parties.split(",")]
    except ValueError:
        raise CommandError(f"--parties {args.parties!r} is not a comma-separated list of integers",
                           "give attributes per party, active first, e.g. --parties 6,4,4") from None
    if not counts or min(counts) < 1:
        raise CommandError(f"--parties {args.parties!r}: every party needs at least one attribute",
                           "give positive counts, e.g. --parties 6,4,4")
    names = args.names.split(",") if args.names else None
    if names is not None and len(names) != len(counts):
        raise CommandError(f"--names lists {len(names)} parties but --parties {len(counts)}",
                           "give one name per --parties count")
    if not 0 < args.keep <= 1:
        raise CommandError(f"--keep must be in (0, 1], got {args.keep}", "e.g. --keep 0.95")
    if args.rows is not None and args.rows < 1:
        raise CommandError(f"--rows must be >= 1, got {args.rows}", "leave it out to use every training row")
    try:
        both = _party_frames(args.dataset, counts, names, keep=args.keep, seed=args.seed, rows=args.rows,
                             data_dir=args.data_dir, parts=("train", "test"))
    except FileNotFoundError as exc:
        raise missing_dataset(exc) from exc
    except ValueError as exc:
        if "attributes" not in str(exc):
            raise
        raise CommandError(" ".join(str(exc).split()),
                           "give --parties counts that add up to the dataset's attributes") from exc
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (ids, X, y, features) in both["train"].items():
        path = out / f"{name}.csv"
        write_csv(path, ids, X, y, feature_names=features)
        print(f"{os.path.normpath(path)}: {len(ids)} rows, {X.shape[1]} features ({', '.join(features[:4])}"
              f"{', ...' if len(features) > 4 else ''})")
    for name, (ids, X, y, features) in both["test"].items():
        path = out / f"{name}-test.csv"
        write_csv(path, ids, X, y, feature_names=features)
        print(f"{os.path.normpath(path)}: {len(ids)} held-out rows (for evaluate = true: [party] test_data)")
