"""Network link profiles: a bandwidth and a round-trip time, by name or from text.

A profile describes the link between two parties in both directions alike:
``bandwidth_bps`` bits per second each way (``None``: not shaped) and
``rtt_s``, the round-trip time; the one-way latency is half of it. The
named profiles give each link's RTT (the figure ``ping`` shows); the
``--rtt`` of ``vflsec link-relay`` and ``rtt_s`` in benchmark results are
the same quantity.

The ideal time of a transfer of ``S`` bytes that needs ``R`` round trips is
``S * 8 / bandwidth + R * rtt`` (:meth:`LinkProfile.ideal_seconds`); the
relay (:mod:`.link_relay`) is tested against it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, Optional

__all__ = ["LinkProfile", "PROFILES", "parse_bandwidth", "parse_link", "parse_rtt", "format_bandwidth"]

_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_BANDWIDTH = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(bit|kbit|mbit|gbit)\s*$", re.IGNORECASE)
_RTT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class LinkProfile:
    """A link: ``bandwidth_bps`` per direction (``None``: unshaped) and round-trip time ``rtt_s``."""

    name: str
    bandwidth_bps: Optional[float]
    rtt_s: float

    def __post_init__(self) -> None:
        if self.bandwidth_bps is not None and not (math.isfinite(self.bandwidth_bps) and self.bandwidth_bps > 0):
            raise ValueError(f"link {self.name!r}: bandwidth must be positive and finite, got {self.bandwidth_bps!r}")
        if not (math.isfinite(self.rtt_s) and self.rtt_s >= 0):
            raise ValueError(f"link {self.name!r}: RTT must be >= 0 and finite, got {self.rtt_s!r}")

    @property
    def one_way_s(self) -> float:
        return self.rtt_s / 2.0

    @property
    def shaped(self) -> bool:
        return self.bandwidth_bps is not None or self.rtt_s > 0

    def serialization_seconds(self, nbytes: float) -> float:
        """Time to push ``nbytes`` onto the link (0 when the bandwidth is unshaped)."""
        return 0.0 if self.bandwidth_bps is None else nbytes * 8.0 / self.bandwidth_bps

    def ideal_seconds(self, nbytes: float, rounds: float) -> float:
        """``nbytes * 8 / bandwidth + rounds * rtt``: a transfer on an ideal link."""
        return self.serialization_seconds(nbytes) + rounds * self.rtt_s

    def describe(self) -> str:
        bw = "unshaped" if self.bandwidth_bps is None else format_bandwidth(self.bandwidth_bps)
        return f"{self.name} ({bw}, RTT {self.rtt_s * 1e3:g} ms)"


PROFILES: Dict[str, LinkProfile] = {
    p.name: p
    for p in (
        LinkProfile("loopback", None, 0.0),
        LinkProfile("lan", 10e9, 0.1e-3),
        LinkProfile("datacenter", 1e9, 2e-3),
        LinkProfile("wan", 100e6, 20e-3),
        LinkProfile("internet", 20e6, 50e-3),
    )
}


def parse_bandwidth(text: str) -> float:
    """``"100mbit"`` -> 1e8 bits per second (units bit, kbit, mbit, gbit; powers of 10)."""
    m = _BANDWIDTH.match(str(text))
    if not m:
        raise ValueError(f"bandwidth {text!r} not understood: write a number and a unit, e.g. 100mbit, 1gbit, 500kbit")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"bandwidth {text!r} must be positive")
    return value


def parse_rtt(text: str) -> float:
    """``"20ms"`` (or ``"20"``, milliseconds) -> 0.02 seconds."""
    m = _RTT.match(str(text))
    if not m:
        raise ValueError(f"RTT {text!r} not understood: write milliseconds, e.g. 20ms or 0.1ms")
    value = float(m.group(1)) * 1e-3
    if not math.isfinite(value):
        raise ValueError(f"RTT {text!r} must be finite")
    return value


def parse_link(text: str) -> LinkProfile:
    """A named profile (``wan``) or ``BANDWIDTH,RTT`` (``100mbit,20ms``)."""
    text = str(text).strip()
    if text.lower() in PROFILES:
        return PROFILES[text.lower()]
    if "," in text:
        bw, rtt = (part.strip() for part in text.split(",", 1))
        return LinkProfile(text, parse_bandwidth(bw), parse_rtt(rtt))
    raise ValueError(f"unknown link {text!r}: use one of {', '.join(PROFILES)} or BANDWIDTH,RTT such as 100mbit,20ms")


def format_bandwidth(bps: float) -> str:
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}/s"
    return f"{bps:g} bit/s"
