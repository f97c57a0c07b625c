"""Registry of vertical GLM protocols: name -> role programs.

A protocol module registers itself at import::

    register_protocol("plain", {"active": active_program, "passive": passive_program})

A protocol whose runs must not continue from a checkpoint says why with
``resume_refusal``; the party runtime (:mod:`vflsec.runtime`) refuses
``--resume`` with that reason. (A DP protocol need not refuse: "hdp" counts
the repeated releases in each party's privacy accountant instead.)

A protocol declares the message ``tags`` its programs receive: the party
runtime tells the transport to treat a message under any other tag as a
protocol error that fails the job (issue 18, item 3). ``tags=None`` (not
declared) leaves the transport accepting any tag.

A protocol whose programs read their rows only by the job's batches
(:meth:`vflsec.vfl.VFLJob.batches`) says so with ``shard_schedule=True``
("plain", "hdp"): only its jobs may set ``shard_rows`` > 0 (the shard-local
schedule, :mod:`vflsec.vfl.schedule`), which ``vflsec party`` streams from
Parquet shards; any other protocol refuses such a job
(:meth:`Protocol.check_schedule`) rather than train on an order of its own.

Roles are "active", "passive" and optionally "coordinator"; each program
follows the contract of :mod:`vflsec.glm.job`. A protocol with a
"coordinator" role needs ``job.coordinator`` set; one without refuses it.

A protocol whose programs apply the active party's row weights
(``class_weight`` / ``sample_weight``, :mod:`vflsec.glm.weights`) registers
``weight_refusal=None`` ("plain", and the HE flow's "paillier" and "taylor"); every
other protocol keeps a reason why it cannot (the default: its programs do not
apply them; "hdp" and the HE-DP protocols: their sensitivity bounds assume unit
weight per row), and a weighted fit of it is refused with that reason.

A protocol may register the checks its role programs make before they
start, so that ``vflsec party`` can make them before any party connects
(:meth:`Protocol.check_job`): ``check(job)`` on the job's public parameters
(e.g. "hdp": the learning-rate bound and the sensitivities; "paillier": the
key size) and ``check_rows(job, party, X, y)`` on one data party's own rows
(``X`` after the job's row norm, ``y`` the active party's labels as the
programs take them, else None).

:func:`get_protocol` imports ``vflsec.glm.<name>`` on first use of an
unregistered name, so a protocol module in this package (e.g. ``paillier``,
``ckks``) is found without being imported explicitly.
"""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from ..vfl.job import ROLES
from ..vfl.result import PartyResult

__all__ = ["ROLES", "Protocol", "available_protocols", "get_protocol", "register_protocol"]

# Modules of this package that define protocols (imported lazily by name).
_BUILTIN_MODULES = ("plain", "hdp", "paillier", "ckks", "paillier_dp", "ckks_dp", "mpc", "mpc_dp")

#: why a protocol that does not say otherwise cannot take row weights
DEFAULT_WEIGHT_REFUSAL = "its programs do not apply row weights"

PartyProgram = Callable[..., PartyResult]
JobCheck = Callable[[Any], Any]
RowsCheck = Callable[[Any, str, Any, Any], Any]


@dataclass(frozen=True)
class Protocol:
    """A registered protocol: its role programs and the properties the
    runtime needs. ``resume_refusal``: why a run cannot continue from a
    checkpoint (None: it can). ``tags``: the message tags its programs
    receive (None: not declared). ``check`` / ``check_rows``: the checks
    its programs make at start (None: none beyond the job's own).
    ``weight_refusal``: why a weighted fit cannot run (None: its programs
    apply the active party's row weights)."""

    name: str
    roles: Mapping[str, PartyProgram]
    resume_refusal: Optional[str] = None
    tags: Optional[FrozenSet[str]] = None
    check: Optional[JobCheck] = None
    check_rows: Optional[RowsCheck] = None
    shard_schedule: bool = False
    weight_refusal: Optional[str] = DEFAULT_WEIGHT_REFUSAL

    def check_parties(self, job: Any) -> None:
        """ValueError unless ``job`` has a coordinator exactly when this protocol has that role."""
        if self.needs_coordinator and job.coordinator is None:
            raise ValueError(f"protocol {self.name!r} needs a coordinator party (job.coordinator is None)")
        if not self.needs_coordinator and job.coordinator is not None:
            raise ValueError(f"protocol {self.name!r} has no coordinator role, but job.coordinator is set")

    def check_job(self, job: Any) -> None:
        """Every check of ``job``'s public parameters this protocol makes
        before training (ValueError/TypeError): its parties, its schedule, then ``check``."""
        self.check_parties(job)
        self.check_schedule(job)
        if getattr(job, "weighted", False) and self.weight_refusal is not None:
            raise ValueError(f"protocol {self.name!r} cannot take class_weight: {self.weight_refusal} -- remove "
                             "class_weight, or use protocol 'plain' or 'paillier' for a weighted fit")
        if self.check is not None:
            self.check(job)

    def check_schedule(self, job: Any) -> None:
        """ValueError when ``job`` asks for the shard-local schedule (``shard_rows`` > 0) and this
        protocol's programs do not read their rows by the job's batches (module docstring)."""
        if getattr(job, "shard_rows", 0) and not self.shard_schedule:
            raise ValueError(f"protocol {self.name!r} does not take shard_rows (the shard-local schedule of "
                             "'plain' and 'hdp'), got shard_rows = " + str(job.shard_rows)
                             + " -- remove shard_rows from the job, or use protocol 'plain' or 'hdp'")

    @property
    def resumable(self) -> bool:
        return self.resume_refusal is None

    @property
    def needs_coordinator(self) -> bool:
        return "coordinator" in self.roles


_REGISTRY: Dict[str, Protocol] = {}
_LOCK = threading.Lock()


def register_protocol(name: str, roles: Mapping[str, PartyProgram], *, replace: bool = False,
                      resume_refusal: Optional[str] = None, tags: Optional[Iterable[str]] = None,
                      check: Optional[JobCheck] = None, check_rows: Optional[RowsCheck] = None,
                      shard_schedule: bool = False,
                      weight_refusal: Optional[str] = DEFAULT_WEIGHT_REFUSAL) -> Protocol:
    """Register role programs under ``name``; ``replace=True`` overrides an
    existing registration (otherwise that is a ValueError).
    ``resume_refusal``: why runs of this protocol cannot resume (None: they can).
    ``tags``: the message tags the role programs receive (None: not declared).
    ``check`` / ``check_rows``: the checks the role programs make at start;
    ``shard_schedule``: the programs read rows only by the job's batches, so
    its jobs may set ``shard_rows``; ``weight_refusal``: why a weighted fit
    cannot run, None when the programs apply row weights (module docstring)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"protocol name must be a non-empty str, got {name!r}")
    if not isinstance(roles, Mapping):
        raise TypeError(f"roles must be a mapping role -> program, got {type(roles).__name__}")
    missing = {"active", "passive"} - set(roles)
    if missing:
        raise ValueError(f"protocol {name!r} lacks role programs for {sorted(missing)}")
    for role, program in roles.items():
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} in protocol {name!r}; roles are {ROLES}")
        if not callable(program):
            raise TypeError(f"program for role {role!r} of protocol {name!r} is not callable")
    if resume_refusal is not None and (not isinstance(resume_refusal, str) or not resume_refusal):
        raise TypeError(f"resume_refusal must be a non-empty str or None, got {resume_refusal!r}")
    tag_set = None
    if tags is not None:
        if isinstance(tags, str):
            raise TypeError("tags must be an iterable of str, not one str")
        tag_set = frozenset(tags)
        if not all(isinstance(t, str) and t for t in tag_set):
            raise TypeError(f"tags must be non-empty strs, got {sorted(map(repr, tag_set))}")
    for what, fn in (("check", check), ("check_rows", check_rows)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{what} of protocol {name!r} must be callable or None")
    if not isinstance(shard_schedule, bool):
        raise TypeError(f"shard_schedule of protocol {name!r} must be a bool, got {shard_schedule!r}")
    if weight_refusal is not None and (not isinstance(weight_refusal, str) or not weight_refusal):
        raise TypeError(f"weight_refusal must be a non-empty str or None, got {weight_refusal!r}")
    protocol = Protocol(name, dict(roles), resume_refusal, tag_set, check, check_rows, shard_schedule,
                        weight_refusal)
    with _LOCK:
        if name in _REGISTRY and not replace:
            raise ValueError(f"protocol {name!r} is already registered")
        _REGISTRY[name] = protocol
    return protocol


def get_protocol(name: str) -> Protocol:
    """The registered protocol ``name`` (ValueError listing the known ones)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"protocol name must be a non-empty str, got {name!r}")
    with _LOCK:
        found: Optional[Protocol] = _REGISTRY.get(name)
    if found is None and name.isidentifier():
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
        with _LOCK:
            found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown protocol {name!r}; available: {list(available_protocols())}")
    return found


def available_protocols() -> Tuple[str, ...]:
    """Names of registered protocols (after importing this package's
    protocol modules that are present and whose optional dependencies are
    installed: without TenSEAL, "ckks" is not listed; :func:`get_protocol`
    names the extra to install)."""
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing != f"{__package__}.{module}" and missing.split(".")[0] in ("vflsec", ""):
                raise
    with _LOCK:
        return tuple(sorted(_REGISTRY))
