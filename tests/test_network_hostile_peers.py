"""Hostile or faulty peers on a gRPC channel (issue 18, items 1-3): an outsider's
certificate is refused before any payload is read; a member's stalled streams
cannot exhaust the handler pool or the memory budget; unexpected tags and
unbounded queues are protocol errors that fail the job, naming the peer."""
from __future__ import annotations

import threading
import time

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("cryptography")

from vflsec.federation.envelope import FRAME_HEADER_BYTES, split_frames  # noqa: E402
from vflsec.federation.grpc_channel import (  # noqa: E402
    SEND_METHOD,
    GrpcChannel,
    MessageRejected,
    NetworkSettings,
    PeerFailed,
)
from vflsec.federation.tls import init_certificates, load_tls  # noqa: E402
from vflsec.runtime.launch import free_ports  # noqa: E402

pytestmark = pytest.mark.network

SETTINGS = NetworkSettings(peer_timeout=3.0, heartbeat_interval=0.25, connect_timeout=10.0, chunk_bytes=4096,
                           max_message_bytes=1 << 20, max_streams_per_peer=2, max_queued_messages=3)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    root = tmp_path_factory.mktemp("certs")
    init_certificates(root, ["a", "b", "outsider"])  # the CA also signs a name outside the job
    return root


def _tls(certs, name):
    return load_tls(certs / "ca.pem", certs / f"{name}.pem", certs / f"{name}.key")


@pytest.fixture
def pair(certs):
    pa, pb = free_ports(2)
    a = GrpcChannel("a", f"127.0.0.1:{pa}", {"b": f"127.0.0.1:{pb}"}, tls=_tls(certs, "a"), settings=SETTINGS)
    b = GrpcChannel("b", f"127.0.0.1:{pb}", {"a": f"127.0.0.1:{pa}"}, tls=_tls(certs, "b"), settings=SETTINGS,
                    expected_tags={"t", "u"})
    a.start()
    b.start()
    try:
        a.wait_for_peers()
        b.wait_for_peers()
        yield a, b
    finally:
        a.close(grace=0.1)
        b.close(grace=0.1)


def _client(port, tls):
    creds = grpc.ssl_channel_credentials(root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "b")])


def _stalled_stream(port, tls, declared_total, release: threading.Event, errors: list):
    """Send one frame declaring `declared_total` bytes, then stall until `release`."""
    def frames():
        # the first frame of a 2-frame message, then nothing until released
        first = next(split_frames(b"\0" * declared_total, declared_total // 2))
        yield first[:FRAME_HEADER_BYTES + 16]
        release.wait(10)

    channel = _client(port, tls)
    try:
        channel.stream_unary(SEND_METHOD)(frames(), timeout=15)
    except grpc.RpcError as exc:
        errors.append(exc)
    finally:
        channel.close()


def test_outsider_certificate_refused_before_reading_payload(pair, certs):
    _, b = pair
    release, errors = threading.Event(), []
    worker = threading.Thread(target=_stalled_stream, args=(b.port, _tls(certs, "outsider"), 1 << 20, release,
                                                            errors))
    worker.start()
    worker.join(5)  # refused at once, without waiting for the stalled frames
    release.set()
    worker.join(5)
    assert errors and errors[0].code() == grpc.StatusCode.PERMISSION_DENIED
    assert "not a party of this job" in errors[0].details()
    assert sum(b._inflight.values()) == 0 and sum(b._streams.values()) == 0


def test_stalled_streams_of_a_member_are_capped_and_pings_still_answered(pair, certs):
    a, b = pair
    release, errors = threading.Event(), []
    workers = [threading.Thread(target=_stalled_stream, args=(b.port, _tls(certs, "a"), 1 << 19, release, errors))
               for _ in range(6)]
    for w in workers:
        w.start()
    time.sleep(1.0)
    try:
        # at most max_streams_per_peer stalled streams are held; the rest were refused
        assert b._streams["a"] <= SETTINGS.max_streams_per_peer
        refused = [e for e in errors if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) >= 6 - SETTINGS.max_streams_per_peer
        assert b._inflight["a"] <= SETTINGS.inflight_budget
        # heartbeats still go through: b's peers are not declared dead
        start = time.monotonic()
        a._ping_stubs["b"](b"a", timeout=2.0)
        assert time.monotonic() - start < 2.0
    finally:
        release.set()
        for w in workers:
            w.join(10)
    assert sum(b._streams.values()) == 0 and sum(b._inflight.values()) == 0


def test_unexpected_tag_is_a_protocol_error_naming_the_peer(pair):
    a, b = pair
    a.send("b", "t", b"fine")
    assert b.recv("a", "t") == b"fine"
    with pytest.raises(MessageRejected, match="protocol error"):
        a.send("b", "nobody-receives-this", b"x" * 1000)
    with pytest.raises(PeerFailed, match=r"'a'.*tagged 'nobody-receives-this'"):
        b.recv("a", "u", timeout=2)


def test_unbounded_queue_is_a_protocol_error(pair):
    a, b = pair
    for i in range(SETTINGS.max_queued_messages):
        a.send("b", "u", bytes([i]) * 100)
    with pytest.raises(MessageRejected, match="more than 3 messages tagged 'u'"):
        a.send("b", "u", b"one too many")
    assert b.recv("a", "u") == b"\0" * 100  # what was queued is intact
    with pytest.raises(PeerFailed, match="protocol error"):
        b.recv("a", "t", timeout=2)
