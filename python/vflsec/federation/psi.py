"""Entity alignment by private set intersection (PSI) over a Channel.

Two-party building block: OpenMined's ECDH PSI (``openmined-psi``; P-256,
"reveal intersection" mode, the exact ``RAW`` server set, no false
positives). The *client* sends its items blinded with its secret exponent;
the *server* returns them re-blinded with its own exponent together with its
own blinded items; the client removes its exponent and matches. The client
learns which of its items the server holds; the server learns only how many
items the client sent.

Multi-party alignment (:func:`align_ids`), semi-honest parties: the leader
(the active party) runs the two-party protocol as client with each member in
turn, each time on the running intersection, so it learns ``A ∩ P1``, then
``A ∩ P1 ∩ P2``, ... (what the leader learns about a later member is limited
to the running intersection). It then sends the final intersection, sorted,
to every member. A member learns the final intersection and the size of the
running set the leader sent it -- nothing about non-shared IDs of others.
Every party then orders its rows by the sorted common IDs
(:func:`row_order`), so rows line up without any further exchange. The IDs
stay in one Arrow array per party (:class:`~vflsec.federation.ids.IdColumn`);
the intersection is announced in parts of :data:`RESULT_PART` IDs.

A member checks that every ID the leader announces is one it holds, is
unique and sorted, and that no more IDs are announced than it could share.

Buckets (:func:`align_ids`, :func:`bucket_of`): each two-party run is split by a
public hash of the ID into buckets of about :data:`BUCKET_TARGET` of the
leader's IDs, each an independent instance with fresh keys, computed by several
workers and pipelined between the parties.
The intersection is the same; what each party learns in addition is the
number of the other's IDs in each bucket (for IDs not chosen to collide, about
``n / buckets`` each, whatever the IDs are), no ID. The work is the same as
unbucketed (per ID: three exponentiations for the client's items, one for the
server's), so the speed-up is the number of cores the two parties' workers
find free: at most 2x when both run on one 2-core machine. The leader keeps
at most a window of buckets (two per worker) unanswered and the member
answers before it waits beyond it, so the messages a party holds at once do
not grow with the number of IDs.

No common ID (:func:`exchange_id_formats`): when the intersection is empty, and only then,
every member sends the leader the coarse format of its IDs
(:class:`~vflsec.federation.id_format.IdFormat`: their length range, the common start of all of
them before the first digit, digits only or not, leading zeros, letter case, the other
characters used, spaces around them; no ID and no count), and the leader sends each member
its own, so every party can say how the writing differs (``'4711'`` and ``'C004711'``). That
format is what this step reveals beyond PSI's empty result.

Progress: ``progress(peer, buckets_done, buckets)`` of :func:`align_ids` is called after every
bucket (the leader: a reply back; a member: a request answered).

Where a party's buckets are computed (:mod:`vflsec.federation.psi_workers`,
``executor=`` of :func:`align_ids`, ``[compute]`` of a party file): this
process's threads (openmined-psi releases the GIL; the default), or the
party's own Ray cluster (a :class:`~vflsec.he.RayExecutor`): each member bucket a
stateless Ray task whose key is made in it and dies with it, each leader bucket
on a Ray actor that makes the bucket's key, keeps it until the reply is back and
returns only the request bytes and the indices of the IDs found. No key leaves
the process that made it; the messages between the parties are the same.
"""
from __future__ import annotations

import hashlib
import time
from collections import deque
from functools import partial
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence

import numpy as np

from .channel import Channel
from .id_format import IdFormat
from .ids import IdColumn, check_strings, ids_sha256
from .psi_workers import (
    BucketWorkers,
    bucket_workers,
    psi_client_intersection,
    psi_client_request,
    psi_server_reply,
    thread_count,
)

__all__ = ["BUCKET_TARGET", "TAG_PSI_FORMAT", "TAG_PSI_REQUEST", "TAG_PSI_RESPONSE", "TAG_PSI_RESULT",
           "TAG_PSI_SETUP", "IdColumn", "IdFormat", "align_ids", "bucket_of", "exchange_id_formats", "ids_sha256",
           "psi_client_intersection", "psi_server_reply", "row_order"]

TAG_PSI_REQUEST = "psi_request"
TAG_PSI_SETUP = "psi_setup"
TAG_PSI_RESPONSE = "psi_response"
TAG_PSI_RESULT = "psi_result"
TAG_PSI_FORMAT = "psi_id_format"

#: ``progress(peer, buckets_done, buckets)``
Progress = Callable[[str, int, int], None]


def check_ids(ids: Sequence[str], what: str = "ids") -> Sequence[str]:
    """IDs checked: non-empty strings without duplicates (TypeError/ValueError naming
    the first offending one). A checked :class:`~vflsec.federation.ids.IdColumn`
    (compact, for alignment), or the list of them when pyarrow is not installed."""
    if isinstance(ids, IdColumn):
        return IdColumn.of(ids, what)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return check_strings(ids, what)
    return IdColumn.of(ids, what)


#: IDs per bucket the leader aims at (a bucket is one two-party PSI instance and one message each way)
BUCKET_TARGET = 20_000
#: fewest IDs in a bucket the leader makes to give every thread work
MIN_BUCKET = 1_000
#: most buckets a member accepts (a bound on the work a leader can ask of it per ID)
MAX_BUCKETS = 4096
#: IDs per message of the announced intersection
RESULT_PART = 1 << 20
PROTOCOL = "ecdh-psi/buckets-v2"


def bucket_of(ids: Sequence[str], buckets: int) -> np.ndarray:
    """The bucket of every ID: the first 8 bytes of its BLAKE2b digest, modulo ``buckets``.

    A public function both parties compute, so an ID falls into the same bucket at each; the
    buckets are independent PSI instances, run in parallel and pipelined. What it adds to what
    PSI shows: each party learns how many of the other's IDs fall into each bucket (about
    ``n / buckets`` each for IDs not chosen to collide), no ID and no more than that."""
    if buckets == 1:
        return np.zeros(len(ids), dtype=np.int64)
    digests = (int.from_bytes(hashlib.blake2b(item.encode("utf-8"), digest_size=8).digest(), "big") for item in ids)
    return np.fromiter((d % buckets for d in digests), dtype=np.int64, count=len(ids))


class _Buckets:
    """Where each bucket's IDs sit in a column: ``rows(k)`` (positions, ascending) and
    ``strings(k)`` (the IDs, made into Python strings only when asked for)."""

    def __init__(self, ids: IdColumn, buckets: int):
        where = bucket_of(ids, buckets).astype(np.uint16)  # MAX_BUCKETS fits
        self._bounds = np.concatenate([[0], np.cumsum(np.bincount(where, minlength=buckets))])
        order = np.argsort(where, kind="stable")  # a radix sort of the bucket numbers
        del where
        # 4 bytes per ID where the positions fit (what a party holds through the whole run).
        self._order = order.astype(np.int32) if len(ids) < 2 ** 31 else order
        self._ids = ids

    def rows(self, k: int) -> np.ndarray:
        return self._order[self._bounds[k]:self._bounds[k + 1]]

    def strings(self, k: int) -> List[str]:
        return self._ids.strings(self.rows(k))


def align_ids(endpoint: Channel, ids: Sequence[str], *, leader: str, members: Sequence[str],
              timeout: Optional[float] = None, workers: Optional[int] = None,
              bucket_target: int = BUCKET_TARGET, executor: Any = None,
              progress: Optional[Progress] = None) -> IdColumn:
    """Run multi-party PSI; every caller gets the same sorted column of the IDs
    all parties hold (an :class:`~vflsec.federation.ids.IdColumn`, equal to the
    list of them). The leader calls it with ``members`` = the other data
    parties; a member with ``members`` = () (only the leader is contacted).
    ``ids``: a sequence of str or an IdColumn (a party's IDs as read, checked
    once).

    Each two-party run is split into buckets of about ``bucket_target`` of the leader's IDs, at
    least two per worker when there are enough IDs (:func:`bucket_count`, :func:`bucket_of`; the
    leader chooses the count and announces it), each an independent
    ECDH PSI with fresh keys. Each party computes its buckets on ``workers`` workers and the
    buckets are pipelined: the member answers bucket k while the leader blinds bucket k + 1. At
    most ``window`` buckets (two per worker) are under way at once, so a party's memory for the
    messages does not grow with the number of IDs; a bucket's IDs become Python strings only
    while it is under way.

    Where the buckets are computed (:mod:`vflsec.federation.psi_workers`): ``executor`` None, a
    :class:`~vflsec.he.LocalPoolExecutor` or any other executor but Ray: this process's threads,
    ``workers`` of them (default: its cores, at most 8; openmined-psi releases the GIL). A
    :class:`~vflsec.he.RayExecutor`: the party's Ray cluster, server buckets as Ray tasks and
    client buckets on ``workers`` Ray actors (default: one per CPU of the cluster) that keep each
    bucket's key to themselves. The messages are the same either way.
    ``workers=1`` with a ``bucket_target`` above the ID count is the unbucketed, sequential
    protocol. ``progress(peer, buckets_done, buckets)`` is called after every bucket."""
    column = IdColumn.of(ids)
    if workers is not None:
        thread_count(workers)  # checked before anything starts
    if isinstance(bucket_target, bool) or not isinstance(bucket_target, int) or bucket_target < 1:
        raise ValueError(f"bucket_target must be an int >= 1, got {bucket_target!r}")
    bucket_work = bucket_workers(executor, workers)
    try:
        if endpoint.name == leader:
            current = column  # the running intersection, in the column's order (no sorted copy of all IDs)
            for member in members:
                current = _leader_run(endpoint, member, current, bucket_work, bucket_target, timeout, progress)
        else:
            _member_run(endpoint, leader, column, bucket_work, timeout, progress)
    finally:
        bucket_work.close()
    if endpoint.name == leader:
        common = current.sorted()
        common.checked = True  # IDs of the checked column, each once: row_order need not check them again
        del current
        for member in members:
            _announce(endpoint, member, common)
        return common
    common = _announced(endpoint, leader, timeout)
    if len(common) > len(column):
        raise ValueError(f"party {leader!r} announced {len(common)} common IDs; party {endpoint.name!r} holds "
                         f"only {len(column)}")
    positions = common.positions_in(column)
    if np.any(positions < 0):
        foreign = common[int(np.argmax(positions < 0))]
        raise ValueError(f"party {leader!r} announced ID {foreign!r} that party {endpoint.name!r} does not hold")
    del positions
    if not common.is_strictly_increasing():
        raise ValueError(f"party {leader!r} announced IDs that are not sorted and unique")
    common.checked = True  # unique and all this party's own (checked) IDs: row_order need not check them again
    return common


def _announce(endpoint: Channel, member: str, common: IdColumn) -> None:
    """The final intersection to ``member``: its size and the number of parts, then the parts."""
    parts = -(-len(common) // RESULT_PART)
    endpoint.send(member, TAG_PSI_RESULT, {"count": len(common), "parts": parts})
    for start in range(0, len(common), RESULT_PART):
        endpoint.send(member, TAG_PSI_RESULT, common.pack(start, start + RESULT_PART))


def _announced(endpoint: Channel, leader: str, timeout: Optional[float]) -> IdColumn:
    header = endpoint.recv(leader, TAG_PSI_RESULT, timeout=timeout)
    count = header.get("count") if isinstance(header, dict) else None
    parts = header.get("parts") if isinstance(header, dict) else None
    if (isinstance(count, bool) or not isinstance(count, int) or isinstance(parts, bool) or not isinstance(parts, int)
            or count < 0 or parts != -(-count // RESULT_PART)):
        raise ValueError(f"party {leader!r} sent a PSI result header that is not {{count, parts}} of the "
                         f"{PROTOCOL} protocol")
    received = [endpoint.recv(leader, TAG_PSI_RESULT, timeout=timeout) for _ in range(parts)]
    common = IdColumn.unpack(received, f"party {leader!r}'s PSI result")
    if len(common) != count:
        raise ValueError(f"party {leader!r} announced {count} common IDs and sent {len(common)}")
    return common


def bucket_count(n_ids: int, bucket_target: int, threads: int) -> int:
    """Buckets for ``n_ids`` of the leader's IDs: about ``bucket_target`` IDs each, and with
    several threads at least two per thread (buckets of at least :data:`MIN_BUCKET` IDs), so
    every thread has work and the parties can pipeline."""
    buckets = -(-n_ids // bucket_target)
    if threads > 1:
        buckets = max(buckets, min(2 * threads, n_ids // MIN_BUCKET))
    return max(1, min(MAX_BUCKETS, buckets))


def _leader_run(endpoint: Channel, member: str, current: IdColumn, bucket_work: BucketWorkers,
                bucket_target: int, timeout: Optional[float], progress: Optional[Progress] = None) -> IdColumn:
    """One two-party run as PSI client: the running intersection with ``member``'s IDs.

    Requests go out at most ``window`` buckets ahead of the replies that came back (the
    member answers in bucket order), and each bucket is blinded ``window`` buckets ahead."""
    buckets = bucket_count(len(current), bucket_target, bucket_work.n_workers)
    window = min(buckets, 2 * bucket_work.n_workers)
    parts = _Buckets(current, buckets)
    endpoint.send(member, TAG_PSI_REQUEST, {"protocol": PROTOCOL, "buckets": buckets, "window": window})
    blinding = {k: bucket_work.blind(k, partial(parts.strings, k)) for k in range(min(2 * window, buckets))}

    def send_request(k: int) -> None:
        endpoint.send(member, TAG_PSI_REQUEST, blinding.pop(k).result())
        if k + 2 * window < buckets:
            blinding[k + 2 * window] = bucket_work.blind(k + 2 * window, partial(parts.strings, k + 2 * window))

    for k in range(window):
        send_request(k)
    found: Deque[Any] = deque()
    kept: List[np.ndarray] = []

    def keep_found() -> None:
        # The positions (in the leader's column) of a bucket's IDs the member holds: an int64
        # array, not the library's list of Python ints, while the other buckets finish.
        kept.append(parts.rows(len(kept))[found.popleft().result()])

    for k in range(buckets):
        setup = endpoint.recv(member, TAG_PSI_SETUP, timeout=timeout)
        response = endpoint.recv(member, TAG_PSI_RESPONSE, timeout=timeout)
        if not isinstance(setup, bytes) or not isinstance(response, bytes):
            raise TypeError(f"party {member!r} sent a PSI reply that is not bytes")
        found.append(bucket_work.intersect(k, setup, response))
        if k + window < buckets:
            send_request(k + window)
        while found and found[0].done():
            keep_found()
        if progress is not None:
            progress(member, k + 1, buckets)
    while found:
        keep_found()
    return current.take(np.sort(np.concatenate(kept)) if kept else np.zeros(0, dtype=np.int64))


def _member_run(endpoint: Channel, leader: str, ids: IdColumn, bucket_work: BucketWorkers,
                timeout: Optional[float], progress: Optional[Progress] = None) -> None:
    """One two-party run as PSI server, bucket by bucket as the leader's requests arrive; a
    reply goes out before the member waits for a request beyond the leader's window."""
    header = endpoint.recv(leader, TAG_PSI_REQUEST, timeout=timeout)
    if not isinstance(header, dict) or header.get("protocol") != PROTOCOL:
        raise ValueError(f"party {leader!r} opened PSI with {type(header).__name__}, not the {PROTOCOL} header "
                         "(every party must run the same vflsec version)")
    buckets, window = header.get("buckets"), header.get("window")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"party {leader!r} asked for {buckets!r} PSI buckets; at most {MAX_BUCKETS}")
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= buckets:
        raise ValueError(f"party {leader!r} announced a PSI window of {window!r} buckets; 1 to {buckets}")
    parts = _Buckets(ids, buckets)
    replies: Deque[Any] = deque()

    def send_reply() -> None:
        setup, response = replies.popleft().result()
        endpoint.send(leader, TAG_PSI_SETUP, setup)
        endpoint.send(leader, TAG_PSI_RESPONSE, response)

    for k in range(buckets):
        while replies and (len(replies) >= window or replies[0].done()):
            send_reply()
        request = endpoint.recv(leader, TAG_PSI_REQUEST, timeout=timeout)
        if not isinstance(request, bytes):
            raise TypeError(f"party {leader!r} sent a PSI request that is not bytes")
        replies.append(bucket_work.reply(partial(parts.strings, k), request))
        if progress is not None:
            progress(leader, k + 1, buckets)
    while replies:
        send_reply()


def exchange_id_formats(endpoint: Channel, ids: Sequence[str], *, leader: str, members: Sequence[str],
                        timeout: Optional[float] = None) -> Dict[str, IdFormat]:
    """After an alignment that found no common ID, and only then: the coarse formats of the
    peers' IDs (module docstring; what they reveal is an
    :class:`~vflsec.federation.id_format.IdFormat`, no ID). Called as :func:`align_ids` is
    (the leader with ``members``, a member with ``members`` = ()); ``party -> format``: this
    party's own first, then every member's (the leader) or the leader's (a member). The leader
    answers only once it holds every member's, so no member stops before the leader has them."""
    own = IdFormat.of(IdColumn.of(ids))
    formats = {endpoint.name: own}
    if endpoint.name == leader:
        for member in members:
            formats[member] = IdFormat.from_message(endpoint.recv(member, TAG_PSI_FORMAT, timeout=timeout), member)
        for member in members:
            endpoint.send(member, TAG_PSI_FORMAT, own.to_message())
        return formats
    endpoint.send(leader, TAG_PSI_FORMAT, own.to_message())
    formats[leader] = IdFormat.from_message(endpoint.recv(leader, TAG_PSI_FORMAT, timeout=timeout), leader)
    return formats


def row_order(ids: Sequence[str], common: Sequence[str]) -> np.ndarray:
    """Row indices into ``ids`` that put this party's rows in ``common``'s order."""
    positions = IdColumn.of(common, "common").positions_in(IdColumn.of(ids))
    if np.any(positions < 0):
        missing = common[int(np.argmax(positions < 0))]
        raise ValueError(f"ID {missing!r} of the intersection is not among this party's IDs")
    return positions


def time_two_party_psi(n_ids: int, overlap: float = 0.5, seed: int = 0) -> Dict[str, float]:
    """Seconds of each step of one two-party PSI on ``n_ids`` random IDs per
    party sharing ``overlap`` of them (in process, no transport), and the
    bytes each message takes."""
    rng = np.random.default_rng(seed)
    shared = int(round(n_ids * overlap))
    pool = rng.choice(10 ** 12, size=2 * n_ids - shared, replace=False)
    a = [f"id{v:012d}" for v in pool[:n_ids]]
    b = [f"id{v:012d}" for v in pool[n_ids - shared:]]
    t0 = time.perf_counter()
    client, request = psi_client_request(a)
    t1 = time.perf_counter()
    setup, response = psi_server_reply(b, request)
    t2 = time.perf_counter()
    found = psi_client_intersection(client, setup, response)
    t3 = time.perf_counter()
    if len(found) != shared:
        raise AssertionError(f"PSI found {len(found)} shared IDs, expected {shared}")
    return {"n_ids": n_ids, "shared": shared, "client_request_s": t1 - t0, "server_reply_s": t2 - t1,
            "client_intersect_s": t3 - t2, "total_s": t3 - t0,
            "request_bytes": len(request), "setup_bytes": len(setup), "response_bytes": len(response)}
