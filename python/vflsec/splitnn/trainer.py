"""Party programs of split learning and the in-process ``run_split_job``.

:func:`passive_program` and :func:`active_program` follow the hook sequence
of :mod:`vflsec.splitnn.defenses.base` exactly; :func:`run_split_job` runs
each party in its own thread over an :class:`~vflsec.federation.InMemoryHub`
through the shared runner :func:`vflsec.vfl.runner.run_programs` (the same
programs run unchanged in separate processes through ``vflsec party``, see
:mod:`vflsec.runtime.splitnn_kind`).

Each party calls the hooks on its *own* copy of the defense (the estimator
makes one ``copy.deepcopy`` per party after ``setup()``), as it would when
every process builds the agreed defense itself: ``on_batch_start`` is called
once per batch by every party; ``wrap_bottom`` by each passive party on its
bottom (the active party's own bottom, if any, is not wrapped: its embedding
is never released); ``wrap_head`` by the active party.

Each party checks every array it receives before use
(:func:`vflsec.vfl.check_received_array`): float32, finite, and the shape
the protocol fixes (an embedding: the batch's rows and the sender's width,
:func:`embedding_widths`; a gradient: the shape of the embedding it
answers); anything else fails the job with
:class:`vflsec.vfl.PeerMessageRefused` naming the sender, the tag and the step.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from .._torch import require_torch
from ..federation.channel import InMemoryHub, payload_nbytes
from ..vfl.clock import PhaseClock
from ..vfl.received import check_received_array
from ..vfl.runner import JobResult, run_programs
from .defenses.base import BatchInfo
from .job import TAG_EMBEDDING, TAG_GRADIENT, SplitJob, SplitPartyData, SplitPartyResult
from .training_state import restore_training_state, training_state

__all__ = ["PROGRAMS", "active_program", "embedding_widths", "make_optimizer", "passive_program", "run_split_job"]


def make_optimizer(job: SplitJob, params: Any):
    """The job's optimizer over ``params`` (Adam with torch defaults, or plain SGD)."""
    torch = require_torch("split learning")
    params = list(params)
    if not params:
        return None
    if job.optimizer == "adam":
        return torch.optim.Adam(params, lr=job.lr)
    return torch.optim.SGD(params, lr=job.lr)


def _batches(job: SplitJob):
    for epoch, step, idx in job.batches():
        yield BatchInfo(epoch=epoch, step=step, global_step=epoch * job.steps_per_epoch + step,
                        indices=idx.astype(np.int64))


def _resume(job: SplitJob, data: SplitPartyData, modules: Mapping[str, Any], optimizer: Any,
            history: Dict[str, List[float]]) -> None:
    """For a resumed job, load the state saved after epoch ``start_epoch - 1``
    into ``modules``, ``optimizer`` and ``history`` (in place)."""
    if job.start_epoch == 0:
        return
    if data.checkpoint is None:
        raise ValueError(f"job starts at epoch {job.start_epoch} but the party has no checkpoint to resume from")
    reason = getattr(data.defense, "resume_refusal", None)
    if reason is not None:
        raise ValueError(f"defense {type(data.defense).__name__} cannot resume: {reason}")
    state, saved = data.checkpoint.load(job.start_epoch - 1)
    restore_training_state(state, modules, optimizer)
    for key, values in saved.items():
        history[key] = [float(v) for v in values]


def _end_epoch(job: SplitJob, data: SplitPartyData, epoch: int, modules: Mapping[str, Any], optimizer: Any,
               history: Dict[str, List[float]]) -> None:
    """Hand the state after ``epoch`` to the checkpoint, if any."""
    if data.checkpoint is not None:
        data.checkpoint.save(epoch, training_state(modules, optimizer), history)
    if data.progress is not None:
        data.progress(epoch, history)


def _to_wire(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().to("cpu", dtype=require_torch("split learning").float32).numpy())


def embedding_widths(job: SplitJob, defense: Any) -> Dict[str, Optional[int]]:
    """Each passive party's embedding width as the job's set-up told the defense
    (``DefenseContext.extra["embedding_dims"]``: the estimator and ``vflsec
    party`` give it); None where it was not told (the first embedding received
    from that party then fixes it for the rest of the run)."""
    context = getattr(defense, "context_", None)
    dims = dict(getattr(context, "extra", None) or {}).get("embedding_dims") or {}
    return {p: int(dims[p]) if p in dims else None for p in job.passives}


class _ByteCounter:
    """Bytes this party sends, per epoch and tag (the sizes the hub records)."""

    def __init__(self, epochs: int):
        self.per_epoch: List[Dict[str, int]] = [defaultdict(int) for _ in range(epochs)]

    def send(self, endpoint, receiver: str, tag: str, payload: Any, epoch: int) -> None:
        self.per_epoch[epoch][tag] += payload_nbytes(payload)
        endpoint.send(receiver, tag, payload)

    def result(self) -> List[Dict[str, int]]:
        return [dict(d) for d in self.per_epoch]


def passive_program(endpoint, job: SplitJob, data: SplitPartyData) -> SplitPartyResult:
    """Per batch: embed, defend, send; receive ``dL/dh``; update the bottom."""
    torch = require_torch("split learning")
    clock = PhaseClock()
    name = endpoint.name
    device = torch.device(job.device)
    defense = data.defense
    X = torch.as_tensor(data.X, dtype=torch.float32).to(device)
    bottom = defense.wrap_bottom(name, data.bottom.to(device))
    optimizer = make_optimizer(job, bottom.parameters())
    modules = {"bottom": bottom}
    _resume(job, data, modules, optimizer, {})
    counter = _ByteCounter(job.epochs)
    bottom.train()
    for batch in _batches(job):
        defense.on_batch_start(batch)
        xb = X[torch.from_numpy(batch.indices).to(device)]
        h_raw = bottom(xb)
        h_sent = defense.transform_embedding(name, h_raw, batch)
        counter.send(endpoint, job.active, TAG_EMBEDDING, _to_wire(h_sent), batch.epoch)
        grad = torch.from_numpy(check_received_array(
            endpoint.recv(job.active, TAG_GRADIENT), receiver=name, sender=job.active, tag=TAG_GRADIENT,
            step=batch.global_step, dtype=np.float32, shape=tuple(h_sent.shape), what="gradient")).to(device)
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)

        def embed(x, _batch=batch):
            return defense.transform_embedding(name, bottom(x), _batch)

        if not defense.bottom_backward(name, bottom, optimizer, xb, embed, grad, batch):
            loss = (h_sent * grad).sum()
            for extra in (defense.regularizer(name, h_raw, h_sent, batch),
                          defense.adjust_loss(name, h_sent, grad, batch)):
                if extra is not None:
                    loss = loss + extra
            if loss.requires_grad:
                loss.backward()
                if optimizer is not None:
                    optimizer.step()
        if batch.step == job.steps_per_epoch - 1:
            _end_epoch(job, data, batch.epoch, modules, optimizer, {})
    return SplitPartyResult(
        party=name, role="passive", bottom=bottom, defense=defense, bytes_sent=counter.result(),
        timings=clock.timings(endpoint),
    )


def active_program(endpoint, job: SplitJob, data: SplitPartyData) -> SplitPartyResult:
    """Per batch: receive embeddings, train the head (and own bottom), return ``dL/dh``."""
    torch = require_torch("split learning")
    clock = PhaseClock()
    name = endpoint.name
    device = torch.device(job.device)
    defense = data.defense
    classification = job.task == "classification"
    y = torch.as_tensor(data.y, dtype=torch.int64 if classification else torch.float32).to(device)
    own_bottom = None
    X: Any = None  # the active party's own features (a tensor) when it has any
    if job.active_features:
        X = torch.as_tensor(data.X, dtype=torch.float32).to(device)
        own_bottom = data.bottom.to(device)
        own_bottom.train()
    head = defense.wrap_head(data.head.to(device))
    head.train()
    params = list(head.parameters()) + (list(own_bottom.parameters()) if own_bottom is not None else [])
    optimizer = make_optimizer(job, params)
    criterion = torch.nn.CrossEntropyLoss() if classification else torch.nn.MSELoss()
    counter = _ByteCounter(job.epochs)
    history: Dict[str, List[float]] = {"loss": [], "seconds": []}
    if classification:
        history["accuracy"] = []
    modules = {"bottom": own_bottom, "head": head}
    _resume(job, data, modules, optimizer, history)
    loss_sum = correct = seen = 0.0
    widths = embedding_widths(job, defense)
    epoch_start = time.perf_counter()
    for batch in _batches(job):
        defense.on_batch_start(batch)
        b = len(batch.indices)
        idx = torch.from_numpy(batch.indices).to(device)
        received = []
        for party in job.passives:
            arr = check_received_array(endpoint.recv(party, TAG_EMBEDDING), receiver=name, sender=party,
                                       tag=TAG_EMBEDDING, step=batch.global_step, dtype=np.float32,
                                       shape=(b, widths[party]), what="embedding")
            widths[party] = arr.shape[1]
            received.append(torch.from_numpy(arr).to(device).requires_grad_(True))
        parts = list(received)
        if own_bottom is not None:
            parts.append(own_bottom(X[idx]))
        out = head(torch.cat(parts, dim=1))
        yb = y[idx]
        if not classification:
            out = out.reshape(-1)
        loss = criterion(out, yb)
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = defense.transform_gradient({p: h.grad for p, h in zip(job.passives, received)}, batch)
        for party in job.passives:
            counter.send(endpoint, party, TAG_GRADIENT, _to_wire(grads[party]), batch.epoch)
        if optimizer is not None:
            optimizer.step()
        loss_sum += float(loss.detach()) * b
        seen += b
        if classification:
            correct += float((out.detach().argmax(dim=1) == yb).sum())
        if batch.step == job.steps_per_epoch - 1:
            history["loss"].append(loss_sum / seen)
            if classification:
                history["accuracy"].append(correct / seen)
            now = time.perf_counter()
            history["seconds"].append(now - epoch_start)
            epoch_start = now
            loss_sum = correct = seen = 0.0
            _end_epoch(job, data, batch.epoch, modules, optimizer, history)
    return SplitPartyResult(
        party=name, role="active", bottom=own_bottom, head=head, defense=defense, history=history,
        bytes_sent=counter.result(), timings=clock.timings(endpoint),
    )


PROGRAMS = {"active": active_program, "passive": passive_program}


def run_split_job(job: SplitJob, party_data: Mapping[str, SplitPartyData], hub: Optional[InMemoryHub] = None, *,
                  timeout: Optional[float] = None) -> JobResult:
    """Run every party program of ``job`` in its own thread over ``hub``.

    If a party raises, the hub is aborted so the others stop, and the first
    failure is re-raised naming its party (ValueError/TypeError keep their type).
    """
    if not isinstance(job, SplitJob):
        raise TypeError(f"job must be a SplitJob, got {type(job).__name__}")
    for party in job.parties:
        if not isinstance(party_data.get(party), SplitPartyData):
            raise TypeError(f"party_data[{party!r}] must be a SplitPartyData")
    return run_programs(job, PROGRAMS, party_data, hub, timeout=timeout, label="run_split_job")
