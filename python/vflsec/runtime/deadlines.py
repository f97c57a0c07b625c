"""Deadlines and expected message tags of ``vflsec party`` (issue 18, items 3 and 4).

Deadlines: every protocol wait has one, so a peer that is alive (it answers
heartbeats) but never sends fails the job with one line naming the peer,
the tag and the phase, instead of blocking forever. Per message waited for:

* the start-up handshake (job agreement, start plan):
  ``[network] handshake_timeout`` (default 60 s; every peer is connected by
  then, so these messages follow within milliseconds);
* everything after the job is agreed (PSI, training):
  ``[network] step_timeout``, else ``[network] recv_timeout``, else the job
  kind's :meth:`~vflsec.runtime.kinds.JobKind.default_step_timeout`: 15 min
  for the HE-VFL GLM protocols (key generation and the coordinator's
  decryptions of every party's gradient fall into one wait), 5 min for the
  other GLM protocols, 10 min for split learning (a peer's forward and
  backward pass over a batch, and an epoch-end evaluation).

Tags: once the job is agreed, the transport accepts only the tags this job
receives -- the runtime's own handshake tags, PSI's and the job kind's
(:meth:`~vflsec.runtime.kinds.JobKind.receive_tags`: a GLM protocol's
registered ``tags``, split learning's embedding and gradient tags) and, for
a job with ``evaluate = true``, its held-out evaluation's
(:meth:`~vflsec.runtime.kinds.JobKind.evaluation_tags`). A
message under any other tag is a protocol error that fails the job, naming
the peer (:meth:`vflsec.federation.grpc_channel.GrpcChannel.expect_tags`).
"""
from __future__ import annotations

from typing import Any, FrozenSet, Optional

from . import handshake
from .kinds import JobKind

__all__ = ["PHASE_EVALUATION", "PHASE_HANDSHAKE", "PHASE_PLAN", "PHASE_PSI", "expected_tags", "phase_training",
           "runtime_tags", "step_timeout"]

PHASE_HANDSHAKE = "the start-up handshake (job agreement)"
PHASE_PSI = "entity alignment (PSI)"
PHASE_PLAN = "the start-up handshake (start plan)"
PHASE_EVALUATION = "the held-out evaluation (PSI of the held-out rows, scoring)"


def phase_training(kind: JobKind[Any]) -> str:
    return f"training (a {kind.name} job)"


def runtime_tags() -> FrozenSet[str]:
    """The tags the runtime itself receives: its handshake and PSI."""
    from ..federation import psi

    return frozenset(handshake.TAGS) | {psi.TAG_PSI_REQUEST, psi.TAG_PSI_SETUP, psi.TAG_PSI_RESPONSE,
                                        psi.TAG_PSI_RESULT, psi.TAG_PSI_FORMAT}


def expected_tags(kind: JobKind[Any], job: Any, evaluate: bool = False) -> Optional[FrozenSet[str]]:
    """Every tag a party of ``job`` receives (None: the kind does not declare its
    tags); ``evaluate``: with the held-out evaluation's."""
    tags = kind.receive_tags(job)
    if tags is None:
        return None
    return runtime_tags() | frozenset(tags) | (frozenset(kind.evaluation_tags(job)) if evaluate else frozenset())


def step_timeout(settings: Any, kind: JobKind[Any], job: Any) -> float:
    """The deadline of each protocol message after the handshake (seconds)."""
    for value in (settings.step_timeout, settings.recv_timeout):
        if value is not None:
            return float(value)
    return float(kind.default_step_timeout(job))
