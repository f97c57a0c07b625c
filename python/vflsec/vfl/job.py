"""What every VFL job has in common: its parties, roles and batch schedule.

A job is a frozen dataclass of public parameters that every party agrees on
before training (:class:`vflsec.glm.job.GLMJob`,
:class:`vflsec.splitnn.job.SplitJob`). :class:`VFLJob` is their common base:
it declares no dataclass fields (so each job keeps its own field order and
defaults) and expects these attributes:

* ``n_samples``, ``epochs``, ``batch_size``, ``seed`` -- the schedule;
* ``active`` (labels, leader of the run), ``passives`` (one or more) and
  optionally ``coordinator`` (no data) -- the parties;
* optionally ``start_epoch`` (> 0 resumes a run) and ``shard_rows`` (> 0:
  the shard-local schedule of :mod:`.schedule`; a GLM job's field).

A job's ``__post_init__`` calls :meth:`VFLJob._check_common` for the shared
validation, then checks its own fields.
"""
from __future__ import annotations

import numbers
from typing import Any, Iterator, Optional, Tuple

import numpy as np

from .._arrays import check_positive_int
from .schedule import batch_indices

__all__ = ["ROLES", "VFLJob", "check_name"]

ROLES = ("active", "passive", "coordinator")
# Largest ``epochs`` a job accepts: far above any real run, it catches a
# mistyped value (an exponent too many) before a run that would never end.
MAX_EPOCHS = 1_000_000


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a non-empty str, else TypeError naming ``what``."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty str, got {value!r}")
    return value


class VFLJob:
    """Base of the job dataclasses: party names, roles and the schedule."""

    # Fields every job dataclass declares (annotations only: a plain base's
    # annotations do not become dataclass fields).
    n_samples: int
    epochs: int
    batch_size: int
    seed: int
    active: str
    passives: Tuple[str, ...]
    # Jobs without these fields (split learning has no coordinator, always
    # starts at epoch 0 and takes the global permutation) read the class defaults.
    coordinator: Optional[str] = None
    start_epoch: int = 0
    shard_rows: int = 0

    def _check_common(self) -> None:
        """Validate (and normalise, on a frozen dataclass) the schedule and
        party fields."""
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("n_samples", check_positive_int(self.n_samples, "n_samples"))
        set_("epochs", check_positive_int(self.epochs, "epochs"))
        if self.epochs > MAX_EPOCHS:
            raise ValueError(f"epochs must be <= {MAX_EPOCHS}, got {self.epochs}")
        set_("batch_size", check_positive_int(self.batch_size, "batch_size"))
        if self.batch_size > self.n_samples:
            raise ValueError(
                f"batch_size ({self.batch_size}) must not exceed n_samples ({self.n_samples})"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise TypeError(f"seed must be a non-negative int, got {self.seed!r}")
        check_name(self.active, "active")
        passives = self.passives
        if isinstance(passives, str):
            raise TypeError("passives must be a sequence of party names, not a str")
        if not isinstance(passives, (list, tuple)):
            raise TypeError(f"passives must be a sequence of party names, got {type(passives).__name__}")
        passives = tuple(check_name(p, "passive party name") for p in passives)
        if not passives:
            raise ValueError("at least one passive party is required")
        set_("passives", passives)
        if self.coordinator is not None:
            check_name(self.coordinator, "coordinator")
        names = self.parties
        if len(set(names)) != len(names):
            raise ValueError(f"party names must be distinct, got {names}")

    @property
    def parties(self) -> Tuple[str, ...]:
        """All party names: active, passives, then the coordinator if any."""
        extra = (self.coordinator,) if self.coordinator is not None else ()
        return (self.active, *self.passives, *extra)

    @property
    def data_parties(self) -> Tuple[str, ...]:
        """The parties that hold rows: active, then passives."""
        return (self.active, *self.passives)

    def role_of(self, party: str) -> str:
        if party == self.active:
            return "active"
        if party in self.passives:
            return "passive"
        if self.coordinator is not None and party == self.coordinator:
            return "coordinator"
        raise ValueError(f"{party!r} is not a party of this job {self.parties}")

    @property
    def steps_per_epoch(self) -> int:
        """``r = ceil(n / b)``."""
        return -(-self.n_samples // self.batch_size)

    @property
    def total_steps(self) -> int:
        """``T = epochs * ceil(n / b)``."""
        return self.epochs * self.steps_per_epoch

    def batches(self) -> Iterator[Tuple[int, int, np.ndarray]]:
        """``(epoch, step_in_epoch, row_indices)`` for the whole run (from
        ``start_epoch`` on); the step of the whole run is
        ``epoch * steps_per_epoch + step_in_epoch``; with ``shard_rows`` > 0
        the shard-local order (:mod:`.schedule`)."""
        for epoch in range(self.start_epoch, self.epochs):
            for step, idx in enumerate(batch_indices(self.n_samples, self.batch_size, self.seed, epoch,
                                                     self.shard_rows)):
                yield epoch, step, idx
