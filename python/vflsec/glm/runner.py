"""``run_job``: every party program of a GLM job in-process, one thread each.

The GLM checks (protocol roles vs the coordinator, each data party has a
:class:`~vflsec.glm.job.PartyData`) in front of the shared in-process runner
:func:`vflsec.vfl.runner.run_programs`.
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..federation.channel import InMemoryHub
from ..vfl.runner import JobResult, PartyError, run_programs
from .job import GLMJob, PartyData
from .registry import get_protocol

__all__ = ["JobResult", "PartyError", "run_job"]


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
    if not isinstance(party_data, Mapping):
        raise TypeError(f"party_data must be a mapping party -> PartyData, got {type(party_data).__name__}")
    unknown = set(party_data) - set(job.parties)
    if unknown:
        raise ValueError(f"party_data has parties not in the job: {sorted(unknown)}")
    for party in job.data_parties:
        if not isinstance(party_data.get(party), PartyData):
            raise TypeError(f"party_data[{party!r}] must be a PartyData")
    if job.coordinator is not None and party_data.get(job.coordinator) is not None:
        raise ValueError("the coordinator holds no data; pass None or leave it out")
    return run_programs(job, protocol.roles, party_data, hub, timeout=timeout, label="run_job")
