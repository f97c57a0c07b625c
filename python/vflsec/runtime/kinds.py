"""Registry of job kinds: how ``vflsec party`` runs each kind of VFL job.

A job file's ``[job]`` table names its kind (``kind = "glm"``, the default,
``kind = "splitnn"``, ``kind = "trees"``: vertical boosting, :mod:`.trees_kind`, or
``kind = "predict"``: scoring new rows with the parties' saved GLM or trees,
:mod:`.predict_kind`). A :class:`JobKind` knows, for its kind:

* which ``[job]`` fields it accepts and how to build the job object
  (a :class:`vflsec.vfl.VFLJob`) once the alignment gave ``n_samples``;
* how a party turns its aligned CSV rows into the rows its program takes
  (:meth:`JobKind.party_rows`: the job's ``row_norm``, or a model design of
  the kind's own, e.g. a GLM's intercept column), then into the data its
  role program takes, and which program that is; a kind whose jobs may
  keep those rows as Parquet shards on disk (a GLM job with ``shard_rows``,
  :mod:`.party_shards`) says so (:meth:`JobKind.shard_rows`) and writes them
  (:meth:`JobKind.sharded_party_data`);
* what its programs check before they start, of the job's public
  parameters (:meth:`JobKind.check_job`) and of one party's own rows
  (:meth:`JobKind.check_party`), so that ``vflsec party`` refuses a
  mistake before any party connects (:mod:`.startup`);
* its protocol properties: whether its programs write per-epoch
  checkpoints, and why a given job must not resume (e.g. a DP protocol);
* what a party writes to its output besides the common summary;
* how the parties score the trained model on held-out rows (a job with
  ``evaluate = true``) and the tags that evaluation receives;
* the message tags its programs receive and its default per-message
  deadline (see :mod:`.deadlines`).

Kinds register by name; :func:`get_job_kind` imports the built-in kinds
(:mod:`.glm_kind`, :mod:`.splitnn_kind`, :mod:`.trees_kind`, :mod:`.predict_kind`) on
first use, so the party process imports only the framework its job needs.
"""
from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Any, Dict, FrozenSet, Generic, Mapping, Optional, Sequence, Set, Tuple, TypeVar

import numpy as np

from ..dp.sensitivity import clip_row_norms
from ..vfl.job import VFLJob
from ..vfl.runner import PartyProgram

__all__ = ["DEFAULT_KIND", "JobKind", "available_job_kinds", "get_job_kind", "register_job_kind"]

DEFAULT_KIND = "glm"
# Built-in kind name -> module that registers it.
_BUILTIN = {"glm": "vflsec.runtime.glm_kind", "splitnn": "vflsec.runtime.splitnn_kind",
            "predict": "vflsec.runtime.predict_kind", "trees": "vflsec.runtime.trees_kind"}

JobT = TypeVar("JobT", bound=VFLJob)


class JobKind(Generic[JobT]):
    """How the party runtime runs one kind of job (subclass per kind,
    parametrised by its job class)."""

    #: the ``kind`` value in job.toml
    name: str = ""
    #: ``row_norm`` when job.toml does not set it ("clip": x / max(1, ||x||))
    default_row_norm: str = "none"
    #: whether the role programs save per-epoch checkpoints (``--resume``)
    writes_checkpoints: bool = False
    #: whether the active party's data file holds labels (``[party] label_column``)
    uses_labels: bool = True
    #: whether a run scores the parties' saved models instead of training (``[party] model``;
    #: the kind then implements :meth:`load_model`, :meth:`check_model`, :meth:`agree_on_model`
    #: and :meth:`score`: :mod:`.predict_kind`)
    scores_saved_model: bool = False

    def job_fields(self) -> Set[str]:
        """The ``[job]`` keys this kind accepts (besides ``kind`` and ``row_norm``)."""
        raise NotImplementedError

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> JobT:
        """The job object (validated; ValueError/TypeError on bad fields)."""
        raise NotImplementedError

    def check_job(self, job: JobT, fields: Mapping[str, Any]) -> None:
        """The checks of ``job``'s public parameters its programs make before
        they start, beyond the job object's own (ValueError/TypeError); e.g. a
        GLM protocol's lookup and its parameter checks."""

    def check_evaluation(self, job: JobT, fields: Mapping[str, Any], evaluate: bool) -> None:
        """The checks of ``job``'s fields that depend on the job's ``evaluate`` (ValueError),
        e.g. a GLM threshold chosen on the held-out rows needs them."""

    def party_rows(self, job: JobT, fields: Mapping[str, Any], row_norm: str, party: str,
                   X: np.ndarray, order: Optional[np.ndarray] = None) -> Any:
        """Data party ``party``'s rows (training or held-out, as read from its
        CSV; ``order``: the row positions of the aligned order, None for the
        rows as read) as its program and :meth:`evaluate` take them: by
        default the job's ``row_norm`` ("clip": every row onto the unit ball,
        ``x / max(1, ||x||)``; "none": as given). A kind whose model has a
        design of its own overrides it (GLM: :mod:`vflsec.glm.model`, rows
        designed batch by batch from ``X`` and ``order``). ``X`` is never written."""
        ordered = X[order] if order is not None else None  # a new array, clipped in place below
        if row_norm == "clip" and X.shape[1] > 0:
            return clip_row_norms(X if ordered is None else ordered, out=ordered)
        return X if ordered is None else ordered

    def check_party(self, job: JobT, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                    y: Optional[np.ndarray]) -> None:
        """The checks of data party ``party``'s own rows (X as
        :meth:`party_rows` gives them, y the active party's labels as in its
        CSV, else None) its program makes before it starts
        (ValueError/TypeError)."""

    def resume_refusal(self, job: JobT, fields: Mapping[str, Any]) -> Optional[str]:
        """Why ``job`` (described by the ``[job]`` ``fields``) must not
        continue from a checkpoint (None: it may)."""
        if not self.writes_checkpoints:
            return (f"{self.name} jobs cannot resume: their party programs write no checkpoints; "
                    "start the job again without --resume")
        return None

    def party_data(self, job: JobT, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                   y: Optional[np.ndarray], checkpoint: Any) -> Any:
        """The ``data`` argument of ``party``'s role program from its aligned
        rows (X as :meth:`party_rows` gives them, y the labels as in the CSV;
        None for a party without data)."""
        raise NotImplementedError

    def shard_rows(self, job: JobT) -> int:
        """Rows per Parquet shard of the aligned rows (0: the rows stay in memory). A kind
        returning > 0 implements :meth:`sharded_party_data`."""
        return 0

    def sharded_party_data(self, job: JobT, fields: Mapping[str, Any], row_norm: str, party: str, X: np.ndarray,
                           order: np.ndarray, y: Optional[np.ndarray], checkpoint: Any, directory: Path) -> Any:
        """What :meth:`party_data` gives, from the rows as read (``X``, ``y``; ``order``: the row
        positions of the aligned order), with the aligned rows written to ``directory`` as
        Parquet shards of :meth:`shard_rows` rows and read from there during training: the
        caller drops ``X`` and ``y`` once this returns."""
        raise NotImplementedError(f"job kind {self.name!r} keeps no shards")

    def program(self, job: JobT, role: str) -> PartyProgram:
        raise NotImplementedError

    def receive_tags(self, job: JobT) -> Optional[FrozenSet[str]]:
        """Every message tag the role programs of ``job`` receive (None: not
        declared; the transport then accepts any tag)."""
        return None

    def default_step_timeout(self, job: JobT) -> float:
        """Seconds a party waits for each protocol message of ``job`` when
        ``[network]`` sets no ``step_timeout``."""
        return 300.0

    def features_optional(self, job: JobT, role: str) -> bool:
        """Whether a data party of ``role`` may hold no feature columns."""
        return False

    def summary(self, job: JobT, result: Any, output: Optional[Path], data: Any = None) -> Dict[str, Any]:
        """Kind-specific entries of the party's output (JSON-serialisable);
        may write files beside ``output``. ``data``: what :meth:`party_data`
        gave the program (None for a party without data)."""
        raise NotImplementedError

    def evaluation_tags(self, job: JobT) -> FrozenSet[str]:
        """The tags :meth:`evaluate` receives."""
        return frozenset()

    def evaluate(self, channel: Any, job: JobT, role: str, result: Any, X: Optional[np.ndarray],
                 y: Optional[np.ndarray], data: Any = None) -> Optional[Dict[str, Any]]:
        """Score the trained model (``result``, this party's program's result) on
        the aligned held-out rows ``X`` (this party's block, as
        :meth:`party_rows` gives it; None for a party without data) and labels
        ``y`` (the active party's, as in its CSV); ``data`` is what
        :meth:`party_data` gave the program (None for a party without data).
        Every party of the job calls it at the same point; the active party
        returns the metrics (``{"metric": name, "value": ..., "n": rows,
        ...}``), the others None."""
        raise NotImplementedError(f"job kind {self.name!r} has no held-out evaluation")


    # -- kinds that score saved models (scores_saved_model) -----------------------------------
    def load_model(self, path: Path, party: str, role: str, job: JobT) -> Any:
        """Party ``party``'s saved model from ``path`` (ValueError with `` -- fix``)."""
        raise NotImplementedError(f"job kind {self.name!r} reads no saved model")

    def check_model(self, model: Any, n_features: int, data: Path) -> None:
        """The party's new rows (``n_features`` columns, from ``data``) fit ``model``."""
        raise NotImplementedError(f"job kind {self.name!r} reads no saved model")

    def agree_on_model(self, channel: Any, job: JobT, model: Any) -> None:
        """Before the alignment: every party's model belongs to the same trained model."""
        raise NotImplementedError(f"job kind {self.name!r} reads no saved model")

    def score(self, channel: Any, job: JobT, model: Any, ids: Sequence[str], X: np.ndarray, common: Sequence[str],
              output: Optional[Path]) -> Dict[str, Any]:
        """Score this party's rows (``ids``, ``X`` as read; ``common`` the aligned IDs) with the
        saved model; the kind's entries of the party's output."""
        raise NotImplementedError(f"job kind {self.name!r} reads no saved model")


_REGISTRY: Dict[str, JobKind[Any]] = {}
_LOCK = threading.Lock()


def register_job_kind(kind: JobKind[Any], *, replace: bool = False) -> JobKind[Any]:
    if not isinstance(kind, JobKind):
        raise TypeError(f"kind must be a JobKind, got {type(kind).__name__}")
    if not isinstance(kind.name, str) or not kind.name:
        raise TypeError("a job kind needs a non-empty name")
    with _LOCK:
        if kind.name in _REGISTRY and not replace:
            raise ValueError(f"job kind {kind.name!r} is already registered")
        _REGISTRY[kind.name] = kind
    return kind


def get_job_kind(name: str) -> JobKind[Any]:
    """The registered kind ``name`` (ValueError listing the known kinds)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"job kind must be a non-empty str, got {name!r}")
    with _LOCK:
        found = _REGISTRY.get(name)
    if found is None and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
        with _LOCK:
            found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown job kind {name!r}; known kinds: {list(available_job_kinds())}")
    return found


def available_job_kinds() -> Tuple[str, ...]:
    with _LOCK:
        return tuple(sorted(set(_REGISTRY) | set(_BUILTIN)))
