"""Network addresses in the ``HOST:PORT`` form: a party's ``listen`` address and
its peers' addresses (``vflsec party``), and ``vflsec link-relay``'s ends.

One rule for all of them (:func:`parse_address`): HOST is an IPv4 address, a
bracketed IPv6 address (``[::1]:50051``) or a DNS name (labels of letters,
digits and '-', as RFC 1123 allows); PORT is a decimal number in 1-65535 (0,
"any free port", only where the caller allows it: a peer could not be told
that port). Nothing is resolved or opened: the check is on the text alone.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Tuple

__all__ = ["parse_address"]

_DNS_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
EXAMPLE = "e.g. 127.0.0.1:50051"


def _check_host(host: str, what: str, text: str) -> str:
    if host.startswith("[") or host.endswith("]"):
        inner = host[1:-1] if host.startswith("[") and host.endswith("]") else None
        try:
            return str(ipaddress.IPv6Address(inner or ""))
        except ValueError:
            raise ValueError(f"{what} {text!r}: {host!r} is not an IPv6 address in brackets") from None
    if ":" in host:
        raise ValueError(f"{what} {text!r}: write an IPv6 address in brackets, e.g. [::1]:50051")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValueError(f"{what} {text!r}: host {host!r} is not an IPv4 address") from None
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_DNS_LABEL.match(label) for label in name.split(".")):
        raise ValueError(f"{what} {text!r}: host {host!r} is not a host name (letters, digits, '-' and '.') "
                         "or an IP address")
    return host


def parse_address(text: Any, what: str = "address", *, allow_port_zero: bool = False) -> Tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)`` (an IPv6 host without its brackets).

    TypeError for a value that is not a str; ValueError naming ``what`` for
    any other mistake: no port, a port that is not a number or not in
    1-65535 (0-65535 with ``allow_port_zero``), a host that is not an IP
    address or a DNS name."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a 'HOST:PORT' string ({EXAMPLE}), got {type(text).__name__} {text!r}")
    stripped = text.strip()
    host, sep, port = stripped.rpartition(":")
    if not sep or not host or not port or (host.count(":") and not host.startswith("[")):
        if stripped.count(":") > 1 and not stripped.startswith("["):
            raise ValueError(f"{what} {text!r}: write an IPv6 address in brackets, e.g. [::1]:50051")
        raise ValueError(f"{what} {text!r} is not HOST:PORT ({EXAMPLE})")
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"{what} {text!r}: port {port!r} is not a number")
    value = int(port)
    low = 0 if allow_port_zero else 1
    if not low <= value <= 65535:
        raise ValueError(f"{what} {text!r}: port {value} is out of range {low}-65535")
    host = _check_host(host, what, text)
    return host.strip("[]"), value
