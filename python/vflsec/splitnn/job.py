"""The contract between a split-learning training job and its party programs.

Like the vertical GLM (:mod:`vflsec.glm.job`), a run is one public
:class:`SplitJob` agreed by every party, and each party runs its role
program::

    program(endpoint: Channel, job: SplitJob, data: SplitPartyData) -> SplitPartyResult

* ``endpoint`` is the party's only link to the others;
* ``data`` holds this party's private objects: its feature rows ``X``, its
  bottom model, its own copy of the defense, and for the active party the
  labels ``y`` and the head;
* the mini-batch order is a pure function of ``(seed, epoch)``
  (:func:`vflsec.glm.job.batch_indices`), so every party computes the same
  rows without talking.

Messages per batch: each passive party sends its (defended) embedding as a
float32 array under :data:`TAG_EMBEDDING`; the active party answers each one
with ``dL/dh`` (float32, after the defense's ``transform_gradient``) under
:data:`TAG_GRADIENT`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .._arrays import check_positive_int, check_real

__all__ = [
    "OPTIMIZERS",
    "TAG_EMBEDDING",
    "TAG_GRADIENT",
    "TASKS",
    "SplitJob",
    "SplitPartyData",
    "SplitPartyResult",
]

TAG_EMBEDDING = "sl_embedding"
TAG_GRADIENT = "sl_gradient"
OPTIMIZERS = ("adam", "sgd")
TASKS = ("classification", "regression")


def _check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty str, got {value!r}")
    return value


@dataclass(frozen=True)
class SplitJob:
    """Public parameters of one split-learning run.

    ``task``: "classification" (cross-entropy over ``n_classes`` logits,
    labels ``0..n_classes-1``) or "regression" (mean squared error on one
    output). ``active_features``: the active party also has a bottom model on
    its own features; its embedding is never sent and is concatenated after
    the passive parties' embeddings (in ``passives`` order). ``device``: torch
    device string every party uses (each party could use its own in a real
    deployment).
    """

    n_samples: int
    task: str = "classification"
    n_classes: Optional[int] = 2
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    optimizer: str = "adam"
    seed: int = 0
    active: str = "active"
    passives: Tuple[str, ...] = ("passive_0",)
    active_features: bool = False
    device: str = "cpu"

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("n_samples", check_positive_int(self.n_samples, "n_samples"))
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.task == "classification":
            set_("n_classes", check_positive_int(self.n_classes, "n_classes", minimum=2))
        elif self.n_classes is not None:
            raise ValueError("n_classes must be None for regression")
        set_("epochs", check_positive_int(self.epochs, "epochs"))
        set_("batch_size", check_positive_int(self.batch_size, "batch_size"))
        if self.batch_size > self.n_samples:
            raise ValueError(f"batch_size ({self.batch_size}) must not exceed n_samples ({self.n_samples})")
        set_("lr", check_real(self.lr, "lr", low=0.0, low_inclusive=False))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise TypeError(f"seed must be a non-negative int, got {self.seed!r}")
        _check_name(self.active, "active")
        if isinstance(self.passives, str):
            raise TypeError("passives must be a sequence of party names, not a str")
        passives = tuple(_check_name(p, "passive party name") for p in self.passives)
        if not passives:
            raise ValueError("at least one passive party is required")
        set_("passives", passives)
        if len(set(self.parties)) != len(self.parties):
            raise ValueError(f"party names must be distinct, got {self.parties}")
        if not isinstance(self.active_features, bool):
            raise TypeError("active_features must be a bool")
        _check_name(self.device, "device")

    @property
    def parties(self) -> Tuple[str, ...]:
        return (self.active, *self.passives)

    def role_of(self, party: str) -> str:
        if party == self.active:
            return "active"
        if party in self.passives:
            return "passive"
        raise ValueError(f"{party!r} is not a party of this job {self.parties}")

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.n_samples // self.batch_size)


@dataclass
class SplitPartyData:
    """One party's private inputs: ``X`` (float32 ``(n, p)``, rows aligned;
    None for an active party without features), its ``bottom`` module (None
    likewise), ``defense`` (this party's own copy, already ``setup()``), and
    for the active party ``y`` and ``head``."""

    X: Any
    bottom: Any
    defense: Any
    y: Any = None
    head: Any = None


@dataclass
class SplitPartyResult:
    """What a party program returns: its trained modules (``bottom``, and
    ``head`` for the active party), ``history`` (per-epoch lists: the active
    party records ``loss``, ``accuracy`` for classification and ``seconds``),
    ``bytes_sent`` (one ``{tag: bytes}`` dict per epoch, this party's sends)
    and ``timings`` (compute / messaging / total seconds)."""

    party: str
    role: str
    bottom: Any = None
    head: Any = None
    defense: Any = None
    history: Dict[str, List[float]] = field(default_factory=dict)
    bytes_sent: List[Dict[str, int]] = field(default_factory=list)
    timings: Dict[str, float] = field(default_factory=dict)
