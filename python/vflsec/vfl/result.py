"""What a party program returns: the common part of every job kind's result.

A role program of any VFL job (``program(endpoint, job, data)``) returns a
:class:`PartyResult`. Each job kind subclasses it with what its parties
train (:class:`vflsec.glm.job.GLMPartyResult`: a weight block;
:class:`vflsec.splitnn.job.SplitPartyResult`: torch modules) and, by
convention, a ``history`` (metric name -> one value per epoch) and
``timings`` (seconds, from :class:`~vflsec.vfl.clock.PhaseClock`). Those two
are declared by the subclasses rather than here because dataclass fields with
defaults must come after the subclasses' required fields (``coef``), and
keyword-only fields need Python 3.10.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List

__all__ = ["PartyResult"]


@dataclass
class PartyResult:
    """``party``: the party's name; ``role``: its role in the job
    ("active", "passive", "coordinator")."""

    party: str
    role: str

    if TYPE_CHECKING:  # declared by every subclass (see the module docstring)
        # Read-only properties to the type checker, not dataclass fields: annotations here
        # would put them before the subclasses' required fields in its view of __init__.
        @property
        def history(self) -> Dict[str, List[float]]: ...

        @property
        def timings(self) -> Dict[str, float]: ...
