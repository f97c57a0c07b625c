"""Vertical mini-batch gradient descent by exchanging intermediate results.

The party programs shared by the "plain" and "hdp" protocols (Algorithm 1 of
HDP-VFL with the noise made pluggable). Per step with batch rows ``s``:

1. each passive party P sends ``release_P(X_P[s] w_P)`` under tag
   ``"ir_passive"`` to the active party;
2. the active party forms ``theta = X_A[s] w_A + sum_P received_P`` and
   ``IR_A = dl/dtheta (theta, y[s])``, and sends one ``release_A(IR_A)`` to
   every passive party under tag ``"ir_active"``;
3. gradients ``g_A = IR_A^T X_A[s] / b`` (the active party's own, un-released
   IR) and ``g_P = received^T X_P[s] / b``; then the penalized step and the
   norm clip.

``release`` is the identity for "plain" and adds Gaussian noise for "hdp".
All passive parties receive the same released ``IR_A`` vector (a single
mechanism output, so colluding passives learn nothing beyond it).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

from ..federation.channel import Channel
from ..vfl.clock import PhaseClock
from .job import SIGNED_LABEL_LOSSES, GLMJob, PartyData, PartyResult
from .penalties import clip_norm, penalized_step

__all__ = ["TAGS", "TAG_IR_ACTIVE", "TAG_IR_PASSIVE", "active_program", "passive_program"]

TAG_IR_PASSIVE = "ir_passive"
TAG_IR_ACTIVE = "ir_active"
#: every tag the programs of this module receive
TAGS = (TAG_IR_PASSIVE, TAG_IR_ACTIVE)

Release = Callable[[np.ndarray], np.ndarray]


def _identity(ir: np.ndarray) -> np.ndarray:
    return ir


def _losses():
    # Imported lazily so the framework modules import without vflsec.dp.
    from ..dp import loss_gradient, loss_value

    return loss_gradient, loss_value


def active_program(
    endpoint: Channel,
    job: GLMJob,
    data: PartyData,
    *,
    release: Release = _identity,
    clock: Optional[PhaseClock] = None,
    info: Optional[Dict] = None,
    X: Optional[np.ndarray] = None,
    y: Optional[np.ndarray] = None,
    theta_bound: Optional[float] = None,
    ir_bound: Optional[float] = None,
) -> PartyResult:
    """Active party: labels + features X_A. ``X``/``y`` may be passed
    already validated (then ``data`` is not re-checked). ``theta_bound``
    clips theta before the loss derivative (needed by the Poisson DP
    constants, see ``vflsec.dp.loss_constants``); ``ir_bound`` clips
    ``IR_A = dl/dtheta`` to ``[-bound, bound]`` (the "hdp" protocol: the
    sensitivity lemmas need ``|h| <= L``, which the L2-loss SVM and least
    squares do not guarantee by themselves; a clipped derivative of a convex
    loss is the derivative of a Huberized convex loss, so the step stays
    non-expansive)."""
    clock = PhaseClock() if clock is None else clock
    if X is None:
        X, y = data.checked(job, endpoint.name, needs_labels=True)
    assert y is not None  # needs_labels=True (checked() raises rather than return no labels), or passed with X
    loss_gradient, loss_value = _losses()
    b = job.batch_size
    classify = job.loss in SIGNED_LABEL_LOSSES
    history: Dict[str, List[float]] = {"loss": []}
    if classify:
        history["accuracy"] = []
    w = data.initial_coef(job, X.shape[1], history)
    loss_sum = correct = seen = 0.0
    for epoch, step, idx in job.batches():
        Xs, ys = X[idx], y[idx]
        theta = Xs @ w
        for passive in job.passives:
            received = endpoint.recv(passive, TAG_IR_PASSIVE)
            if received.shape != (len(idx),):
                raise ValueError(
                    f"passive party {passive!r} sent an IR of shape {received.shape}, expected ({len(idx)},)"
                )
            theta = theta + received
        ir = loss_gradient(job.loss, theta, ys, theta_bound=theta_bound)
        if ir_bound is not None:
            ir = np.clip(ir, -ir_bound, ir_bound)
        released = release(ir)
        for passive in job.passives:
            endpoint.send(passive, TAG_IR_ACTIVE, released)
        g = (ir @ Xs) / b
        w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        # Training metrics from the thetas of this step (what the active
        # party sees anyway); no extra messages are needed.
        loss_sum += float(np.sum(loss_value(job.loss, theta, ys, theta_bound=theta_bound)))
        if classify:
            correct += float(np.sum(np.where(theta >= 0, 1.0, -1.0) == ys))
        seen += len(idx)
        if step == job.steps_per_epoch - 1:
            history["loss"].append(loss_sum / seen)
            if classify:
                history["accuracy"].append(correct / seen)
            loss_sum = correct = seen = 0.0
            data.end_epoch(epoch, w, history)
    return PartyResult(
        endpoint.name, "active", w, history=history, timings=clock.timings(endpoint), info=dict(info or {})
    )


def passive_program(
    endpoint: Channel,
    job: GLMJob,
    data: PartyData,
    *,
    release: Release = _identity,
    clock: Optional[PhaseClock] = None,
    info: Optional[Dict] = None,
    X: Optional[np.ndarray] = None,
    received_bound: Optional[float] = None,
) -> PartyResult:
    """Passive party: features X_P only. ``received_bound`` clips every
    received ``IR_A`` entry to ``[-bound, bound]`` before the gradient (the
    "hdp" protocol needs it: the noisy IR is unbounded, see
    :mod:`vflsec.dp.sensitivity`, step 5)."""
    clock = PhaseClock() if clock is None else clock
    if X is None:
        X, _ = data.checked(job, endpoint.name, needs_labels=False)
    w = data.initial_coef(job, X.shape[1], {})
    b = job.batch_size
    for epoch, step, idx in job.batches():
        Xs = X[idx]
        endpoint.send(job.active, TAG_IR_PASSIVE, release(Xs @ w))
        received = endpoint.recv(job.active, TAG_IR_ACTIVE)
        if received.shape != (len(idx),):
            raise ValueError(
                f"active party {job.active!r} sent an IR of shape {received.shape}, expected ({len(idx)},)"
            )
        if received_bound is not None:
            received = np.clip(received, -received_bound, received_bound)
        g = (received @ Xs) / b
        w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        if step == job.steps_per_epoch - 1:
            data.end_epoch(epoch, w, {})
    return PartyResult(
        endpoint.name, "passive", w, timings=clock.timings(endpoint), info=dict(info or {})
    )
