"""Predict a job's wall time over a network link from an in-memory run (the cost
model of ``vflsec bench network --links``).

An in-memory run (:class:`~vflsec.federation.channel.InMemoryHub`) records every message
(:class:`~vflsec.federation.channel.MessageRecord`: sender, receiver, tag, bytes, when) and
every completed receive (:class:`~vflsec.federation.channel.ReceiptRecord`: when the party
asked, when it got the message). Between a party's channel calls it
computes; while it waits in ``recv`` it does not. :func:`predict` replays
each party's sequence of compute stretches, sends and receives against a
link profile, keeping the protocol's dependency structure (a receive waits
for the matching send: the k-th message of a (sender, receiver, tag)):

* a send of ``b`` payload bytes occupies the sender -> receiver link for
  ``wire(b) * 8 / bandwidth`` seconds, after the messages queued on that
  link before it (one link per ordered pair of parties, as one gRPC
  connection per pair);
* it arrives one one-way latency (RTT / 2) after it has left;
* the sender waits for the receiver's acknowledgement (vflsec's gRPC
  ``Send`` returns once the peer holds the message): another RTT / 2;
* every message costs ``message_seconds`` of fixed per-message processing
  (gRPC, TLS, the envelope; 0 in memory), which the loopback run measures.

The wall time is the latest party's finish. Compute stretches are taken
as measured in memory, where all parties share one process (and the GIL):
where parties computed at the same time there, their separate processes
would overlap better. Rounds are messages (each costs its sender a round
trip); HTTP/2 flow-control windows are not modelled (gRPC grows them by
BDP probing), nor is TCP slow start.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ....federation.channel import MessageRecord, ReceiptRecord
from ....federation.link_profiles import LinkProfile

__all__ = ["Prediction", "WireOverhead", "predict"]


@dataclass(frozen=True)
class WireOverhead:
    """Bytes a message occupies on the wire beyond its payload accounting.

    ``per_message``: the envelope's frame headers, gRPC's HTTP/2 HEADERS
    frames of the request and of the acknowledgement, TLS records;
    ``per_chunk`` for every ``chunk_bytes`` of payload: a DATA frame header,
    the gRPC message prefix and a TLS record header and tag.
    """

    per_message: int = 300
    per_chunk: int = 9 + 5 + 29
    chunk_bytes: int = 16384

    def wire_bytes(self, payload_bytes: int) -> int:
        chunks = max(1, math.ceil(payload_bytes / self.chunk_bytes))
        return payload_bytes + self.per_message + chunks * self.per_chunk


@dataclass(frozen=True)
class Prediction:
    """The replayed run: wall ``seconds`` (the latest party's finish),
    ``compute_seconds`` (the longest party's compute), ``bytes`` on the wire
    (both directions, all pairs), ``rounds`` (messages)."""

    seconds: float
    compute_seconds: float
    bytes: int
    rounds: int
    party_seconds: Dict[str, float]

    @property
    def communication_seconds(self) -> float:
        """Wall time not covered by the slowest-computing party's compute."""
        return max(0.0, self.seconds - self.compute_seconds)


@dataclass
class _Event:
    order: float           # position in the hub's history: a send's seq, a receipt's sent_before - 0.5
    time: float            # send: when it was recorded; recv: when it was called
    end: float             # send: == time; recv: when it returned
    kind: str              # "send" | "recv"
    peer: str
    tag: str
    nbytes: int = 0


def _timelines(records: Sequence[MessageRecord], receipts: Sequence[ReceiptRecord]) -> Dict[str, List[_Event]]:
    # A party never sends while it waits in recv, so its own sends with seq <
    # sent_before precede a receipt and the others follow it: exact even when
    # timestamps tie.
    out: Dict[str, List[_Event]] = defaultdict(list)
    for m in records:
        out[m.sender].append(_Event(m.seq, m.time, m.time, "send", m.receiver, m.tag, m.nbytes))
    for r in receipts:
        out[r.receiver].append(_Event(r.sent_before - 0.5, r.called, r.returned, "recv", r.sender, r.tag))
    for events in out.values():
        events.sort(key=lambda e: (e.order, e.time))
    return out


def predict(records: Sequence[MessageRecord], receipts: Sequence[ReceiptRecord], profile: LinkProfile, *,
            finished: Optional[Mapping[str, float]] = None, overhead: WireOverhead = WireOverhead(),
            message_seconds: float = 0.0, compute_scale: float = 1.0, acknowledged: bool = True) -> Prediction:
    """Replay an in-memory run over ``profile``.

    ``records`` / ``receipts``: the hub's :attr:`~vflsec.federation.channel.InMemoryHub.records`
    and :attr:`~vflsec.federation.channel.InMemoryHub.receipts`; ``finished``: each party's
    finish time on the hub's clock (default: its last channel call; pass it
    to count compute after the last message). ``compute_scale`` multiplies
    every compute stretch (separate processes do not share the in-memory
    run's GIL: a loopback run calibrates it, see :func:`.links.calibrate`).
    ``acknowledged=False`` models a transport whose send returns once the
    bytes have left.
    """
    if message_seconds < 0 or not math.isfinite(message_seconds):
        raise ValueError(f"message_seconds must be >= 0, got {message_seconds!r}")
    if not (compute_scale > 0 and math.isfinite(compute_scale)):
        raise ValueError(f"compute_scale must be > 0, got {compute_scale!r}")
    timelines = _timelines(records, receipts)
    parties = sorted(set(timelines) | set(finished or {}))
    bandwidth = profile.bandwidth_bps
    one_way = profile.one_way_s
    link_free: Dict[Tuple[str, str], float] = defaultdict(float)
    arrivals: Dict[Tuple[str, str, str], List[float]] = defaultdict(list)
    taken: Dict[Tuple[str, str, str], int] = defaultdict(int)
    clock = {p: 0.0 for p in parties}        # the party's replayed time
    last = {p: 0.0 for p in parties}         # end of its last event, hub clock
    compute = {p: 0.0 for p in parties}
    position = {p: 0 for p in parties}
    wire_total = 0
    remaining = sum(len(timelines.get(p, ())) for p in parties)
    while remaining:
        progressed = False
        for p in parties:
            events = timelines.get(p, [])
            while position[p] < len(events):
                e = events[position[p]]
                work = compute_scale * max(0.0, e.time - last[p])
                if e.kind == "recv":
                    key = (e.peer, p, e.tag)
                    k = taken[key]
                    if k >= len(arrivals[key]):
                        break  # its sender has not been replayed that far yet
                    taken[key] = k + 1
                    clock[p] = max(clock[p] + work, arrivals[key][k])
                    last[p] = e.end
                else:
                    clock[p] += work + message_seconds
                    wire = overhead.wire_bytes(e.nbytes)
                    wire_total += wire
                    link = (p, e.peer)
                    start = max(clock[p], link_free[link])
                    done = start + (0.0 if bandwidth is None else wire * 8.0 / bandwidth)
                    link_free[link] = done
                    arrivals[(p, e.peer, e.tag)].append(done + one_way)
                    clock[p] = done + 2 * one_way if acknowledged else done
                    last[p] = e.end
                compute[p] += work
                position[p] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {p: timelines[p][position[p]] for p in parties if position[p] < len(timelines.get(p, []))}
            raise ValueError("the records do not form a complete run: receives without a matching send: "
                             + ", ".join(f"{p} waits for {e.peer}/{e.tag}" for p, e in stuck.items()))
    party_seconds = {}
    for p in parties:
        tail = compute_scale * max(0.0, (finished or {}).get(p, last[p]) - last[p])
        compute[p] += tail
        party_seconds[p] = clock[p] + tail
    return Prediction(seconds=max(party_seconds.values(), default=0.0),
                      compute_seconds=max(compute.values(), default=0.0),
                      bytes=wire_total, rounds=len(records), party_seconds=party_seconds)
