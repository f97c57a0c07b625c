"""A party's trees as they grow: the seconds and bytes of each tree, and one log line per tree.

:class:`MeteredChannel` wraps a party's endpoint and counts the wire size of what it
sends and receives (:func:`~vflsec.federation.envelope.payload_nbytes`, the size every
channel records per message). :class:`TreeMeter` reads it when a tree is done, keeps
the per-tree record (:data:`TREE_RECORD`: seconds, leaves, bytes sent and received,
one value per tree) and logs one line on the ``vflsec.trees`` logger at INFO::

    party 'bank': tree 3/100: 0.21 s, 31 leaves, sent 24.1 kB, received 6.3 kB, about 20 s left

(the time left: the mean seconds per tree so far times the trees left). A tree's
seconds run from the previous tree's end (the first tree's from :meth:`TreeMeter.restart`).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional

from .._progress import time_left
from ..federation.channel import Channel
from ..federation.envelope import payload_nbytes

__all__ = ["TREE_RECORD", "MeteredChannel", "TreeMeter", "format_bytes"]

logger = logging.getLogger("vflsec.trees")

#: the per-tree record's keys (each a list with one value per tree, in a party result's ``history``)
TREE_RECORD = ("tree_seconds", "tree_leaves", "tree_bytes_sent", "tree_bytes_received")


def format_bytes(nbytes: float) -> str:
    """``"812 B"``, ``"24.1 kB"`` or ``"3.70 MB"`` (decimal units)."""
    if nbytes < 1e3:
        return f"{nbytes:.0f} B"
    return f"{nbytes / 1e3:.1f} kB" if nbytes < 1e6 else f"{nbytes / 1e6:.2f} MB"


class MeteredChannel(Channel):
    """``inner`` with the wire bytes of every payload sent (``bytes_sent``) and received
    (``bytes_received``) counted; its messaging seconds are ``inner``'s."""

    def __init__(self, inner: Channel):
        super().__init__()
        self.inner = inner
        self.bytes_sent = 0
        self.bytes_received = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def _send(self, receiver: str, tag: str, payload: Any) -> None:
        nbytes = payload_nbytes(payload)
        self.inner.send(receiver, tag, payload)
        self.bytes_sent += nbytes

    def _recv(self, sender: str, tag: str, timeout: Optional[float]) -> Any:
        payload = self.inner.recv(sender, tag, timeout=timeout)
        self.bytes_received += payload_nbytes(payload)
        return payload

    @property
    def messaging_seconds(self) -> float:
        return self.inner.messaging_seconds


class TreeMeter:
    """Each tree's seconds, leaves and bytes (through ``channel``) out of ``trees``; one log line per tree."""

    def __init__(self, channel: MeteredChannel, trees: int):
        self.channel = channel
        self.trees = int(trees)
        self.record: Dict[str, List[float]] = {key: [] for key in TREE_RECORD}
        self.restart()

    def restart(self) -> None:
        """Count the next tree from now (its bytes from what the channel has counted so far)."""
        self._start = self._last = time.perf_counter()
        self._sent, self._received = self.channel.bytes_sent, self.channel.bytes_received

    def tree_done(self, leaves: int) -> None:
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        sent, received = self.channel.bytes_sent - self._sent, self.channel.bytes_received - self._received
        self._sent, self._received = self.channel.bytes_sent, self.channel.bytes_received
        for key, value in zip(TREE_RECORD, (seconds, leaves, sent, received)):
            self.record[key].append(float(value))
        done = len(self.record["tree_seconds"])
        left = f", {time_left(now - self._start, done, self.trees)}" if done < self.trees else ""
        logger.info("party %r: tree %d/%d: %.2f s, %d leaves, sent %s, received %s%s", self.channel.name, done,
                    self.trees, seconds, leaves, format_bytes(sent), format_bytes(received), left)
