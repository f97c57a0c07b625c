"""A :class:`~vflsec.federation.channel.Channel` over gRPC with mutual TLS.

Each party runs one gRPC server (its inbox) and one client connection per
peer. There are no generated stubs: the service ``vflsec.Federation`` has
two generic byte methods,

* ``Send`` (client streaming): the frames of one envelope
  (:mod:`.envelope`), answered by an empty acknowledgement once the message
  is queued at the receiver -- so ``send`` returns when the peer holds the
  message, never waiting for the peer's program to ``recv`` it;
* ``Ping`` (unary): liveness, used by the heartbeat.

Every message carries the session id, sender, receiver, tag and a sequence
number per (session, sender -> receiver). The receiving server rejects --
logs a warning and answers an error status, without disturbing the party --
a message that is malformed, larger than ``max_message_bytes`` (checked
before the reassembly buffer is allocated), from a sender other than the
authenticated peer, for another receiver or session, or whose sequence
number is not exactly the next one (a replay or a reordering). Payloads are
decoded by the typed envelope only; nothing is unpickled.

Authentication (default): the server requires a client certificate from the
federation CA and checks its common name equals the message's sender; the
client checks the server certificate against the CA and that it was issued
to the party name it dials. ``insecure=True`` uses plaintext and warns:
sender names are then unauthenticated.

Faults: a heartbeat thread per peer pings it every ``heartbeat_interval``
seconds; a peer that has not answered for ``peer_timeout`` seconds is
declared failed and every pending or later ``recv`` raises
:class:`PeerFailed` naming it. A party whose program fails tells its peers
(:meth:`GrpcChannel.notify_abort`), which then stop with
:class:`PeerFailed` carrying the reason; a party that finishes says so
(:meth:`GrpcChannel.notify_done`) so its later absence is not a failure.
"""
from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import defaultdict, deque
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Tuple, cast

from .address import parse_address
from .channel import Channel, ChannelClosed, ChannelTimeout, MessageRecord
from .envelope import (
    FRAME_HEADER_BYTES,
    KIND_ABORT,
    KIND_DATA,
    KIND_DONE,
    Envelope,
    EnvelopeError,
    FrameAssembler,
    check_payload,
    decode_envelope,
    encode_envelope_head,
    encode_payload,
    split_frames,
)
from .tls import TLSFiles, check_party_name

__all__ = [
    "GrpcChannel",
    "InsecureTransportWarning",
    "MessageRejected",
    "NetworkSettings",
    "PeerFailed",
    "SERVICE",
    "StepTimeout",
]

logger = logging.getLogger("vflsec.network")

SERVICE = "vflsec.Federation"
SEND_METHOD = f"/{SERVICE}/Send"
PING_METHOD = f"/{SERVICE}/Ping"
_ACK = b""


class InsecureTransportWarning(UserWarning):
    """Plaintext transport: messages are neither encrypted nor authenticated."""


class PeerFailed(ChannelClosed):
    """A peer died, stopped answering, or aborted the job. ``peer`` names it."""

    def __init__(self, peer: str, reason: str):
        self.peer = peer
        self.reason = reason
        super().__init__(f"peer party {peer!r} failed: {reason}")


class StepTimeout(ChannelTimeout):
    """A peer that is alive (it answers heartbeats) sent nothing within the
    current phase's deadline; the message names the peer, the tag and the phase."""

    def __init__(self, receiver: str, sender: str, tag: str, timeout: float, phase: str):
        super().__init__(receiver, sender, tag, timeout)
        self.phase = phase
        self.args = (f"peer party {sender!r} sent nothing for {timeout:g} s during {phase}: party {receiver!r} "
                     f"was waiting for its message tagged {tag!r}",)

    def __str__(self) -> str:
        return str(self.args[0])


class MessageRejected(RuntimeError):
    """The receiving party refused a message (it stays up)."""


@dataclass(frozen=True)
class NetworkSettings:
    """Transport settings (seconds and bytes).

    peer_timeout : a peer that does not answer heartbeats (or accept a
        message) for this long is declared failed.
    heartbeat_interval : seconds between pings to each peer.
    connect_timeout : how long :meth:`GrpcChannel.wait_for_peers` waits for
        every peer to come up.
    recv_timeout : default ``recv`` timeout (None: wait, relying on the
        heartbeat to detect dead peers; a peer that answers pings but never
        sends is then waited for forever). :meth:`GrpcChannel.set_recv_timeout`
        changes it per protocol phase.
    handshake_timeout : ``vflsec party``'s deadline for each message of the
        start-up handshake (job agreement, the start plan), once every peer
        is connected.
    step_timeout : ``vflsec party``'s deadline for each protocol message
        after the handshake (PSI, training); None: derived from the job
        (:mod:`vflsec.runtime.deadlines`).
    max_message_bytes : largest envelope accepted (checked before allocation;
        the party runtime may lower it to what its job needs).
    chunk_bytes : data bytes per frame; a frame larger than this (plus its
        header) is refused by the gRPC layer.
    max_streams_per_peer : messages one peer may have in flight to this party
        at once (each holds a server thread; honest parties send one at a
        time per pair, so a stalled peer can only block its own quota).
    max_inflight_bytes_per_peer : bytes of messages being reassembled from one
        peer at once (default 2 x max_message_bytes), reserved on each
        message's first frame before its buffer is allocated.
    max_queued_messages : received but not yet ``recv``-ed messages kept per
        (peer, tag); one more is a protocol error that fails the job.
    max_queued_bytes_per_peer : bytes of such messages kept per peer (default
        4 x max_message_bytes); more is a protocol error.
    """

    peer_timeout: float = 10.0
    heartbeat_interval: float = 1.0
    connect_timeout: float = 60.0
    recv_timeout: Optional[float] = None
    handshake_timeout: float = 60.0
    step_timeout: Optional[float] = None
    max_message_bytes: int = 1 << 28
    chunk_bytes: int = 1 << 20
    max_streams_per_peer: int = 2
    max_inflight_bytes_per_peer: Optional[int] = None
    max_queued_messages: int = 1024
    max_queued_bytes_per_peer: Optional[int] = None

    def __post_init__(self) -> None:
        for name in ("peer_timeout", "heartbeat_interval", "connect_timeout", "handshake_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        for name in ("recv_timeout", "step_timeout"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value > 0):
                raise ValueError(f"{name} must be a number > 0 or None, got {value!r}")
        if self.heartbeat_interval >= self.peer_timeout:
            raise ValueError("heartbeat_interval must be smaller than peer_timeout")
        for name in ("max_message_bytes", "chunk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
                raise ValueError(f"{name} must be an int >= 1024, got {value!r}")
        for name in ("max_streams_per_peer", "max_queued_messages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name in ("max_inflight_bytes_per_peer", "max_queued_bytes_per_peer"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < self.max_message_bytes):
                raise ValueError(f"{name} must be None or an int >= max_message_bytes, got {value!r}")

    @property
    def inflight_budget(self) -> int:
        return self.max_inflight_bytes_per_peer or 2 * self.max_message_bytes

    @property
    def queue_budget(self) -> int:
        return self.max_queued_bytes_per_peer or 4 * self.max_message_bytes

    @property
    def max_frame_bytes(self) -> int:
        return self.chunk_bytes + FRAME_HEADER_BYTES


def _grpc():
    import grpc

    return grpc


class _Rejected(Exception):
    def __init__(self, code_name: str, message: str):
        self.code_name = code_name
        super().__init__(message)


class GrpcChannel(Channel):
    """This party's endpoint: a gRPC server at ``listen`` and clients to
    ``peers`` (name -> "host:port").

    ``tls`` (a :class:`~vflsec.federation.tls.TLSFiles`) is required unless
    ``insecure=True``. ``session`` is the initial session id; see
    :meth:`begin_session`. Call :meth:`start` (or use ``with``), then
    :meth:`wait_for_peers`, before messaging; :meth:`close` at the end.
    """

    def __init__(
        self,
        name: str,
        listen: str,
        peers: Mapping[str, str],
        *,
        tls: Optional[TLSFiles] = None,
        insecure: bool = False,
        settings: Optional[NetworkSettings] = None,
        session: str = "",
        expected_tags: Optional[Iterable[str]] = None,
    ):
        super().__init__()
        self._name = check_party_name(name)
        parse_address(listen, "listen", allow_port_zero=True)  # 0: any free port (see .port)
        if not isinstance(peers, Mapping) or not peers:
            raise ValueError("peers must be a non-empty mapping name -> 'host:port'")
        self._peers = {check_party_name(p): str(a) for p, a in peers.items()}
        for peer, address in self._peers.items():
            parse_address(address, f"the address of peer {peer!r}")
        if self._name in self._peers:
            raise ValueError(f"party {name!r} lists itself among its peers")
        if tls is None and not insecure:
            raise ValueError("mutual TLS needs tls=TLSFiles(...); pass insecure=True for a plaintext transport")
        if tls is not None and insecure:
            raise ValueError("pass either tls or insecure=True, not both")
        if insecure:
            warnings.warn(
                f"party {name!r} uses an INSECURE plaintext transport: messages are readable and "
                "sender names unauthenticated", InsecureTransportWarning, stacklevel=2)
        self._tls = tls
        self._insecure = bool(insecure)
        self.settings = settings or NetworkSettings()
        self._listen = listen
        self._session = str(session)
        self._accepted = {self._session}
        self._recv_timeout = self.settings.recv_timeout
        self._phase = ""

        self._cond = threading.Condition()
        self._queues: Dict[Tuple[str, str], Deque[Tuple[Any, int]]] = defaultdict(deque)
        self._queued_bytes: Dict[str, int] = defaultdict(int)
        self._streams: Dict[str, int] = defaultdict(int)
        self._inflight: Dict[str, int] = defaultdict(int)
        self._expected_tags: Optional[frozenset] = None
        if expected_tags is not None:
            self.expect_tags(expected_tags)
        self._expected: Dict[Tuple[str, str], int] = defaultdict(int)
        self._send_seq: Dict[Tuple[str, str], int] = defaultdict(int)
        self._send_locks = {p: threading.Lock() for p in self._peers}
        self._failure: Optional[PeerFailed] = None
        self._finished: Dict[str, float] = {}
        self._closed = False
        self._last_ok: Dict[str, float] = {}
        self._records: List[MessageRecord] = []
        self._t0 = time.perf_counter()
        self.wire_bytes_sent = 0
        self.wire_bytes_received = 0
        self.rejected: List[str] = []

        self._server = None
        self._port: Optional[int] = None
        self._clients: Dict[str, Any] = {}
        self._send_stubs: Dict[str, Any] = {}
        self._ping_stubs: Dict[str, Any] = {}
        self._stop = threading.Event()
        self._heartbeats: List[threading.Thread] = []

    # -- properties ----------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def peers(self) -> Tuple[str, ...]:
        return tuple(self._peers)

    @property
    def port(self) -> Optional[int]:
        """The bound port (useful with ``listen="127.0.0.1:0"``)."""
        return self._port

    @property
    def session(self) -> str:
        return self._session

    @property
    def records(self) -> List[MessageRecord]:
        """Messages this party sent; ``nbytes`` is the length of the payload's
        encoding in the envelope it went out in (what the in-memory hub counts,
        :func:`~vflsec.federation.envelope.payload_nbytes`)."""
        with self._cond:
            return list(self._records)

    def bytes_by_tag(self) -> Dict[str, int]:
        out: Dict[str, int] = defaultdict(int)
        for r in self.records:
            out[r.tag] += r.nbytes
        return dict(out)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> "GrpcChannel":
        grpc = _grpc()
        frame_limit = self.settings.max_frame_bytes
        options = [("grpc.max_receive_message_length", frame_limit),
                   ("grpc.max_send_message_length", frame_limit)]
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=max(4, 2 * len(self._peers) + 2),
                                                        thread_name_prefix=f"vflsec-{self._name}-rpc"),
                             options=options)
        handlers = {
            "Send": grpc.stream_unary_rpc_method_handler(self._handle_send),
            "Ping": grpc.unary_unary_rpc_method_handler(self._handle_ping),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        tls = cast(TLSFiles, self._tls)  # None only with insecure=True (__init__ checks), then unused
        if self._insecure:
            port = server.add_insecure_port(self._listen)
        else:
            creds = grpc.ssl_server_credentials([(tls.key, tls.cert)],
                                                root_certificates=tls.ca, require_client_auth=True)
            port = server.add_secure_port(self._listen, creds)
        if not port:
            raise OSError(f"party {self._name!r} could not listen on {self._listen}")
        server.start()
        self._server, self._port = server, port
        for peer, address in self._peers.items():
            if self._insecure:
                client = grpc.insecure_channel(address, options=options)
            else:
                creds = grpc.ssl_channel_credentials(root_certificates=tls.ca, private_key=tls.key,
                                                     certificate_chain=tls.cert)
                # The server certificate must be issued to the party we dial.
                client = grpc.secure_channel(address, creds,
                                             options=options + [("grpc.ssl_target_name_override", peer)])
            self._clients[peer] = client
            self._send_stubs[peer] = client.stream_unary(SEND_METHOD)
            self._ping_stubs[peer] = client.unary_unary(PING_METHOD)
        return self

    def __enter__(self) -> "GrpcChannel":
        return self.start() if self._server is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, grace: float = 0.5) -> None:
        """Stop heartbeats, the server and the client connections."""
        self._stop.set()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._heartbeats:
            thread.join(self.settings.heartbeat_interval + 1.0)
        if self._server is not None:
            self._server.stop(grace).wait(grace + 1.0)
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def wait_for_peers(self, timeout: Optional[float] = None) -> None:
        """Block until every peer answers a ping (PeerFailed naming the first
        one that does not within ``timeout``, default ``connect_timeout``), then
        start the heartbeats."""
        grpc = _grpc()
        timeout = self.settings.connect_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        for peer in self._peers:
            last_error = "no answer"
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerFailed(peer, f"not reachable at {self._peers[peer]} within {timeout:g} s "
                                           f"({last_error})")
                try:
                    self._ping_stubs[peer](self._name.encode(), timeout=min(remaining, 2.0), wait_for_ready=True)
                    break
                except grpc.RpcError as exc:
                    last_error = f"{exc.code().name}: {exc.details()}"
                    if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        now = time.monotonic()
        for peer in self._peers:
            self._last_ok[peer] = now
        for peer in self._peers:
            thread = threading.Thread(target=self._heartbeat, args=(peer,), daemon=True,
                                      name=f"vflsec-{self._name}-heartbeat-{peer}")
            thread.start()
            self._heartbeats.append(thread)

    def accept_session(self, session: str) -> None:
        """Also accept messages of ``session`` (before switching to it with
        :meth:`begin_session`, so a peer that switched first is not refused)."""
        if not isinstance(session, str) or not session:
            raise ValueError("session must be a non-empty str")
        with self._cond:
            self._accepted.add(session)

    def begin_session(self, session: str) -> None:
        """Switch to a new session id: messages are sent in it and only its
        messages are accepted (a late message of an earlier session is
        rejected); sequence numbers start again at 0."""
        if not isinstance(session, str) or not session:
            raise ValueError("session must be a non-empty str")
        with self._cond:
            self._session = session
            self._accepted = {session}

    def expect_tags(self, tags: Iterable[str]) -> None:
        """The data tags this party's program can receive: a peer's message
        under any other tag is a protocol error that fails the job (naming
        the peer and the tag) instead of waiting in memory forever."""
        tags = frozenset(tags)
        if not all(isinstance(t, str) and t for t in tags):
            raise ValueError("expected tags must be non-empty strings")
        with self._cond:
            self._expected_tags = tags

    def set_recv_timeout(self, timeout: Optional[float], phase: str = "") -> None:
        """The deadline of every later ``recv`` without its own timeout
        (None: wait), and the protocol ``phase`` a timeout names (then a
        :class:`StepTimeout`)."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"timeout must be a number > 0 or None, got {timeout!r}")
        with self._cond:
            self._recv_timeout = timeout
            self._phase = str(phase)

    # -- Channel API -------------------------------------------------------------
    def _check_peer(self, peer: Any, role: str) -> str:
        super()._check_peer(peer, role)
        if peer not in self._peers:
            raise ValueError(f"party {self._name!r} has no peer {peer!r}; peers: {sorted(self._peers)}")
        return peer

    def _send(self, receiver: str, tag: str, payload: Any) -> None:
        check_payload(payload)
        with self._cond:
            if self._failure is not None:
                raise self._failure
        self._transmit(receiver, KIND_DATA, tag, payload, timeout=self.settings.peer_timeout)

    def _recv(self, sender: str, tag: str, timeout: Optional[float]) -> Any:
        phase = ""
        if timeout is None:
            with self._cond:
                timeout, phase = self._recv_timeout, self._phase
        deadline = None if timeout is None else time.monotonic() + timeout
        key = (sender, tag)
        with self._cond:
            while True:
                queue = self._queues.get(key)
                if queue:
                    payload, size = queue.popleft()
                    self._queued_bytes[sender] -= size
                    return payload
                if self._failure is not None:
                    raise self._failure
                if self._closed:
                    raise ChannelClosed(f"channel of party {self._name!r} is closed")
                if sender in self._finished:
                    raise ChannelClosed(f"peer party {sender!r} finished its program without sending "
                                        f"a message tagged {tag!r}")
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        if phase:
                            raise StepTimeout(self._name, sender, tag, cast(float, timeout), phase)
                        raise ChannelTimeout(self._name, sender, tag, cast(float, timeout))  # deadline set: a timeout
                    self._cond.wait(remaining)

    # -- control -------------------------------------------------------------------
    def notify_done(self) -> None:
        """Tell every peer this party's program finished (best effort)."""
        self._broadcast(KIND_DONE, "", b"")

    def notify_abort(self, reason: str) -> None:
        """Tell every reachable peer this party failed, with ``reason`` (best effort)."""
        self._broadcast(KIND_ABORT, "", {"reason": str(reason)[:2000]})

    def fail(self, peer: str, reason: str) -> None:
        """Declare ``peer`` failed locally: every waiting and later ``recv`` raises."""
        with self._cond:
            if self._failure is None and not self._closed:
                self._failure = PeerFailed(peer, reason)
                logger.error("party %r: %s", self._name, self._failure)
            self._cond.notify_all()

    @property
    def failure(self) -> Optional[PeerFailed]:
        with self._cond:
            return self._failure

    def _broadcast(self, kind: int, tag: str, payload: Any) -> None:
        for peer in self._peers:
            with self._cond:
                skip = peer in self._finished or (self._failure is not None and self._failure.peer == peer)
            if skip:
                continue
            try:
                self._transmit(peer, kind, tag or "_control", payload,
                               timeout=min(2.0, self.settings.peer_timeout))
            except (PeerFailed, MessageRejected) as exc:
                logger.info("party %r could not notify %r: %s", self._name, peer, exc)

    # -- client side -----------------------------------------------------------------
    def _transmit(self, receiver: str, kind: int, tag: str, payload: Any, *, timeout: float) -> None:
        grpc = _grpc()
        if self._server is None:
            raise RuntimeError("GrpcChannel.start() was not called")
        with self._send_locks[receiver]:
            session = self._session
            seq = self._send_seq[(session, receiver)]
            # The payload's encoding is what this message's record counts (as the in-memory hub's
            # payload_nbytes: the same encoder), the head the envelope's own framing.
            body = encode_payload(payload)
            message = encode_envelope_head(Envelope(kind, session, self._name, receiver, tag, seq, None)) + body
            if len(message) > self.settings.max_message_bytes:
                raise ValueError(f"message tagged {tag!r} to {receiver!r} is {len(message)} bytes, over the "
                                 f"maximum of {self.settings.max_message_bytes}")
            frames = list(split_frames(message, self.settings.chunk_bytes))
            try:
                self._send_stubs[receiver](iter(frames), timeout=timeout, wait_for_ready=True)
            except grpc.RpcError as exc:
                code = exc.code()
                if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
                            grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION):
                    raise MessageRejected(f"party {receiver!r} rejected message tagged {tag!r}: "
                                          f"{code.name}: {exc.details()}") from None
                reason = (f"could not deliver a message tagged {tag!r} within {timeout:g} s "
                          f"({code.name}: {exc.details()})")
                if kind == KIND_DATA:
                    self.fail(receiver, reason)
                raise PeerFailed(receiver, reason) from None
            self._send_seq[(session, receiver)] = seq + 1
        self.wire_bytes_sent += sum(len(f) for f in frames)
        if kind == KIND_DATA:
            with self._cond:
                self._records.append(MessageRecord(self._name, receiver, tag, len(body), len(self._records),
                                                   time.perf_counter() - self._t0))

    def _heartbeat(self, peer: str) -> None:
        grpc = _grpc()
        interval = self.settings.heartbeat_interval
        while not self._stop.wait(interval):
            with self._cond:
                if peer in self._finished or self._failure is not None or self._closed:
                    return
            try:
                self._ping_stubs[peer](self._name.encode(), timeout=interval)
                self._last_ok[peer] = time.monotonic()
            except grpc.RpcError:
                pass
            except ValueError:  # channel closed under us
                return
            silent = time.monotonic() - self._last_ok[peer]
            if silent > self.settings.peer_timeout:
                with self._cond:
                    if peer in self._finished:
                        return
                self.fail(peer, f"no answer for {silent:.1f} s (peer_timeout={self.settings.peer_timeout:g} s); "
                                "the process died, hung or lost its network")
                return

    # -- server side -------------------------------------------------------------------
    def _authenticated_peer(self, context) -> Optional[str]:
        if self._insecure:
            return None
        auth = context.auth_context()
        names = auth.get("x509_common_name") or []
        if len(names) != 1:
            raise _Rejected("UNAUTHENTICATED", "no client certificate common name")
        return names[0].decode("utf-8", "replace")

    def _reject(self, context, code_name: str, message: str):
        grpc = _grpc()
        note = f"party {self._name!r} rejected a message from {context.peer()}: {message}"
        logger.warning(note)
        with self._cond:
            self.rejected.append(message)
        context.abort(getattr(grpc.StatusCode, code_name), message)

    def _handle_ping(self, request: bytes, context) -> bytes:
        return b"pong"

    def _admit(self, peer: str) -> None:
        with self._cond:
            if self._streams[peer] >= self.settings.max_streams_per_peer:
                raise _Rejected("RESOURCE_EXHAUSTED",
                                f"{peer!r} already has {self._streams[peer]} messages in flight to this party "
                                f"(max_streams_per_peer={self.settings.max_streams_per_peer})")
            self._streams[peer] += 1

    def _reserve(self, peer: str, total: int, reserved: List[int]) -> None:
        with self._cond:
            if self._inflight[peer] + total > self.settings.inflight_budget:
                raise _Rejected("RESOURCE_EXHAUSTED",
                                f"{peer!r} would have {self._inflight[peer] + total} bytes in flight, over the "
                                f"budget of {self.settings.inflight_budget}")
            self._inflight[peer] += total
            reserved[0] += total

    def _release(self, peer: str, reserved: int) -> None:
        with self._cond:
            self._streams[peer] -= 1
            self._inflight[peer] -= reserved

    def _handle_send(self, request_iterator, context) -> bytes:
        try:
            identity = self._authenticated_peer(context)
            # A certificate of the federation CA for a name outside this job is
            # refused before a byte of payload is read or a buffer allocated.
            if identity is not None and identity not in self._peers:
                raise _Rejected("PERMISSION_DENIED", f"certificate of {identity!r}: not a party of this job")
            peer = identity if identity is not None else "(unauthenticated)"
            self._admit(peer)
            reserved = [0]
            try:
                assembler = FrameAssembler(self.settings.max_message_bytes,
                                           reserve=lambda total: self._reserve(peer, total, reserved))
                received = 0
                done = False
                for frame in request_iterator:
                    if done:
                        raise _Rejected("INVALID_ARGUMENT", "frames after the end of the message")
                    received += len(frame)
                    done = assembler.add(frame)
                if not done:
                    raise _Rejected("INVALID_ARGUMENT", "stream ended before the message was complete")
                env = decode_envelope(assembler.message())
                self._accept(env, identity, received)
            finally:
                self._release(peer, reserved[0])
        except EnvelopeError as exc:
            code = "RESOURCE_EXHAUSTED" if "exceeds the maximum" in str(exc) else "INVALID_ARGUMENT"
            self._reject(context, code, f"malformed message: {exc}")
        except _Rejected as exc:
            self._reject(context, exc.code_name, str(exc))
        return _ACK

    def _accept(self, env: Envelope, identity: Optional[str], wire_bytes: int) -> None:
        if env.sender not in self._peers:
            raise _Rejected("PERMISSION_DENIED", f"unknown sender {env.sender!r}")
        if identity is not None and identity != env.sender:
            raise _Rejected("PERMISSION_DENIED",
                            f"certificate of {identity!r} used to send as {env.sender!r}")
        if env.receiver != self._name:
            raise _Rejected("INVALID_ARGUMENT", f"message addressed to {env.receiver!r}, this is {self._name!r}")
        if env.kind == KIND_DATA and not env.tag:
            raise _Rejected("INVALID_ARGUMENT", "empty tag")
        with self._cond:
            if env.session not in self._accepted:
                raise _Rejected("FAILED_PRECONDITION",
                                f"message of session {env.session!r}, the current session is {self._session!r}")
            key = (env.session, env.sender)
            expected = self._expected[key]
            if env.seq != expected:
                what = "replayed" if env.seq < expected else "out-of-order"
                raise _Rejected("INVALID_ARGUMENT",
                                f"{what} message from {env.sender!r}: sequence number {env.seq}, expected {expected}")
            if env.kind == KIND_DATA:
                queue = self._queues[(env.sender, env.tag)]
                problem = None
                if self._expected_tags is not None and env.tag not in self._expected_tags:
                    problem = f"sent a message tagged {env.tag!r}, which this job never receives"
                elif len(queue) >= self.settings.max_queued_messages:
                    problem = (f"sent more than {self.settings.max_queued_messages} messages tagged {env.tag!r} "
                               "that this party has not received yet")
                elif self._queued_bytes[env.sender] + wire_bytes > self.settings.queue_budget:
                    problem = (f"has {self._queued_bytes[env.sender] + wire_bytes} bytes queued at this party, "
                               f"over the budget of {self.settings.queue_budget}")
                if problem is not None:
                    # A protocol error: refuse the message and fail the job, naming the peer.
                    if self._failure is None:
                        self._failure = PeerFailed(env.sender, f"protocol error: it {problem}")
                        logger.error("party %r: %s", self._name, self._failure)
                    self._cond.notify_all()
                    raise _Rejected("RESOURCE_EXHAUSTED", f"protocol error: {env.sender!r} {problem}")
            self._expected[key] = expected + 1
            self.wire_bytes_received += wire_bytes
            if env.kind == KIND_DATA:
                self._queues[(env.sender, env.tag)].append((env.payload, wire_bytes))
                self._queued_bytes[env.sender] += wire_bytes
            elif env.kind == KIND_DONE:
                self._finished[env.sender] = time.monotonic()
            elif env.kind == KIND_ABORT:
                reason = env.payload.get("reason", "") if isinstance(env.payload, dict) else ""
                if self._failure is None:
                    self._failure = PeerFailed(env.sender, f"it aborted the job: {reason}")
                    logger.error("party %r: %s", self._name, self._failure)
            self._cond.notify_all()
