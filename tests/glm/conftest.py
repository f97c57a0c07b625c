"""Shared by the GLM tests: the plaintext Taylor descent the HE protocols are checked
against, and each HE-VFL protocol this environment can run."""
import math

import numpy as np
import pytest

from vflsec.glm import he_vfl
from vflsec.glm.penalties import clip_norm, penalized_step


def _taylor_descent(job, blocks, y):
    """Plaintext mini-batch descent on the Taylor residual d = theta/4 - y/2
    (or 2 (theta - y) for least squares), the same schedule and update as the
    protocols (an HE job's batches: a partial last chunk joins the batch
    before it); returns the weight blocks and the per-epoch Taylor loss."""
    ws = [np.zeros(X.shape[1]) for X in blocks]
    losses, epoch_loss = [], 0.0
    for _, step, idx in he_vfl.he_batches(job):
        theta = sum(X[idx] @ w for X, w in zip(blocks, ws))
        ys = y[idx]
        if job.loss == "logistic":
            d = theta / 4 - ys / 2
            epoch_loss += np.sum(math.log(2) - ys * theta / 2 + theta ** 2 / 8)
        else:
            d = 2 * (theta - ys)
            epoch_loss += np.sum((ys - theta) ** 2)
        ws = [clip_norm(penalized_step(job.penalty, w, d @ X[idx] / job.batch_size, job.lr, job.lam, job.mu), job.k)
              for X, w in zip(blocks, ws)]
        if step == he_vfl.steps_per_epoch(job) - 1:
            losses.append(epoch_loss / job.n_samples)
            epoch_loss = 0.0
    return ws, losses


@pytest.fixture(scope="session")
def taylor_reference():
    """``taylor_reference(job, blocks, y) -> (weight blocks, per-epoch Taylor loss)``: the
    plaintext descent that protocol "taylor" runs and the HE protocols approximate."""
    return _taylor_descent


@pytest.fixture(params=["paillier", "ckks"])
def he_protocol(request):
    """Each HE-VFL protocol: "paillier", and "ckks" where TenSEAL is installed."""
    if request.param == "ckks":
        pytest.importorskip("tenseal")
    return request.param
