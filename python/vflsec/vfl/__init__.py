"""What vertical GLMs and split learning have in common.

* :mod:`.schedule` -- ``batch_indices``: the public mini-batch order.
* :mod:`.job` -- :class:`VFLJob`, the base of every job dataclass (parties,
  roles, seed and schedule checks).
* :mod:`.result` -- :class:`PartyResult`, the base of what a party program
  returns.
* :mod:`.clock` -- :class:`PhaseClock`: compute / crypto / messaging time.
* :mod:`.runner` -- :func:`run_programs`: the one in-process runner (a
  thread per party over an in-memory hub).
* :mod:`.received` -- :func:`check_received_array`: what a party checks in
  every array a peer sends it (dtype, shape, finite, the protocol's bound),
  and :class:`PeerMessageRefused`, the error naming the sender.

Layering: this package imports only :mod:`vflsec.federation.channel` (the
``Channel`` contract and the in-memory hub); :mod:`vflsec.glm`,
:mod:`vflsec.splitnn`, :mod:`vflsec.attacks` and :mod:`vflsec.runtime` import
it.
"""
from .clock import PhaseClock
from .job import ROLES, VFLJob, check_name
from .received import PeerMessageRefused, check_received_array
from .result import PartyResult
from .runner import JobResult, PartyError, PartyProgram, run_party_threads, run_programs
from .schedule import batch_indices

__all__ = [
    "JobResult",
    "PartyError",
    "PartyProgram",
    "PartyResult",
    "PeerMessageRefused",
    "PhaseClock",
    "ROLES",
    "VFLJob",
    "batch_indices",
    "check_name",
    "check_received_array",
    "run_party_threads",
    "run_programs",
]
