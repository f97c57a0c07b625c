"""Run every party program of a job, each in its own thread, over a hub.

This in-process runner is how protocols are exercised and benchmarked
without a network: each role program runs in its own thread and blocks on
``recv`` exactly as it would in its own process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from ..federation.channel import InMemoryHub, MessageRecord
from ..federation.local import PartyError, run_party_threads
from .job import GLMJob, PartyData, PartyResult
from .registry import get_protocol

__all__ = ["JobResult", "PartyError", "run_job"]


@dataclass
class JobResult:
    """Per-party results plus the message log of the run."""

    results: Dict[str, PartyResult]
    records: List[MessageRecord]
    hub: InMemoryHub

    def bytes_by_tag(self) -> Dict[str, int]:
        return self.hub.bytes_by_tag()

    def total_bytes(self) -> int:
        return self.hub.total_bytes()


def run_job(
    job: GLMJob,
    party_data: Mapping[str, Optional[PartyData]],
    hub: Optional[InMemoryHub] = None,
    *,
    timeout: Optional[float] = None,
) -> JobResult:
    """Run ``job``: one thread per party, connected by ``hub`` (a fresh
    :class:`InMemoryHub` by default).

    ``party_data`` maps the active and passive party names to their
    :class:`PartyData` (the coordinator, if any, gets None). If any party
    raises, the hub is aborted so the others stop, and the first failure is
    re-raised naming its party. ``timeout`` bounds the whole run (seconds).
    """
    if not isinstance(job, GLMJob):
        raise TypeError(f"job must be a GLMJob, got {type(job).__name__}")
    protocol = get_protocol(job.protocol)
    if protocol.needs_coordinator and job.coordinator is None:
        raise ValueError(f"protocol {job.protocol!r} needs a coordinator party (job.coordinator is None)")
    if not protocol.needs_coordinator and job.coordinator is not None:
        raise ValueError(f"protocol {job.protocol!r} has no coordinator role, but job.coordinator is set")
    data_parties = (job.active, *job.passives)
    if not isinstance(party_data, Mapping):
        raise TypeError(f"party_data must be a mapping party -> PartyData, got {type(party_data).__name__}")
    unknown = set(party_data) - set(job.parties)
    if unknown:
        raise ValueError(f"party_data has parties not in the job: {sorted(unknown)}")
    for party in data_parties:
        if not isinstance(party_data.get(party), PartyData):
            raise TypeError(f"party_data[{party!r}] must be a PartyData")
    if job.coordinator is not None and party_data.get(job.coordinator) is not None:
        raise ValueError("the coordinator holds no data; pass None or leave it out")

    hub = InMemoryHub() if hub is None else hub

    def run_party(party: str, endpoint) -> PartyResult:
        result = protocol.roles[job.role_of(party)](endpoint, job, party_data.get(party))
        if not isinstance(result, PartyResult):
            raise TypeError(f"program returned {type(result).__name__}, expected PartyResult")
        return result

    results = run_party_threads(hub, job.parties, run_party, timeout=timeout, label="run_job")
    return JobResult(results=results, records=hub.records, hub=hub)
