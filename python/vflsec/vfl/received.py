"""What a party checks in a message from a peer before using it.

A peer's message is data the receiving party did not produce: the transport
authenticates who sent it and under which tag, not that the sender followed
the protocol. Every party program of vflsec (GLM plain / HDP / HE, split
learning, the held-out evaluation of ``vflsec party``) passes each array it
receives through :func:`check_received_array` before the first use, with
what the protocol fixes for that message:

* the dtype, exactly (the honest sender's: float64 IRs, float32 embeddings;
  an int, bool or float32 array is refused, never silently cast);
* the shape (the batch rows and the widths both sides know; an extent given
  as ``None`` may be any positive size, so empty arrays are refused too);
* every value finite: NaN and infinities are refused always, also where the
  protocol clips in-range values (HDP's passive party clips the noisy
  ``Sec[IR_A]`` to ``[-L, L]``; ``np.clip`` keeps NaN);
* where the protocol bounds what an honest sender can send (e.g. an HDP
  release: the clipped value plus noise of bounded support), ``|value| <=
  bound``: beyond it the message is a protocol violation, refused rather than
  clipped.

A violation raises :class:`PeerMessageRefused`, which names the receiver, the
sender, the tag, the step and what was wrong. It fails the job like any
party error: :func:`vflsec.vfl.run_programs` re-raises it naming the failed
(receiving) party, and under ``vflsec party`` the receiver exits with status
1 and its abort notice carries the refusal, so every peer's error names the
sender that broke the protocol.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

__all__ = ["PeerMessageRefused", "Step", "check_received_array", "describe_payload"]

#: a global step index, or the phase of a message outside training (e.g. "evaluation")
Step = Union[int, str]


class PeerMessageRefused(ValueError):
    """A party refused a message from a peer that the protocol's honest sender
    could not have sent (wrong type, dtype or shape, non-finite values, a value
    beyond the protocol's bound, an undecodable ciphertext): a protocol
    violation that fails the job, naming the sender, the tag and the step."""

    def __init__(self, receiver: str, sender: str, tag: str, step: Step, reason: str):
        self.receiver, self.sender, self.tag, self.step, self.reason = receiver, sender, tag, step, reason
        where = f"step {step}" if isinstance(step, int) else str(step)
        super().__init__(f"party {receiver!r} refused the message tagged {tag!r} from peer {sender!r} at "
                         f"{where}: {reason}")


def describe_payload(value: Any) -> str:
    """A short description of what arrived (type, dtype and shape of an array)."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value)[:5]}"
    return type(value).__name__


def _shape_text(shape: Sequence[Optional[int]]) -> str:
    items = ["n" if extent is None else str(extent) for extent in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def check_received_array(value: Any, *, receiver: str, sender: str, tag: str, step: Step,
                         dtype: Any, shape: Sequence[Optional[int]], bound: Optional[float] = None,
                         what: str = "array") -> np.ndarray:
    """``value`` if it is what the protocol lets ``sender`` send under ``tag``
    at ``step``; else :class:`PeerMessageRefused`.

    ``dtype``: the exact dtype (native byte order); ``shape``: the exact shape,
    ``None`` for an extent that may be any size >= 1; ``bound``: every
    ``|value| <= bound`` (None: finite is enough); ``what``: the message's name
    in the error (e.g. "IR", "embedding").
    """
    expected = np.dtype(dtype)

    def refuse(reason: str) -> PeerMessageRefused:
        return PeerMessageRefused(receiver, sender, tag, step, f"{what}: {reason}")

    wanted = f"a {expected} array of shape {_shape_text(shape)}"
    if not isinstance(value, np.ndarray):
        raise refuse(f"expected {wanted}, got {describe_payload(value)}")
    if value.dtype != expected:
        raise refuse(f"expected {wanted}, got dtype {value.dtype} (no conversion is made)")
    if value.ndim != len(shape) or any(
            (got < 1 if want is None else got != want) for got, want in zip(value.shape, shape)):
        raise refuse(f"expected {wanted}, got shape {value.shape}")
    if value.dtype.kind in "fc":
        finite = np.isfinite(value)
        if not finite.all():
            bad = value[~finite]
            raise refuse(f"{bad.size} non-finite value(s) (first: {float(bad.flat[0])}) among {value.size}; "
                         "non-finite values are refused, never clipped")
    if bound is not None and value.size:
        largest = float(np.max(np.abs(value)))
        if largest > bound:
            raise refuse(f"|value| up to {largest:.6g}, beyond the bound {bound:.6g} that every honest {what} "
                         "respects")
    return value
