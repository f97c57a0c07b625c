"""A party's aligned rows written once as Parquet shards and read back shard by shard.

A job with ``shard_rows = S > 0`` (:class:`vflsec.glm.job.GLMJob`) trains on the
shard-local schedule (:func:`vflsec.vfl.schedule.epoch_order`): an epoch takes
the shards (``S`` consecutive rows of the aligned order; the last may be
shorter) one after the other, in an order of its own, so a batch touches the
shard it is in and possibly the next one. :meth:`ShardedTable.write` writes the
rows once, one Parquet file per shard (float64 feature columns ``x0, x1, ...``,
and for the active party the ``label`` column: the targets the loss takes); the
:class:`ShardedTable` then reads any selection of rows (``table[idx]``,
``table[a:b]``) from the shards it lies in, holding at most two shards (the
current and the next: a shard is read when a selection first needs it, and the
one used longest ago is dropped first). Read in the schedule's order, every
shard is read once per epoch.

A :class:`~vflsec.glm.design_rows.DesignedRows` over the table builds the
party's block per batch from those rows (row norm, intercept column), and
:attr:`ShardedTable.labels` gives the labels per batch from the same shards:
the "plain" and "hdp" programs read nothing else, so they train on the rows
without the party's table in memory, and the result is bit for bit the run on
the table in memory with the same schedule (the shards hold the float64 values
as they are). ``vflsec party`` uses it for a job with ``shard_rows``
(:mod:`vflsec.runtime.party_shards`: where the files go, their removal).

The shards hold the party's private rows: the folder is the caller's (made
0700 by ``vflsec party``), and :meth:`ShardedTable.remove` deletes the files.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple, Union

import numpy as np

__all__ = ["LABEL_COLUMN", "ShardedLabels", "ShardedTable", "value_chunks"]

#: the column of the active party's labels in its shards
LABEL_COLUMN = "label"
#: shards a table holds in memory at most: the current one and the next
RESIDENT_SHARDS = 2

Rows = Union[np.ndarray, slice]


def _shard_name(shard: int) -> str:
    return f"shard-{shard:06d}.parquet"


class Float64Rows:
    """What array-minded callers read of rows that are not an array (a sharded table, a designed
    block): ``ndim`` from ``shape`` and a float64 ``dtype``; a subclass gives ``shape`` and ``__len__``."""

    @property
    def shape(self) -> Tuple[int, ...]:
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)


class ShardedTable(Float64Rows):
    """A party's rows in the aligned order, as Parquet shards of ``shard_rows`` rows in
    ``directory`` (module docstring). Made by :meth:`write`.

    ``table[idx]`` (an integer index array) and ``table[a:b]`` are those rows'
    features, a new 2-D float64 array; :attr:`labels` the labels of the same rows.
    ``loads`` counts the shard files read so far, ``max_resident`` the most shards
    held at once (never above 2)."""

    def __init__(self, directory: Path, n_rows: int, n_features: int, shard_rows: int, has_labels: bool):
        self.directory = Path(directory)
        self._n = int(n_rows)
        self._d = int(n_features)
        self.shard_rows = int(shard_rows)
        self._has_labels = bool(has_labels)
        self._resident: "collections.OrderedDict[int, Tuple[np.ndarray, Optional[np.ndarray]]]" = \
            collections.OrderedDict()
        self.loads = 0
        self.max_resident = 0

    # -- writing ------------------------------------------------------------------------------
    @classmethod
    def write(cls, directory: Path, X: np.ndarray, order: Optional[np.ndarray], shard_rows: int,
              labels: Optional[np.ndarray] = None) -> "ShardedTable":
        """Write the rows ``X[order]`` (``order`` None: ``X`` as it is) to ``directory`` (an
        existing folder), one Parquet file of ``shard_rows`` rows per shard; ``labels``: the
        labels of those rows, already in that order (the active party's). Reads ``X`` one shard
        of rows at a time: no second copy of the table is made."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not isinstance(X, np.ndarray) or X.ndim != 2:
            raise TypeError(f"the rows to shard must be a 2-D array, got {type(X).__name__} {getattr(X, 'shape', '')}")
        if X.shape[1] == 0:
            raise ValueError("the rows to shard have no feature columns")
        shard_rows = int(shard_rows)
        if shard_rows < 1:
            raise ValueError(f"shard_rows must be >= 1 to write shards, got {shard_rows}")
        n = X.shape[0] if order is None else len(order)
        if labels is not None and len(labels) != n:
            raise ValueError(f"{len(labels)} labels for {n} rows")
        directory = Path(directory)
        names = [f"x{j}" for j in range(X.shape[1])]
        for shard, first in enumerate(range(0, n, shard_rows)):
            last = min(n, first + shard_rows)
            part = X[first:last] if order is None else X[order[first:last]]
            columns = [pa.array(np.ascontiguousarray(part[:, j], dtype=np.float64)) for j in range(part.shape[1])]
            fields = list(names)
            if labels is not None:
                columns.append(pa.array(np.asarray(labels[first:last], dtype=np.float64)))
                fields.append(LABEL_COLUMN)
            table = pa.table(columns, names=fields)
            pq.write_table(table, directory / _shard_name(shard))
            del part, columns, table
        return cls(directory, n, X.shape[1], shard_rows, labels is not None)

    # -- shape --------------------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, int]:
        return (self._n, self._d)

    def __len__(self) -> int:
        return self._n

    @property
    def n_shards(self) -> int:
        return -(-self._n // self.shard_rows)

    @property
    def resident(self) -> int:
        """Shards held in memory now."""
        return len(self._resident)

    @property
    def labels(self) -> Optional["ShardedLabels"]:
        """The labels of the rows (None: the shards hold none, a passive party's)."""
        return ShardedLabels(self) if self._has_labels else None

    def files(self) -> Tuple[Path, ...]:
        """The shard files, in the aligned order."""
        return tuple(self.directory / _shard_name(s) for s in range(self.n_shards))

    # -- reading ------------------------------------------------------------------------------
    def _shard(self, shard: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Shard ``shard``'s ``(features, labels)``: held, or read (dropping the shard used
        longest ago when two are held)."""
        held = self._resident.get(shard)
        if held is not None:
            self._resident.move_to_end(shard)
            return held
        while len(self._resident) >= RESIDENT_SHARDS:
            self._resident.popitem(last=False)
        held = self._read(shard)
        self._resident[shard] = held
        self.loads += 1
        self.max_resident = max(self.max_resident, len(self._resident))
        return held

    def _read(self, shard: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        import pyarrow.parquet as pq

        path = self.directory / _shard_name(shard)
        expected = min(self.shard_rows, self._n - shard * self.shard_rows)
        try:
            table = pq.read_table(path)
        except (OSError, ValueError) as exc:  # a file removed or damaged during the run
            raise ValueError(f"shard {shard} of the party's rows ({path}) cannot be read: {exc}") from exc
        if table.num_rows != expected or table.num_columns != self._d + self._has_labels:
            raise ValueError(f"shard {shard} of the party's rows ({path}) holds {table.num_rows} rows and "
                             f"{table.num_columns} columns, written with {expected} and "
                             f"{self._d + self._has_labels}: the file changed during the run")
        features = np.empty((expected, self._d), dtype=np.float64)
        for j in range(self._d):
            features[:, j] = table.column(j).to_numpy()
        labels = table.column(self._d).to_numpy().astype(np.float64, copy=True) if self._has_labels else None
        return features, labels

    def _positions(self, rows: Rows) -> np.ndarray:
        if isinstance(rows, slice):
            picked = range(self._n)[rows]
            return np.arange(picked.start, picked.stop, picked.step, dtype=np.int64)
        positions = np.asarray(rows)
        if positions.ndim != 1 or positions.dtype.kind not in "iu":
            raise TypeError("a sharded table selects rows only: a 1-D integer index array or a slice")
        if positions.size and (int(positions.min()) < -self._n or int(positions.max()) >= self._n):
            raise IndexError(f"row positions outside the {self._n} rows")
        return np.where(positions < 0, positions + self._n, positions).astype(np.int64, copy=False)

    def _gather(self, rows: Rows, labels: bool) -> np.ndarray:
        positions = self._positions(rows)
        out = np.empty((len(positions),) if labels else (len(positions), self._d), dtype=np.float64)
        shard_of = positions // self.shard_rows
        # The shards in the order the selection first reaches them (the schedule's order).
        found, first = np.unique(shard_of, return_index=True)
        for shard in found[np.argsort(first, kind="stable")]:
            at = np.flatnonzero(shard_of == shard)
            features, shard_labels = self._shard(int(shard))
            source = shard_labels if labels else features
            assert source is not None  # labels are asked for only through self.labels
            out[at] = source[positions[at] - int(shard) * self.shard_rows]
        return out

    def __getitem__(self, rows: Rows) -> np.ndarray:
        return self._gather(rows, labels=False)

    def chunks(self) -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
        """Every shard's ``(features, labels)`` in the aligned order, read one after the other."""
        for shard in range(self.n_shards):
            yield self._shard(shard)

    def __array__(self, dtype: Optional[Any] = None, copy: Optional[bool] = None) -> np.ndarray:
        whole = np.empty(self.shape)
        for shard, (features, _) in enumerate(self.chunks()):
            whole[shard * self.shard_rows:shard * self.shard_rows + len(features)] = features
        return whole if dtype is None else whole.astype(dtype, copy=False)

    # -- removal ------------------------------------------------------------------------------
    def release(self) -> None:
        """Drop the shards held in memory."""
        self._resident.clear()

    def remove(self) -> None:
        """Delete the shard files (and drop the shards held); the folder itself stays the caller's."""
        self.release()
        for path in self.files():
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"ShardedTable(shape={self.shape}, shard_rows={self.shard_rows}, directory={str(self.directory)!r})"


class ShardedLabels(Float64Rows):
    """The labels of a :class:`ShardedTable`'s rows: ``labels[idx]`` is a new 1-D float64
    array read from the same shards as ``table[idx]`` (held shards are not read again);
    :meth:`chunks` gives them shard by shard; ``np.asarray(labels)`` all of them."""

    def __init__(self, table: ShardedTable):
        self._table = table

    @property
    def shape(self) -> Tuple[int]:
        return (len(self._table),)

    def __len__(self) -> int:
        return len(self._table)

    def __getitem__(self, rows: Rows) -> np.ndarray:
        return self._table._gather(rows, labels=True)

    def chunks(self) -> Iterator[np.ndarray]:
        for _, labels in self._table.chunks():
            assert labels is not None  # a ShardedLabels exists only for a table with labels
            yield labels

    def __array__(self, dtype: Optional[Any] = None, copy: Optional[bool] = None) -> np.ndarray:
        whole = np.concatenate(list(self.chunks())) if len(self) else np.empty(0)
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"ShardedLabels(n={len(self)})"


def value_chunks(values: Any) -> Iterator[np.ndarray]:
    """``values`` (a 1-D array, or :class:`ShardedLabels`) in pieces: the array itself, or the
    labels shard by shard (a check of every label without them all in memory)."""
    if isinstance(values, ShardedLabels):
        yield from values.chunks()
    else:
        yield np.asarray(values)
