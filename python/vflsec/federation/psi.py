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
(:func:`row_order`), so rows line up without any further exchange.

A member checks that every ID the leader announces is one it holds, is
unique and sorted, and that no more IDs are announced than it could share.

Buckets (:func:`align_ids`, :func:`bucket_of`): each two-party run is split by a
public hash of the ID into buckets of about :data:`BUCKET_TARGET` of the
leader's IDs, each an independent instance with fresh keys, blinded on several
threads (openmined-psi releases the GIL) and pipelined between the parties.
The intersection is the same; what each party learns in addition is the
number of the other's IDs in each bucket (for IDs not chosen to collide, about
``n / buckets`` each, whatever the IDs are), no ID. The work is the same as
unbucketed (per ID: three exponentiations for the client's items, one for the
server's), so the speed-up is the number of cores the two parties' threads
find free: at most 2x when both run on one 2-core machine.
"""
from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .channel import Channel

__all__ = ["BUCKET_TARGET", "TAG_PSI_REQUEST", "TAG_PSI_RESPONSE", "TAG_PSI_RESULT", "TAG_PSI_SETUP", "align_ids",
           "bucket_of", "psi_client_intersection", "psi_server_reply", "row_order"]

TAG_PSI_REQUEST = "psi_request"
TAG_PSI_SETUP = "psi_setup"
TAG_PSI_RESPONSE = "psi_response"
TAG_PSI_RESULT = "psi_result"


def _psi():
    try:
        import private_set_intersection.python as psi
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("entity alignment needs openmined-psi (pip install 'vflsec[net]')") from exc
    return psi


def check_ids(ids: Sequence[str], what: str = "ids") -> List[str]:
    """IDs as a list of non-empty str without duplicates (ValueError/TypeError)."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of str, not a single {type(ids).__name__}")
    out = []
    for i, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise TypeError(f"{what}[{i}] must be a non-empty str, got {item!r}")
        out.append(item)
    if len(set(out)) != len(out):
        seen, dup = set(), None
        for item in out:
            if item in seen:
                dup = item
                break
            seen.add(item)
        raise ValueError(f"{what} contains duplicate ID {dup!r}; IDs must be unique per party")
    return out


def psi_client_request(ids: Sequence[str]):
    """``(client, request_bytes)``: a fresh client key and the blinded items."""
    psi = _psi()
    client = psi.client.CreateWithNewKey(True)
    return client, client.CreateRequest(list(ids)).SerializeToString()


def psi_server_reply(ids: Sequence[str], request: bytes) -> Tuple[bytes, bytes]:
    """The server's ``(setup, response)`` bytes for a client's request."""
    psi = _psi()
    req = psi.Request()
    try:
        req.ParseFromString(bytes(request))
    except Exception as exc:  # protobuf's DecodeError
        raise ValueError(f"malformed PSI request: {exc}") from None
    server = psi.server.CreateWithNewKey(True)
    setup = server.CreateSetupMessage(0.0, len(req.encrypted_elements), list(ids), psi.DataStructure.RAW)
    response = server.ProcessRequest(req)
    return setup.SerializeToString(), response.SerializeToString()


def psi_client_intersection(client, setup: bytes, response: bytes) -> List[int]:
    """Indices (into the client's request items) of the items the server holds."""
    psi = _psi()
    server_setup, server_response = psi.ServerSetup(), psi.Response()
    try:
        server_setup.ParseFromString(bytes(setup))
        server_response.ParseFromString(bytes(response))
    except Exception as exc:
        raise ValueError(f"malformed PSI reply: {exc}") from None
    return sorted(int(i) for i in client.GetIntersection(server_setup, server_response))


#: IDs per bucket the leader aims at (a bucket is one two-party PSI instance and one message each way)
BUCKET_TARGET = 20_000
#: fewest IDs in a bucket the leader makes to give every thread work
MIN_BUCKET = 1_000
#: most buckets a member accepts (a bound on the work a leader can ask of it per ID)
MAX_BUCKETS = 4096
PROTOCOL = "ecdh-psi/buckets-v1"


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


def _split(ids: Sequence[str], buckets: int) -> List[List[str]]:
    where = bucket_of(ids, buckets)
    parts: List[List[str]] = [[] for _ in range(buckets)]
    for item, k in zip(ids, where.tolist()):
        parts[k].append(item)
    return parts


def _workers(workers: Optional[int]) -> int:
    if workers is None:
        try:
            return max(1, min(8, len(os.sched_getaffinity(0))))
        except AttributeError:  # not on Linux
            return max(1, min(8, os.cpu_count() or 1))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    return workers


def align_ids(endpoint: Channel, ids: Sequence[str], *, leader: str, members: Sequence[str],
              timeout: Optional[float] = None, workers: Optional[int] = None,
              bucket_target: int = BUCKET_TARGET) -> List[str]:
    """Run multi-party PSI; every caller gets the same sorted list of the IDs
    all parties hold. The leader calls it with ``members`` = the other data
    parties; a member with ``members`` = () (only the leader is contacted).

    Each two-party run is split into buckets of about ``bucket_target`` of the leader's IDs, at
    least two per thread when there are enough IDs (:func:`bucket_count`, :func:`bucket_of`; the
    leader chooses the count and announces it), each an independent
    ECDH PSI with fresh keys. Each party blinds its buckets on ``workers`` threads (default: its
    cores, at most 8; openmined-psi releases the GIL) and the buckets are pipelined: the member
    answers bucket k while the leader blinds bucket k + 1. ``workers=1`` with a
    ``bucket_target`` above the ID count is the unbucketed, sequential protocol."""
    ids = check_ids(ids)
    threads = _workers(workers)
    if isinstance(bucket_target, bool) or not isinstance(bucket_target, int) or bucket_target < 1:
        raise ValueError(f"bucket_target must be an int >= 1, got {bucket_target!r}")
    if endpoint.name == leader:
        current = sorted(ids)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vflsec-psi") as pool:
            for member in members:
                current = _leader_run(endpoint, member, current, pool, bucket_target, timeout, threads)
        common = sorted(current)
        encoded = [item.encode("utf-8") for item in common]
        for member in members:
            endpoint.send(member, TAG_PSI_RESULT, encoded)
        return common
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vflsec-psi") as pool:
        _member_run(endpoint, leader, ids, pool, timeout)
    announced = endpoint.recv(leader, TAG_PSI_RESULT, timeout=timeout)
    if not isinstance(announced, list):
        raise TypeError(f"party {leader!r} sent a PSI result that is not a list of IDs")
    try:
        common = [item.decode("utf-8") for item in announced]
    except UnicodeDecodeError:
        raise ValueError(f"party {leader!r} announced IDs that are not UTF-8") from None
    own = set(ids)
    foreign = next((item for item in common if item not in own), None)
    if foreign is not None:
        raise ValueError(f"party {leader!r} announced ID {foreign!r} that party {endpoint.name!r} does not hold")
    if any(a >= b for a, b in zip(common, common[1:])):
        raise ValueError(f"party {leader!r} announced IDs that are not sorted and unique")
    return common


def bucket_count(n_ids: int, bucket_target: int, threads: int) -> int:
    """Buckets for ``n_ids`` of the leader's IDs: about ``bucket_target`` IDs each, and with
    several threads at least two per thread (buckets of at least :data:`MIN_BUCKET` IDs), so
    every thread has work and the parties can pipeline."""
    buckets = -(-n_ids // bucket_target)
    if threads > 1:
        buckets = max(buckets, min(2 * threads, n_ids // MIN_BUCKET))
    return max(1, min(MAX_BUCKETS, buckets))


def _leader_run(endpoint: Channel, member: str, current: List[str], pool: ThreadPoolExecutor, bucket_target: int,
                timeout: Optional[float], threads: int) -> List[str]:
    """One two-party run as PSI client: the running intersection with ``member``'s IDs."""
    buckets = bucket_count(len(current), bucket_target, threads)
    parts = _split(current, buckets)
    endpoint.send(member, TAG_PSI_REQUEST, {"protocol": PROTOCOL, "buckets": buckets})
    requests = [pool.submit(psi_client_request, part) for part in parts]
    clients = []
    for future in requests:  # in bucket order, each as soon as it is ready
        client, request = future.result()
        clients.append(client)
        endpoint.send(member, TAG_PSI_REQUEST, request)
    found = []
    for k in range(buckets):
        setup = endpoint.recv(member, TAG_PSI_SETUP, timeout=timeout)
        response = endpoint.recv(member, TAG_PSI_RESPONSE, timeout=timeout)
        if not isinstance(setup, bytes) or not isinstance(response, bytes):
            raise TypeError(f"party {member!r} sent a PSI reply that is not bytes")
        found.append(pool.submit(psi_client_intersection, clients[k], setup, response))
    kept: List[str] = []
    for part, future in zip(parts, found):
        kept.extend(part[i] for i in future.result())
    return kept


def _member_run(endpoint: Channel, leader: str, ids: List[str], pool: ThreadPoolExecutor,
                timeout: Optional[float]) -> None:
    """One two-party run as PSI server, bucket by bucket as the leader's requests arrive."""
    header = endpoint.recv(leader, TAG_PSI_REQUEST, timeout=timeout)
    if not isinstance(header, dict) or header.get("protocol") != PROTOCOL:
        raise ValueError(f"party {leader!r} opened PSI with {type(header).__name__}, not the {PROTOCOL} header "
                         "(every party must run the same vflsec version)")
    buckets = header.get("buckets")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"party {leader!r} asked for {buckets!r} PSI buckets; at most {MAX_BUCKETS}")
    parts = _split(ids, buckets)
    replies = []
    for k in range(buckets):
        request = endpoint.recv(leader, TAG_PSI_REQUEST, timeout=timeout)
        if not isinstance(request, bytes):
            raise TypeError(f"party {leader!r} sent a PSI request that is not bytes")
        replies.append(pool.submit(psi_server_reply, parts[k], request))
    for future in replies:
        setup, response = future.result()
        endpoint.send(leader, TAG_PSI_SETUP, setup)
        endpoint.send(leader, TAG_PSI_RESPONSE, response)


def row_order(ids: Sequence[str], common: Sequence[str]) -> np.ndarray:
    """Row indices into ``ids`` that put this party's rows in ``common``'s order."""
    position: Dict[str, int] = {item: i for i, item in enumerate(ids)}
    try:
        return np.fromiter((position[item] for item in common), dtype=np.int64, count=len(common))
    except KeyError as exc:
        raise ValueError(f"ID {exc.args[0]!r} of the intersection is not among this party's IDs") from None


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
