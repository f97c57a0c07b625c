"""Run every party of a job in its own thread over an in-memory hub.

The in-process way to exercise a protocol: each party program blocks on
``recv`` exactly as it would in its own process. Shared by the vertical-GLM
runner (:func:`vflsec.glm.run_job`) and the split-learning runner
(:func:`vflsec.splitnn.run_split_job`).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .channel import Channel, ChannelClosed, InMemoryHub

__all__ = ["PartyError", "run_party_threads"]


class PartyError(RuntimeError):
    """A party program failed; ``party`` names it and ``__cause__`` is the
    original exception."""

    def __init__(self, party: str, exc: BaseException):
        self.party = party
        super().__init__(f"party {party!r} failed: {type(exc).__name__}: {exc}")


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
