"""The contract between a vertical GLM training job and its party programs.

A training run is described by one :class:`GLMJob`, agreed by every party at
the start (it holds only public parameters). Each party then runs its
*role program*::

    program(endpoint: Channel, job: GLMJob, data: PartyData | None) -> PartyResult

* ``endpoint`` is the party's only link to the others (see
  :mod:`vflsec.federation.channel`); a program never touches another party's
  objects.
* ``data`` holds only this party's rows: ``X`` (and ``y`` for the active
  party); the coordinator gets ``None``. Rows are already aligned across
  parties (entity resolution happened before).
* The mini-batch schedule is a pure function of public job fields
  (:meth:`GLMJob.batches`, from :mod:`vflsec.vfl.schedule`), so every party
  computes the same indices without talking.
* The result (:class:`GLMPartyResult`) carries this party's own weight
  block (``coef``), its per-epoch history, and wall time split into
  compute / crypto / messaging (:class:`vflsec.vfl.PhaseClock`).

Role names are ``"active"`` (labels + features), ``"passive"`` (features
only; one or more) and ``"coordinator"`` (no data; key holder for HE
protocols). Protocols register their role programs by name in
:mod:`vflsec.glm.registry`. Party names, roles and the schedule are the
shared :class:`vflsec.vfl.VFLJob`'s.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from .._arrays import as_float_array, check_positive_int, check_real

# LOSSES, PENALTIES and CALIBRATIONS (the Gaussian mechanism's methods) are defined once, in vflsec.dp.
from ..dp.gaussian import GAUSSIAN_METHODS as CALIBRATIONS
from ..dp.losses import LOSSES
from ..dp.sensitivity import PENALTIES
from ..vfl.clock import PhaseClock
from ..vfl.job import VFLJob, check_name
from ..vfl.result import PartyResult as _PartyResultBase
from .design_rows import DesignedRows
from .shards import ShardedLabels

__all__ = [
    "CALIBRATIONS",
    "LOSSES",
    "PENALTIES",
    "GLMJob",
    "GLMPartyResult",
    "PartyData",
    "PartyResult",
    "PhaseClock",
]

# Losses whose labels are y in {-1, +1}.
SIGNED_LABEL_LOSSES = ("logistic", "svm")


@dataclass(frozen=True)
class GLMJob(VFLJob):
    """Public parameters of one vertical GLM training run.

    Parameters
    ----------
    protocol : registered protocol name ("plain", "hdp", "paillier", ...).
    n_samples : number of aligned training rows.
    loss : "logistic" (y in {-1, +1}), "least_squares", "svm" (L2-loss SVM,
        y in {-1, +1}) or "poisson".
    penalty, lam, mu : "l2" (w - lr (g + lam w)), "l1" (proximal
        soft-threshold) or "elasticnet" (soft-threshold then divide by
        1 + lr lam mu).
    lr, epochs, batch_size : gradient step, passes over the data, mini-batch
        size ``b``. Gradients are ``IR^T X[s] / b`` with the nominal ``b``
        also for a smaller last batch (Algorithm 1's formula; it keeps the
        per-sample influence at most ``lr / b``, which the DP sensitivity
        bounds assume).
    k : weight-norm clip, ``w <- w / max(1, ||w|| / k)`` after each update;
        ``None`` or ``math.inf`` disables clipping (not allowed for "hdp").
    seed : seed of the mini-batch order (public, shared by all parties).
    active, passives, coordinator : party names.
    epsilon, delta, calibration : DP budget of the whole run and the
        Gaussian calibration ("analytic" Balle-Wang, or "classic" Dwork-Roth
        as in the paper) -- used by DP protocols. ``delta=None`` (the
        default) is ``min(1e-5, 1 / (10 n_samples))``
        (:func:`vflsec.dp.default_delta`), as for the estimators; a job
        file without ``delta`` gets it from the rows PSI aligned.
    noise : False turns DP noise off. A testing aid only (it makes "hdp"
        compute exactly what "plain" computes); never use it for privacy.
    noise_seed : None draws noise from the OS-entropy CSPRNG (the only
        setting with a privacy guarantee); an int makes noise reproducible.
    y_max : public bound on the labels, ``0 <= y <= y_max`` (Poisson counts);
        the "hdp" sensitivity for loss "poisson" needs it.
    key_bits : key size for HE protocols.
    start_epoch : first epoch to run (0; > 0 resumes a run from the
        checkpoint each data party saved after epoch ``start_epoch - 1``,
        see :class:`PartyData`). The schedule, sensitivities and everything
        else still describe the whole run of ``epochs`` epochs.
    options : protocol-specific public options (e.g. CKKS parameters); values
        are int, float, str, bool, None or a list of numbers (kept as a tuple).
    widths : every data party's block width, party name -> number of feature
        columns (exactly the active and passive parties, each >= 1), or None.
        Public and agreed like every other field: each data party checks its
        own block against it (:meth:`PartyData.checked`), and the HE key
        holder decrypts for each party exactly that many values per step
        (:mod:`.he_vfl`, which refuses a job without it). Filled in by whoever
        builds the job: the estimator, :func:`vflsec.glm.run_job` for an HE
        job from the data it is given, ``vflsec party`` from the widths every
        party announces in the handshake (:mod:`vflsec.runtime.handshake`).
    shard_rows : 0 (the default) or a shard size ``S >= batch_size``: the
        epoch's order is then shard-local (:func:`vflsec.vfl.schedule.epoch_order`:
        shards of ``S`` consecutive aligned rows in a permuted order, each
        permuted within), so a party that keeps its rows as Parquet shards
        reads each shard once per epoch (``vflsec party``,
        :mod:`vflsec.glm.shards`). Public like the seed; only protocols whose
        programs read their rows by the job's batches take it ("plain",
        "hdp": :meth:`vflsec.glm.registry.Protocol.check_schedule`). No DP
        accounting here counts on the order being random: "hdp" needs every
        row once per epoch, which holds for any ``shard_rows``.
    weighted : the active party weights each row's loss by its private row
        weights (``PartyData.weights``, :mod:`vflsec.glm.weights`:
        ``class_weight`` / ``sample_weight``). Public (the weights are not):
        the HE key holder expects the weighted residual's fixed-point level,
        and a protocol that cannot apply weights refuses the job
        (:attr:`vflsec.glm.registry.Protocol.weight_refusal`).
    """

    protocol: str
    n_samples: int
    loss: str = "logistic"
    penalty: str = "l2"
    lam: float = 0.001
    mu: float = 1.0
    lr: float = 0.1
    epochs: int = 10
    batch_size: int = 64
    k: Optional[float] = 1.0
    seed: int = 0
    active: str = "active"
    passives: Tuple[str, ...] = ("passive",)
    coordinator: Optional[str] = None
    epsilon: float = 1.0
    # None is resolved in __post_init__ (default_delta(n_samples)): every built job holds a float.
    delta: float = None  # type: ignore[assignment]
    calibration: str = "analytic"
    noise: bool = True
    noise_seed: Optional[int] = None
    y_max: Optional[float] = None
    key_bits: int = 3072
    options: Mapping[str, Any] = field(default_factory=dict)
    start_epoch: int = 0
    widths: Optional[Mapping[str, int]] = None
    shard_rows: int = 0
    weighted: bool = False

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        check_name(self.protocol, "protocol")
        self._check_common()
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.penalty not in PENALTIES:
            raise ValueError(f"penalty must be one of {PENALTIES}, got {self.penalty!r}")
        set_("lam", check_real(self.lam, "lam", low=0.0))
        set_("mu", check_real(self.mu, "mu", low=0.0))
        set_("lr", check_real(self.lr, "lr", low=0.0, low_inclusive=False))
        if self.k is not None:
            if isinstance(self.k, bool) or not isinstance(self.k, numbers.Real):
                raise TypeError(f"k must be a real number or None, got {type(self.k).__name__}")
            k = float(self.k)
            if math.isnan(k) or k <= 0:
                raise ValueError(f"k must be > 0 (or None / inf for no clipping), got {self.k}")
            set_("k", None if math.isinf(k) else k)
        set_("epsilon", check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False))
        if self.delta is None:  # one default for every DP estimator and job (vflsec.dp.delta_rule)
            from ..dp.delta_rule import default_delta

            set_("delta", default_delta(max(1, int(self.n_samples))))
        set_("delta", check_real(self.delta, "delta", low=0.0, low_inclusive=False,
                                 high=1.0, high_inclusive=False))
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if not isinstance(self.noise, bool):
            raise TypeError(f"noise must be a bool, got {type(self.noise).__name__}")
        if self.noise_seed is not None and (
            isinstance(self.noise_seed, bool) or not isinstance(self.noise_seed, numbers.Integral)
        ):
            raise TypeError(f"noise_seed must be an int or None, got {type(self.noise_seed).__name__}")
        if self.y_max is not None:
            set_("y_max", check_real(self.y_max, "y_max", low=0.0, low_inclusive=False))
        set_("key_bits", check_positive_int(self.key_bits, "key_bits", minimum=8))
        set_("start_epoch", check_positive_int(self.start_epoch, "start_epoch", minimum=0))
        if self.start_epoch >= self.epochs:
            raise ValueError(f"start_epoch ({self.start_epoch}) must be below epochs ({self.epochs})")
        if not isinstance(self.options, Mapping):
            raise TypeError(f"options must be a mapping, got {type(self.options).__name__}")
        options = {}
        for key, value in self.options.items():
            if isinstance(value, (list, tuple)) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
            ):
                value = tuple(value)
            elif not isinstance(value, (bool, int, float, str, type(None))):
                raise TypeError(
                    f"options[{key!r}] must be an int, float, str, bool, None or a list of numbers"
                )
            if not isinstance(key, str):
                raise TypeError(f"options keys must be str, got {key!r}")
            options[key] = value
        set_("options", options)
        if self.widths is not None:
            set_("widths", self._checked_widths(self.widths))
        set_("shard_rows", check_positive_int(self.shard_rows, "shard_rows", minimum=0))
        if not isinstance(self.weighted, bool):
            raise TypeError(f"weighted must be a bool, got {type(self.weighted).__name__}")
        if 0 < self.shard_rows < self.batch_size:
            raise ValueError(f"shard_rows must be 0 (no shards) or at least batch_size ({self.batch_size}), got "
                             f"{self.shard_rows} -- a shard holds at least one batch")

    def _checked_widths(self, widths: Any) -> Dict[str, int]:
        if not isinstance(widths, Mapping):
            raise TypeError(f"widths must be a mapping party -> number of feature columns, got "
                            f"{type(widths).__name__}")
        data_parties = self.data_parties
        if set(widths) != set(data_parties):
            raise ValueError(f"widths must name exactly the data parties {list(data_parties)}, got "
                             f"{sorted(str(name) for name in widths)}")
        return {party: check_positive_int(widths[party], f"widths[{party!r}]") for party in data_parties}


@dataclass
class PartyData:
    """One party's private training data: its feature block ``X`` (rows
    aligned with every other party) and, for the active party, ``y``.

    ``checkpoint`` (optional) keeps per-epoch training state: an object with
    ``save(epoch, coef, history)`` (called at the end of every epoch) and
    ``load(epoch) -> (coef, history)`` (called once when ``job.start_epoch``
    > 0, for the state after epoch ``start_epoch - 1``).

    ``progress`` (optional) is called as ``progress(epoch, history)`` at the
    end of every epoch, after the checkpoint (e.g.
    :class:`vflsec._progress.EpochProgress`).

    ``weights`` (the active party of a job with ``weighted``): its
    :class:`vflsec.glm.weights.RowWeights`, read per batch (:meth:`batch_weights`).
    """

    X: Any
    y: Any = None
    checkpoint: Any = None
    progress: Any = None
    weights: Any = None

    def batch_weights(self, job: GLMJob, party: str, idx: np.ndarray, targets: np.ndarray) -> Optional[np.ndarray]:
        """The row weights of batch ``idx`` (targets ``targets``), None for an unweighted job;
        ValueError when the party's weights and the job's ``weighted`` disagree."""
        if (self.weights is not None) != job.weighted:
            raise ValueError(f"party {party!r} holds {'row weights' if self.weights is not None else 'no weights'} "
                             f"but the job has weighted={job.weighted}")
        return None if self.weights is None else self.weights.of(idx, targets)

    def initial_coef(self, job: GLMJob, n_features: int, history: Dict[str, List[float]]) -> np.ndarray:
        """Zeros, or for a resumed job the saved weights (``history`` is
        then filled in place with the saved per-epoch values)."""
        if job.start_epoch == 0:
            return np.zeros(n_features)
        if self.checkpoint is None:
            raise ValueError(f"job starts at epoch {job.start_epoch} but the party has no checkpoint to resume from")
        coef, saved = self.checkpoint.load(job.start_epoch - 1)
        coef = np.array(coef, dtype=np.float64)
        if coef.shape != (n_features,):
            raise ValueError(f"checkpointed weights have shape {coef.shape}, expected ({n_features},)")
        for key, values in saved.items():
            history[key] = [float(v) for v in values]
        return coef

    def end_epoch(self, epoch: int, coef: np.ndarray, history: Dict[str, List[float]]) -> None:
        """Hand the state after ``epoch`` to the checkpoint, if any."""
        if self.checkpoint is not None:
            self.checkpoint.save(epoch, coef, history)
        if self.progress is not None:
            self.progress(epoch, history)

    def checked(self, job: GLMJob, party: str, *, needs_labels: bool) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """``(X, y)`` as validated float64 arrays; raises ValueError/TypeError
        naming ``party`` on NaN/inf, wrong shapes, a row count different
        from ``job.n_samples`` or a column count different from the job's
        agreed ``widths``. An ``X`` that is a
        :class:`~vflsec.glm.design_rows.DesignedRows` is built whole here
        (once per call)."""
        X, _ = as_float_array(self.X, f"X of party {party!r}", ndim=2, dtype=np.float64)
        y = self._checked_rest(job, party, X.shape, needs_labels=needs_labels)
        assert y is None or isinstance(y, np.ndarray)  # not by_batch: labels in shards were read whole
        return X, y

    def checked_by_batch(self, job: GLMJob, party: str, *,
                         needs_labels: bool) -> Tuple[Union[np.ndarray, DesignedRows],
                                                      Optional[Union[np.ndarray, ShardedLabels]]]:
        """:meth:`checked` for a program that reads ``X`` only by rows
        (``X[idx]``, ``X[a:b]``, ``X.shape``) and ``y`` only by ``y[idx]``: a
        :class:`~vflsec.glm.design_rows.DesignedRows` stays one (its rows are
        built per batch; checked for NaN/inf in chunks), and so do labels in
        Parquet shards (:class:`~vflsec.glm.shards.ShardedLabels`, checked
        shard by shard); any other ``X`` is checked as by :meth:`checked`."""
        if not isinstance(self.X, DesignedRows):
            return self.checked(job, party, needs_labels=needs_labels)
        if not self.X.all_finite():
            raise ValueError(f"X of party {party!r} contains NaN or infinite values")
        return self.X, self._checked_rest(job, party, self.X.shape, needs_labels=needs_labels, by_batch=True)

    def _checked_rest(self, job: GLMJob, party: str, shape: Tuple[int, ...], *,
                      needs_labels: bool, by_batch: bool = False) -> Optional[Union[np.ndarray, ShardedLabels]]:
        """The checks of :meth:`checked` after X's own: its shape against the job, and ``y``
        (``by_batch``: labels in shards are checked shard by shard and stay in them)."""
        if shape[0] != job.n_samples:
            raise ValueError(
                f"party {party!r} has {shape[0]} rows, the job has n_samples={job.n_samples}"
            )
        if job.widths is not None and shape[1] != job.widths[party]:
            raise ValueError(f"party {party!r} holds {shape[1]} feature columns, the job agreed on "
                             f"widths[{party!r}] = {job.widths[party]}")
        if not needs_labels:
            if self.y is not None:
                raise ValueError(f"party {party!r} is not the active party but holds labels")
            return None
        if self.y is None:
            raise ValueError(f"the active party {party!r} has no labels (y is None)")
        labels: Union[np.ndarray, ShardedLabels]
        if by_batch and isinstance(self.y, ShardedLabels):
            labels = self.y
            parts: Iterable[np.ndarray] = (as_float_array(part, f"y of party {party!r}", ndim=1,
                                                          dtype=np.float64)[0] for part in labels.chunks())
        else:
            labels, _ = as_float_array(self.y, f"y of party {party!r}", ndim=1, dtype=np.float64)
            parts = (labels,)
        if labels.shape[0] != job.n_samples:
            raise ValueError(f"y of party {party!r} has {labels.shape[0]} entries, expected {job.n_samples}")
        for y in parts:
            if job.loss in SIGNED_LABEL_LOSSES and not np.all(np.abs(y) == 1.0):
                raise ValueError(f"loss {job.loss!r} needs labels y in {{-1, +1}}")
            if job.loss == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
                raise ValueError("loss 'poisson' needs non-negative integer counts y")
        return labels


@dataclass
class GLMPartyResult(_PartyResultBase):
    """What one GLM party program returns (a :class:`vflsec.vfl.PartyResult`).

    ``coef`` is this party's own weight block (None for a coordinator);
    ``history`` maps a metric name to one value per epoch (the active party
    records ``loss`` and, for classification losses, ``accuracy``);
    ``timings`` has ``compute``, ``crypto``, ``messaging`` and ``total``
    seconds; ``info`` holds public protocol facts (e.g. noise sigmas).
    """

    coef: Optional[np.ndarray]
    history: Dict[str, List[float]] = field(default_factory=dict)
    timings: Dict[str, float] = field(default_factory=dict)
    info: Dict[str, Any] = field(default_factory=dict)


# The name protocol modules and users import (``vflsec.glm.PartyResult``).
PartyResult = GLMPartyResult
