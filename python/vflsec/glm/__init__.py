"""Vertical generalized linear models: party programs, protocols, estimator.

Framework: :mod:`.job` (the job / party-program contract),
:mod:`.registry` (protocol name -> role programs), :mod:`.runner`
(``run_job``: one thread per party over an in-memory hub).
"""
from .job import GLMJob, PartyData, PartyResult, PhaseClock, batch_indices
from .registry import Protocol, available_protocols, get_protocol, register_protocol
from .runner import JobResult, PartyError, run_job

__all__ = [
    "GLMJob",
    "JobResult",
    "PartyData",
    "PartyError",
    "PartyResult",
    "PhaseClock",
    "Protocol",
    "available_protocols",
    "batch_indices",
    "get_protocol",
    "register_protocol",
    "run_job",
]

from . import hdp, plain  # noqa: E402,F401  (register the built-in protocols)
from .estimator import VerticalLogisticRegression  # noqa: E402

__all__ += ["VerticalLogisticRegression"]
