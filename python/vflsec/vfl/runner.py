"""The in-process runner: every party program of a job, one thread each,
over an in-memory hub.

How protocols are exercised, tested and benchmarked without a network: each
role program runs in its own thread and blocks on ``recv`` exactly as it
would in its own process (where :mod:`vflsec.runtime` runs it over gRPC).
:func:`vflsec.glm.run_job` and :func:`vflsec.splitnn.run_split_job` are thin
uses of :func:`run_programs` that first check their own job and data.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..federation.channel import Channel, ChannelClosed, InMemoryHub, MessageRecord
from .job import VFLJob
from .result import PartyResult

__all__ = ["JobResult", "PartyError", "PartyProgram", "run_party_threads", "run_programs"]

PartyProgram = Callable[[Channel, Any, Any], PartyResult]


class PartyError(RuntimeError):
    """A party program failed; ``party`` names it and ``__cause__`` is the
    original exception."""

    def __init__(self, party: str, exc: BaseException):
        self.party = party
        super().__init__(f"party {party!r} failed: {type(exc).__name__}: {exc}")


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


def _with_party(party: str, exc: BaseException) -> BaseException:
    # ValueError/TypeError keep their type (callers catch them as input
    # errors); anything else becomes PartyError. Either way chained.
    if type(exc) in (ValueError, TypeError):
        return type(exc)(f"party {party!r}: {exc}")
    return PartyError(party, exc)


def run_party_threads(hub: InMemoryHub, parties: Sequence[str], run_party: Callable[[str, Channel], Any], *,
                      timeout: Optional[float] = None, label: str = "job") -> Dict[str, Any]:
    """``{party: run_party(party, endpoint)}`` with one thread per party.

    If a party raises, the hub is aborted so the others stop, and the root
    cause -- the first failure that is not a consequence of the abort -- is
    re-raised naming its party. ``timeout`` bounds the whole run (seconds).
    """
    endpoints = {party: hub.endpoint(party) for party in parties}
    results: Dict[str, Any] = {}
    failures: List[Tuple[str, BaseException]] = []
    lock = threading.Lock()

    def target(party: str) -> None:
        try:
            result = run_party(party, endpoints[party])
            with lock:
                results[party] = result
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            with lock:
                failures.append((party, exc))
            hub.abort(f"party {party!r} failed")

    threads = [threading.Thread(target=target, args=(party,), name=f"vflsec-{label}-{party}", daemon=True)
               for party in parties]
    for thread in threads:
        thread.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    for thread in threads:
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            hub.abort(f"{label} timeout")
            for other in threads:
                other.join(5.0)
            raise TimeoutError(f"{label} did not finish within {timeout} s (party thread {thread.name})")
    if failures:
        party, exc = next(((p, e) for p, e in failures if not isinstance(e, ChannelClosed)), failures[0])
        raise _with_party(party, exc) from exc
    return results


def run_programs(job: VFLJob, programs: Mapping[str, PartyProgram], party_data: Mapping[str, Any],
                 hub: Optional[InMemoryHub] = None, *, timeout: Optional[float] = None,
                 label: str = "job") -> JobResult:
    """Run ``programs[job.role_of(party)](endpoint, job, party_data.get(party))``
    for every party of ``job``, each in its own thread over ``hub`` (a fresh
    :class:`InMemoryHub` by default).

    Every program must return a :class:`PartyResult`. If any party raises,
    the hub is aborted so the others stop, and the first failure is re-raised
    naming its party (ValueError/TypeError keep their type, anything else
    becomes :class:`PartyError`). ``timeout`` bounds the whole run (seconds).
    """
    hub = InMemoryHub() if hub is None else hub

    def run_party(party: str, endpoint: Channel) -> PartyResult:
        result = programs[job.role_of(party)](endpoint, job, party_data.get(party))
        if not isinstance(result, PartyResult):
            raise TypeError(f"program returned {type(result).__name__}, expected PartyResult")
        return result

    results = run_party_threads(hub, job.parties, run_party, timeout=timeout, label=label)
    return JobResult(results=results, records=hub.records, hub=hub)
