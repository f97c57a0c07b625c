"""Federation plumbing: how parties exchange messages.

Party programs talk only through a :class:`~vflsec.federation.channel.Channel`
endpoint; :class:`~vflsec.federation.channel.InMemoryHub` connects endpoints in
one process and accounts every message's wire size. The rest is the network
transport the ``vflsec party`` runtime (:mod:`vflsec.runtime`) uses:
:mod:`.envelope` (wire format), :mod:`.grpc_channel`, :mod:`.tls`,
:mod:`.psi` (entity alignment; :mod:`.psi_workers`: where its buckets are
computed) and :mod:`.checkpoint` (per-epoch files).

This package is the bottom of the VFL stack: it imports no job framework
(:mod:`vflsec.vfl`, :mod:`vflsec.glm`, :mod:`vflsec.splitnn`) and not the
runtime.
"""
from .channel import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    InMemoryEndpoint,
    InMemoryHub,
    MessageRecord,
    check_payload,
    payload_nbytes,
)

__all__ = [
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "InMemoryEndpoint",
    "InMemoryHub",
    "MessageRecord",
    "check_payload",
    "payload_nbytes",
]
