"""A vertical tree: its structure with the active party, each split's threshold with its owner.

The active party holds every tree's structure (:class:`Tree`): for an internal
node, which party owns the split and the id of the record in that party's
lookup table; for a leaf, its value. A party's :class:`LookupTable` holds what
only it knows: the feature and bin of each split it owns (SecureBoost's
"lookup table"; with the party's own bin thresholds, :mod:`vflsec.trees.binning`,
a value), so no party learns another's thresholds. Walking a tree over rows
(:func:`tree_output`) needs, at each node, the owner's answer "does this row go
left", which :func:`tree_output` takes from a callable; in one process (the
estimator) every party's table and codes are at hand (:func:`lookup_walker`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Sequence

import numpy as np

__all__ = ["LEAF", "LookupTable", "Tree", "lookup_walker", "tree_output"]

#: ``Tree.owner`` of a leaf
LEAF = -1


@dataclass
class LookupTable:
    """A party's own splits: record ``r`` sends a row left when its bin code of feature
    ``feature[r]`` is at most ``code[r]`` (its value at most the party's threshold
    ``thresholds_[feature][code]``), and a row whose value is missing (its code is the
    feature's missing code ``missing_code[r]``, above every value code) left when
    ``missing_left[r]``."""

    feature: List[int] = field(default_factory=list)
    code: List[int] = field(default_factory=list)
    missing_left: List[bool] = field(default_factory=list)
    missing_code: List[int] = field(default_factory=list)

    def add(self, feature: int, code: int, missing_left: bool = False, missing_code: int = 0) -> int:
        """A record; ``missing_code`` (the feature's, :meth:`~vflsec.trees.binning.FeatureBins.missing_code`)
        matters only with ``missing_left``."""
        self.feature.append(int(feature))
        self.code.append(int(code))
        self.missing_left.append(bool(missing_left))
        self.missing_code.append(int(missing_code))
        return len(self.feature) - 1

    def __len__(self) -> int:
        return len(self.feature)

    def goes_left(self, record: int, codes: np.ndarray) -> np.ndarray:
        """Whether each row of ``codes`` (this party's bin codes) goes left at ``record``."""
        column = codes[:, self.feature[record]]
        left = column <= self.code[record]  # a missing code is above every threshold code: right
        if self.missing_left[record]:
            left |= column == self.missing_code[record]
        return left

    def to_dict(self) -> dict:
        return {"feature": list(self.feature), "code": list(self.code), "missing_left": list(self.missing_left),
                "missing_code": list(self.missing_code)}

    @classmethod
    def from_dict(cls, data: dict) -> "LookupTable":
        n = len(data["feature"])
        columns = (data["feature"], data["code"], data.get("missing_left", [False] * n),
                   data.get("missing_code", [0] * n))
        if any(len(column) != n for column in columns):
            raise ValueError("a lookup table's columns (feature, code, missing_left, missing_code) differ in length")
        return cls([int(f) for f in columns[0]], [int(c) for c in columns[1]], [bool(m) for m in columns[2]],
                   [int(c) for c in columns[3]])


@dataclass
class Tree:
    """Node arrays of one tree (node 0 is the root): ``owner`` (the party's index in
    the job, active first; :data:`LEAF` for a leaf), ``record`` (the id in the
    owner's lookup table), ``left``/``right`` (child nodes), ``value`` (a leaf's
    contribution to the raw score, learning rate included)."""

    owner: np.ndarray
    record: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.owner == LEAF))

    @property
    def depth(self) -> int:
        depth = np.zeros(len(self.owner), dtype=np.int64)
        for node in range(len(self.owner)):  # children are numbered after their parent
            if self.owner[node] != LEAF:
                depth[self.left[node]] = depth[self.right[node]] = depth[node] + 1
        return int(depth.max())

    def to_dict(self) -> dict:
        return {key: getattr(self, key).tolist() for key in ("owner", "record", "left", "right", "value")}

    @classmethod
    def from_dict(cls, data: dict) -> "Tree":
        ints = {key: np.asarray(data[key], dtype=np.int64) for key in ("owner", "record", "left", "right")}
        return cls(**ints, value=np.asarray(data["value"], dtype=np.float64))


def tree_output(tree: Tree, n_rows: int, goes_left: Callable[[int, int, np.ndarray], np.ndarray]) -> np.ndarray:
    """The tree's value for each of ``n_rows`` rows. ``goes_left(owner, record, rows)`` answers
    for the rows ``rows`` (indices) whether they go left at the owner's record."""
    out = np.zeros(n_rows)
    stack = [(0, np.arange(n_rows))]
    while stack:
        node, rows = stack.pop()
        if tree.owner[node] == LEAF:
            out[rows] = tree.value[node]
            continue
        left = np.asarray(goes_left(int(tree.owner[node]), int(tree.record[node]), rows), dtype=bool)
        stack.append((int(tree.left[node]), rows[left]))
        stack.append((int(tree.right[node]), rows[~left]))
    return out


def lookup_walker(tables: Sequence[LookupTable], codes: Sequence[np.ndarray]
                  ) -> Callable[[int, int, np.ndarray], np.ndarray]:
    """``goes_left`` for :func:`tree_output` when every party's table and codes are here."""
    def goes_left(owner: int, record: int, rows: np.ndarray) -> np.ndarray:
        return tables[owner].goes_left(record, codes[owner][rows])
    return goes_left
