"""The row-norm bound of vflsec.dp.sensitivity without copies of the rows: ``clip_row_norms`` writes
into a given array (in place, or into the first columns of a wider block) with the same bits as into a
new one, and ``check_row_norms`` reads the rows in chunks and names the worst row as over all rows."""
from __future__ import annotations

import numpy as np
import pytest

from vflsec.dp import sensitivity
from vflsec.dp.sensitivity import check_row_norms, clip_row_norms


def _rows(n=513, width=7, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, width)) * rng.uniform(0.05, 4.0, size=(n, 1))


@pytest.mark.parametrize("radius", [1.0, 0.8])
@pytest.mark.parametrize("width", [1, 2, 7, 33])
def test_clip_into_out_gives_the_bits_of_a_new_array(radius, width):
    X = _rows(width=width)
    expected = clip_row_norms(X, radius)
    assert np.all(np.sqrt(np.einsum("ij,ij->i", expected, expected)) <= radius + sensitivity.ROW_NORM_TOLERANCE)

    wider = np.full((X.shape[0], width + 1), 0.5)
    result = clip_row_norms(X, radius, out=wider[:, :width])
    assert result.base is wider and wider[:, :width].tobytes() == np.ascontiguousarray(expected).tobytes()
    assert np.all(wider[:, width] == 0.5)

    in_place = X.copy()
    assert clip_row_norms(in_place, radius, out=in_place) is in_place
    assert in_place.tobytes() == expected.tobytes()


def test_clip_leaves_its_input_alone():
    X = _rows()
    before = X.copy()
    clip_row_norms(X, 0.5, out=np.empty_like(X))
    assert X.tobytes() == before.tobytes()


def test_check_reads_chunks_and_names_the_worst_row(monkeypatch):
    monkeypatch.setattr(sensitivity, "_CHUNK_BYTES", 8 * 7 * 10)  # 10 rows a chunk: 52 chunks
    X = clip_row_norms(_rows())
    check_row_norms(X)  # every row within the unit ball
    X[377] *= 1.75  # norm 1.75 at most, in a late chunk
    worst = float(np.sqrt(X[377] @ X[377]))
    with pytest.raises(ValueError, match=f"party 'p' has a row of norm {worst:.6g}"):
        check_row_norms(X, party="p")
    X[377, 0] = np.nan  # a NaN norm is no violation, as in one max over every row
    check_row_norms(X)
    check_row_norms(np.zeros((0, 3)))
