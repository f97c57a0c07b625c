"""GrpcChannel, the typed envelope, mutual TLS and PSI, in one process over loopback."""
from __future__ import annotations

import pickle
import struct
import threading
import time

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.federation import ChannelTimeout  # noqa: E402
from vflsec.federation.envelope import (  # noqa: E402
    KIND_DATA,
    Envelope,
    EnvelopeError,
    FrameAssembler,
    decode_envelope,
    decode_payload,
    encode_envelope,
    encode_payload,
    split_frames,
)
from vflsec.federation.grpc_channel import (  # noqa: E402
    SEND_METHOD,
    GrpcChannel,
    InsecureTransportWarning,
    MessageRejected,
    NetworkSettings,
    PeerFailed,
)
from vflsec.federation.psi import align_ids, row_order  # noqa: E402
from vflsec.federation.tls import init_certificates, load_tls  # noqa: E402
from vflsec.runtime.launch import free_ports  # noqa: E402

pytestmark = pytest.mark.network

SETTINGS = NetworkSettings(peer_timeout=2.0, heartbeat_interval=0.25, connect_timeout=10.0,
                           chunk_bytes=4096, max_message_bytes=1 << 20)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    root = tmp_path_factory.mktemp("certs")
    init_certificates(root / "fed", ["a", "b", "c"])
    init_certificates(root / "rogue", ["a", "b"])  # another CA issuing the same names
    return root


def _tls(certs, name, ca="fed", issuer="fed"):
    return load_tls(certs / ca / "ca.pem", certs / issuer / f"{name}.pem", certs / issuer / f"{name}.key")


@pytest.fixture
def pair(certs, loopback_channels):
    """Two connected parties a, b with mutual TLS."""
    with loopback_channels(certs / "fed", ["a", "b"], SETTINGS) as ch:
        yield ch["a"], ch["b"]


# -- envelope ---------------------------------------------------------------------

PAYLOADS = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array([True, False]),
    np.zeros((0, 3), dtype=np.int16),
    np.asfortranarray(np.arange(6, dtype=np.uint64).reshape(2, 3)),
    b"\x00\x01ciphertext",
    [b"c1", b"", b"c3" * 100],
    {"n": 2 ** 3072 - 1, "neg": -5, "f": -0.25, "s": "naïve", "flag": True, "arr": np.array([1.5]),
     "blobs": [b"x"], "raw": b"y", "np_scalar": np.float64(2.5)},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_envelope_round_trip(payload):
    env = Envelope(KIND_DATA, "s1", "a", "b", "tag", 7, payload)
    back = decode_envelope(encode_envelope(env))
    assert (back.session, back.sender, back.receiver, back.tag, back.seq) == ("s1", "a", "b", "tag", 7)
    if isinstance(payload, np.ndarray):
        assert back.payload.dtype == payload.dtype and back.payload.flags.writeable
        np.testing.assert_array_equal(back.payload, payload)
    elif isinstance(payload, dict):
        assert set(back.payload) == set(payload)
        assert back.payload["n"] == payload["n"] and back.payload["flag"] is True
        assert back.payload["np_scalar"] == 2.5 and type(back.payload["np_scalar"]) is float
    else:
        assert back.payload == payload


def test_envelope_refuses_what_the_channel_refuses():
    with pytest.raises(TypeError):
        encode_payload(np.array(["text"], dtype=object))
    with pytest.raises(TypeError):
        encode_payload({"nested": {"x": 1}})
    with pytest.raises(TypeError):
        encode_payload(3.0)


@pytest.mark.parametrize("data", [
    b"", b"VFLE", pickle.dumps({"x": np.ones(3)}), b"VFLE\x02" + b"\x00" * 40,
])
def test_decoder_rejects_garbage(data):
    with pytest.raises(EnvelopeError):
        decode_envelope(data)


def test_decoder_checks_lengths_and_dtypes():
    good = encode_payload(np.ones(4))
    with pytest.raises(EnvelopeError):
        decode_payload(good[:-1])  # truncated data
    with pytest.raises(EnvelopeError):
        decode_payload(good + b"\x00")  # trailing byte
    bad_dtype = good.replace(b"<f8", b"|O8")
    with pytest.raises(EnvelopeError, match="dtype"):
        decode_payload(bad_dtype)
    # A list claiming 2^32-1 items in a few bytes is refused before allocating.
    with pytest.raises(EnvelopeError):
        decode_payload(b"\x03\xff\xff\xff\xff")


@pytest.mark.parametrize("shape", [(0, 2**63), (0, 2**64 - 1), (2**40, 2**40, 0)])
def test_decoder_refuses_shapes_beyond_numpys_range_as_envelope_errors(shape):
    # a zero extent makes the byte count 0, so only numpy itself would notice
    # (with its own ValueError, which the handler used to report as UNKNOWN)
    good = encode_payload(np.zeros((0, 3)))
    header = struct.pack(">Q", 0) + struct.pack(">Q", 3)
    assert header in good
    forged = good.replace(b"\x02" + header, bytes([len(shape)]) + b"".join(struct.pack(">Q", e) for e in shape))
    assert forged != good
    with pytest.raises(EnvelopeError, match="index range"):
        decode_payload(forged)


def test_frames_enforce_the_size_limit_before_allocating():
    message = bytes(range(256)) * 40
    frames = list(split_frames(message, 1000))
    assembler = FrameAssembler(len(message))
    assert [assembler.add(f) for f in frames][-1] is True
    assert assembler.message() == message
    with pytest.raises(EnvelopeError, match="exceeds the maximum"):
        FrameAssembler(len(message) - 1).add(frames[0])
    shuffled = FrameAssembler(len(message))
    shuffled.add(frames[0])
    with pytest.raises(EnvelopeError, match="expected frame 1"):
        shuffled.add(frames[2])


# -- channel semantics ------------------------------------------------------------------

def test_fifo_per_tag_chunking_and_byte_accounting(pair):
    a, b = pair
    big = np.random.default_rng(0).normal(size=(300, 17))  # ~40 kB: 10 frames of 4 kB
    a.send("b", "x", big)
    a.send("b", "y", [b"first"])
    a.send("b", "x", {"k": 1})
    assert b.recv("a", "y") == [b"first"]
    np.testing.assert_array_equal(b.recv("a", "x"), big)
    assert b.recv("a", "x") == {"k": 1}
    from vflsec.federation import payload_nbytes

    assert a.bytes_by_tag()["x"] == payload_nbytes(big) + payload_nbytes({"k": 1})
    with pytest.raises(ChannelTimeout, match="'a'"):
        b.recv("a", "x", timeout=0.2)
    with pytest.raises(TypeError):
        a.send("b", "x", object())
    with pytest.raises(ValueError, match="no peer"):
        a.send("c", "x", b"")


def test_oversized_message_is_refused_by_the_sender_and_receiver(pair, certs):
    a, b = pair
    with pytest.raises(ValueError, match="over the maximum"):
        a.send("b", "x", np.zeros(1 << 18))
    # A peer with a larger limit sending past b's limit: b refuses it and stays up.
    big = GrpcChannel("a", "127.0.0.1:0", {"b": f"127.0.0.1:{b.port}"}, tls=_tls(certs, "a"),
                      settings=NetworkSettings(chunk_bytes=4096, max_message_bytes=1 << 24))
    big.start()
    try:
        with pytest.raises(MessageRejected, match="exceeds the maximum"):
            big.send("b", "x", np.zeros(1 << 18))
    finally:
        big.close(grace=0.1)
    a.send("b", "x", b"still alive")
    assert b.recv("a", "x") == b"still alive"


def _raw_send(port, tls, target, frames):
    creds = grpc.ssl_channel_credentials(root_certificates=tls.ca, private_key=tls.key,
                                         certificate_chain=tls.cert) if tls else None
    options = [("grpc.ssl_target_name_override", target)]
    channel = grpc.secure_channel(f"127.0.0.1:{port}", creds, options=options) if tls else \
        grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        return channel.stream_unary(SEND_METHOD)(iter(frames), timeout=5)
    finally:
        channel.close()


def test_replayed_and_out_of_order_messages_are_rejected(pair, certs):
    a, b = pair
    a.send("b", "t", b"m0")
    assert b.recv("a", "t") == b"m0"
    tls = _tls(certs, "a")
    replay = encode_envelope(Envelope(KIND_DATA, a.session, "a", "b", "t", 0, b"m0 again"))
    with pytest.raises(grpc.RpcError) as info:
        _raw_send(b.port, tls, "b", split_frames(replay, 4096))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "replayed" in info.value.details()
    skipped = encode_envelope(Envelope(KIND_DATA, a.session, "a", "b", "t", 5, b"future"))
    with pytest.raises(grpc.RpcError) as info:
        _raw_send(b.port, tls, "b", split_frames(skipped, 4096))
    assert "out-of-order" in info.value.details()
    other_session = encode_envelope(Envelope(KIND_DATA, "old-session", "a", "b", "t", 1, b"stale"))
    with pytest.raises(grpc.RpcError):
        _raw_send(b.port, tls, "b", split_frames(other_session, 4096))
    a.send("b", "t", b"m1")  # the honest sequence continues
    assert b.recv("a", "t") == b"m1"
    assert len(b.rejected) == 3


def test_hostile_client_does_not_crash_the_server(pair, certs):
    a, b = pair
    tls = _tls(certs, "a")
    attacks = [
        [b"garbage that is not a frame"],
        [pickle.dumps(np.ones(5))],  # a pickled payload is just bytes that fail the magic check
        list(split_frames(b"VFLE\x01\x00" + pickle.dumps("x"), 4096)),  # pickle inside a frame
        [b"VFLF" + b"\x01" + (0).to_bytes(4, "big") + (1).to_bytes(4, "big") + (1 << 40).to_bytes(8, "big")],
        [b"\x00" * (SETTINGS.chunk_bytes * 2)],  # oversized frame: refused by the gRPC layer
        list(split_frames(encode_envelope(Envelope(KIND_DATA, a.session, "a", "b", "t", 0, b"x")), 4096))[:0],
    ]
    for frames in attacks:
        with pytest.raises(grpc.RpcError):
            _raw_send(b.port, tls, "b", frames)
    # Impersonation: a valid certificate of "c" cannot send as "a".
    forged = encode_envelope(Envelope(KIND_DATA, a.session, "a", "b", "t", 0, b"forged"))
    with pytest.raises(grpc.RpcError) as info:
        _raw_send(b.port, _tls(certs, "c"), "b", split_frames(forged, 4096))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    a.send("b", "t", b"genuine")
    assert b.recv("a", "t") == b"genuine"
    assert b.failure is None


@pytest.mark.parametrize("client", ["other_ca", "no_cert"])
def test_party_without_a_federation_certificate_is_refused(pair, certs, client):
    _, b = pair
    payload = split_frames(encode_envelope(Envelope(KIND_DATA, b.session, "a", "b", "t", 0, b"x")), 4096)
    if client == "other_ca":
        # Same name "a", same receiver, but issued by a different CA (and trusting that CA only).
        rogue = _tls(certs, "a", ca="rogue", issuer="rogue")
        with pytest.raises(grpc.RpcError) as info:
            _raw_send(b.port, rogue, "b", payload)
    else:
        fed_ca = _tls(certs, "a")
        creds = grpc.ssl_channel_credentials(root_certificates=fed_ca.ca)
        channel = grpc.secure_channel(f"127.0.0.1:{b.port}", creds,
                                      options=[("grpc.ssl_target_name_override", "b")])
        try:
            with pytest.raises(grpc.RpcError) as info:
                channel.stream_unary(SEND_METHOD)(iter(payload), timeout=5)
        finally:
            channel.close()
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert b.failure is None


def test_client_refuses_a_server_with_the_wrong_name(certs):
    pa, pb = free_ports(2)
    # "b" listens with c's (valid) certificate: a must refuse to talk to it as b.
    a = GrpcChannel("a", f"127.0.0.1:{pa}", {"b": f"127.0.0.1:{pb}"}, tls=_tls(certs, "a"), settings=SETTINGS)
    impostor = GrpcChannel("b", f"127.0.0.1:{pb}", {"a": f"127.0.0.1:{pa}"}, tls=_tls(certs, "c"),
                           settings=SETTINGS)
    a.start()
    impostor.start()
    try:
        with pytest.raises(PeerFailed, match="'b'"):
            a.wait_for_peers(timeout=1.5)
    finally:
        a.close(grace=0.1)
        impostor.close(grace=0.1)


def test_insecure_transport_warns_and_needs_the_flag():
    with pytest.raises(ValueError, match="mutual TLS"):
        GrpcChannel("a", "127.0.0.1:0", {"b": "127.0.0.1:1"})
    with pytest.warns(InsecureTransportWarning):
        GrpcChannel("a", "127.0.0.1:0", {"b": "127.0.0.1:1"}, insecure=True)


def test_dead_peer_is_detected_within_peer_timeout(pair):
    a, b = pair
    b.close(grace=0)  # b "dies" without a word
    start = time.monotonic()
    with pytest.raises(PeerFailed, match="'b'.*no answer"):
        a.recv("b", "never")
    assert time.monotonic() - start < SETTINGS.peer_timeout + 2 * SETTINGS.heartbeat_interval + 1.0


def test_abort_notice_names_the_failed_party(pair):
    a, b = pair
    a.notify_abort("ValueError: bad data")
    with pytest.raises(PeerFailed, match="'a'.*bad data"):
        b.recv("a", "t", timeout=5)


# -- PSI ----------------------------------------------------------------------------------

def test_psi_aligns_three_parties(certs):
    rng = np.random.default_rng(5)
    universe = [f"id-{v}" for v in rng.permutation(10 ** 6)[:400]]
    sets = {name: [u for u in universe if rng.random() < 0.7] for name in ("a", "b", "c")}
    for name in sets:
        rng.shuffle(sets[name])
    ports = dict(zip("abc", free_ports(3)))
    channels = {n: GrpcChannel(n, f"127.0.0.1:{ports[n]}",
                               {p: f"127.0.0.1:{ports[p]}" for p in "abc" if p != n},
                               tls=_tls(certs, n), settings=SETTINGS) for n in "abc"}
    results, errors = {}, []
    for ch in channels.values():
        ch.start()

    def party(name):
        try:
            channels[name].wait_for_peers()
            members = ("b", "c") if name == "a" else ()
            results[name] = align_ids(channels[name], sets[name], leader="a", members=members, timeout=30)
        except BaseException as exc:  # noqa: BLE001
            errors.append((name, exc))

    threads = [threading.Thread(target=party, args=(n,)) for n in "abc"]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for ch in channels.values():
            ch.close(grace=0.1)
    assert not errors, errors
    expected = sorted(set(sets["a"]) & set(sets["b"]) & set(sets["c"]))
    assert 0 < len(expected) < 200
    for name in "abc":
        assert results[name] == expected
        order = row_order(sets[name], expected)
        assert [sets[name][i] for i in order] == expected
    # The passive parties received only the final intersection, never the leader's own IDs.
    assert channels["a"].bytes_by_tag()["psi_result"] < channels["a"].bytes_by_tag()["psi_request"]


def test_psi_rejects_duplicate_ids():
    from vflsec.federation.psi import check_ids

    with pytest.raises(ValueError, match="duplicate"):
        check_ids(["x", "y", "x"])
    with pytest.raises(TypeError):
        check_ids([1, 2])


def test_certs_init_cli_and_party_names(tmp_path):
    from vflsec.cli import main
    from vflsec.federation.tls import certificate_common_name

    assert main(["certs", "init", "--dir", str(tmp_path), "--parties", "active,passive1"]) == 0
    assert certificate_common_name((tmp_path / "passive1.pem").read_bytes()) == "passive1"
    assert (tmp_path / "ca.key").stat().st_mode & 0o077 == 0  # private keys readable by the owner only
    with pytest.raises(SystemExit) as info:  # one line, exit status 2 (vflsec.cli)
        main(["certs", "init", "--dir", str(tmp_path), "--parties", "active"])
    assert info.value.code == 2
    with pytest.raises(ValueError, match="party name"):
        init_certificates(tmp_path / "x", ["bad name"])
