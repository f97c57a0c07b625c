"""Protocol "taylor": HE-VFL's flow in the clear (the reference for HE accuracy)."""
from __future__ import annotations

import numpy as np
import pytest

from vflsec.data import load_breast, vertical_split
from vflsec.glm import GLMJob, PartyData, VerticalLogisticRegression, run_job


@pytest.fixture(scope="module")
def blocks():
    split = vertical_split(load_breast(), [10, 12, 8], seed=1, scaling="standard")
    y = np.where(split.y_train == 1, 1.0, -1.0)
    return split, [X for X in split.X_train], y


@pytest.mark.parametrize("loss", ["logistic", "least_squares"])
def test_taylor_protocol_equals_plaintext_taylor_descent(blocks, loss, taylor_reference):
    _, Xs, y = blocks
    n = len(y)
    job = GLMJob(protocol="taylor", loss=loss, n_samples=n, batch_size=64, epochs=3, lr=0.5, k=2.0,
                 passives=("p1", "p2"), coordinator="c", seed=3)
    data = {job.active: PartyData(Xs[0], y), "p1": PartyData(Xs[1]), "p2": PartyData(Xs[2])}
    result = run_job(job, data, timeout=60)
    ref, _ = taylor_reference(job, Xs, y)
    for name, w in zip(("active", "p1", "p2"), ref):
        np.testing.assert_allclose(result.results[name].coef, w, rtol=0, atol=1e-12)


def test_estimator_runs_the_taylor_reference(blocks):
    split, _, _ = blocks
    model = VerticalLogisticRegression(protection="taylor", epochs=5, batch_size=128, lr=2.0, seed=0)
    model.fit(split.X_train, split.y_train)
    assert model.score(split.X_test, split.y_test) > 0.9
    assert model.history_["total_bytes"] > 0
