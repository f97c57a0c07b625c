"""The start-up agreements of ``vflsec party``, led by the active party.

* :func:`agree_on_job`: every party sends the SHA-256 of its job description
  to the leader, which refuses any mismatch, then opens a fresh random
  session id (messages of any other session are rejected).
* :func:`agree_on_plan`: ``(n_samples, start_epoch)``; with ``--resume`` the
  start is one past the last epoch every data party has checkpointed, unless
  the job kind refuses to resume that job.
"""
from __future__ import annotations

import hashlib
import secrets
from typing import List, Optional, Sequence, Tuple

from .job_spec import JobSpec

__all__ = ["agree_on_job", "agree_on_plan", "checkpoint_fingerprint"]

TAG_HELLO = "job_hello"
TAG_SESSION = "job_session"
TAG_READY = "job_ready"
TAG_GO = "job_go"
TAG_RESUME = "job_resume"
TAG_PLAN = "job_plan"
#: every tag the handshake receives
TAGS = (TAG_HELLO, TAG_SESSION, TAG_READY, TAG_GO, TAG_RESUME, TAG_PLAN)


def agree_on_job(channel, spec: JobSpec, leader: str, followers: List[str]) -> None:
    """Compare job digests, then move everyone to a fresh random session."""
    if channel.name != leader:
        channel.send(leader, TAG_HELLO, {"job_sha256": spec.digest})
        reply = channel.recv(leader, TAG_SESSION)
        if "error" in reply:
            raise ValueError(f"the leader {leader!r} refused the job: {reply['error']}")
        channel.begin_session(reply["session"])
        channel.send(leader, TAG_READY, b"")
        channel.recv(leader, TAG_GO)
        return
    mismatched = []
    for follower in followers:
        hello = channel.recv(follower, TAG_HELLO)
        if hello.get("job_sha256") != spec.digest:
            mismatched.append(follower)
    if mismatched:
        error = (f"job description of {mismatched} differs from the leader's (sha256 {spec.digest[:16]}...); "
                 "every party must run the same job.toml")
        for follower in followers:
            channel.send(follower, TAG_SESSION, {"error": error})
        raise ValueError(error)
    session = f"{spec.digest[:16]}-{secrets.token_hex(16)}"
    channel.accept_session(session)
    for follower in followers:
        channel.send(follower, TAG_SESSION, {"session": session})
    channel.begin_session(session)
    for follower in followers:
        channel.recv(follower, TAG_READY)
    for follower in followers:
        channel.send(follower, TAG_GO, b"")


def checkpoint_fingerprint(spec: JobSpec, common: Sequence[str]) -> str:
    """Ties a checkpoint to this job description and these aligned IDs."""
    digest = hashlib.sha256(spec.digest.encode())
    for item in common:
        digest.update(item.encode("utf-8") + b"\n")
    return digest.hexdigest()


def agree_on_plan(channel, spec: JobSpec, leader: str, followers: List[str], data_parties: Sequence[str],
                  n_samples: Optional[int], last_epoch: int, resume: bool) -> Tuple[int, int]:
    """Agree on ``(n_samples, start_epoch)``; the leader decides."""
    if channel.name != leader:
        channel.send(leader, TAG_RESUME, {"last_epoch": int(last_epoch)})
        plan = channel.recv(leader, TAG_PLAN)
        if "error" in plan:
            raise ValueError(plan["error"])
        return int(plan["n_samples"]), int(plan["start_epoch"])
    if n_samples is None:
        raise ValueError(f"the leader {leader!r} must hold aligned rows")
    epochs = [last_epoch] + [int(channel.recv(f, TAG_RESUME)["last_epoch"]) for f in followers]
    data_epochs = [e for e, p in zip(epochs, [leader] + followers) if p in data_parties]
    start = min(data_epochs) + 1 if resume else 0
    error = None
    total = int(spec.fields.get("epochs", 10))
    refusal = spec.kind.resume_refusal(spec.probe_job(), spec.fields) if start > 0 else None
    if refusal is not None:
        error = refusal
    elif start >= total:
        error = f"every data party has already checkpointed all {total} epochs; nothing to resume"
    for follower in followers:
        channel.send(follower, TAG_PLAN, {"error": error} if error else
                     {"n_samples": int(n_samples), "start_epoch": int(start)})
    if error:
        raise ValueError(error)
    return int(n_samples), start
