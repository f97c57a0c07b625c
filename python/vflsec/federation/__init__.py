"""Federation plumbing: how parties exchange messages.

Party programs talk only through a :class:`~vflsec.federation.channel.Channel`
endpoint; :class:`~vflsec.federation.channel.InMemoryHub` connects endpoints in
one process and accounts every message's wire size.
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
