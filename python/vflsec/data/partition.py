"""Vertical partition of a dataset among parties, with per-party row scaling.

HDP-VFL's sensitivity bounds (Lemma 3 and 4) need every party's part of
every row to have ``||x_i^P||_2 <= 1``. Each party scales only its own
columns, with statistics from its own training rows, so no party learns
anything about another's features (the statistics themselves are not
covered by the DP budget; see ``vertical_split``'s ``scaling``). The
scaling code is :mod:`.scaling`, shared with
:class:`vflsec.data.PartyPreprocessor`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, List, Sequence, Tuple

import numpy as np

from .._arrays import check_positive_int, check_real
from .dataset import Dataset
from .scaling import NORM_SAFETY, ZScoreClip, project_rows

__all__ = ["PAPER_SPLITS", "PAPER_SPLITS_AS_PUBLISHED", "SCALINGS", "VerticalSplit", "vertical_split"]

# Attribute counts per party as printed in HDP-VFL (Sec. 6): active first.
PAPER_SPLITS_AS_PUBLISHED = {"breast": [11, 20], "credit": [14, 10], "adult": [7, 8]}
# Each published total is the number of feature attributes plus one (Breast 30,
# Credit 23 after dropping ID, Adult 14): the paper counts the label among the
# active party's columns. Without the label the active party has one fewer.
PAPER_SPLITS = {"breast": [10, 20], "credit": [13, 10], "adult": [6, 8]}

SCALINGS = ("zscore_clip", "clip_only", "minmax", "standard")


@dataclass(frozen=True, eq=False)
class VerticalSplit:
    """Per-party train/test feature blocks. Party 0 ("active") holds the labels.

    ``X_train[P]``/``X_test[P]``: party P's scaled columns (every row has L2
    norm <= 1); ``attributes[P]``/``feature_names[P]``/``columns[P]``: its
    attribute names, column names, and column indices into ``dataset.X``;
    ``train_index``/``test_index``: row indices into ``dataset.X``.
    """

    party_names: Tuple[str, ...]
    X_train: List[np.ndarray]
    X_test: List[np.ndarray]
    y_train: np.ndarray
    y_test: np.ndarray
    attributes: List[Tuple[str, ...]]
    feature_names: List[Tuple[str, ...]]
    columns: List[np.ndarray]
    train_index: np.ndarray
    test_index: np.ndarray

    @property
    def n_parties(self) -> int:
        return len(self.party_names)


def _resolve_parties(dataset: Dataset, parties: Any) -> List[List[str]]:
    """Attribute names of each party from counts or from name lists."""
    names = list(dataset.attribute_names)
    if isinstance(parties, (str, bytes)) or not isinstance(parties, Sequence):
        raise TypeError("parties must be a list of attribute counts or a list of lists of "
                        f"attribute names, got {type(parties).__name__}")
    if len(parties) == 0:
        raise ValueError("parties must describe at least one party")
    if all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in parties):
        counts = [int(p) for p in parties]
        for i, c in enumerate(counts):
            if c < 1:
                raise ValueError(f"parties[{i}] must be >= 1 attribute, got {c}")
        if sum(counts) != len(names):
            raise ValueError(f"parties counts {counts} sum to {sum(counts)}, but dataset "
                             f"{dataset.name!r} has {len(names)} attributes")
        bounds = np.cumsum([0] + counts)
        return [names[bounds[i]:bounds[i + 1]] for i in range(len(counts))]
    groups: List[List[str]] = []
    known = set(names)
    seen: dict = {}
    for i, group in enumerate(parties):
        if isinstance(group, (str, bytes)) or not isinstance(group, Sequence):
            raise TypeError(f"parties[{i}] must be a list of attribute names (or every entry of "
                            f"parties an int count), got {type(group).__name__}")
        if len(group) == 0:
            raise ValueError(f"parties[{i}] has no attributes; every party needs at least one")
        for a in group:
            if not isinstance(a, str):
                raise TypeError(f"parties[{i}] holds {a!r}; attribute names are strings")
            if a not in known:
                raise ValueError(f"parties[{i}]: unknown attribute {a!r} for dataset "
                                 f"{dataset.name!r}; attributes: {names}")
            if a in seen:
                raise ValueError(f"attribute {a!r} is given to parties {seen[a]} and {i}")
            seen[a] = i
        groups.append(list(group))
    missing = [a for a in names if a not in seen]
    if missing:
        raise ValueError(f"attributes {missing} are assigned to no party; every attribute must "
                         "belong to exactly one")
    return groups


def _scale_party(
    train: np.ndarray, test: np.ndarray, scaling: str, one_hot: np.ndarray, n_attributes: int
) -> Tuple[np.ndarray, np.ndarray]:
    """One party's train/test block scaled with statistics of its own training
    rows only (``one_hot`` marks columns of multi-column attributes)."""
    if scaling == "clip_only":
        # No statistics at all: only the per-row, data-independent projection.
        return (np.ascontiguousarray(project_rows(train)),
                np.ascontiguousarray(project_rows(test)))
    if scaling == "zscore_clip":
        zscore = ZScoreClip.fit(train, one_hot, n_attributes)
        return (np.ascontiguousarray(zscore.transform(train)),
                np.ascontiguousarray(zscore.transform(test)))
    if scaling == "minmax":
        shift = train.min(axis=0)
        spread = train.max(axis=0) - shift
    else:
        shift = train.mean(axis=0)
        spread = train.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)  # constant column: centred to 0
    train = (train - shift) / spread
    test = (test - shift) / spread
    # One divisor for all rows keeps the geometry among rows; it is fitted on
    # training rows only.
    max_norm = float(np.max(np.linalg.norm(train, axis=1)))
    if max_norm > 0:
        train = train / (max_norm * NORM_SAFETY)
        test = test / (max_norm * NORM_SAFETY)
    # A test row outside the training range may still exceed 1: project it.
    test = project_rows(test)
    return np.ascontiguousarray(train), np.ascontiguousarray(test)


def vertical_split(
    dataset: Dataset,
    parties: Any,
    *,
    test_size: float = 0.2,
    seed: int = 0,
    stratify: bool = True,
    scaling: str = "zscore_clip",
) -> VerticalSplit:
    """Split ``dataset`` row-wise into train/test and column-wise among parties.

    Parameters
    ----------
    parties : list of int or list of list of str
        Attribute counts ``[n_active, n_passive1, ...]`` (attributes are dealt
        out in dataset order, the first block to the active party), or the
        attribute names of each party. Every attribute goes to exactly one
        party, every party gets at least one; a one-hot encoded attribute's
        columns always go together. ``PAPER_SPLITS[name]`` gives HDP-VFL's split.
    test_size : float in (0, 1)
    seed : int >= 0, seeds the train/test split.
    stratify : bool, keep the label proportions in both parts.
    scaling : ``"zscore_clip"`` (default), ``"clip_only"``, ``"minmax"`` or ``"standard"``
        How each party scales its own columns so that every row of its block,
        train and test alike, has ``||x_i^P||_2 <= 1`` (HDP-VFL's assumption):

        * ``"zscore_clip"`` -- z-score every column with the mean and standard
          deviation of the party's *training* rows (a constant column becomes
          0), winsorize at +-3, keep the 0/1 columns of one-hot (multi-column)
          attributes as they are, divide each row by ``sqrt(number of the
          party's attributes)`` (a one-hot attribute counts once) and project
          it onto the unit ball, ``x / max(1, ||x||)``. Typical rows end up
          with norm about 1, so every attribute keeps a comparable share of
          the budget and only outlying rows are shrunk; this is what makes
          (private) logistic regression learn on heavy-tailed data.
        * ``"clip_only"`` -- no statistics: only the per-row projection onto
          the unit ball. Data-independent (nothing about the training rows
          leaks through the scaling), but useful only when the raw columns
          already sit on comparable, publicly known scales (e.g. the owner
          scaled them with public bounds beforehand).
        * ``"minmax"`` / ``"standard"`` -- the original scalings: min-max or
          mean/std per column, then every row divided by the largest
          training-row norm (a test row still above 1 is projected). One
          heavy-tailed column makes all the others tiny, and the divisor is
          itself a statistic of one (extreme) training row.

        Privacy note: the statistics (means and standard deviations for
        ``"zscore_clip"``; minima, maxima, means, standard deviations and the
        largest row norm for the original scalings) are computed by each
        party from its own training rows and stay with that party, but they
        are *not* covered by the DP ``epsilon`` of HDP-VFL: the model's
        guarantee is for the rows after this (data-dependent) preprocessing.
        For an end-to-end guarantee, use ``"clip_only"`` on columns scaled
        with public bounds (or statistics from public data).

    Parties are named ``"active"`` (party 0, which keeps the labels),
    ``"passive1"``, ``"passive2"``, ...
    """
    from sklearn.model_selection import train_test_split

    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset must be a vflsec.data.Dataset, got {type(dataset).__name__}")
    test_size = check_real(test_size, "test_size", low=0.0, low_inclusive=False,
                           high=1.0, high_inclusive=False)
    seed = check_positive_int(seed, "seed", minimum=0)
    if not isinstance(stratify, (bool, np.bool_)):
        raise TypeError(f"stratify must be a bool, got {type(stratify).__name__}")
    if not isinstance(scaling, str) or scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    groups = _resolve_parties(dataset, parties)
    n = dataset.n_samples
    n_test = int(np.ceil(test_size * n))
    if n_test < 1 or n - n_test < 1:
        raise ValueError(f"test_size={test_size} leaves an empty train or test part of {n} rows")

    attr_columns = dict(dataset.attributes)
    index = np.arange(n)
    try:
        train_index, test_index = train_test_split(
            index, test_size=test_size, random_state=seed,
            stratify=dataset.y if stratify else None)
    except ValueError as exc:  # e.g. a class too small to stratify
        raise ValueError(f"cannot split {dataset.name!r} with test_size={test_size}, "
                         f"stratify={stratify}: {exc}") from None
    train_index = np.sort(train_index)
    test_index = np.sort(test_index)

    X_train, X_test, columns, feature_names = [], [], [], []
    for group in groups:
        cols = np.array([c for a in group for c in attr_columns[a]], dtype=np.int64)
        one_hot = np.array([len(attr_columns[a]) > 1 for a in group for _ in attr_columns[a]], dtype=bool)
        block = dataset.X[:, cols]
        tr, te = _scale_party(block[train_index], block[test_index], scaling, one_hot, len(group))
        X_train.append(tr)
        X_test.append(te)
        columns.append(cols)
        feature_names.append(tuple(dataset.feature_names[c] for c in cols))
    party_names = ("active",) + tuple(f"passive{i}" for i in range(1, len(groups)))
    return VerticalSplit(
        party_names=party_names,
        X_train=X_train,
        X_test=X_test,
        y_train=np.ascontiguousarray(dataset.y[train_index]),
        y_test=np.ascontiguousarray(dataset.y[test_index]),
        attributes=[tuple(g) for g in groups],
        feature_names=feature_names,
        columns=columns,
        train_index=train_index,
        test_index=test_index,
    )
