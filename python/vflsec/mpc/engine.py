"""The MPC engine: SPU's protocols, its runtime configuration, compiled programs and shares.

vflsec does not implement secret sharing itself: it runs SPU (SecretFlow's secure processing
unit, ``pip install "vflsec[mpc]"``), whose protocols are registered here as small classes
with the threat model each one gives (:data:`MPC_PROTOCOLS`):

* ``"cheetah"``: two parties, semi-honest, dishonest majority (Huang et al., USENIX Security
  2022: additive shares over Z_2^64, HE-based matrix products and silent-OT comparisons; no
  dealer). Either party alone learns nothing beyond its outputs.
* ``"aby3"``: three parties, replicated sharing, semi-honest with an honest majority (Mohassel
  and Rindal, CCS 2018): any one party learns nothing; two colluding parties learn everything.
* ``"semi2k"``: two or more parties, additive sharing, semi-honest, **with a trusted dealer**:
  SPU's default ``TrustedFirstParty`` makes the first party (rank 0, the job's active party) deal
  every Beaver triple, so it could read the inputs of every product it dealt for. It protects the
  others' data against every party *but* rank 0 and is labelled an experiment setting (fast, the
  cost floor of secret sharing), not protection against the dealer.

A program is a JAX function compiled by SPU's front end (:func:`compile_program`); each party
compiles it on its own from public shapes (nobody runs code a peer sent). Values cross from
numpy into the engine as shares (:func:`make_shares`, one per rank) and come back as the
reconstruction of every rank's share (:func:`reconstruct`); :func:`share_to_wire` /
:func:`share_from_wire` are a share as a list of ``bytes`` (SPU's serialized meta and chunks), what a
:class:`vflsec.federation.Channel` carries without pickle.

This module imports SPU on first use, never at import, so ``vflsec.mpc`` imports without the
extra; a missing SPU is :func:`vflsec.errors.missing_module`'s one line with the install hint.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import missing_module

__all__ = ["FRACTION_BITS", "MPC_PROTOCOLS", "MPCProtocol", "Program", "available_mpc_protocols", "compile_program",
           "get_mpc_protocol", "load_spu", "make_shares", "reconstruct", "runtime_config", "share_from_wire",
           "share_to_wire"]

#: fixed-point fraction bits of the 64-bit ring (SPU's default for FM64): a value is rounded to 2^-18
FRACTION_BITS = 18


def load_spu() -> Tuple[Any, Any]:
    """``(spu, spu.libspu)``; a missing SPU raises :class:`vflsec.errors.CommandError` naming the ``mpc`` extra."""
    try:
        import spu
        import spu.libspu as libspu
    except ImportError as exc:
        raise missing_module(exc, "spu") from exc
    return spu, libspu


@dataclass(frozen=True)
class MPCProtocol:
    """One SPU protocol: its engine name, how many parties it runs between and what it protects."""

    name: str
    kind: str  # the member of libspu.ProtocolKind
    min_parties: int
    max_parties: Optional[int]
    threat_model: str
    trusted_dealer: bool = False

    def check_parties(self, n_parties: int) -> None:
        """ValueError unless this protocol runs between ``n_parties`` parties, naming one that does."""
        top = self.max_parties
        if n_parties < self.min_parties or (top is not None and n_parties > top):
            fits = [p.name for p in MPC_PROTOCOLS.values() if p.fits(n_parties)]
            count = f"exactly {top}" if top == self.min_parties else f"at least {self.min_parties}"
            raise ValueError(f"mpc_protocol {self.name!r} runs between {count} parties, the job has {n_parties}"
                             f" -- use mpc_protocol {' or '.join(repr(f) for f in fits) or 'semi2k'}")

    def fits(self, n_parties: int) -> bool:
        return n_parties >= self.min_parties and (self.max_parties is None or n_parties <= self.max_parties)


MPC_PROTOCOLS: Dict[str, MPCProtocol] = {p.name: p for p in (
    MPCProtocol("cheetah", "CHEETAH", 2, 2,
                "two parties, semi-honest, dishonest majority: either party alone learns nothing but its outputs"),
    MPCProtocol("aby3", "ABY3", 3, 3,
                "three parties, semi-honest, honest majority: any one party learns nothing but its outputs; "
                "two colluding parties learn everything"),
    MPCProtocol("semi2k", "SEMI2K", 2, None,
                "n parties, semi-honest, trusted dealer: the first party (the active party) deals every Beaver "
                "triple and could read the inputs of every product; safe against every other party only",
                trusted_dealer=True),
)}


def available_mpc_protocols() -> Tuple[str, ...]:
    return tuple(MPC_PROTOCOLS)


def get_mpc_protocol(name: Any) -> MPCProtocol:
    """The registered protocol ``name`` (ValueError listing them otherwise)."""
    if not isinstance(name, str) or name not in MPC_PROTOCOLS:
        raise ValueError(f"mpc_protocol must be one of {sorted(MPC_PROTOCOLS)}, got {name!r}")
    return MPC_PROTOCOLS[name]


def runtime_config(protocol: MPCProtocol, *, fraction_bits: int = FRACTION_BITS) -> Any:
    """SPU's ``RuntimeConfig`` for ``protocol`` on the 64-bit ring; the sigmoid is SPU's exact
    form (``1 / (1 + exp(-x))`` by its fixed-point exp and reciprocal), not a low-degree fit, so the
    model is plain VFL's up to fixed-point rounding."""
    _, libspu = load_spu()
    if isinstance(fraction_bits, bool) or not isinstance(fraction_bits, int) or not 8 <= fraction_bits <= 26:
        raise ValueError(f"fraction_bits must be an int in [8, 26] (the 64-bit ring), got {fraction_bits!r}")
    config = libspu.RuntimeConfig(protocol=getattr(libspu.ProtocolKind, protocol.kind),
                                  field=libspu.FieldType.FM64)
    config.fxp_fraction_bits = fraction_bits
    config.sigmoid_mode = libspu.RuntimeConfig.SIGMOID_REAL
    return config


@dataclass(frozen=True)
class Program:
    """A compiled SPU program: the executable, its input and output names, and a digest of its code
    (the parties compare digests: each compiled the same program from the same public shapes)."""

    executable: Any
    input_names: Tuple[str, ...]
    output_names: Tuple[str, ...]
    digest: str


def compile_program(fn: Callable[..., Any], shapes: Sequence[Tuple[str, Tuple[int, ...], str, bool]],
                    output_names: Sequence[str]) -> Program:
    """Compile the JAX function ``fn`` for SPU. ``shapes``: one ``(name, shape, dtype, secret)`` per
    argument, in order (a public argument, ``secret=False``, is known to every party, such as a
    batch schedule); ``output_names``: the names of its outputs (an output named like an input
    replaces that input for the next run, so state stays secret-shared between runs)."""
    _, libspu = load_spu()
    from spu.utils import frontend

    names = [name for name, _, _, _ in shapes]
    args = [np.zeros(shape, dtype=dtype) for _, shape, dtype, _ in shapes]
    visibility = [libspu.Visibility.VIS_SECRET if secret else libspu.Visibility.VIS_PUBLIC
                  for _, _, _, secret in shapes]
    outputs = list(output_names)
    from jax.experimental import enable_x64

    # Traced in 64-bit, so the program's types are the float64 values' the parties share (JAX's default
    # 32-bit tracing types them f32, which SPU refuses to mix with F64 shares); scoped to the trace.
    with enable_x64():
        executable, _ = frontend.compile(frontend.Kind.JAX, fn, args, {}, names, visibility, lambda flat: outputs)
    digest = hashlib.sha256(executable.code).hexdigest()
    return Program(executable, tuple(executable.input_names), tuple(executable.output_names), digest)


def make_shares(io: Any, value: np.ndarray, *, secret: bool = True) -> List[Any]:
    """One share of ``value`` (float64) per rank of ``io`` (``spu.Io``); a public value's shares are
    its encoding, the same for every rank."""
    _, libspu = load_spu()
    visibility = libspu.Visibility.VIS_SECRET if secret else libspu.Visibility.VIS_PUBLIC
    return list(io.make_shares(np.ascontiguousarray(value), visibility))


def reconstruct(io: Any, shares: Sequence[Any]) -> np.ndarray:
    """The value of one share per rank, as float64."""
    return np.asarray(io.reconstruct(list(shares)), dtype=np.float64)


def share_to_wire(share: Any) -> List[bytes]:
    """A share as ``[meta, chunk, ...]`` (SPU's serialized protobufs)."""
    return [bytes(share.meta), *(bytes(chunk) for chunk in share.share_chunks)]


def share_from_wire(parts: Any) -> Any:
    """The share :func:`share_to_wire` wrote (ValueError for anything that is not a list of bytes)."""
    _, libspu = load_spu()
    if not isinstance(parts, list) or len(parts) < 1 or not all(isinstance(p, bytes) for p in parts):
        raise ValueError("a share on the wire is a non-empty list of bytes (meta, then chunks)")
    share = libspu.Share()
    share.meta = parts[0]
    share.share_chunks = parts[1:]
    return share
