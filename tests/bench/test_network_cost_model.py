"""The network cost model: replaying an in-memory run's messages over a link."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from vflsec.bench.experiments.network.cost_model import WireOverhead, predict
from vflsec.federation.channel import InMemoryHub, MessageRecord, ReceiptRecord
from vflsec.federation.link_profiles import PROFILES, LinkProfile

NO_OVERHEAD = WireOverhead(per_message=0, per_chunk=0)


def _ping_pong_records(compute_a: float, compute_b: float, nbytes: int):
    """A computes, sends to B; B (waiting since 0) computes, answers; A receives."""
    t1 = compute_a
    t2 = t1 + compute_b
    records = [MessageRecord("a", "b", "x", nbytes, 0, t1), MessageRecord("b", "a", "y", 10, 1, t2)]
    receipts = [ReceiptRecord("b", "a", "x", 0.0, t1, 1), ReceiptRecord("a", "b", "y", t1, t2, 2)]
    return records, receipts


def test_replay_adds_serialization_and_latency_on_the_critical_path():
    records, receipts = _ping_pong_records(0.5, 0.25, 1_000_000)
    link = LinkProfile("test", 8e6, 0.1)  # 1 MB/s, 100 ms RTT
    p = predict(records, receipts, link, overhead=NO_OVERHEAD)
    # a: 0.5 compute, 1 s on the wire, +50 ms to b (arrives 1.55), ack back at 1.6
    # b: computes 0.25 from 1.55, sends 10 bytes (1e-5 s) -> arrives at a at 1.85001;
    # b waits for the acknowledgement until 1.90001
    assert p.party_seconds["a"] == pytest.approx(1.85001)
    assert p.party_seconds["b"] == pytest.approx(1.55 + 0.25 + 1e-5 + 0.1)
    assert p.seconds == pytest.approx(1.90001)
    assert p.rounds == 2 and p.bytes == 1_000_010
    assert p.compute_seconds == pytest.approx(0.5)


def test_loopback_replay_reproduces_the_in_memory_time():
    records, receipts = _ping_pong_records(0.5, 0.25, 1_000_000)
    p = predict(records, receipts, PROFILES["loopback"], finished={"a": 0.8, "b": 0.75})
    assert p.seconds == pytest.approx(0.8)


def test_acknowledgement_and_per_message_cost():
    records, receipts = _ping_pong_records(0.0, 0.0, 0)
    link = LinkProfile("rtt", None, 0.2)
    assert predict(records, receipts, link, overhead=NO_OVERHEAD).party_seconds["b"] == pytest.approx(0.1 + 0.2)
    unacked = predict(records, receipts, link, overhead=NO_OVERHEAD, acknowledged=False)
    assert unacked.party_seconds["b"] == pytest.approx(0.1)
    slow = predict(records, receipts, link, overhead=NO_OVERHEAD, message_seconds=0.01)
    assert slow.seconds == pytest.approx(predict(records, receipts, link, overhead=NO_OVERHEAD).seconds + 0.02)


def test_messages_share_their_link_in_order():
    # a sends two 1 MB messages back to back: the second waits for the first
    records = [MessageRecord("a", "b", "x", 1_000_000, 0, 0.0), MessageRecord("a", "b", "x", 1_000_000, 1, 0.0)]
    receipts = [ReceiptRecord("b", "a", "x", 0.0, 0.0, 1), ReceiptRecord("b", "a", "x", 0.0, 0.0, 2)]
    p = predict(records, receipts, LinkProfile("t", 8e6, 0.0), overhead=NO_OVERHEAD, acknowledged=False)
    assert p.party_seconds["b"] == pytest.approx(2.0)


def test_wire_overhead_counts_chunks():
    w = WireOverhead(per_message=100, per_chunk=10, chunk_bytes=1000)
    assert w.wire_bytes(0) == 110 and w.wire_bytes(1000) == 1110 and w.wire_bytes(1001) == 1121


def test_incomplete_records_are_refused_clearly():
    receipts = [ReceiptRecord("b", "a", "x", 0.0, 1.0, 0)]
    with pytest.raises(ValueError, match="b waits for a/x"):
        predict([], receipts, PROFILES["wan"])


def test_hub_records_receipts_of_a_real_run():
    hub = InMemoryHub(default_timeout=10)
    a, b = hub.endpoint("a"), hub.endpoint("b")

    def party_b():
        for _ in range(3):
            x = b.recv("a", "req")
            time.sleep(0.02)
            b.send("a", "ans", x[:10])

    t = threading.Thread(target=party_b)
    t.start()
    for _ in range(3):
        time.sleep(0.01)
        a.send("b", "req", np.zeros(1000))
        a.recv("b", "ans")
    t.join()
    assert len(hub.receipts) == 6 and len(hub.records) == 6
    assert all(r.returned >= r.called for r in hub.receipts)
    # over a 100 ms RTT link each exchange waits one RTT (two one-way trips), and b
    # waits for the acknowledgement of its last answer: half an RTT after a is done
    base = predict(hub.records, hub.receipts, PROFILES["loopback"])
    slow = predict(hub.records, hub.receipts, LinkProfile("far", None, 0.1), overhead=NO_OVERHEAD)
    assert slow.seconds - base.seconds == pytest.approx(3 * 0.1 + 0.05, abs=0.02)


def test_loopback_calibration_fits_one_parameter():
    from vflsec.bench.experiments.network.links import InMemoryTrace, calibrate

    records, receipts = _ping_pong_records(0.5, 0.25, 1000)
    trace = InMemoryTrace(records, receipts, 0.75)
    slower = calibrate(trace, 0.95)  # the processes took longer: a per-message cost (2 messages)
    assert slower.compute_scale == 1.0 and slower.message_seconds == pytest.approx(0.1, rel=1e-6)
    faster = calibrate(trace, 0.6)  # the processes computed faster than the shared interpreter
    assert faster.message_seconds == 0.0 and faster.compute_scale == pytest.approx(0.8, rel=1e-6)
    assert faster.predict(trace, PROFILES["loopback"]).seconds == pytest.approx(0.6, rel=1e-6)


def test_parse_links():
    from vflsec.bench.experiments.network.links import parse_links

    assert [p.name for p in parse_links("loopback,lan,datacenter,wan,internet")] == list(PROFILES)
    custom = parse_links("100mbit,20ms")
    assert len(custom) == 1 and custom[0].bandwidth_bps == 1e8
    assert [p.name for p in parse_links("wan;5mbit,80ms")] == ["wan", "5mbit,80ms"]
    for bad in ("wan,wan", "moon", ""):
        with pytest.raises(ValueError):
            parse_links(bad)
