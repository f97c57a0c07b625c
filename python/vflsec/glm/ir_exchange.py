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
In a weighted job ("plain" only) the active party multiplies ``IR_A`` by
its batch's row weights before step 3 and its release (the weighted loss's
derivative, :mod:`vflsec.glm.weights`); its recorded loss is the weighted one.
All passive parties receive the same released ``IR_A`` vector (a single
mechanism output, so colluding passives learn nothing beyond it).

Every received IR is checked before use (:func:`vflsec.vfl.check_received_array`):
a float64 vector of the batch's rows, all finite, and within ``received_limit``
where the protocol bounds what an honest peer sends ("hdp":
:func:`release_limit`); anything else fails the job with
:class:`vflsec.vfl.PeerMessageRefused` naming the sender, the tag and the step.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Union

import numpy as np

from ..federation.channel import Channel
from ..vfl.clock import PhaseClock
from ..vfl.received import PeerMessageRefused, check_received_array
from .design_rows import DesignedRows
from .job import SIGNED_LABEL_LOSSES, GLMJob, PartyData, PartyResult
from .penalties import clip_norm, penalized_step
from .shards import ShardedLabels

__all__ = ["TAGS", "TAG_IR_ACTIVE", "TAG_IR_PASSIVE", "active_program", "passive_program", "release_limit"]

TAG_IR_PASSIVE = "ir_passive"
TAG_IR_ACTIVE = "ir_active"
#: every tag the programs of this module receive
TAGS = (TAG_IR_PASSIVE, TAG_IR_ACTIVE)

Release = Callable[[np.ndarray], np.ndarray]


def _identity(ir: np.ndarray) -> np.ndarray:
    return ir


def release_limit(value_bound: float, sigma: Optional[float]) -> float:
    """The largest ``|y|`` an honest release ``y = add_gaussian_noise(x, sigma)``
    of values ``|x| <= value_bound`` can have (``sigma`` None: no noise, ``y = x``).

    The lattice sampler's noise has finite support: ``|y - x| < g (T + 1/2)``
    with ``T < 130 s + 2^18 <= 130.25 s`` lattice steps
    (:data:`vflsec.kernels.noise.SUPPORT_SIGMAS`, cpp/lattice_gaussian.cpp), i.e.
    below ``131 sigma'`` (``sigma' = lattice_sigma(sigma)``). A received value
    beyond this limit is no honest release: refused, not clipped. The relative
    slack of 1e-6 on ``value_bound`` covers the float rounding of ``x``."""
    limit = float(value_bound) * (1.0 + 1e-6)
    if sigma is None:
        return limit
    from ..kernels.noise import SUPPORT_SIGMAS, lattice_sigma

    return limit + (SUPPORT_SIGMAS + 1.0) * lattice_sigma(sigma)


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
    X: Optional[Union[np.ndarray, DesignedRows]] = None,
    y: Optional[Union[np.ndarray, ShardedLabels]] = None,
    theta_bound: Optional[float] = None,
    ir_bound: Optional[float] = None,
    received_limit: Optional[float] = None,
) -> PartyResult:
    """Active party: labels + features X_A. ``X``/``y`` may be passed
    already validated (then ``data`` is not re-checked). ``X`` is read by
    batches only (``X[idx]``), so it may be a
    :class:`~vflsec.glm.design_rows.DesignedRows` (the block built per
    batch, from rows in memory or in Parquet shards), and ``y`` by batches
    too (``y[idx]``: an array, or the labels in the shards,
    :class:`~vflsec.glm.shards.ShardedLabels`). ``theta_bound`` clips
    theta before the loss derivative (needed by the Poisson DP
    constants, see ``vflsec.dp.loss_constants``); ``ir_bound`` clips
    ``IR_A = dl/dtheta`` to ``[-bound, bound]`` (the "hdp" protocol: the
    sensitivity lemmas need ``|h| <= L``, which the L2-loss SVM and least
    squares do not guarantee by themselves; a clipped derivative of a convex
    loss is the derivative of a Huberized convex loss, so the step stays
    non-expansive). ``received_limit`` refuses a passive IR with an entry
    beyond it (the largest value an honest release can have,
    :func:`release_limit`)."""
    clock = PhaseClock() if clock is None else clock
    if X is None:
        X, y = data.checked_by_batch(job, endpoint.name, needs_labels=True)
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
        t = epoch * job.steps_per_epoch + step
        for passive in job.passives:
            received = check_received_array(
                endpoint.recv(passive, TAG_IR_PASSIVE), receiver=endpoint.name, sender=passive,
                tag=TAG_IR_PASSIVE, step=t, dtype=np.float64, shape=(len(idx),), bound=received_limit, what="IR")
            with np.errstate(over="ignore"):  # an overflow is refused just below
                theta = theta + received
            if not np.all(np.isfinite(theta)):  # finite values whose sum overflows: the last one added is to blame
                raise PeerMessageRefused(endpoint.name, passive, TAG_IR_PASSIVE, t,
                                         "IR: adding it to theta overflows the float64 range")
        ir = loss_gradient(job.loss, theta, ys, theta_bound=theta_bound)
        if ir_bound is not None:
            ir = np.clip(ir, -ir_bound, ir_bound)
        weights = data.batch_weights(job, endpoint.name, idx, ys)
        if weights is not None:  # each row's loss times its weight, so its residual too (vflsec.glm.weights)
            ir = ir * weights
        released = release(ir)
        for passive in job.passives:
            endpoint.send(passive, TAG_IR_ACTIVE, released)
        g = (ir @ Xs) / b
        w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        # Training metrics from the thetas of this step (what the active
        # party sees anyway); no extra messages are needed.
        losses = loss_value(job.loss, theta, ys, theta_bound=theta_bound)
        loss_sum += float(np.sum(losses if weights is None else losses * weights))
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
    X: Optional[Union[np.ndarray, DesignedRows]] = None,
    received_bound: Optional[float] = None,
    received_limit: Optional[float] = None,
) -> PartyResult:
    """Passive party: features X_P only (read by batches, as in
    :func:`active_program`). ``received_bound`` clips every
    received ``IR_A`` entry to ``[-bound, bound]`` before the gradient (the
    "hdp" protocol needs it: the noisy IR is unbounded, see
    :mod:`vflsec.dp.sensitivity`, step 5); the clip is for in-range noise:
    non-finite entries are refused before it, and so is an entry beyond
    ``received_limit`` (no honest release has one, :func:`release_limit`)."""
    clock = PhaseClock() if clock is None else clock
    if X is None:
        X, _ = data.checked_by_batch(job, endpoint.name, needs_labels=False)
    w = data.initial_coef(job, X.shape[1], {})
    b = job.batch_size
    for epoch, step, idx in job.batches():
        Xs = X[idx]
        endpoint.send(job.active, TAG_IR_PASSIVE, release(Xs @ w))
        t = epoch * job.steps_per_epoch + step
        received = check_received_array(
            endpoint.recv(job.active, TAG_IR_ACTIVE), receiver=endpoint.name, sender=job.active,
            tag=TAG_IR_ACTIVE, step=t, dtype=np.float64, shape=(len(idx),), bound=received_limit, what="IR")
        if received_bound is not None:
            received = np.clip(received, -received_bound, received_bound)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
            g = (received @ Xs) / b
            w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(w))):
            # finite values whose product with this party's rows is not: the sender is to blame, not this
            # party, whose next message would otherwise carry the non-finite values
            raise PeerMessageRefused(endpoint.name, job.active, TAG_IR_ACTIVE, t,
                                     "IR: its product with this party's rows overflows the float64 range")
        if step == job.steps_per_epoch - 1:
            data.end_epoch(epoch, w, {})
    return PartyResult(
        endpoint.name, "passive", w, timings=clock.timings(endpoint), info=dict(info or {})
    )
