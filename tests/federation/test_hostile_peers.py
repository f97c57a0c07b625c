"""Hostile or faulty peers on loopback (issue 18, items 1-6), each attack
refused within a stated bound on what it costs the victim:

1. an outsider's certificate declaring 1 GiB messages on stalled streams is
   refused before any payload is read;
2. a member's stalled streams are capped (per-peer stream quota and in-flight
   byte budget) and cannot starve honest pings, messages or heartbeats;
3. a flood of complete messages under a tag nobody receives, or under a tag
   that is never received, is a protocol error that fails the job, naming
   the peer, with bounded queues;
4. a leader that answers pings but never sends fails the follower at the
   phase's deadline, naming the leader, the tag and the phase;
5. HE-VFL's key holder refuses a forwarded ciphertext (no decryption oracle);
6. malformed envelopes (shapes beyond numpy's range, lengths past the end)
   are the transport's own INVALID_ARGUMENT, never UNKNOWN with a traceback.

The victim runs in this process, so the bound on its memory is the growth of
this process's resident set (peak over the attack: VmHWM reset before it, and
sampled every 5 ms) over what the victim's settings let a member hold; the
attackers hold nothing of what they declare (a flood's sender runs in its own
process). Honest
traffic is pings from an honest peer every 50 ms during the attack, each
answered within PING_LATENCY_BOUND, and heartbeats: nobody is declared dead
although the attacks outlast peer_timeout.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import struct
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("cryptography")

from vflsec.federation.channel import ChannelTimeout  # noqa: E402
from vflsec.federation.envelope import (  # noqa: E402
    FRAME_HEADER_BYTES,
    KIND_DATA,
    Envelope,
    encode_envelope,
    split_frames,
)
from vflsec.federation.grpc_channel import (  # noqa: E402
    SEND_METHOD,
    GrpcChannel,
    MessageRejected,
    NetworkSettings,
    PeerFailed,
    StepTimeout,
)
from vflsec.federation.tls import init_certificates, load_tls  # noqa: E402
from vflsec.runtime import deadlines  # noqa: E402
from vflsec.runtime.handshake import TAG_SESSION, agree_on_job  # noqa: E402

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")]

MiB = 1 << 20

# -- the stated bounds ------------------------------------------------------------
# What the victim may hold beyond what its settings let one member hold (the
# in-flight budget of messages being reassembled, the queue budget of received
# messages): gRPC's and Python's own buffers, the transient copies of a message
# being decoded (reassembly buffer, its bytes, the payload: three), and what
# glibc keeps of them once freed (its per-thread arenas and its mmap threshold,
# which rises to the largest block freed, keep up to several such copies).
# Measured on these tests: up to about 90 MiB (a flood of 8 MiB messages; about
# 30 MiB with MALLOC_MMAP_THRESHOLD_ fixed). Every attack below that declares
# or sends bytes does so at least twice over the bound it is held to (the
# outsider and the malformed arrays: 2 GiB and 1 TiB), so a victim that
# allocated or kept what it was told to fails the test.
RSS_SLACK = 160 * MiB
# An honest ping on loopback takes about a millisecond, tens of milliseconds
# on a loaded 2-core machine; a starved handler pool makes it wait for a
# stalled stream (seconds: the attacks last longer than peer_timeout) or fail.
PING_LATENCY_BOUND = 1.0
PING_TIMEOUT = 5.0  # a starved pool shows as a latency over the bound, not only as an error
# A silent leader fails the follower no later than this after the phase's deadline.
DEADLINE_LATENESS_BOUND = 2.0

BASE = dict(peer_timeout=2.0, heartbeat_interval=0.25, connect_timeout=10.0)
SETTINGS = NetworkSettings(**BASE, chunk_bytes=4096, max_message_bytes=1 << 20, max_streams_per_peer=2,
                           max_queued_messages=3)

_FRAME_HEADER = struct.Struct(">4sBIIQ")  # envelope.py's frame header: magic, version, index, count, total
assert _FRAME_HEADER.size == FRAME_HEADER_BYTES


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    root = tmp_path_factory.mktemp("certs")
    # the CA also signs a name outside every job below ("outsider")
    init_certificates(root, ["a", "b", "c", "outsider", "active", "passive", "coordinator"])
    return root


def _tls(certs, name):
    return load_tls(certs / "ca.pem", certs / f"{name}.pem", certs / f"{name}.key")


@pytest.fixture
def pair(certs, loopback_channels):
    with loopback_channels(certs, ["a", "b"], SETTINGS, expected_tags={"b": {"t", "u"}}) as ch:
        yield ch["a"], ch["b"]


def _client(port, tls, target="b"):
    creds = grpc.ssl_channel_credentials(root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", target),
                                                                    ("grpc.max_send_message_length", 64 * MiB)])


def _first_frame(total: int) -> bytes:
    """The first of two frames of a message declaring ``total`` bytes, with 16 of them
    (the attacker never holds the bytes it declares)."""
    return _FRAME_HEADER.pack(b"VFLF", 1, 0, 2, total) + b"\0" * 16


def _stalled_stream(port, tls, declared_total, release: threading.Event, errors: list, hold: float = 10.0):
    """Send one frame declaring `declared_total` bytes, then stall until `release`."""
    def frames():
        yield _first_frame(declared_total)
        release.wait(hold)

    channel = _client(port, tls)
    try:
        channel.stream_unary(SEND_METHOD)(frames(), timeout=hold + 5)
    except grpc.RpcError as exc:
        errors.append(exc)
    finally:
        channel.close()


# -- the measurements ---------------------------------------------------------------

def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


class PeakRSS:
    """Peak growth of this process's resident set over a block: VmHWM reset to the
    current RSS at the start (/proc/self/clear_refs, where allowed) and VmRSS
    sampled every 5 ms (filling a 1 GiB buffer takes far longer than that)."""

    def __enter__(self) -> "PeakRSS":
        gc.collect()
        self.baseline = self.peak = _status_bytes("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self._hwm = True
        except OSError:
            self._hwm = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _status_bytes("VmRSS"))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _status_bytes("VmRSS"), _status_bytes("VmHWM") if self._hwm else 0)

    @property
    def growth(self) -> int:
        return self.peak - self.baseline

    def check(self, bound: int, what: str) -> None:
        assert self.growth <= bound, (f"{what}: the victim's resident memory grew by {self.growth / MiB:.0f} MiB, "
                                      f"over the bound of {bound / MiB:.0f} MiB")


class PingProbe:
    """An honest peer pings the victim every 50 ms while the block runs."""

    def __init__(self, source: GrpcChannel, target: str):
        self.source, self.target = source, target
        self.latencies: List[float] = []
        self.errors: List[str] = []

    def __enter__(self) -> "PingProbe":
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        stub = self.source._ping_stubs[self.target]
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                stub(self.source.name.encode(), timeout=PING_TIMEOUT)
                self.latencies.append(time.monotonic() - start)
            except grpc.RpcError as exc:
                self.errors.append(f"{exc.code().name} after {time.monotonic() - start:.2f} s")
            self._stop.wait(0.05)

    def __exit__(self, *exc) -> None:
        # A refusal can end the attack within a few pings (the native Paillier
        # kernel makes the forwarded-ciphertext job fail in ~0.1 s): keep
        # probing the victim right after it until three pings are in.
        deadline = time.monotonic() + 2.0
        while len(self.latencies) < 3 and not self.errors and time.monotonic() < deadline:
            time.sleep(0.01)
        self._stop.set()
        self._thread.join(PING_TIMEOUT + 1)

    def check(self) -> None:
        assert not self.errors, f"honest pings of {self.target!r} failed during the attack: {self.errors}"
        assert len(self.latencies) >= 3, f"only {len(self.latencies)} honest pings completed during the attack"
        worst = max(self.latencies)
        assert worst < PING_LATENCY_BOUND, (f"an honest ping of {self.target!r} took {worst:.2f} s during the "
                                            f"attack (bound {PING_LATENCY_BOUND} s)")


def _nobody_declared_dead(*channels: GrpcChannel) -> None:
    for ch in channels:
        assert ch.failure is None, f"{ch.name!r} declared a peer failed: {ch.failure}"


# -- 1. an outsider declaring a huge message ---------------------------------------------

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


def test_outsider_declaring_1_gib_costs_the_victim_nothing(certs, loopback_channels):
    # The audit's attack: a certificate of the federation CA for a name outside the
    # job declares 1 GiB on two stalled streams. The victim accepts 1 GiB messages
    # from its members, so only the certificate check stands between the attack and
    # 2 GiB of buffers (the audit saw 68 MB -> 2.1 GB).
    big = NetworkSettings(**BASE, max_message_bytes=1 << 30)
    with loopback_channels(certs, ["b", "c"], SETTINGS, per_party={"b": big}) as ch:
        b, c = ch["b"], ch["c"]
        release, errors = threading.Event(), []
        workers = [threading.Thread(target=_stalled_stream, args=(b.port, _tls(certs, "outsider"), 1 << 30, release,
                                                                  errors)) for _ in range(2)]
        with PeakRSS() as rss, PingProbe(c, "b") as pings:
            started = time.monotonic()
            for w in workers:
                w.start()
            for w in workers:
                w.join(5)
            refused_after = time.monotonic() - started
            time.sleep(0.5)
        release.set()
        for w in workers:
            w.join(5)
        rss.check(RSS_SLACK, "outsider declaring 2 x 1 GiB")
        pings.check()
        assert len(errors) == 2 and all(e.code() == grpc.StatusCode.PERMISSION_DENIED for e in errors), errors
        assert refused_after < 5.0, "refused only when the stalled streams ended"
        assert sum(b._inflight.values()) == 0 and sum(b._streams.values()) == 0
        _nobody_declared_dead(b, c)


# -- 2. a member's stalled streams ----------------------------------------------------

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


def test_stalled_member_holds_its_budget_only_and_honest_traffic_flows(certs, loopback_channels):
    # The audit's attack: stalled streams of a member (8 had all 6 handler threads;
    # honest pings hit DEADLINE_EXCEEDED). Here each of 16 declares the largest
    # message the victim accepts (64 MiB): 1 GiB for 16 streams if each got a buffer,
    # 384 MiB if only the 6 handler threads did. The member may hold its in-flight
    # budget (2 x 64 MiB, reserved and allocated on each message's first frame); the
    # attack lasts longer than peer_timeout.
    settings = NetworkSettings(**BASE, max_message_bytes=64 * MiB, max_streams_per_peer=2)
    bound = 2 * settings.max_message_bytes + RSS_SLACK  # the default in-flight budget
    streams = 16
    with loopback_channels(certs, ["a", "b", "c"], SETTINGS, per_party={"b": settings},
                           expected_tags={"b": {"t"}}) as ch:
        a, b, c = ch["a"], ch["b"], ch["c"]
        release, errors = threading.Event(), []
        workers = [threading.Thread(target=_stalled_stream, args=(b.port, _tls(certs, "a"), settings.max_message_bytes,
                                                                  release, errors)) for _ in range(streams)]
        with PeakRSS() as rss, PingProbe(c, "b") as pings:
            for w in workers:
                w.start()
            time.sleep(0.5)
            held = b._streams["a"]
            # an honest member's message gets through while the stalled streams are held
            start = time.monotonic()
            try:
                c.send("b", "t", np.arange(1000.0))
                delivered = np.array_equal(b.recv("c", "t", timeout=5), np.arange(1000.0))
            except (PeerFailed, MessageRejected, ChannelTimeout) as exc:
                delivered = exc
            honest_message = time.monotonic() - start
            time.sleep(settings.peer_timeout + 0.5)  # outlast peer_timeout: heartbeats must keep everyone alive
            inflight = b._inflight["a"]
        release.set()
        for w in workers:
            w.join(10)
        rss.check(bound, f"{streams} stalled streams declaring {settings.max_message_bytes // MiB} MiB each")
        pings.check()
        assert delivered is True, f"an honest member's message was not delivered: {delivered!r}"
        assert honest_message < PING_LATENCY_BOUND, f"an honest message took {honest_message:.2f} s"
        _nobody_declared_dead(a, b, c)
        assert held <= settings.max_streams_per_peer
        refused = [e for e in errors if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) >= streams - settings.max_streams_per_peer, errors
        assert inflight <= settings.inflight_budget
        assert sum(b._streams.values()) == 0 and sum(b._inflight.values()) == 0


# -- 3. unexpected tags and unbounded queues ---------------------------------------------

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


# The flooding member runs in its own process: its own buffers (the message, gRPC's
# send queue) must not count as the victim's memory. One buffer serves every message
# (only the sequence number changes).
_FLOOD = r"""
import json, struct, sys
import grpc
import numpy as np
from vflsec.federation.envelope import KIND_DATA, Envelope, encode_envelope
port, ca, cert, key, session, tag = sys.argv[1:7]
messages, nbytes, chunk = (int(v) for v in sys.argv[7:10])
read = lambda path: open(path, "rb").read()
creds = grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=read(key), certificate_chain=read(cert))
client = grpc.secure_channel(f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "b")])
send = client.stream_unary("/vflsec.Federation/Send")
message = bytearray(encode_envelope(Envelope(KIND_DATA, session, "a", "b", tag, 0, np.ones(nbytes // 8))))
seq_at = 6 + sum(2 + len(s.encode()) for s in (session, "a", "b", tag))  # the u64 closing the header
count = -(-len(message) // chunk)

def frames():
    view = memoryview(message)
    for i in range(count):
        yield struct.pack(">4sBIIQ", b"VFLF", 1, i, count, len(view)) + bytes(view[i * chunk:(i + 1) * chunk])

errors, seq = [], 0
for _ in range(messages):
    message[seq_at:seq_at + 8] = struct.pack(">Q", seq)
    try:
        send(frames(), timeout=30)
        seq += 1
    except grpc.RpcError as exc:
        errors.append([exc.code().name, exc.details()])
client.close()
print(json.dumps(errors))
"""


def _flood(child_env: Dict[str, str], certs: Path, port: int, session: str, tag: str, messages: int, nbytes: int,
           chunk: int) -> List[list]:
    """Errors of the flooding member's ``messages`` sends ([code, details] each)."""
    env = {**os.environ, **child_env}
    args = [str(port), str(certs / "ca.pem"), str(certs / "a.pem"), str(certs / "a.key"), session, tag,
            str(messages), str(nbytes), str(chunk)]
    proc = subprocess.run([sys.executable, "-c", _FLOOD, *args], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tag", ["junk", "u"], ids=["unexpected-tag", "expected-tag-never-received"])
def test_flood_of_complete_messages_is_refused_within_the_queue_budget(certs, tag, loopback_channels, child_env):
    # The audit's attack: 40 complete 8 MiB messages under a tag nobody receives,
    # all kept (324 -> 530 MB, never freed); 64 here, 512 MiB. Under a tag the job
    # never receives, the first one fails the job and nothing is kept; under a tag
    # the job receives (but not yet), the victim keeps at most its queue budget
    # (4 x max_message_bytes = 64 MiB), then fails the job.
    settings = NetworkSettings(**BASE, max_message_bytes=16 * MiB, chunk_bytes=MiB)
    kept = 0 if tag == "junk" else 4 * settings.max_message_bytes  # the default queue budget
    messages, nbytes = 64, 8 * MiB
    with loopback_channels(certs, ["a", "b", "c"], SETTINGS, per_party={"b": settings},
                           expected_tags={"b": {"t", "u"}}) as ch:
        a, b, c = ch["a"], ch["b"], ch["c"]
        with PeakRSS() as rss, PingProbe(c, "b") as pings:
            errors = _flood(child_env, certs, b.port, b.session, tag, messages, nbytes, settings.chunk_bytes)
        rss.check(kept + RSS_SLACK, f"{messages} messages of {nbytes // MiB} MiB tagged {tag!r}")
        pings.check()
        if tag == "junk":
            assert len(errors) == messages  # every one refused, none kept
        else:
            assert 1 <= len(errors) <= messages - settings.queue_budget // nbytes + 1
        assert all(code == "RESOURCE_EXHAUSTED" for code, _ in errors), errors[:3]
        assert "protocol error" in errors[0][1]
        assert b._queued_bytes["a"] <= kept
        # the job fails, naming the peer; honest parties are not blamed
        with pytest.raises(PeerFailed, match=r"'a'.*protocol error"):
            b.recv("c", "t", timeout=2)
        _nobody_declared_dead(a, c)


# -- 4. a leader that answers pings but never sends ---------------------------------------

def test_silent_leader_fails_the_follower_at_the_deadline_naming_it(certs, loopback_channels):
    # The audit: a leader that answers pings but never sends the job session kept
    # the followers blocked for 100 s+ with no output. The follower runs the
    # runtime's handshake under the handshake deadline, as `vflsec party` does.
    deadline = 2.0
    with loopback_channels(certs, ["a", "b"], SETTINGS) as ch:
        leader, follower = ch["a"], ch["b"]
        follower.set_recv_timeout(deadline, deadlines.PHASE_HANDSHAKE)
        from vflsec.runtime.kinds import get_job_kind

        spec = SimpleNamespace(digest="0" * 64, kind=get_job_kind("glm"), key_digests=dict)
        with PeakRSS() as rss, PingProbe(leader, "b") as pings:
            started = time.monotonic()
            with pytest.raises(StepTimeout) as info:
                agree_on_job(follower, spec, "a", ["b"])
            waited = time.monotonic() - started
        rss.check(RSS_SLACK, "a silent leader")
        pings.check()
        assert deadline <= waited < deadline + DEADLINE_LATENESS_BOUND, f"failed after {waited:.2f} s"
        message = str(info.value)
        assert "'a'" in message and repr(TAG_SESSION) in message and deadlines.PHASE_HANDSHAKE in message
        _nobody_declared_dead(leader, follower)  # alive, and not mistaken for dead: a deadline, not a death


# -- 5. HE-VFL's key holder is no decryption oracle ---------------------------------------

def test_key_holder_refuses_a_forwarded_ciphertext_over_loopback(certs, loopback_channels, forwarding_attack):
    # The audit: a malicious active party forwarded the passive party's [[u_B]],
    # relabelled as its masked gradient, and got every value back. Over the real
    # transport, the key holder (the victim) refuses and fails the job at once,
    # the active party learns nothing, and the key holder stays responsive.
    pytest.importorskip("phe")
    from vflsec.glm import GLMJob, PartyData, he_vfl
    from vflsec.glm.registry import get_protocol
    from vflsec.he import WeakKeyWarning
    from vflsec.runtime.kinds import get_job_kind

    attack = forwarding_attack
    Xa, Xb, y = attack.data()
    job = GLMJob(protocol="paillier", n_samples=attack.n, batch_size=attack.batch, epochs=1, lr=0.5,
                 passives=("passive",), coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False},
                 widths=attack.widths)
    roles = dict(get_protocol("paillier").roles)
    leaked: list = []
    roles["active"] = attack.malicious_active("paillier", "whole", leaked)
    data = {"active": PartyData(Xa, y), "passive": PartyData(Xb), "coordinator": None}
    tags = deadlines.expected_tags(get_job_kind("glm"), job)
    names = ["active", "passive", "coordinator"]
    with loopback_channels(certs, names, SETTINGS, expected_tags={n: tags for n in names}) as ch:
        outcome: Dict[str, BaseException] = {}

        def run(name):
            ch[name].set_recv_timeout(60.0, "training")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", WeakKeyWarning)
                    roles[job.role_of(name)](ch[name], job, data[name])
            except BaseException as exc:  # noqa: BLE001 - inspected below
                outcome[name] = exc
                ch[name].notify_abort(f"{type(exc).__name__}: {exc}")  # as `vflsec party` does

        threads = [threading.Thread(target=run, args=(n,)) for n in names]
        with PeakRSS() as rss, PingProbe(ch["passive"], "coordinator") as pings:
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            elapsed = time.monotonic() - started
        rss.check(RSS_SLACK, "a forwarded ciphertext")
        pings.check()
        assert not any(t.is_alive() for t in threads)
        assert not leaked, "the key holder decrypted the passive party's [[u_B]] for the active party"
        refusal = outcome.get("coordinator")
        assert isinstance(refusal, he_vfl.DecryptionRefused), outcome
        assert "'active'" in str(refusal) and "step 0" in str(refusal)
        # the others stop on the abort notices (the passive party hears the key holder's
        # or the active party's first; either carries the refusal)
        assert isinstance(outcome.get("active"), PeerFailed) and outcome["active"].peer == "coordinator", outcome
        assert isinstance(outcome.get("passive"), PeerFailed) and "DecryptionRefused" in str(outcome["passive"])
        assert elapsed < 30.0, f"the job took {elapsed:.1f} s to fail"


# -- 6. malformed envelopes ------------------------------------------------------------

def _malformed_envelopes(session: str) -> Dict[str, bytes]:
    head = encode_envelope(Envelope(KIND_DATA, session, "a", "b", "t", 0, b""))[:-9]  # up to the payload

    def array(dtype: bytes, shape, nbytes: int, data: bytes = b"") -> bytes:
        return (head + bytes([1, len(dtype)]) + dtype + bytes([len(shape)])
                + b"".join(struct.pack(">Q", d) for d in shape) + struct.pack(">Q", nbytes) + data)

    return {
        "shape (0, 2^63)": array(b"<f8", (0, 2**63), 0),
        "shape (2^31, 2^31)": array(b"<f8", (2**31, 2**31), 2**65 % 2**64),
        "1 TiB array in 100 bytes": array(b"<f8", (2**37,), 2**40, b"\0" * 100),
        "2^64-1 bytes": head + bytes([2]) + struct.pack(">Q", 2**64 - 1) + b"\0" * 100,
        "list of 2^32-1 items": head + bytes([3]) + struct.pack(">I", 2**32 - 1) + b"\0" * 100,
        "dict of 2^32-1 items": head + bytes([4]) + struct.pack(">I", 2**32 - 1) + b"\0" * 100,
        "int of 2^32-1 bytes": head + bytes([4]) + struct.pack(">I", 1) + struct.pack(">H", 1) + b"k" + bytes([5])
        + struct.pack(">I", 2**32 - 1),
        "object dtype": array(b"|O8", (1,), 8, b"\0" * 8),
        "trailing bytes": head + bytes([2]) + struct.pack(">Q", 1) + b"xy",
    }


def test_malformed_envelopes_are_invalid_argument_and_cost_nothing(certs, caplog, loopback_channels):
    with loopback_channels(certs, ["a", "b", "c"], SETTINGS, expected_tags={"b": {"t"}}) as ch:
        a, b, c = ch["a"], ch["b"], ch["c"]
        client = _client(b.port, _tls(certs, "a"))
        send = client.stream_unary(SEND_METHOD)
        outcomes: Dict[str, str] = {}
        details: Dict[str, str] = {}
        caplog.set_level(logging.WARNING)
        try:
            with PeakRSS() as rss, PingProbe(c, "b") as pings:
                started, rounds = time.monotonic(), 0
                while rounds < 5 or time.monotonic() - started < 1.0:  # anything kept would add up
                    rounds += 1
                    for what, message in _malformed_envelopes(b.session).items():
                        try:
                            send(iter(split_frames(message, SETTINGS.chunk_bytes)), timeout=10)
                            outcomes[what] = "accepted"
                        except grpc.RpcError as exc:
                            outcomes[what] = exc.code().name
                            details[what] = exc.details()
        finally:
            client.close()
        rss.check(RSS_SLACK, "malformed envelopes declaring up to 1 TiB")
        pings.check()
        assert set(outcomes.values()) == {"INVALID_ARGUMENT"}, outcomes
        assert all(d.startswith("malformed message") for d in details.values()), details
        # no traceback: every rejection is the transport's one-line warning
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
            [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
        # the victim is unharmed: the honest sequence continues
        a.send("b", "t", b"genuine")
        assert b.recv("a", "t", timeout=5) == b"genuine"
        _nobody_declared_dead(a, b, c)
