"""The secret-sharing MPC cells of ``vflsec bench glm``: protection "mpc" on SPU.

An MPC method is ``mpc_<engine protocol>`` (:data:`.grid.MPC_METHODS`): the vertical GLM of
:mod:`vflsec.glm.mpc`, plain VFL's recursion computed on secret shares by the engine protocol
of :data:`vflsec.mpc.MPC_PROTOCOLS` (``semi2k``: the active party deals every Beaver triple, an
experiment setting; ``cheetah``: two parties, no dealer). Accuracy cells train with plain VFL's
configuration on the engine's in-memory link (:mod:`.accuracy`); runtime cells train with the
engine's link on loopback TCP through a byte-counting relay (:func:`counted_engine_links`), so
their bytes are the vflsec Channel's (the input shares and the reveal) plus the engine's own.
An MPC+DP method is ``mpc_dp_<engine protocol>`` (:data:`.grid.MPC_DP_METHODS`): protection "mpc_dp"
(:mod:`vflsec.glm.mpc_dp`), the DP spectrum's cells (:mod:`.spectrum`).

SPU is the ``mpc`` extra. It is looked up here (:func:`spu_installed`), never imported before an
MPC cell runs, so a run without it labels its MPC (and MPC+DP) rows :data:`NOT_INSTALLED` and goes on.
"""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from typing import Any, Iterator

from .grid import MPC_DP_METHODS, MPC_METHODS

__all__ = ["NOT_INSTALLED", "counted_engine_links", "engine_protocol", "spu_installed", "threat_model"]

NOT_INSTALLED = 'not run (needs the mpc extra: pip install ".[mpc]")'


def spu_installed() -> bool:
    """Whether SPU (the ``mpc`` extra) can be imported, without importing it."""
    try:
        return importlib.util.find_spec("spu") is not None
    except (ImportError, ValueError):  # a broken or half-removed installation
        return False


def engine_protocol(method: str) -> str:
    """``"mpc_semi2k"`` -> ``"semi2k"``, ``"mpc_dp_cheetah"`` -> ``"cheetah"``: the engine protocol of an MPC
    or MPC+DP method."""
    for prefix, methods in (("mpc_dp_", MPC_DP_METHODS), ("mpc_", MPC_METHODS)):
        if method in methods:
            return method[len(prefix):]
    raise ValueError(f"{method!r} is not an MPC method -- choose from {', '.join(MPC_METHODS + MPC_DP_METHODS)}")


def threat_model(method: str) -> str:
    """The engine protocol's threat model, as :data:`vflsec.mpc.MPC_PROTOCOLS` states it."""
    from ....mpc.engine import MPC_PROTOCOLS

    protocol = MPC_PROTOCOLS[engine_protocol(method)]
    return protocol.threat_model + (" (an experiment setting)" if protocol.trusted_dealer else "")


@contextmanager
def counted_engine_links() -> Iterator[Any]:
    """Within the block, MPC fits count their engine's bytes on the wire (``history_["engine_bytes"]``,
    ``history_["engine_total_bytes"]``): each party's engine link listens on loopback behind an
    unshaped relay that counts what crosses it."""
    from ....mpc.links import MeteredLinks, use_links

    with use_links(MeteredLinks("127.0.0.1")) as provider:
        yield provider
