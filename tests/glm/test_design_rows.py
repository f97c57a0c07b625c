"""The estimator's data path without copies of the data (issue 28): the blocks are built batch by batch
(:class:`vflsec.glm.design_rows.DesignedRows`), the same numbers as the blocks built whole, the caller's
arrays untouched, and ``fit``'s peak memory a fraction above its input."""
from __future__ import annotations

import gc
import math
import tracemalloc
import warnings

import numpy as np
import pytest

from vflsec.glm import VerticalLogisticRegression
from vflsec.glm.design_rows import DesignedRows
from vflsec.glm.model import GLMDesign

SAFETY = 1.0 + 8.0 * np.finfo(np.float64).eps


def _old_block(X, role, *, fit_intercept, row_norm, c):
    """The block as GLMDesign built it before issue 28: a projected copy per ball, then np.hstack."""
    if row_norm == "clip" and X.shape[1]:
        X = X / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", X, X)))[:, None]
        radius = math.sqrt(1.0 - c * c) if fit_intercept else 1.0
        if role == "active" and radius < 1.0:
            X = X / np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", X, X)) * (SAFETY / radius))[:, None]
    if role == "active" and fit_intercept:
        X = np.hstack([X, np.full((X.shape[0], 1), c)])
    return X


def _parties(n=400, widths=(4, 3, 5), scale=1.5, seed=0):
    rng = np.random.default_rng(seed)
    blocks = [scale * rng.standard_normal((n, d)) for d in widths]
    y = (blocks[0][:, 0] - blocks[-1][:, 1] + 0.3 * rng.standard_normal(n) > 0.2).astype(int)
    return blocks, y


@pytest.mark.parametrize("protection", ["plain", "hdp", "taylor"])
@pytest.mark.parametrize("fit_intercept,row_norm,c", [(True, "clip", 0.5), (False, "clip", 0.5), (True, "clip", 0.9),
                                                      (True, None, 0.3)])
def test_fit_gives_the_weights_of_training_on_the_blocks_built_whole(protection, fit_intercept, row_norm, c):
    # The reference: the estimator without a design of its own, on the blocks built the way fit built them
    # before (whole, copy by copy); the intercept is then an ordinary last weight of the active block.
    blocks, y = _parties(scale=0.1 if row_norm is None else 1.5)  # rows as given stay in HDP's unit ball
    options = dict(epochs=2, batch_size=0.25, lr=0.4, seed=3)
    if protection == "hdp":
        options.update(epsilon=2.0, noise_seed=7)
    roles = ["active"] + ["passive"] * (len(blocks) - 1)
    old = [_old_block(X, role, fit_intercept=fit_intercept, row_norm=row_norm, c=c) for X, role in zip(blocks, roles)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = VerticalLogisticRegression(protection, fit_intercept=False, row_norm=None, **options).fit(old, y)
        model = VerticalLogisticRegression(protection, fit_intercept=fit_intercept, row_norm=row_norm,
                                           intercept_scaling=c, **options).fit(blocks, y)
    expected = [reference.coef_[0][:-1] if fit_intercept else reference.coef_[0], *reference.coef_[1:]]
    for got, want in zip(model.coef_, expected):
        assert got.tobytes() == want.tobytes()
    assert model.intercept_ == (c * float(reference.coef_[0][-1]) if fit_intercept else 0.0)
    assert model.history_.get("loss") == reference.history_.get("loss")


def test_fit_leaves_the_callers_arrays_as_they_were():
    blocks, y = _parties()
    copies = [X.copy() for X in blocks]
    for X in blocks:
        X.flags.writeable = False  # a write into them would raise
    model = VerticalLogisticRegression("plain", epochs=1, batch_size=0.25).fit(blocks, y)
    VerticalLogisticRegression("hdp", epochs=1, batch_size=0.25, epsilon=5.0, noise_seed=1).fit(blocks, y)
    model.predict(blocks)
    for X, copy in zip(blocks, copies):
        assert X.tobytes() == copy.tobytes()


@pytest.mark.parametrize("width", [1, 2, 7, 16])
@pytest.mark.parametrize("role", ["active", "passive"])
def test_designed_rows_are_the_rows_of_the_block(width, role):
    rng = np.random.default_rng(width)
    X = rng.standard_normal((301, width)) * rng.uniform(0.1, 3.0, size=(301, 1))
    design = GLMDesign(intercept_scaling=0.6)
    block = design.block(X, role)
    rows = design.rows(X, role)
    assert isinstance(rows, DesignedRows) and rows.shape == block.shape and len(rows) == 301
    for idx in (rng.permutation(301)[:64], np.arange(301), slice(5, 200)):
        assert rows[idx].tobytes() == block[idx].tobytes()
    assert np.asarray(rows).tobytes() == block.tobytes()
    assert block.tobytes() == _old_block(X, role, fit_intercept=True, row_norm="clip", c=0.6).tobytes()
    with pytest.raises(TypeError, match="selects rows only"):
        rows[3]


def test_designed_rows_refuse_what_is_no_float64_table():
    with pytest.raises(TypeError, match="2-D float64"):
        DesignedRows(np.zeros(5), lambda X: X, 1)


def _traced_peak_of_fit(protection, blocks, y, **options):
    """tracemalloc's peak (bytes) while ``fit`` runs, beyond what existed before (the input)."""
    model = VerticalLogisticRegression(protection, **options)
    gc.collect()
    tracemalloc.start()
    try:
        model.fit(blocks, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("protection", ["plain", "hdp"])
def test_fit_peaks_within_1_6_times_its_input(protection):
    # numpy reports its allocations to tracemalloc, so the traced peak is what fit adds to the input.
    # Rows of norm ~3 that every party's projection changes: built whole, each block would be a copy.
    options = dict(epochs=1) if protection == "plain" else dict(epochs=1, epsilon=1.0, noise_seed=1)
    small, y_small = _parties(n=2000, widths=(10, 10))
    _traced_peak_of_fit(protection, small, y_small, **options)  # imports and first calls outside the measure
    blocks, y = _parties(n=200_000, widths=(10, 10))
    data = sum(X.nbytes for X in blocks)
    peak = _traced_peak_of_fit(protection, blocks, y, **options)
    assert data + peak <= 1.6 * data, f"fit peaked at {(data + peak) / data:.2f}x its input"


def test_rows_in_another_order_are_designed_without_the_ordered_copy():
    rng = np.random.default_rng(3)
    X = 2.0 * rng.standard_normal((300, 4))
    X[7] = np.nan  # a row the order leaves out
    order = rng.permutation(np.delete(np.arange(300), 7))[:250]
    design = GLMDesign(intercept_scaling=0.5)
    for role in ("active", "passive"):
        rows = design.rows(X, role, order)
        expected = design.block(X[order], role)
        assert rows.shape == expected.shape and len(rows) == 250
        np.testing.assert_array_equal(np.asarray(rows), expected)
        np.testing.assert_array_equal(rows[10:20], expected[10:20])
        np.testing.assert_array_equal(rows[np.array([5, 0, 249])], expected[[5, 0, 249]])
        assert rows.all_finite()
    assert not design.rows(X, "active", np.array([3, 7])).all_finite()
    with pytest.raises(IndexError):
        design.rows(X, "active", np.array([300]))
    with pytest.raises(TypeError):
        design.rows(X, "active", np.array([0.5]))


def test_predictions_read_the_rows_a_chunk_at_a_time():
    # decision_function/predict/score used to build each party's row-normalised copy whole: a score on
    # the training table then peaked at ~2x the data. Chunked, what they add is a chunk and theta.
    blocks, y = _parties(n=200_000, widths=(10, 10))
    model = VerticalLogisticRegression("plain", epochs=1).fit(blocks, y)
    design = model.design_
    whole = sum(design.features(X, role) @ w for X, role, w in zip(blocks, ("active", "passive"), model.coef_))
    np.testing.assert_allclose(model.decision_function(blocks), whole + model.intercept_, rtol=0, atol=1e-12)
    data = sum(X.nbytes for X in blocks)
    gc.collect()
    tracemalloc.start()
    try:
        accuracy = model.score(blocks, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert accuracy > 0.6
    assert peak <= 0.2 * data, f"score added {peak / data:.2f}x its input"
