"""Where SPU's party-to-party links go: the transport of the secret-shared computation.

SPU's runtime talks over its own link (``libspu.link``), not over a vflsec
:class:`~vflsec.federation.Channel`: its protocols exchange many small rounds that its
link pipelines. What the links connect is chosen by the process, as the HE executor is
(:func:`vflsec.he.use_executor`), never by a party program, which only calls
:func:`current_links`:

* :class:`InMemoryLinks` (the default): every party is a thread of this process (the
  estimator's in-process run); SPU's in-memory link, one session per run.
* :class:`NetworkLinks`: parties in separate processes (``vflsec party``); SPU's network link
  (brpc) between the addresses the parties announce over their Channel, with mutual TLS from
  the federation's CA; :class:`MeteredLinks` puts a relay in front of each party's link that
  counts the bytes on the wire.

A provider has two methods: ``address(party)``, what this party announces to the others, and
``open(session, parties, rank)``, the link of rank ``rank`` among ``parties``
(``[(name, address), ...]`` in rank order) for the run named ``session`` (a random string the
first party draws, so two runs in one process never meet).
"""
from __future__ import annotations

import abc
import socket
import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

from .engine import load_spu

__all__ = ["InMemoryLinks", "LinkProvider", "MeteredLinks", "NetworkLinks", "current_links", "use_links"]


class LinkProvider(abc.ABC):
    """Opens SPU links (module docstring)."""

    @abc.abstractmethod
    def address(self, party: str) -> str:
        """What ``party`` announces to its peers (an address its link listens on)."""

    @abc.abstractmethod
    def open(self, session: str, parties: Sequence[Tuple[str, str]], rank: int) -> Any:
        """The ``libspu.link.Context`` of ``parties[rank]`` for the run ``session``."""

    def release(self, address: str) -> Optional[Dict[str, int]]:
        """Called once this party and every peer are done with the link announced at ``address`` (the
        program calls it after the reveal, which each peer starts only after leaving the engine): what the provider
        measured of it (``bytes_in``: bytes the peers sent this party; ``bytes_out``: the answers
        this party's link sent back on those connections), or None when it does not measure."""
        return None


class InMemoryLinks(LinkProvider):
    """Every party a thread of this process (SPU's in-memory link)."""

    def address(self, party: str) -> str:
        return f"thread:{party}"

    def open(self, session: str, parties: Sequence[Tuple[str, str]], rank: int) -> Any:
        _, libspu = load_spu()
        desc = libspu.link.Desc()
        desc.id = session
        for name, address in parties:
            desc.add_party(name, address)
        return libspu.link.create_mem(desc, rank)


class NetworkLinks(LinkProvider):
    """Parties in separate processes: SPU's network link (brpc) on ``host``, with mutual TLS
    when ``tls`` is given (``{"ca", "cert", "key"}``: PEM file paths, the party's certificate
    from the federation's CA, the same files as its gRPC channel), each side verifying the other's
    certificate against the CA. The port is a free one of ``host`` when the party announces it;
    ``recv_timeout`` bounds the wait for a peer's message inside the engine (seconds)."""

    def __init__(self, host: str, tls: Optional[Mapping[str, Any]] = None, *, recv_timeout: float = 600.0,
                 connect_tries: int = 60) -> None:
        self.host = host
        self.tls = None if tls is None else {key: str(tls[key]) for key in ("ca", "cert", "key")}
        self.recv_timeout = recv_timeout
        self.connect_tries = connect_tries

    def address(self, party: str) -> str:
        with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as probe:
            probe.bind((self.host, 0))
            port = probe.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{port}"

    def open(self, session: str, parties: Sequence[Tuple[str, str]], rank: int) -> Any:
        _, libspu = load_spu()
        desc = libspu.link.Desc()
        desc.id = session
        desc.recv_timeout_ms = int(self.recv_timeout * 1000)
        # brpc's own per-request deadline (20 s by default) would end a run whose one large message takes
        # longer to cross a slow link than that; the wait for a peer is bounded by recv_timeout instead
        desc.http_timeout_ms = int(self.recv_timeout * 1000)
        desc.connect_retry_times = self.connect_tries
        desc.connect_retry_interval_ms = 1000
        for name, address in parties:
            desc.add_party(name, address)
        if self.tls is not None:
            desc.enable_ssl = True
            for options in (desc.server_ssl_opts, desc.client_ssl_opts):
                options.cert.certificate_path = self.tls["cert"]
                options.cert.private_key_path = self.tls["key"]
                options.verify.ca_file_path = self.tls["ca"]
                options.verify.verify_depth = 1
        return libspu.link.create_brpc(desc, rank)


class MeteredLinks(NetworkLinks):
    """:class:`NetworkLinks` with a relay (:class:`vflsec.federation.link_relay.LinkRelay`) in front of
    each party's engine port: the peers connect to the relay, which counts the bytes on the wire (TLS
    included when ``tls`` is given). The announced address is the relay's; the party's own link listens
    behind it. ``profile`` (a :class:`~vflsec.federation.link_profiles.LinkProfile`; default unshaped
    loopback) is the link the relay emulates, a rehearsal setting (``[network] engine_link``): it shapes the
    peers' connections to this party, so the same profile at every party shapes each direction once, as
    ``vflsec link-relay`` in front of every gRPC port does."""

    def __init__(self, host: str, tls: Optional[Mapping[str, Any]] = None, *, recv_timeout: float = 600.0,
                 connect_tries: int = 60, profile: Any = None) -> None:
        super().__init__(host, tls, recv_timeout=recv_timeout, connect_tries=connect_tries)
        self.profile = profile
        self._relays: Dict[str, Tuple[str, Any]] = {}  # announced address -> (the link's own address, relay)
        self._lock = threading.Lock()

    def address(self, party: str) -> str:
        from ..federation.address import parse_address
        from ..federation.link_profiles import PROFILES
        from ..federation.link_relay import LinkRelay

        own = super().address(party)
        relay = LinkRelay((self.host, 0), parse_address(own, "the engine's address"),
                          PROFILES["loopback"] if self.profile is None else self.profile)
        port = relay.start()
        announced = f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"
        with self._lock:
            self._relays[announced] = (own, relay)
        return announced

    def open(self, session: str, parties: Sequence[Tuple[str, str]], rank: int) -> Any:
        with self._lock:
            own = self._relays[parties[rank][1]][0]
        # this party's link listens on its own address; the peers reach it through the relay
        return super().open(session, [(name, own if r == rank else address)
                                      for r, (name, address) in enumerate(parties)], rank)

    def release(self, address: str) -> Optional[Dict[str, int]]:
        with self._lock:
            entry = self._relays.pop(address, None)
        if entry is None:
            return None
        relay = entry[1]
        relay.stop()
        return {"bytes_in": int(relay.stats.bytes_forward), "bytes_out": int(relay.stats.bytes_backward)}


_DEFAULT: LinkProvider = InMemoryLinks()
_current: LinkProvider = _DEFAULT
_lock = threading.Lock()


def current_links() -> LinkProvider:
    """The process's link provider (:class:`InMemoryLinks` unless :func:`use_links` chose another)."""
    return _current


@contextmanager
def use_links(provider: Optional[LinkProvider]) -> Iterator[LinkProvider]:
    """Within the block, MPC party programs open their links with ``provider`` (None: leave the
    current one). The choice is the process's, not the thread's, as :func:`vflsec.he.use_executor`'s."""
    global _current
    if provider is None:
        yield _current
        return
    if not isinstance(provider, LinkProvider):
        raise TypeError(f"provider must be a LinkProvider, got {type(provider).__name__}")
    with _lock:
        previous, _current = _current, provider
    try:
        yield provider
    finally:
        with _lock:
            _current = previous
