"""Vertical generalized linear models: party programs, protocols, estimator.

Framework: :mod:`.job` (the job / party-program contract, on the shared
:mod:`vflsec.vfl` job base, result and phase clock), :mod:`.registry`
(protocol name -> role programs and properties such as ``resume_refusal``),
:mod:`.runner` (``run_job``: one thread per party over an in-memory hub, the
shared :func:`vflsec.vfl.run_programs`). Separate processes:
``vflsec party`` (:mod:`vflsec.runtime`, job kind "glm").

Protocols: ``"plain"`` (:mod:`.plain`, IRs in the clear) and ``"hdp"``
(:mod:`.hdp`, HDP-VFL), both on the IR-exchange loop of :mod:`.ir_exchange`;
``"paillier"``, ``"ckks"`` and ``"taylor"`` (the same flow in the clear, a
reference) on the HE-VFL flow of :mod:`.he_vfl`; with a DP model (the key
holder noises every decrypted gradient, :mod:`.he_dp`) ``"paillier_dp"``,
``"ckks_dp"`` and ``"taylor_dp"``.
Adding a protocol: write a module ``vflsec/glm/<name>.py`` whose role
programs follow :mod:`.job` and that calls
``register_protocol("<name>", {"active": ..., "passive": ...,
"coordinator": ...})`` at import; :func:`get_protocol` imports it on first
use, and ``VerticalLogisticRegression(protection="<name>")`` runs it (with a
party named "coordinator" when the protocol has that role).

Model: :mod:`.model`, the one definition of the GLM's design (party blocks,
row normalisation, intercept column, label encoding), metric and privacy
report, used by the estimator, the benchmarks' blocks and ``vflsec party``.

Estimator: :class:`VerticalLogisticRegression` (:mod:`.estimator`; its input
forms, per-party blocks or one table with ``party_columns``, in
:mod:`.party_input`; ``save``/``load`` as JSON in :mod:`.persistence`).

Central-DP reference: :class:`CentralDPLogisticRegression` (:mod:`.central_dp`),
DP logistic regression on the joined features (DP-SGD, objective or output
perturbation): the ceiling of the vertical DP protocols at the same guarantee.

Experiments: :mod:`.fast` (``fit_grid``: the plain/hdp recursion for a grid
of jobs at once, equal to the party programs) and :mod:`.tuning`
(cross-validation, the composed epsilon of a search, Papernot-Steinke
private selection).
"""
from .job import GLMJob, GLMPartyResult, PartyData, PartyResult, PhaseClock
from .registry import Protocol, available_protocols, get_protocol, register_protocol
from .runner import JobResult, PartyError, run_job

# isort: split
from . import hdp, plain  # noqa: F401  (registers the built-in protocols)

__all__ = [
    "CentralDPLogisticRegression",
    "GLMJob",
    "GLMPartyResult",
    "JobResult",
    "PartyData",
    "PartyError",
    "PartyResult",
    "PhaseClock",
    "Protocol",
    "VerticalLogisticRegression",
    "available_protocols",
    "get_protocol",
    "register_protocol",
    "run_job",
    "score_by_id",
]


def __getattr__(name: str):
    # The estimator pulls in scikit-learn (seconds to import); a party process
    # that only runs protocol programs should not pay for it.
    if name == "VerticalLogisticRegression":
        from .estimator import VerticalLogisticRegression

        return VerticalLogisticRegression
    if name == "CentralDPLogisticRegression":
        from .central_dp import CentralDPLogisticRegression

        return CentralDPLogisticRegression
    if name == "score_by_id":
        from .scoring import score_by_id

        return score_by_id
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
