"""Secret-sharing MPC, run on SPU (``pip install "vflsec[mpc]"``): the third family of protection.

* :mod:`.engine`: SPU's protocols as a registry of small classes with their threat models
  (:data:`MPC_PROTOCOLS`: "cheetah", "aby3", "semi2k"), the runtime configuration, programs
  compiled from JAX functions, and shares as bytes a Channel carries.
* :mod:`.links`: where the engine's party-to-party links go (in-memory threads by default).

The vertical GLM trained inside MPC is the protocol "mpc" of :mod:`vflsec.glm`
(:mod:`vflsec.glm.mpc`; ``VerticalLogisticRegression("mpc", mpc_protocol=...)``). Nothing here
imports SPU until it is used.
"""
from .engine import MPC_PROTOCOLS, MPCProtocol, available_mpc_protocols, get_mpc_protocol
from .links import InMemoryLinks, LinkProvider, current_links, use_links

__all__ = ["MPC_PROTOCOLS", "InMemoryLinks", "LinkProvider", "MPCProtocol", "available_mpc_protocols",
           "current_links", "get_mpc_protocol", "use_links"]
