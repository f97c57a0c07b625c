"""Message channels between federated parties.

Contract
--------
Parties interact **only** by messages. Each party holds one endpoint (a
:class:`Channel`) and calls

* ``send(receiver, tag, payload)`` -- never blocks on the receiver;
* ``recv(sender, tag, *, timeout=None)`` -- blocks until the next message from
  ``sender`` with ``tag`` arrives (FIFO per ``(sender, receiver, tag)``);
  ``timeout=None`` waits without limit, otherwise :class:`ChannelTimeout` is
  raised naming the peer and the tag.

Payloads are restricted to wire-encodable values, so that the same party
programs can later run over a network transport with a typed envelope
(arrays as dtype + shape + raw bytes), never pickle:

* a numpy array of a numeric dtype (bool, signed/unsigned int, float);
* ``bytes``;
* a list of ``bytes`` (a batch of serialized ciphertexts);
* a dict ``str -> value`` where value is one of the above, an ``int``
  (arbitrary precision, e.g. a Paillier modulus), a ``float`` or a ``str``.

Anything else raises ``TypeError`` at ``send`` (:func:`check_payload`, defined
with the wire format in :mod:`.envelope`). :func:`payload_nbytes` is the size
of the payload as the envelope encodes it, ``len(encode_payload(payload))``
(the bytes gRPC carries, without the envelope's header): that is the size the
hub records for every message, and the size the gRPC channel records too.

:class:`InMemoryHub` connects endpoints living in one process (one thread per
party). It copies arrays on send, so parties never share memory, records
every message (:class:`MessageRecord`) and can be aborted, which wakes every
blocked ``recv`` with :class:`ChannelClosed` (the runner does this when one
party fails, so the others do not wait forever).
"""
from __future__ import annotations

import abc
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Tuple, cast

import numpy as np

# The payload rules and the wire size are the envelope's (the gRPC encoder's): one definition.
from .envelope import check_payload, payload_nbytes

__all__ = [
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "InMemoryEndpoint",
    "InMemoryHub",
    "MessageRecord",
    "ReceiptRecord",
    "payload_nbytes",
    "check_payload",
]

class ChannelTimeout(TimeoutError):
    """``recv`` waited longer than its timeout."""

    def __init__(self, receiver: str, sender: str, tag: str, timeout: float):
        self.receiver = receiver
        self.sender = sender
        self.tag = tag
        self.timeout = timeout
        super().__init__(
            f"party {receiver!r} timed out after {timeout:g} s waiting for message "
            f"tag {tag!r} from peer {sender!r}"
        )


class ChannelClosed(RuntimeError):
    """The hub was aborted (typically because another party failed)."""


@dataclass(frozen=True)
class MessageRecord:
    """One delivered message: who, what tag, how many wire bytes, when.

    ``seq`` is the hub-wide send order; ``time`` is seconds since the hub
    was created (``time.perf_counter`` clock).
    """

    sender: str
    receiver: str
    tag: str
    nbytes: int
    seq: int
    time: float


@dataclass(frozen=True)
class ReceiptRecord:
    """One completed ``recv``: ``receiver`` took the next ``sender``/``tag``
    message; it called at ``called`` and got the message at ``returned``
    (seconds since the hub was created). The k-th receipt of a (sender,
    receiver, tag) is the k-th :class:`MessageRecord` of it (FIFO)."""

    receiver: str
    sender: str
    tag: str
    called: float
    returned: float
    sent_before: int = 0  # messages the hub had delivered when it returned (orders it among seq numbers)


def _copy_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True, order="C")
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [bytes(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _copy_payload(payload: Any) -> Any:
    if isinstance(payload, dict):
        return {key: _copy_value(value) for key, value in payload.items()}
    return _copy_value(payload)


class Channel(abc.ABC):
    """One party's endpoint.

    ``send``/``recv`` check their arguments (peer, tag, timeout) and account
    the time spent inside them in :attr:`messaging_seconds`; implementations
    provide ``_send``/``_recv``, which receive checked arguments and must keep
    the FIFO, timeout and payload rules of the module docstring. An
    implementation with a fixed set of peers extends :meth:`_check_peer`.
    """

    def __init__(self) -> None:
        self._messaging = 0.0

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """This party's name."""

    @abc.abstractmethod
    def _send(self, receiver: str, tag: str, payload: Any) -> None:
        """Deliver ``payload`` (arguments already checked)."""

    @abc.abstractmethod
    def _recv(self, sender: str, tag: str, timeout: Optional[float]) -> Any:
        """Next payload from ``sender`` under ``tag`` (arguments already checked)."""

    def _check_peer(self, peer: Any, role: str) -> str:
        if not isinstance(peer, str) or not peer:
            raise TypeError(f"{role} must be a non-empty str, got {peer!r}")
        if peer == self.name:
            raise ValueError(f"party {self.name!r} cannot exchange messages with itself")
        return peer

    def send(self, receiver: str, tag: str, payload: Any) -> None:
        """Send ``payload`` to ``receiver`` under ``tag``."""
        start = time.perf_counter()
        try:
            self._send(self._check_peer(receiver, "receiver"), _check_tag(tag), payload)
        finally:
            self._messaging += time.perf_counter() - start

    def recv(self, sender: str, tag: str, *, timeout: Optional[float] = None) -> Any:
        """Next payload from ``sender`` under ``tag`` (blocking)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 or None, got {timeout!r}")
        start = time.perf_counter()
        try:
            return self._recv(self._check_peer(sender, "sender"), _check_tag(tag), timeout)
        finally:
            self._messaging += time.perf_counter() - start

    @property
    def messaging_seconds(self) -> float:
        """Wall time this endpoint has spent inside ``send`` and ``recv``,
        including time blocked waiting for a peer."""
        return self._messaging


def _check_tag(tag: Any) -> str:
    if not isinstance(tag, str) or not tag:
        raise TypeError(f"tag must be a non-empty str, got {tag!r}")
    return tag


class InMemoryHub:
    """Connects in-process endpoints; records every message.

    ``default_timeout`` applies to ``recv`` calls that pass ``timeout=None``
    (``None`` here means wait without limit). ``keep_payloads=True`` also
    keeps a copy of every payload (:attr:`transcript`), e.g. to evaluate
    what a party observed during a run.
    """

    def __init__(self, *, default_timeout: Optional[float] = None, keep_payloads: bool = False):
        if default_timeout is not None and not default_timeout > 0:
            raise ValueError(f"default_timeout must be > 0 or None, got {default_timeout!r}")
        self.default_timeout = default_timeout
        self._cond = threading.Condition()
        self._queues: Dict[Tuple[str, str, str], Deque[Any]] = defaultdict(deque)
        self._endpoints: Dict[str, InMemoryEndpoint] = {}
        self._records: List[MessageRecord] = []
        self._seq = 0
        self._t0 = time.perf_counter()
        self._abort_reason: Optional[str] = None
        self._keep_payloads = bool(keep_payloads)
        self._transcript: List[Tuple[MessageRecord, Any]] = []
        self._receipts: List[ReceiptRecord] = []

    def endpoint(self, name: str) -> "InMemoryEndpoint":
        """The endpoint of party ``name`` (created on first use)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"party name must be a non-empty str, got {name!r}")
        with self._cond:
            ep = self._endpoints.get(name)
            if ep is None:
                ep = InMemoryEndpoint(self, name)
                self._endpoints[name] = ep
            return ep

    @property
    def parties(self) -> Tuple[str, ...]:
        with self._cond:
            return tuple(self._endpoints)

    @property
    def records(self) -> List[MessageRecord]:
        """Copy of every message record, in send order."""
        with self._cond:
            return list(self._records)

    @property
    def transcript(self) -> List[Tuple[MessageRecord, Any]]:
        """``(record, payload copy)`` for every message, in send order
        (empty unless the hub was created with ``keep_payloads=True``)."""
        with self._cond:
            return list(self._transcript)

    @property
    def receipts(self) -> List[ReceiptRecord]:
        """Copy of every completed ``recv``, in completion order (with
        :attr:`records`, enough to replay the run's timing over a network link)."""
        with self._cond:
            return list(self._receipts)

    def total_bytes(self) -> int:
        with self._cond:
            return sum(r.nbytes for r in self._records)

    def bytes_by_tag(self) -> Dict[str, int]:
        out: Dict[str, int] = defaultdict(int)
        with self._cond:
            for r in self._records:
                out[r.tag] += r.nbytes
        return dict(out)

    def pending(self) -> Dict[Tuple[str, str, str], int]:
        """Messages sent but not yet received, per (sender, receiver, tag)."""
        with self._cond:
            return {key: len(q) for key, q in self._queues.items() if q}

    def abort(self, reason: str) -> None:
        """Wake every blocked ``recv`` (and fail later ones) with ChannelClosed."""
        with self._cond:
            if self._abort_reason is None:
                self._abort_reason = reason
            self._cond.notify_all()

    # -- used by endpoints -------------------------------------------------
    def _deliver(self, sender: str, receiver: str, tag: str, payload: Any) -> None:
        nbytes = payload_nbytes(payload)
        copied = _copy_payload(payload)
        with self._cond:
            if self._abort_reason is not None:
                raise ChannelClosed(f"channel closed: {self._abort_reason}")
            if receiver not in self._endpoints:
                raise ValueError(
                    f"party {sender!r} sent to unknown party {receiver!r}; "
                    f"known parties: {sorted(self._endpoints)}"
                )
            self._queues[(sender, receiver, tag)].append(copied)
            record = MessageRecord(sender, receiver, tag, nbytes, self._seq, time.perf_counter() - self._t0)
            self._records.append(record)
            if self._keep_payloads:
                self._transcript.append((record, _copy_payload(payload)))
            self._seq += 1
            self._cond.notify_all()

    def _take(self, sender: str, receiver: str, tag: str, timeout: Optional[float]) -> Any:
        if timeout is None:
            timeout = self.default_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        key = (sender, receiver, tag)
        called = time.perf_counter() - self._t0
        with self._cond:
            while True:
                queue = self._queues.get(key)
                if queue:
                    self._receipts.append(
                        ReceiptRecord(receiver, sender, tag, called, time.perf_counter() - self._t0, self._seq))
                    return queue.popleft()
                if self._abort_reason is not None:
                    raise ChannelClosed(f"channel closed: {self._abort_reason}")
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ChannelTimeout(receiver, sender, tag, cast(float, timeout))  # deadline set: a timeout
                    self._cond.wait(remaining)


class InMemoryEndpoint(Channel):
    """A party's endpoint on an :class:`InMemoryHub` (use ``hub.endpoint``)."""

    def __init__(self, hub: InMemoryHub, name: str):
        super().__init__()
        self._hub = hub
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _send(self, receiver: str, tag: str, payload: Any) -> None:
        self._hub._deliver(self._name, receiver, tag, payload)

    def _recv(self, sender: str, tag: str, timeout: Optional[float]) -> Any:
        return self._hub._take(sender, self._name, tag, timeout)
