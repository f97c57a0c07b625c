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
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .channel import Channel

__all__ = ["TAG_PSI_REQUEST", "TAG_PSI_RESPONSE", "TAG_PSI_RESULT", "TAG_PSI_SETUP", "align_ids",
           "psi_client_intersection", "psi_server_reply", "row_order"]

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


def align_ids(endpoint: Channel, ids: Sequence[str], *, leader: str, members: Sequence[str],
              timeout: Optional[float] = None) -> List[str]:
    """Run multi-party PSI; every caller gets the same sorted list of the IDs
    all parties hold. The leader calls it with ``members`` = the other data
    parties; a member with ``members`` = () (only the leader is contacted)."""
    ids = check_ids(ids)
    if endpoint.name == leader:
        current = sorted(ids)
        for member in members:
            client, request = psi_client_request(current)
            endpoint.send(member, TAG_PSI_REQUEST, request)
            setup = endpoint.recv(member, TAG_PSI_SETUP, timeout=timeout)
            response = endpoint.recv(member, TAG_PSI_RESPONSE, timeout=timeout)
            if not isinstance(setup, bytes) or not isinstance(response, bytes):
                raise TypeError(f"party {member!r} sent a PSI reply that is not bytes")
            current = [current[i] for i in psi_client_intersection(client, setup, response)]
        common = sorted(current)
        encoded = [item.encode("utf-8") for item in common]
        for member in members:
            endpoint.send(member, TAG_PSI_RESULT, encoded)
        return common
    request = endpoint.recv(leader, TAG_PSI_REQUEST, timeout=timeout)
    if not isinstance(request, bytes):
        raise TypeError(f"party {leader!r} sent a PSI request that is not bytes")
    setup, response = psi_server_reply(ids, request)
    endpoint.send(leader, TAG_PSI_SETUP, setup)
    endpoint.send(leader, TAG_PSI_RESPONSE, response)
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
