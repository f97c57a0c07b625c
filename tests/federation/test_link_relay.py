"""The link relay (vflsec link-relay): a transfer of S bytes with R round trips
takes S * 8 / bandwidth + R * RTT within 10% on loopback."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from vflsec.federation.link_profiles import PROFILES, LinkProfile, parse_bandwidth, parse_link, parse_rtt
from vflsec.federation.link_relay import LinkRelay, parse_address


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(1 << 16, n - got))
        if not chunk:
            raise ConnectionError("closed early")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class _Responder:
    """A TCP server: for each request (4-byte length + payload) it answers
    with a 4-byte length + that many bytes (the length it was asked for)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _handle(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            try:
                while True:
                    header = _recv_exactly(conn, 8)
                    size, answer = int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")
                    _recv_exactly(conn, size)
                    conn.sendall(answer.to_bytes(4, "big") + b"a" * answer)
            except (ConnectionError, OSError):
                return

    def close(self) -> None:
        self.server.close()


def _exchange(sock: socket.socket, send: int, answer: int) -> None:
    sock.sendall(send.to_bytes(4, "big") + answer.to_bytes(4, "big") + b"q" * send)
    size = int.from_bytes(_recv_exactly(sock, 4), "big")
    _recv_exactly(sock, size)


def _timed(profile: LinkProfile, rounds: int, send: int, answer: int) -> float:
    """Best of five (the machine may be shared): seconds for `rounds` request/answer exchanges through a relay."""
    responder = _Responder()
    relay = LinkRelay(("127.0.0.1", 0), ("127.0.0.1", responder.port), profile)
    port = relay.start()
    best = float("inf")
    try:
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _exchange(sock, 1, 1)  # connection set up end to end
                t0 = time.perf_counter()
                for _ in range(rounds):
                    _exchange(sock, send, answer)
                best = min(best, time.perf_counter() - t0)
    finally:
        relay.stop()
        responder.close()
    return best


@pytest.mark.parametrize("profile, rounds, send, answer", [
    (LinkProfile("bulk", parse_bandwidth("100mbit"), parse_rtt("20ms")), 1, 2_000_000, 0),
    (LinkProfile("bulk-back", parse_bandwidth("50mbit"), parse_rtt("5ms")), 1, 1000, 1_000_000),
    (LinkProfile("chatty", parse_bandwidth("1gbit"), parse_rtt("10ms")), 20, 100, 100),
    (LinkProfile("mixed", parse_bandwidth("20mbit"), parse_rtt("50ms")), 4, 250_000, 10_000),
    (PROFILES["datacenter"], 20, 20_000, 20_000),
], ids=lambda v: v.name if isinstance(v, LinkProfile) else None)
@pytest.mark.network  # loopback sockets
@pytest.mark.slow  # timed transfers over emulated links
def test_transfer_takes_bytes_over_bandwidth_plus_round_trips(profile, rounds, send, answer):
    # each exchange moves send + 8 bytes out and answer + 4 back, and waits one RTT
    nbytes = rounds * (send + 8)
    back = rounds * (answer + 4)
    ideal = profile.serialization_seconds(nbytes) + profile.serialization_seconds(back) + rounds * profile.rtt_s
    measured = _timed(profile, rounds, send, answer)
    assert abs(measured - ideal) <= 0.10 * ideal, f"{profile.describe()}: {measured:.4f} s vs ideal {ideal:.4f} s"


@pytest.mark.network  # loopback sockets
def test_unshaped_relay_passes_bytes_both_ways_intact():
    responder = _Responder()
    with LinkRelay(("127.0.0.1", 0), ("127.0.0.1", responder.port), PROFILES["loopback"]) as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as sock:
            payload = bytes(range(256)) * 4000
            sock.sendall(len(payload).to_bytes(4, "big") + (7).to_bytes(4, "big") + payload)
            assert _recv_exactly(sock, 4) == (7).to_bytes(4, "big")
            assert _recv_exactly(sock, 7) == b"a" * 7
        deadline = time.time() + 2
        while time.time() < deadline and (relay.stats.bytes_forward < len(payload) + 8
                                          or relay.stats.bytes_backward < 11):
            time.sleep(0.01)
        assert relay.stats.bytes_forward == len(payload) + 8
        assert relay.stats.bytes_backward == 11
        assert relay.stats.connections == 1
    responder.close()


def test_profiles_and_parsing():
    assert [p for p in PROFILES] == ["loopback", "lan", "datacenter", "wan", "internet"]
    assert PROFILES["wan"].bandwidth_bps == 100e6 and PROFILES["wan"].rtt_s == pytest.approx(0.02)
    assert parse_bandwidth("100mbit") == 1e8 and parse_bandwidth("1.5Gbit") == 1.5e9
    assert parse_bandwidth("500kbit") == 5e5
    assert parse_rtt("20ms") == pytest.approx(0.02) and parse_rtt("0.1ms") == pytest.approx(1e-4)
    custom = parse_link("100mbit,20ms")
    assert custom.bandwidth_bps == 1e8 and custom.rtt_s == pytest.approx(0.02)
    assert parse_link("WAN") is PROFILES["wan"]
    assert parse_address("127.0.0.1:50051") == ("127.0.0.1", 50051)
    assert parse_address("[::1]:80") == ("::1", 80)
    for bad, fn in [("100", parse_bandwidth), ("-5mbit", parse_bandwidth), ("fast", parse_bandwidth),
                    ("20s", parse_rtt), ("x", parse_rtt), ("moon", parse_link), ("host", parse_address),
                    ("host:99999", parse_address)]:
        with pytest.raises(ValueError):
            fn(bad)


@pytest.mark.network  # loopback sockets
@pytest.mark.slow  # vflsec subprocesses
def test_cli_relays_until_interrupted_and_rejects_bad_arguments():
    responder = _Responder()
    port = socket.create_server(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    proc = subprocess.Popen([sys.executable, "-m", "vflsec", "link-relay", "--listen", f"127.0.0.1:{free}",
                             "--target", f"127.0.0.1:{responder.port}", "--bandwidth", "100mbit", "--rtt", "20ms"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", free), timeout=1)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError(f"relay did not start: {proc.communicate()}") from None
                time.sleep(0.1)
        with sock:
            t0 = time.perf_counter()
            _exchange(sock, 10, 10)
            assert time.perf_counter() - t0 >= 0.019  # one RTT at least
    finally:
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=10)
        responder.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    bad = subprocess.run([sys.executable, "-m", "vflsec", "link-relay", "--listen", "127.0.0.1:1",
                          "--target", "127.0.0.1:2", "--bandwidth", "100mbits", "--rtt", "20ms"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "100mbit" in bad.stderr
