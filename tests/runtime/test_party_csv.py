"""The numeric party CSV of ``vflsec party`` (vflsec.runtime.party_csv, issue 28): read through pyarrow
into one float64 table, or by Python's csv module where pyarrow is missing (the ``net`` extra alone);
both give the same rows and the same one-line errors naming the file and line, and neither takes much
more memory than the table and its IDs."""
from __future__ import annotations

import gc
import io
import random
import sys
import tracemalloc

import numpy as np
import pytest

from vflsec.runtime import party_csv
from vflsec.runtime.party_csv import read_party_csv

pytest.importorskip("pyarrow")

READERS = ["pyarrow", "csv"]


@pytest.fixture
def reader(request, monkeypatch):
    """The reader a test runs with: "csv" makes pyarrow unimportable, as with the ``net`` extra alone."""
    if request.param == "csv":
        monkeypatch.setitem(sys.modules, "pyarrow", None)
    return request.param


def _read(tmp_path, name, text, label="y", **options):
    path = tmp_path / f"{name}.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, newline="", encoding="utf-8")
    try:
        ids, X, y, names = read_party_csv(path, "id", label, **options)
    except ValueError as exc:
        return str(exc).replace(str(path), "F")
    return ids, X.tolist(), None if y is None else y.tolist(), names


# (file text, the label column, what the reader gives: its rows or its error with the file as F). The
# errors are the csv reader's from before pyarrow read the file: its line numbers count records from 2.
CASES = {
    "empty": ("", "y", "F is empty"),
    "header-only": ("id,y,x0\n", "y", "F has a header but no data rows"),
    "header-then-blank-lines": ("id,y,x0\n\n\n", "y", "F has a header but no data rows"),
    "no-id-column": ("key,y,x0\na,1,2\n", "y", "F: no ID column 'id' in header ['key', 'y', 'x0']"),
    "no-label-column": ("id,label,x0\na,1,2\n", "y", "F: no label column 'y' in header ['id', 'label', 'x0']"),
    "no-feature-columns": ("id,y\na,1\n", "y", "F has no feature columns"),
    "fewer-fields": ("id,y,x0\na,1,2\nb,1\n", "y", "F:3: 2 fields, header has 3"),
    "more-fields": ("id,y,x0\na,1,2\nb,1,2,3\n", "y", "F:3: 4 fields, header has 3"),
    "empty-id": ("id,y,x0\na,1,2\n,0,3\n", "y", "F:3: empty ID in column 'id'"),
    "blank-id": ("id,y,x0\na,1,2\n  ,0,3\n", "y", "F:3: empty ID in column 'id'"),
    "not-a-number": ("id,y,x0\na,1,2\nb,0,abc\n", "y", "F:3: could not convert string to float: 'abc'"),
    "empty-cell": ("id,y,x0\na,1,2\nb,0,\n", "y", "F:3: could not convert string to float: ''"),
    "nan-parenthesised": ("id,y,x0\na,1,2\nb,0,nan(1)\n", "y", "F:3: could not convert string to float: 'nan(1)'"),
    "nan-after-blank-line": ("id,y,x0\na,1,2\n\nb,0,nan\n", "y", "F:4: features contain NaN or inf"),
    "inf-label": ("id,y,x0\na,1,2\nb,inf,3\n", "y", "F:3: the label column 'y' holds NaN or inf"),
    "duplicate-id": ("id,y,x0\na,1,2\nb,0,3\na,1,4\n", "y",
                     "F: the ID column 'id' contains duplicate ID 'a'; IDs must be unique per party"),
    # Of several mistakes the csv reader's first: a line's own, then the IDs, then NaN/inf.
    "duplicate-before-nan": ("id,y,x0\na,1,nan\nb,0,3\na,1,4\n", "y",
                             "F: the ID column 'id' contains duplicate ID 'a'; IDs must be unique per party"),
    "empty-id-after-nan": ("id,y,x0\na,1,nan\nb,0,3\n ,1,4\n", "y", "F:4: empty ID in column 'id'"),
    "bad-cell-after-nan": ("id,y,x0\na,1,nan\nb,0,3\nc,1,nan(2)\n", "y",
                           "F:4: could not convert string to float: 'nan(2)'"),
    "bad-cell-after-empty-id": ("id,y,x0\na,1,1\n,0,3\nc,1,nan(2)\n", "y", "F:3: empty ID in column 'id'"),
    "quoted-newline-then-nan": ('id,y,x0\n"a\nb",1,2\nc,0,nan\n', "y", "F:3: features contain NaN or inf"),
    "crlf-then-inf": ("id,y,x0\r\na,1,2\r\nb,0,inf\r\n", "y", "F:3: features contain NaN or inf"),
    "bom": ("\ufeffid,y,x0\na,1,2\n", "y", "F: no ID column 'id' in header ['\\ufeffid', 'y', 'x0']"),
    # Rows read.
    "python-only-numbers": ("id,y,x0,x1\na,1,1_000, 1.5\nb,0,\uff11,+2\n", "y",
                            (["a", "b"], [[1000.0, 1.5], [1.0, 2.0]], [1.0, 0.0], ["x0", "x1"])),
    "quoted-fields": ('id,y,x0\n"a,b",1,"2.5"\n"c""d",0,3\n', "y",
                      (["a,b", 'c"d'], [[2.5], [3.0]], [1.0, 0.0], ["x0"])),
    "cr-only": ("id,y,x0\ra,1,2\rb,0,3\rc,1,4", "y", (["a", "b", "c"], [[2.0], [3.0], [4.0]], [1.0, 0.0, 1.0], ["x0"])),
    "no-final-newline": ("id,y,x0\na,1,2\nb,0,3", "y", (["a", "b"], [[2.0], [3.0]], [1.0, 0.0], ["x0"])),
    "repeated-feature-names": ("x,id,x\n1,a,2\n", None, (["a"], [[1.0, 2.0]], None, ["x", "x"])),
    "passive": ("x0,id,x1\n1.5,a,-2\n3,b,4e-3\n", None, (["a", "b"], [[1.5, -2.0], [3.0, 0.004]], None, ["x0", "x1"])),
}


@pytest.mark.parametrize("reader", READERS, indirect=True)
@pytest.mark.parametrize("name", list(CASES))
def test_rows_and_errors(tmp_path, reader, name):
    text, label, expected = CASES[name]
    assert _read(tmp_path, name, text, label) == expected


@pytest.mark.parametrize("reader", READERS, indirect=True)
def test_labels_without_features_and_bytes_that_are_no_utf8(tmp_path, reader):
    assert _read(tmp_path, "ids", "id,y\na,1\nb,0\n", allow_no_features=True) == (["a", "b"], [[], []], [1.0, 0.0], [])
    # (A UnicodeDecodeError, a ValueError: vflsec party names the file in front of it.)
    assert _read(tmp_path, "latin", b"id,y,x0\na,1,2\nb,0,\xff\n") == \
        "'utf-8' codec can't decode byte 0xff in position 18: invalid start byte"


def test_pyarrow_reads_plain_numbers_and_leaves_the_rest_to_the_csv_reader(tmp_path):
    path = tmp_path / "p.csv"
    for text, by_arrow in (("id,y,x0\na,1,2.5\nb,0,-1e3\n", True), ("id,y,x0\na,1,1_000\n", False),
                           ("id,y,x0\na,1,2\nb,1\n", False)):
        path.write_text(text)
        header = party_csv._read_header(path, "id", "y", False)
        assert (party_csv._read_arrow(header, party_csv._count_lines(path)) is not None) == by_arrow


def _random_file(rng: random.Random) -> tuple:
    numbers = ["1", "-0.5", "2e3", "nan", "inf", "-inf", "nan(1)", "abc", "", " 1.5", "1_0", '"2.5"', '"3"x', "+1",
               "Infinity", "1e999", '"1\n2"']
    idents = ["", " ", '"q"', '"x""y"', 'a"b', '"ab"c', '"a,b"', "\u00e9", '"m\nn"', "\x1c"]
    width, label = rng.randint(0, 3), rng.random() < 0.5
    header = ["id"] + (["y"] if label else []) + [f"x{j}" for j in range(width)]
    rng.shuffle(header)
    lines = [",".join(header)]
    for r in range(rng.randint(0, 6)):
        if rng.random() < 0.05:
            lines.append("")
            continue
        fields = [(rng.choice(idents) if rng.random() < 0.25 else f"id{r}{rng.randint(0, 3)}") if column == "id"
                  else (rng.choice(numbers) if rng.random() < 0.12 else repr(rng.uniform(-3, 3)))
                  for column in header]
        lines.append(",".join(fields[:-1] if rng.random() < 0.03 else fields))
    text = rng.choice(["\n"] * 8 + ["\r\n", "\r"]).join(lines) + rng.choice(["\n", "\r\n", "\n\n", ""])
    return text, ("y" if label else None), width == 0


def test_pyarrow_and_the_csv_reader_agree_on_random_files(tmp_path, monkeypatch):
    rng = random.Random(28)
    files = [_random_file(rng) for _ in range(300)]
    by_arrow = [_outcome(tmp_path, i, *f) for i, f in enumerate(files)]
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    by_csv = [_outcome(tmp_path, i, *f) for i, f in enumerate(files)]
    assert sum(isinstance(o, tuple) for o in by_csv) > 50  # files read, not only refused
    for text, arrow, csv in zip(files, by_arrow, by_csv):
        assert arrow == csv, text


def _outcome(tmp_path, i, text, label, no_features):
    return _read(tmp_path, f"r{i}", text, label, allow_no_features=no_features)


def _numeric_csv(path, n, width, seed=0):
    """A numeric party CSV (ID, label, ``width`` features) and the bytes of its float table and its ID strings."""
    rng = np.random.default_rng(seed)
    values = np.column_stack([rng.integers(0, 2, n), rng.standard_normal((n, width))])
    buffer = io.StringIO()
    np.savetxt(buffer, values, delimiter=",", fmt="%.17g")
    ids = [f"customer-{i:08d}" for i in rng.permutation(n)]
    body = "\n".join(f"{ident},{line}" for ident, line in zip(ids, buffer.getvalue().splitlines()))
    path.write_text(",".join(["id", "y"] + [f"x{j}" for j in range(width)]) + "\n" + body + "\n")
    return n * width * 8, sum(sys.getsizeof(ident) for ident in ids) + sys.getsizeof(ids)


@pytest.mark.parametrize("reader", READERS, indirect=True)
def test_reading_peaks_within_twice_the_table_and_its_ids(tmp_path, reader):
    # tracemalloc sees numpy's arrays and Python's objects (pyarrow's own buffers, a batch at a time,
    # are not traced). The reader before issue 28 built a Python float per cell: 5.7 times the table.
    small, path = tmp_path / "small.csv", tmp_path / "party.csv"
    _numeric_csv(small, 50, 3)
    read_party_csv(small, "id", "y")  # imports and first calls outside the measure
    floats, id_bytes = _numeric_csv(path, 50_000 if reader == "csv" else 100_000, 20)
    gc.collect()
    tracemalloc.start()
    try:
        ids, X, y, _ = read_party_csv(path, "id", "y")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert X.nbytes == floats and X.flags.c_contiguous and X.flags.owndata
    assert peak <= 2 * floats + id_bytes, (f"peak {peak / 1e6:.1f} MB, table {floats / 1e6:.1f} MB, "
                                           f"IDs {id_bytes / 1e6:.1f} MB")
