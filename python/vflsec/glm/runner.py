"""``run_job``: every party program of a GLM job in-process, one thread each.

The GLM checks (protocol roles vs the coordinator, each data party has a
:class:`~vflsec.glm.job.PartyData`) in front of the shared in-process runner
:func:`vflsec.vfl.runner.run_programs`.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

import numpy as np

from .._arrays import as_float_array
from ..federation.channel import InMemoryHub
from ..vfl.runner import JobResult, PartyError, run_programs
from .design_rows import DesignedRows
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
    ``job.widths`` (every data party's block width), if set, must match the
    data; a protocol with a key holder (HE) gets them from the data if unset.
    """
    if not isinstance(job, GLMJob):
        raise TypeError(f"job must be a GLMJob, got {type(job).__name__}")
    protocol = get_protocol(job.protocol)
    protocol.check_parties(job)
    protocol.check_schedule(job)
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
    job = _with_widths(job, party_data, protocol.needs_coordinator)
    return run_programs(job, protocol.roles, party_data, hub, timeout=timeout, label="run_job")


def _with_widths(job: GLMJob, party_data: Mapping[str, Optional[PartyData]], needs_widths: bool) -> GLMJob:
    """``job`` with every data party's block width: the job's own, checked
    against the data before any party starts (so no key is made for a job
    whose widths do not match), or for a protocol with a key holder (which
    decrypts for each party exactly its agreed width) the widths of the data
    this runner hands out, since it holds every party's data."""
    if job.widths is None and not needs_widths:
        return job
    widths = {}
    for party in job.data_parties:
        data = party_data[party]
        assert data is not None  # run_job checked every data party has a PartyData
        if isinstance(data.X, DesignedRows):  # its width is known without building it
            widths[party] = data.X.shape[1]
            continue
        X, _ = as_float_array(data.X, f"X of party {party!r}", ndim=2, dtype=np.float64)
        widths[party] = X.shape[1]
    if job.widths is None:
        return dataclasses.replace(job, widths=widths)
    for party, width in widths.items():
        if width != job.widths[party]:
            raise ValueError(f"party {party!r} holds {width} feature columns, the job agreed on "
                             f"widths[{party!r}] = {job.widths[party]}")
    return job
