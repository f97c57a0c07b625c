"""A party's ID column held in one Arrow array (vflsec.federation.ids.IdColumn): the same checks and
messages as a list of str, Python's order of str, packing for the channel and a peer's malformed
packs refused."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from vflsec.federation import ids as ids_module  # noqa: E402
from vflsec.federation.ids import IdColumn, check_strings, ids_sha256  # noqa: E402

WORDS = ["b", "a", "ä", "z", "€", "\U0001F600", "A", "aa", "a b", "0"]


def test_a_column_is_the_sequence_of_its_ids():
    column = IdColumn.of(WORDS)
    assert column.checked and len(column) == len(WORDS)
    assert column == WORDS and list(column) == WORDS and column == tuple(WORDS)
    assert column[0] == "b" and column[-1] == "0" and column[2:4] == WORDS[2:4] and column[::3] == WORDS[::3]
    assert column != WORDS[::-1] and column != WORDS[:-1]
    with pytest.raises(IndexError):
        column[len(WORDS)]
    assert column.strings(np.array([3, 0])) == ["z", "b"]
    assert IdColumn.of(column) is column


def test_sorting_is_pythons_order_of_str_and_membership_gives_positions():
    column = IdColumn.of(WORDS)
    assert list(column.sorted()) == sorted(WORDS)
    assert column.sorted().is_strictly_increasing() and not column.is_strictly_increasing()
    common = IdColumn.of(["z", "nope", "b"])
    assert common.positions_in(column).tolist() == [3, -1, 0]


@pytest.mark.parametrize("values", [["b", "a", "c", "a", "b"], ["x", "y", "y", "x"], ["q"] * 3])
def test_a_duplicate_is_named_as_a_list_check_names_it(values):
    with pytest.raises(ValueError) as from_list:
        check_strings(values, "ids")
    for given in (values, pa.array(values), pa.chunked_array([values[:2], values[2:]])):
        with pytest.raises(ValueError) as from_column:
            IdColumn.of(given, "ids")
        assert str(from_column.value) == str(from_list.value)


@pytest.mark.parametrize("values, message", [
    (["a", None], r"ids\[1\] must be a non-empty str, got None"),
    (["a", "", "b"], r"ids\[1\] must be a non-empty str, got ''"),
])
def test_missing_and_empty_ids_of_an_arrow_array_are_refused(values, message):
    with pytest.raises(TypeError, match=message):
        IdColumn.of(pa.array(values, pa.string()))
    with pytest.raises(TypeError, match="must hold strings"):
        IdColumn.of(pa.array([1, 2]))


def test_an_unchecked_column_is_checked_when_used():
    with pytest.raises(ValueError, match="duplicate ID 'a'"):
        IdColumn.of(IdColumn(pa.array(["a", "a"], pa.large_string())))


def test_a_string_without_utf8_form_is_refused():
    with pytest.raises(ValueError, match=r"ids\[1\] .* has no UTF-8 form"):
        IdColumn.of(["a", "b\ud800"])


@pytest.mark.parametrize("start, stop", [(0, 10), (2, 7), (5, 5), (9, 10)])
def test_pack_and_unpack_round_trip(start, stop):
    column = IdColumn.of(WORDS)
    parts = [column.pack(start, stop), column.pack(stop, len(WORDS))]
    assert IdColumn.unpack(parts, "result") == WORDS[start:]
    assert IdColumn.unpack([], "result") == []


@pytest.mark.parametrize("part", [
    {"offsets": np.array([0, 2], dtype=np.int64), "data": b"\xff\xfe"},  # not UTF-8
    {"offsets": np.array([0, 3], dtype=np.int64), "data": b"ab"},  # past the data
    {"offsets": np.array([0, 2, 1, 2], dtype=np.int64), "data": b"ab"},  # going back
    {"offsets": np.array([1, 2], dtype=np.int64), "data": b"ab"},  # not from 0
    {"offsets": np.array([0, 2], dtype=np.int32), "data": b"ab"},
    {"offsets": np.array([0, 2], dtype=np.int64), "data": "ab"},
    {"offsets": np.array([0, 2], dtype=np.int64)},
    ["ab"],
])
def test_a_malformed_pack_is_refused(part):
    with pytest.raises(ValueError, match="party 'a'"):
        IdColumn.unpack([part], "party 'a'")


def test_the_digest_is_that_of_the_joined_ids_across_steps(monkeypatch):
    monkeypatch.setattr(ids_module, "_STEP", 3)
    for values in (WORDS, WORDS[:3], WORDS[:1], []):
        expected = hashlib.sha256("\n".join(values).encode()).hexdigest()
        assert ids_sha256(values) == expected
        if values:
            assert IdColumn.of(values).sha256() == expected
            assert list(IdColumn.of(values)) == values


def test_positions_are_found_across_lookup_passes(monkeypatch):
    monkeypatch.setattr(ids_module, "_MIN_LOOKUP", 3)
    monkeypatch.setattr(ids_module, "LOOKUP_PASSES", 4)
    universe = IdColumn.of([f"u{i:03d}" for i in range(40)][::-1])
    wanted = IdColumn.of(["u000", "nope", "u039", "u017", "u020"])
    assert wanted.positions_in(universe).tolist() == [39, -1, 0, 22, 19]
