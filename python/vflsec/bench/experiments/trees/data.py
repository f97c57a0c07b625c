"""The data of ``vflsec bench trees``: a dataset (or why it is skipped), its two parties' attributes,
and each train/test split as the raw blocks the estimator bins itself and the bin codes the
centralized and single-party references and the party programs read."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .grid import TreesGrid

__all__ = ["PARTIES", "PartySplit", "load", "party_columns", "split"]

#: the party names of every vertical run (the estimator's names for a list of two blocks)
PARTIES = ("active", "passive_0")


def load(name: str, grid: TreesGrid, data_dir: Optional[Path]) -> Tuple[Any, Dict[str, Any]]:
    """``(dataset or None, record)``: the record says what was loaded, or why the dataset is
    skipped and how to fix it (a file not found), never raising for a missing file."""
    from ....data import load_dataset
    from ....errors import missing_dataset

    try:
        ds = load_dataset(name, data_dir=data_dir)
    except FileNotFoundError as exc:
        error = missing_dataset(exc)
        return None, {"status": "skipped", "reason": error.what, "fix": error.fix}
    if ds.task != "binary" or len(np.unique(ds.y)) != 2:
        return None, {"status": "skipped", "reason": f"{name} is not a binary classification data set",
                      "fix": "choose binary data sets (breast, credit, adult, csv:PATH with a 0/1 label)"}
    n_all = ds.n_samples
    if grid.max_rows is not None and n_all > grid.max_rows:
        # A stratified-enough subsample: a seeded permutation (both classes are common in every shipped set).
        keep = np.sort(np.random.default_rng(grid.seed).permutation(n_all)[:grid.max_rows])
        import dataclasses

        ds = dataclasses.replace(ds, X=ds.X[keep], y=ds.y[keep])
    active, passive = party_columns(ds)
    record = {"status": "ok", "rows": ds.n_samples, "rows_in_file": n_all, "features": int(ds.X.shape[1]),
              "positive_rate": float(np.mean(ds.y == 1)),
              "attributes": {PARTIES[0]: [a for a, _ in active], PARTIES[1]: [a for a, _ in passive]},
              "columns": {PARTIES[0]: sum(len(c) for _, c in active), PARTIES[1]: sum(len(c) for _, c in passive)}}
    return ds, record


def party_columns(ds: Any) -> Tuple[List[Tuple[str, Tuple[int, ...]]], List[Tuple[str, Tuple[int, ...]]]]:
    """The active party's attributes (the first half, rounded up, in the data set's order) and the
    passive party's (the rest); a one-hot encoded attribute's columns stay together."""
    attributes = list(ds.attributes)
    if len(attributes) < 2:
        raise ValueError(f"{ds.name} has {len(attributes)} attribute(s); two parties need at least 2")
    half = (len(attributes) + 1) // 2
    return attributes[:half], attributes[half:]


@dataclass(frozen=True)
class PartySplit:
    """One train/test split: each party's raw columns and bin codes (bins fitted by each party on
    its own training rows, as the estimator does), the labels, and the passive party's training
    rows standardized by its own statistics (the attack's own-features reference reads them)."""

    raw_train: List[np.ndarray]
    raw_test: List[np.ndarray]
    codes_train: List[np.ndarray]
    codes_test: List[np.ndarray]
    y_train: np.ndarray
    y_test: np.ndarray
    n_bins: Tuple[Tuple[int, ...], ...]
    passive_standardized: np.ndarray


def split(ds: Any, grid: TreesGrid, index: int) -> PartySplit:
    """Split ``index`` (seed ``grid.seed + index``; stratified), raw values (trees need no scaling)."""
    from sklearn.model_selection import train_test_split

    from ....trees import FeatureBins

    rows = np.arange(ds.n_samples)
    train, test = train_test_split(rows, test_size=grid.test_size, random_state=grid.seed + index, stratify=ds.y)
    train, test = np.sort(train), np.sort(test)
    y = (np.asarray(ds.y) == 1).astype(np.int64)
    blocks = [ds.X[:, [c for _, cols in party for c in cols]] for party in party_columns(ds)]
    raw_train = [np.ascontiguousarray(b[train]) for b in blocks]
    raw_test = [np.ascontiguousarray(b[test]) for b in blocks]
    bins = [FeatureBins(grid.max_bins).fit(b) for b in raw_train]
    passive = raw_train[1]
    spread = passive.std(axis=0)
    standardized = (passive - passive.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return PartySplit(raw_train, raw_test, [b.transform(x) for b, x in zip(bins, raw_train)],
                      [b.transform(x) for b, x in zip(bins, raw_test)], y[train], y[test],
                      tuple(tuple(int(c) for c in b.n_bins_) for b in bins), standardized)
