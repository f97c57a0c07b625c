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
  (:func:`vflsec.vfl.batch_indices`), so every party computes the same
  rows without talking.

Party names, roles and the schedule are the shared
:class:`vflsec.vfl.VFLJob`'s; :class:`SplitPartyResult` is a
:class:`vflsec.vfl.PartyResult`.

Messages per batch: each passive party sends its (defended) embedding as a
float32 array under :data:`TAG_EMBEDDING`; the active party answers each one
with ``dL/dh`` (float32, after the defense's ``transform_gradient``) under
:data:`TAG_GRADIENT`. The receiver refuses anything else (another dtype or
shape, NaN/inf), naming the sender (:mod:`vflsec.splitnn.trainer`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .._arrays import check_positive_int, check_real
from ..vfl.job import VFLJob, check_name
from ..vfl.result import PartyResult

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


@dataclass(frozen=True)
class SplitJob(VFLJob):
    """Public parameters of one split-learning run.

    ``task``: "classification" (cross-entropy over ``n_classes`` logits,
    labels ``0..n_classes-1``) or "regression" (mean squared error on one
    output). ``active_features``: the active party also has a bottom model on
    its own features; its embedding is never sent and is concatenated after
    the passive parties' embeddings (in ``passives`` order). ``device``: torch
    device string every party uses (each party could use its own in a real
    deployment). ``start_epoch`` > 0 resumes a run from the checkpoint each
    party saved after epoch ``start_epoch - 1`` (see :class:`SplitPartyData`).
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
    start_epoch: int = 0

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        self._check_common()
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.task == "classification":
            set_("n_classes", check_positive_int(self.n_classes, "n_classes", minimum=2))
        elif self.n_classes is not None:
            raise ValueError("n_classes must be None for regression")
        set_("lr", check_real(self.lr, "lr", low=0.0, low_inclusive=False))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if not isinstance(self.active_features, bool):
            raise TypeError("active_features must be a bool")
        check_name(self.device, "device")
        set_("start_epoch", check_positive_int(self.start_epoch, "start_epoch", minimum=0))
        if self.start_epoch >= self.epochs:
            raise ValueError(f"start_epoch ({self.start_epoch}) must be below epochs ({self.epochs})")


@dataclass
class SplitPartyData:
    """One party's private inputs: ``X`` (float32 ``(n, p)``, rows aligned;
    None for an active party without features), its ``bottom`` module (None
    likewise), ``defense`` (this party's own copy, already ``setup()``), and
    for the active party ``y`` and ``head``.

    ``checkpoint`` (optional) keeps per-epoch training state: an object with
    ``save(epoch, state, history)`` (called at the end of every epoch with
    :func:`~vflsec.splitnn.training_state.training_state`'s arrays) and
    ``load(epoch) -> (state, history)`` (called once when
    ``job.start_epoch`` > 0), e.g.
    :class:`vflsec.federation.checkpoint.EpochCheckpoint`.

    ``progress`` (optional) is called as ``progress(epoch, history)`` at the
    end of every epoch, after the checkpoint (e.g.
    :class:`vflsec._progress.EpochProgress`)."""

    X: Any
    bottom: Any
    defense: Any
    y: Any = None
    head: Any = None
    checkpoint: Any = None
    progress: Any = None


@dataclass
class SplitPartyResult(PartyResult):
    """What a split-learning party program returns: its trained modules (``bottom``, and
    ``head`` for the active party), ``history`` (per-epoch lists: the active
    party records ``loss``, ``accuracy`` for classification and ``seconds``),
    ``bytes_sent`` (one ``{tag: bytes}`` dict per epoch, this party's sends)
    and ``timings`` (compute / messaging / total seconds)."""

    bottom: Any = None
    head: Any = None
    defense: Any = None
    history: Dict[str, List[float]] = field(default_factory=dict)
    bytes_sent: List[Dict[str, int]] = field(default_factory=list)
    timings: Dict[str, float] = field(default_factory=dict)
