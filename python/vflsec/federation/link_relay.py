"""A user-space link emulator: a TCP relay that enforces a bandwidth and an RTT.

``vflsec link-relay --listen HOST:PORT --target HOST:PORT --bandwidth 100mbit --rtt 20ms``
accepts TCP connections on ``--listen``, opens one to ``--target`` for each,
and relays bytes both ways until interrupted. Put one in front of a party's
gRPC port (and point the peers' ``[peers]`` entries at the relay) to rehearse
a deployment over a slower link: the relay works below TLS and gRPC, so the
parties run unchanged. Kernel ``netem`` would do this in the kernel; it
needs privileges these machines (and most CI runners) do not give.

Model, per direction (each direction is its own link, as on a full-duplex
wire): bytes are cut into chunks of at most ``chunk_bytes``; a chunk leaves
once the chunks before it have left and its own serialization time
(``8 * size / bandwidth``) has passed -- a token bucket whose depth is one
chunk -- and is delivered one one-way latency (RTT / 2) later. All
connections of one relay share its two links, as flows share a real one.
A transfer of ``S`` bytes over ``R`` round trips therefore takes
``S * 8 / bandwidth + R * RTT`` plus the relay's own scheduling error
(tested within 10% on loopback for links of 2 ms RTT and slower; each
round trip through the relay adds about 50 us of thread hand-offs on an
idle 2-core machine, so the ``lan`` profile's 0.1 ms RTT comes out near
0.15 ms).

Threads, not asyncio: ``time.sleep`` wakes within about 0.1 ms, where an
event loop rounds its timeouts up to 1 ms, too coarse for sub-millisecond
RTTs. A connection costs four threads. Queued bytes per direction are
bounded (the reader stops reading, so TCP flow control pushes back on the
sender, as a full router queue would).
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .address import parse_address as _parse_address
from .link_profiles import LinkProfile, parse_bandwidth, parse_rtt

__all__ = ["LinkRelay", "RelayStats", "add_arguments", "parse_address", "run"]

log = logging.getLogger("vflsec.link_relay")

_READ_BYTES = 1 << 16
_SPIN_S = 2e-4  # the last stretch of a wait is spun: sleep() may overshoot by ~0.1 ms


def parse_address(text: str) -> Tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``; ``[::1]:80`` for IPv6 (the rule of
    :func:`vflsec.federation.address.parse_address`; port 0 allowed)."""
    return _parse_address(text, "address", allow_port_zero=True)


def _wait_until(deadline: float) -> None:
    remaining = deadline - time.perf_counter()
    if remaining > _SPIN_S:
        time.sleep(remaining - _SPIN_S)
    while time.perf_counter() < deadline:
        pass


class _Link:
    """One direction: the time the link is next free, shared by every connection."""

    def __init__(self, profile: LinkProfile) -> None:
        self._profile = profile
        self._free_at = 0.0
        self._lock = threading.Lock()

    def schedule(self, nbytes: int) -> float:
        """The delivery time (perf_counter) of a chunk handed to the link now."""
        with self._lock:
            start = max(time.perf_counter(), self._free_at)
            self._free_at = start + self._profile.serialization_seconds(nbytes)
            return self._free_at + self._profile.one_way_s


@dataclass
class RelayStats:
    """Counters of one relay (bytes relayed per direction, connections)."""

    connections: int = 0
    bytes_forward: int = 0   # listen side -> target
    bytes_backward: int = 0  # target -> listen side
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, forward: bool, n: int) -> None:
        with self._lock:
            if forward:
                self.bytes_forward += n
            else:
                self.bytes_backward += n


class _Pipe:
    """One direction of one connection: a reader thread feeds a delay line, a
    writer thread empties it at the scheduled times."""

    def __init__(self, src: socket.socket, dst: socket.socket, link: _Link, chunk: int, limit: int,
                 stats: RelayStats, forward: bool, on_done) -> None:
        self._src, self._dst, self._link = src, dst, link
        self._chunk, self._limit = chunk, limit
        self._stats, self._forward, self._on_done = stats, forward, on_done
        self._queue: deque = deque()
        self._queued = 0
        self._cond = threading.Condition()

    def start(self) -> None:
        for target in (self._read, self._write):
            threading.Thread(target=target, daemon=True, name="vflsec-link-relay").start()

    def _put(self, item) -> None:
        with self._cond:
            self._queue.append(item)
            if item[1] is not None:
                self._queued += len(item[1])
            self._cond.notify_all()

    def _read(self) -> None:
        try:
            while True:
                with self._cond:
                    while self._queued > self._limit:
                        self._cond.wait()
                data = self._src.recv(_READ_BYTES)
                if not data:
                    break
                view = memoryview(data)
                for i in range(0, len(view), self._chunk):
                    piece = bytes(view[i:i + self._chunk])
                    self._put((self._link.schedule(len(piece)), piece))
        except OSError:
            pass
        self._put((0.0, None))  # end of stream

    def _write(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue:
                        self._cond.wait()
                    due, piece = self._queue[0]
                _wait_until(due)
                # everything already due goes out in one send
                batch: List[bytes] = []
                end = False
                with self._cond:
                    now = time.perf_counter()
                    while self._queue and self._queue[0][0] <= now:
                        _, p = self._queue.popleft()
                        if p is None:
                            end = True
                            break
                        batch.append(p)
                        self._queued -= len(p)
                    self._cond.notify_all()
                if batch:
                    data = b"".join(batch)
                    self._dst.sendall(data)
                    self._stats.add(self._forward, len(data))
                if end:
                    try:
                        self._dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    break
        except OSError:
            pass
        self._on_done()


class LinkRelay:
    """Relay TCP connections from ``listen`` to ``target`` over an emulated link.

    >>> relay = LinkRelay(("127.0.0.1", 0), ("127.0.0.1", 50051), parse_link("wan"))
    >>> port = relay.start()   # background threads; relay.stop() ends them
    """

    def __init__(self, listen: Tuple[str, int], target: Tuple[str, int], profile: LinkProfile, *,
                 chunk_bytes: int = 8192, queue_bytes: Optional[int] = None) -> None:
        self.listen = listen
        self.target = target
        self.profile = profile
        self.chunk_bytes = int(chunk_bytes)
        self.queue_bytes = queue_bytes
        self.stats = RelayStats()
        self.port: Optional[int] = None  # the port listened on, once started
        self._server: Optional[socket.socket] = None
        self._sockets: List[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def _queue_limit(self) -> int:
        if self.queue_bytes is not None:
            return int(self.queue_bytes)
        bdp = 0 if self.profile.bandwidth_bps is None else self.profile.bandwidth_bps / 8 * self.profile.rtt_s
        return int(max(4 << 20, 2 * bdp))

    def start(self) -> int:
        """Listen and relay in background threads; returns the port listened on."""
        if self.chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {self.chunk_bytes}")
        family = socket.AF_INET6 if ":" in self.listen[0] else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(self.listen)
        except OSError as exc:
            server.close()
            raise OSError(f"cannot listen on {self.listen[0]}:{self.listen[1]}: {exc.strerror or exc}") from None
        server.listen(64)
        self._server = server
        self.port = server.getsockname()[1]
        self._forward, self._backward = _Link(self.profile), _Link(self.profile)
        threading.Thread(target=self._accept, daemon=True, name="vflsec-link-relay-accept").start()
        return self.port

    def serve_forever(self) -> None:
        """Start and block until stop() or Ctrl-C."""
        port = self.start()
        log.info("relaying %s:%d -> %s:%d over %s", self.listen[0], port, self.target[0], self.target[1],
                 self.profile.describe())
        try:
            while not self._stopped.wait(0.5):
                pass
        finally:
            self.stop()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            sockets = ([self._server] if self._server else []) + self._sockets
            self._sockets = []
            self._server = None
        for s in sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        server = self._server
        while not self._stopped.is_set() and server is not None:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10.0)
                upstream.settimeout(None)
            except OSError as exc:
                # the target may not listen yet (parties start in any order): the client retries
                log.debug("cannot reach target %s:%d: %s", self.target[0], self.target[1], exc)
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, upstream]
                self.stats.connections += 1
            remaining = [2]
            done_lock = threading.Lock()

            def half_done(client=client, upstream=upstream, remaining=remaining, done_lock=done_lock) -> None:
                with done_lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    for s in (client, upstream):
                        try:
                            s.close()
                        except OSError:
                            pass

            limit = self._queue_limit()
            _Pipe(client, upstream, self._forward, self.chunk_bytes, limit, self.stats, True, half_done).start()
            _Pipe(upstream, client, self._backward, self.chunk_bytes, limit, self.stats, False, half_done).start()

    def __enter__(self) -> "LinkRelay":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def add_arguments(parser) -> None:
    """The ``vflsec link-relay`` options (a contract: names and units as documented)."""
    parser.add_argument("--listen", required=True, help="HOST:PORT to accept connections on")
    parser.add_argument("--target", required=True, help="HOST:PORT to relay them to")
    parser.add_argument("--bandwidth", default=None,
                        help="per-direction bandwidth, e.g. 100mbit (units kbit, mbit, gbit; default: unshaped)")
    parser.add_argument("--rtt", default="0ms", help="round-trip time in ms, e.g. 20ms (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no start-up line")


def run(args) -> int:
    """Relay until interrupted; a bad argument is one line on stderr and exit status 2."""
    import sys

    try:
        listen, target = parse_address(args.listen), parse_address(args.target)
        bandwidth = None if args.bandwidth is None else parse_bandwidth(args.bandwidth)
        profile = LinkProfile(f"{args.bandwidth or 'unshaped'},{args.rtt}", bandwidth, parse_rtt(args.rtt))
        relay = LinkRelay(listen, target, profile)
        port = relay.start()
    except (ValueError, OSError) as exc:
        print(f"vflsec link-relay: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"vflsec link-relay: {listen[0]}:{port} -> {target[0]}:{target[1]} over {profile.describe()}; "
              f"Ctrl-C to stop", file=sys.stderr, flush=True)
    try:
        while not relay._stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        relay.stop()
    if not args.quiet:
        s = relay.stats
        print(f"vflsec link-relay: stopped after {s.connections} connections, {s.bytes_forward} bytes forward, "
              f"{s.bytes_backward} back", file=sys.stderr)
    return 0
