"""A party's ID column, held compactly: :class:`IdColumn`.

Entity alignment handles every ID a party holds, and at 10^7 rows the IDs
are a large share of a party's memory: a Python list of ``str`` costs about
60 bytes per short ID (the object) plus 8 (the list's pointer), an Arrow
``large_string`` array the ID's UTF-8 bytes plus an 8-byte offset. So the IDs
live in one pyarrow array, and Python strings exist only for a bucket of
IDs at a time (:mod:`vflsec.federation.psi` hands the PSI library one bucket
per call). Sorting, membership (``positions_in``) and the uniqueness check run
in Arrow's C++ kernels, without a Python set or dict of all IDs.
"""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterator, List, Sequence, Union, overload

import numpy as np

__all__ = ["IdColumn", "check_strings", "ids_sha256"]

#: IDs turned into Python strings at a time when a column is iterated or hashed
_STEP = 1 << 16
#: parts of the looked-in column :meth:`IdColumn.positions_in` hashes one at a time
LOOKUP_PASSES = 8
#: fewest IDs in such a part (below, one pass costs little memory anyway)
_MIN_LOOKUP = 1 << 18


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 - registers pyarrow.compute
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("entity alignment needs pyarrow (pip install 'vflsec[net]')") from exc
    return pa


def check_strings(ids: Sequence[Any], what: str = "ids") -> List[str]:
    """``ids`` as a list of non-empty ``str`` without duplicates (TypeError/ValueError
    naming the first offending entry); no pyarrow needed."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of str, not a single {type(ids).__name__}")
    out = []
    for i, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise TypeError(f"{what}[{i}] must be a non-empty str, got {item!r}")
        out.append(item)
    if len(set(out)) != len(out):
        seen, dup = set(), None
        for item in out:
            if item in seen:
                dup = item
                break
            seen.add(item)
        raise ValueError(f"{what} contains duplicate ID {dup!r}; IDs must be unique per party")
    return out


class IdColumn(Sequence[str]):
    """IDs in one pyarrow ``large_string`` array (module docstring): a sequence
    of ``str`` that is checked once (:meth:`of`: non-empty strings, no
    duplicates; ``checked`` says it was) and that hands out Python strings only for the rows asked for
    (:meth:`strings`, iteration in steps). Equal to a list or tuple of the same
    strings in the same order."""

    __slots__ = ("array", "checked")

    def __init__(self, array: Any, *, checked: bool = False):
        """Wrap a pyarrow ``large_string`` array as it is (``checked``: by :meth:`of`)."""
        self.array = array
        self.checked = checked

    # -- building ----------------------------------------------------------
    @classmethod
    def of(cls, ids: Any, what: str = "ids") -> "IdColumn":
        """The checked column of ``ids``: an IdColumn (as it is), a pyarrow string
        array (chunked or not) or a sequence of ``str``. TypeError for a value that
        is not a non-empty string, ValueError for a duplicate ID or a string that
        has no UTF-8 form."""
        if isinstance(ids, IdColumn):
            return ids if ids.checked else cls._of_arrow(ids.array, what)
        pa = _pa()
        if isinstance(ids, (pa.Array, pa.ChunkedArray)):
            return cls._of_arrow(ids, what)
        out = check_strings(ids, what)
        try:
            return cls(pa.array(out, type=pa.large_string()), checked=True)
        except (UnicodeEncodeError, pa.ArrowException):
            bad = next(i for i, item in enumerate(out) if not _encodes(item))
            raise ValueError(f"{what}[{bad}] {out[bad]!r} has no UTF-8 form (a lone surrogate)") from None

    @classmethod
    def _of_arrow(cls, ids: Any, what: str) -> "IdColumn":
        pa = _pa()
        pc = pa.compute
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks() if ids.num_chunks != 1 else ids.chunk(0)
        if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
            raise TypeError(f"{what} must hold strings, got an Arrow array of {ids.type}")
        if ids.null_count:
            first = int(pc.index(pc.is_null(ids), True).as_py())
            raise TypeError(f"{what}[{first}] must be a non-empty str, got None")
        empty = pc.equal(pc.binary_length(ids), 0)
        if pc.any(empty).as_py():
            raise TypeError(f"{what}[{int(pc.index(empty, True).as_py())}] must be a non-empty str, got ''")
        column = cls(ids.cast(pa.large_string()) if pa.types.is_string(ids.type) else ids)
        column._check_unique(what)
        column.checked = True
        return column

    def _check_unique(self, what: str) -> None:
        """ValueError naming the first ID (in the column's order) seen before, if any.
        By sorting (about 30 bytes per ID at once), not by hashing: Arrow's distinct
        count holds about 180 bytes per ID."""
        pc = _pa().compute
        if len(self) < 2:
            return
        order = pc.sort_indices(self.array)  # stable: equal IDs keep the column's order
        ordered = self.array.take(order)
        repeats = pc.equal(ordered.slice(0, len(self) - 1), ordered.slice(1))
        del ordered
        if not pc.any(repeats).as_py():
            return
        again = pc.filter(order.slice(1), repeats)  # positions of IDs seen before
        duplicate = self.array[pc.min(again).as_py()].as_py()
        raise ValueError(f"{what} contains duplicate ID {duplicate!r}; IDs must be unique per party")

    @classmethod
    def unpack(cls, parts: Sequence[Dict[str, Any]], what: str) -> "IdColumn":
        """The column :meth:`pack` wrote, from its parts in order; ValueError for a
        malformed part or IDs that are not UTF-8 (a peer's message: checked in full)."""
        pa = _pa()
        arrays = []
        for part in parts:
            if not isinstance(part, dict) or set(part) != {"offsets", "data"}:
                raise ValueError(f"{what}: a part is not {{'offsets', 'data'}}")
            offsets, data = part["offsets"], part["data"]
            if (not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1
                    or not isinstance(data, bytes) or offsets.size < 1 or offsets[0] != 0
                    or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0)):
                raise ValueError(f"{what}: malformed offsets or data")
            array = pa.LargeStringArray.from_buffers(offsets.size - 1, pa.py_buffer(np.ascontiguousarray(offsets)),
                                                     pa.py_buffer(data))
            try:
                array.validate(full=True)
            except pa.ArrowInvalid:
                raise ValueError(f"{what}: IDs that are not UTF-8") from None
            arrays.append(array)
        return cls(pa.concat_arrays(arrays) if arrays else pa.array([], type=pa.large_string()))

    # -- the sequence ------------------------------------------------------
    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> "IdColumn": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[str, "IdColumn"]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self.take(np.arange(start, stop, step))
            return IdColumn(self.array.slice(start, max(0, stop - start)))
        n = len(self)
        i = int(index)
        if not -n <= i < n:
            raise IndexError("IdColumn index out of range")
        return self.array[i % n].as_py()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), _STEP):
            yield from self.array.slice(start, _STEP).to_pylist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdColumn):
            return bool(self.array.equals(other.array))
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable peers (lists) compare equal

    def __repr__(self) -> str:
        head = ", ".join(repr(s) for s in self.array.slice(0, 3).to_pylist())
        return f"IdColumn([{head}{', ...' if len(self) > 3 else ''}], n={len(self)})"

    # -- operations --------------------------------------------------------
    def strings(self, rows: np.ndarray) -> List[str]:
        """The IDs at positions ``rows`` as Python strings."""
        return self.take(rows).array.to_pylist()

    def take(self, rows: np.ndarray) -> "IdColumn":
        return IdColumn(self.array.take(_pa().array(np.asarray(rows, dtype=np.int64))))

    def sorted(self) -> "IdColumn":
        """The IDs in ascending order (UTF-8 byte order, which is Python's order of ``str``)."""
        return IdColumn(self.array.take(_pa().compute.sort_indices(self.array)))

    def positions_in(self, other: "IdColumn") -> np.ndarray:
        """For each ID of this column its position in ``other`` (-1 where ``other`` lacks it): an
        int32 array (int64 past 2^31 IDs). Arrow's hash lookup holds about 70 bytes per ID of the
        set it looks in, so ``other`` is taken in :data:`LOOKUP_PASSES` parts, each looked up by
        every ID of this column: more passes, a tenth of the memory."""
        pc = _pa().compute
        n = len(other)
        step = max(_MIN_LOOKUP, -(-n // LOOKUP_PASSES))
        out = np.full(len(self), -1, dtype=np.int32 if n < 2 ** 31 else np.int64)
        for start in range(0, n, step):
            found = pc.index_in(self.array, value_set=other.array.slice(start, step))
            where = np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False))
            del found
            hit = where >= 0
            out[hit] = where[hit] + start
        return out

    def is_strictly_increasing(self) -> bool:
        """True when every ID is larger than the one before (sorted and unique)."""
        if len(self) < 2:
            return True
        pc = _pa().compute
        return bool(pc.all(pc.less(self.array.slice(0, len(self) - 1), self.array.slice(1))).as_py())

    def pack(self, start: int, stop: int) -> Dict[str, Any]:
        """Rows ``start:stop`` as ``{"offsets": int64 array, "data": bytes}`` (the UTF-8
        bytes of the IDs back to back and where each starts), a payload of the channel."""
        part = self.array.slice(start, max(0, stop - start))
        if len(part) == 0:
            return {"offsets": np.zeros(1, dtype=np.int64), "data": b""}
        offsets = np.frombuffer(part.buffers()[1], dtype=np.int64)[part.offset:part.offset + len(part) + 1]
        data = part.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
        return {"offsets": offsets - offsets[0], "data": data}

    def sha256(self) -> str:
        """``hashlib.sha256("\\n".join(ids).encode()).hexdigest()`` without the joined string."""
        return ids_sha256(self)


def ids_sha256(ids: Sequence[str]) -> str:
    """The SHA-256 of the IDs joined by newlines (UTF-8), built in steps."""
    digest = hashlib.sha256()
    array = ids.array if isinstance(ids, IdColumn) else None
    for start in range(0, len(ids), _STEP):
        chunk = array.slice(start, _STEP).to_pylist() if array is not None else list(ids[start:start + _STEP])
        digest.update((("\n" if start else "") + "\n".join(chunk)).encode("utf-8"))
    return digest.hexdigest()


def _encodes(item: str) -> bool:
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
