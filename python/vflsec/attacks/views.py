"""What each adversary of split learning observes, read from a transcript.

``run_split_job`` over an ``InMemoryHub(keep_payloads=True)`` records every
message. An attacker party sees only the messages addressed to it; these
helpers select exactly those and pair each with its batch rows, which follow
from the job's public batch schedule (every party computes them).

* :func:`passive_party_gradients`: what a passive party receives -- the
  gradient ``dL/dh`` for each embedding row it sent (label-inference input).
* :func:`active_party_embeddings`: what the active party receives from one
  passive party -- the (defended) embeddings (feature-inference input).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..splitnn.job import TAG_EMBEDDING, TAG_GRADIENT
from ..vfl.schedule import batch_indices

__all__ = ["active_party_embeddings", "last_epoch", "passive_party_gradients"]


def _schedule(job: Any) -> List[Tuple[int, np.ndarray]]:
    return [(epoch, idx.astype(np.int64)) for epoch in range(job.epochs)
            for idx in batch_indices(job.n_samples, job.batch_size, job.seed, epoch)]


def _messages(transcript: Sequence[Tuple[Any, Any]], job: Any, sender: str, receiver: str,
              tag: str) -> List[Tuple[int, np.ndarray, np.ndarray]]:
    payloads = [p for r, p in transcript if r.receiver == receiver and r.sender == sender and r.tag == tag]
    schedule = _schedule(job)
    if not payloads:
        raise ValueError(f"the transcript holds no {tag!r} message from {sender!r} to {receiver!r} "
                         "(was the hub created with keep_payloads=True?)")
    if len(payloads) != len(schedule):
        raise ValueError(f"found {len(payloads)} {tag!r} messages but the job has {len(schedule)} steps")
    out = []
    for (epoch, idx), arr in zip(schedule, payloads):
        arr = np.asarray(arr)
        if arr.ndim != 2 or arr.shape[0] != idx.size:
            raise ValueError(f"a {tag!r} message has shape {arr.shape}, expected ({idx.size}, d)")
        out.append((epoch, idx, arr.astype(np.float64)))
    return out


def passive_party_gradients(transcript: Sequence[Tuple[Any, Any]], job: Any,
                            passive: Optional[str] = None) -> List[Tuple[int, np.ndarray, np.ndarray]]:
    """``[(epoch, batch_rows, gradients)]`` that ``passive`` received, in order."""
    passive = job.passives[0] if passive is None else passive
    return _messages(transcript, job, job.active, passive, TAG_GRADIENT)


def active_party_embeddings(transcript: Sequence[Tuple[Any, Any]], job: Any,
                            passive: Optional[str] = None) -> List[Tuple[int, np.ndarray, np.ndarray]]:
    """``[(epoch, batch_rows, embeddings)]`` the active party received from ``passive``."""
    passive = job.passives[0] if passive is None else passive
    return _messages(transcript, job, passive, job.active, TAG_EMBEDDING)


def last_epoch(messages: Sequence[Tuple[int, np.ndarray, np.ndarray]]) -> Tuple[np.ndarray, np.ndarray]:
    """Rows and stacked payloads of the final epoch (one row per sample)."""
    final = max(epoch for epoch, _, _ in messages)
    rows = np.concatenate([idx for epoch, idx, _ in messages if epoch == final])
    data = np.concatenate([arr for epoch, _, arr in messages if epoch == final])
    return rows, data
