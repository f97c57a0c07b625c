"""A party's block built batch by batch from its own rows, never whole.

The design of :mod:`vflsec.glm.model` maps every row on its own (the row
norm, the intercept column), so the rows ``idx`` of the block are the design
of the rows ``idx``, bit for bit. :class:`DesignedRows` uses that: it keeps
the party's rows as given (never writing to them) and builds the block's rows
when they are read, ``rows[idx]`` (a batch) or ``rows[a:b]`` (a chunk). A
program that reads its block only that way (the IR exchange of "plain" and
"hdp", :mod:`vflsec.glm.ir_exchange`) then trains without a second copy of
the party's data; any other program gets the whole block, built once,
through :meth:`vflsec.glm.job.PartyData.checked` (``np.asarray(rows)``).

The rows may also be a :class:`~vflsec.glm.shards.ShardedTable`: the party's
aligned rows as Parquet shards on disk, read per selection (``vflsec party``
with ``shard_rows``), so not even the rows as given stay in memory.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union

import numpy as np

from ..dp.sensitivity import row_chunk
from .shards import Float64Rows, ShardedTable

__all__ = ["DesignedRows", "all_finite"]


def all_finite(X: Union[np.ndarray, ShardedTable]) -> bool:
    """True when every value of the 2-D array ``X`` (or sharded table) is
    finite, read in chunks of rows (no boolean temporary the size of ``X``)."""
    step = row_chunk(X.shape[1])
    return all(bool(np.isfinite(X[start:start + step]).all()) for start in range(0, X.shape[0], step))


class DesignedRows(Float64Rows):
    """The block ``build(X)`` of a party's rows ``X`` (2-D float64), built per
    selection of rows: ``rows[idx]`` (an index array) and ``rows[a:b]`` are
    ``build(X[idx])`` and ``build(X[a:b])``, new arrays; ``X`` is read, never
    written. ``build`` must map each row on its own (then ``rows[idx]``
    equals ``build(X)[idx]`` bit for bit) and give ``width`` columns.
    ``np.asarray(rows)`` is the whole block ``build(X)``.

    ``index`` (row positions into ``X``): the block of ``X[index]`` instead,
    without that copy of the rows (a party's rows in the aligned order: the
    table as read and the order, not both tables).

    ``X`` may be a :class:`~vflsec.glm.shards.ShardedTable` instead of an
    array (no ``index``: its rows are in the aligned order already): each
    selection is then read from the shards it lies in."""

    def __init__(self, X: Union[np.ndarray, ShardedTable], build: Callable[[np.ndarray], np.ndarray], width: int,
                 index: Optional[np.ndarray] = None):
        if isinstance(X, ShardedTable):
            if index is not None:
                raise TypeError("a sharded table's rows are in the aligned order already: pass no index")
        elif not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float64:
            raise TypeError(f"DesignedRows needs a 2-D float64 array, got {type(X).__name__} "
                            f"{getattr(X, 'shape', '')} {getattr(X, 'dtype', '')}".rstrip())
        if index is not None:
            index = np.asarray(index)
            if index.ndim != 1 or index.dtype.kind not in "iu":
                raise TypeError("index must be a 1-D integer array of row positions")
            if index.size and (int(index.min()) < -X.shape[0] or int(index.max()) >= X.shape[0]):
                raise IndexError(f"index holds row positions outside the {X.shape[0]} rows")
        self._X = X
        self._index = index
        self._build = build
        self._width = int(width)

    @property
    def shape(self) -> Tuple[int, int]:
        return (len(self), self._width)

    def __len__(self) -> int:
        return self._X.shape[0] if self._index is None else len(self._index)

    def all_finite(self) -> bool:
        """True when every value of the block is finite: when the rows are
        (the design divides a row by a norm >= 1, possibly inf, and appends a
        finite constant)."""
        if self._index is None:
            return all_finite(self._X)
        step = row_chunk(self._X.shape[1])
        return all(bool(np.isfinite(self._X[self._index[start:start + step]]).all())
                   for start in range(0, len(self), step))

    def __getitem__(self, rows: Any) -> np.ndarray:
        selected = self._X[rows] if self._index is None else self._X[self._index[rows]]
        if not isinstance(selected, np.ndarray) or selected.ndim != 2:
            raise TypeError("DesignedRows selects rows only: an index array or a slice")
        return self._build(selected)

    @property
    def sharded(self) -> bool:
        """True when the rows are read from Parquet shards (a :class:`~vflsec.glm.shards.ShardedTable`)."""
        return isinstance(self._X, ShardedTable)

    def __array__(self, dtype: Optional[Any] = None, copy: Optional[bool] = None) -> np.ndarray:
        if self._index is None and isinstance(self._X, np.ndarray):
            block = self._build(self._X)
        else:  # chunk by chunk into the block: no ordered copy of the rows (or of the shards) beside it
            block = np.empty(self.shape)
            step = row_chunk(max(1, self._width))
            for start in range(0, len(self), step):
                block[start:start + step] = self[start:start + step]
        return block if dtype is None else block.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"DesignedRows(shape={self.shape})"
