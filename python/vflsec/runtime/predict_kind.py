"""Job kind "predict": score new customers by ID with a vertical GLM or trees model trained with ``vflsec party``.

A bank (the active party) wants scores for next month's customers. Every data party runs ``vflsec
party`` with a job file ``[job] kind = "predict"`` (the parties of the training job, and the policy
``missing``) and its own party file naming:

* ``[party] data``: its new rows (CSV or Parquet, the columns of its training file; the active
  party's without labels);
* ``[party] model``: its output of the training job (its weight block, the model's design; the
  active party's also the intercept, the label encoding and, if trained, the active-only model).
  A preprocessor saved beside it (``<model>.preprocessor.json``, written when the party trained
  from a raw table) is applied to the new rows unchanged; without one the file is read as the
  numeric CSV it trained from;
* ``[party] output``: its summary; the active party writes the scores beside it
  (``<output>.scores.csv``).

What runs: the job agreement as for training; each passive party tells the active party which
training run its model comes from (the training job's digest and the digest of its aligned IDs),
and a model from another run stops the job before any row is aligned; PSI on the new IDs; each
passive party sends its partial scores ``x_p . w_p`` of the aligned rows (tag
``predict_scores``, checked as the held-out evaluation's are); the active party adds its own and
its intercept and writes one row per customer of *its* file, sorted by ID:
``id, score, probability, prediction, source``. ``prediction`` is the class: for a logistic
GLM ``probability`` above the model's decision threshold (0.5, or the training job's
``threshold``, written into the model's label encoding), for trees ``score > 0``; written
by the label's own name when the active party trained from a table with text labels or a
``positive_label`` (its output's ``label_names``, e.g. "Yes"/"No"), else as its training
file coded it (e.g. 0/1).

A trees model (the output of a ``kind = "trees"`` job, :mod:`.predict_trees`) is scored the way
its held-out evaluation is: each passive party bins its aligned new rows with its training bins
and sends the active party its packed split masks (tag ``trees_masks``), and the active party
walks the trees; ``score`` is the raw log-odds of the larger class. A trees model has no
active-only model (``missing = "none"`` only), and the predict job must list the training job's
parties (its active party first).

Customers of the active party that some partner does not hold (``missing``):

* ``"none"`` (default): no score (empty cells), ``source = missing``, counted in the summary;
* ``"active_only"``: scored by the active-only model the active party fitted beside the joint one
  (training job ``active_only_model = true``), ``source = active_only``: a weaker, honest score
  that uses no partner column.

A passive party answers within its ``[predict]`` budget (:mod:`.predict_budget`: customers per job,
jobs and customers over the model's life, an optional repeat window), checked on the aligned
customers before any score leaves it and counted in a ledger beside its model; past it the job
stops at every party with one line naming the limit.

Customers only a passive party holds are never scored and the active party never learns them
(PSI). What this shows: as the held-out evaluation does, the active party learns each passive
party's partial scores of the aligned customers, which no training epsilon covers, and every
party learns which of its customers are among the aligned ones (PSI's output). It is the same
computation as :func:`vflsec.glm.score_by_id`, the in-process reference the tests compare with.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..glm.model import GLMDesign, LabelEncoding
from ..vfl.job import VFLJob
from .kinds import JobKind, register_job_kind

__all__ = ["MISSING_POLICIES", "PredictJob", "PredictJobKind", "SavedPartyModel", "load_saved_model",
           "scores_path"]

MISSING_POLICIES = ("none", "active_only")
TAG_PREDICT_MODEL = "predict_model"
TAG_PREDICT_SCORES = "predict_scores"
PHASE_PREDICTION = "prediction (model agreement, PSI of the new rows, scoring)"


@dataclass(frozen=True)
class PredictJob(VFLJob):
    """A predict job's public parameters: its parties and the missing-ID policy (the schedule
    fields are fixed: one pass)."""

    n_samples: int
    active: str = "active"
    passives: Tuple[str, ...] = ("passive",)
    missing: str = "none"
    epochs: int = 1
    batch_size: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.passives, list):
            object.__setattr__(self, "passives", tuple(self.passives))
        self._check_common()
        if self.missing not in MISSING_POLICIES:
            raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {self.missing!r}")


@dataclass(frozen=True)
class SavedPartyModel:
    """One party's part of a trained vertical GLM, as its training output holds it."""

    path: Path
    party: str
    role: str
    coef: np.ndarray
    design: GLMDesign
    training_job_sha256: str
    training_ids_sha256: str
    intercept: float = 0.0
    labels: Optional[LabelEncoding] = None
    fallback: Optional[Tuple[np.ndarray, float]] = None
    preprocessor: Any = None
    preprocessor_path: Optional[Path] = None
    label_names: Optional[Tuple[Any, Any]] = None  # the labels' own names of the classes coded 0 and 1
    budget: Any = None  # a passive party's predict budget (runtime.predict_budget.PredictBudget)

    @property
    def training_run(self) -> str:
        """What identifies the training run every party's model must come from."""
        return hashlib.sha256(f"{self.training_job_sha256}:{self.training_ids_sha256}".encode()).hexdigest()

    def scores(self, X: np.ndarray) -> np.ndarray:
        """This party's partial scores ``features(X) . w`` (the active party's with its intercept)."""
        features = self.design.features(np.asarray(X, dtype=np.float64), self.role)
        own = features @ self.coef
        return own + self.intercept if self.role == "active" else own

    def fallback_scores(self, X: np.ndarray) -> np.ndarray:
        assert self.fallback is not None
        coef, intercept = self.fallback
        return self.design.features(np.asarray(X, dtype=np.float64), "active") @ coef + intercept


def _floats(values: Any, what: str, path: Path) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64) if isinstance(values, list) else None
    if array is None or array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError(f"{path}: {what} is not a list of finite numbers")
    return array


def _another_run(party: str, model: Any, theirs: Any) -> Exception:
    """The active party's line for a passive party's model of another training run: both runs
    by their digests (the outputs' ``job_sha256`` and ``ids_sha256``) and what differs."""
    from ..errors import CommandError

    def run(job_sha256: Any, ids_sha256: Any) -> str:
        return f"job {str(job_sha256)[:12]}..., aligned IDs {str(ids_sha256)[:12]}..."

    ours = run(model.training_job_sha256, model.training_ids_sha256)
    if isinstance(theirs, dict) and isinstance(theirs.get("job_sha256"), str) and isinstance(
            theirs.get("ids_sha256"), str):
        other = run(theirs["job_sha256"], theirs["ids_sha256"])
        why = ("another training job" if theirs["job_sha256"] != model.training_job_sha256 else
               "the same job file trained on other rows (another run)")
    else:
        other, why = "a run it does not name (an older vflsec)", "another run"
    what = f"party {party!r} holds a model of {why}: its run is {other}, this party's is {ours}"
    fix = ("give every party's [party] model its output of one training run (the outputs' job_sha256 and "
           "ids_sha256 must match)")
    return CommandError(f"{what} ({os.path.normpath(model.path)})", fix, shared=f"{what} -- {fix}")


def load_saved_model(path: Path, party: str, role: str, missing: str,
                     parties: Optional[Sequence[str]] = None) -> Any:
    """Party ``party``'s (role ``role``) model from its training output ``path``: a
    :class:`SavedPartyModel` (GLM) or a :class:`~.predict_trees.SavedTreesModel` (trees, for a
    predict job over ``parties``, active first); ValueError (with `` -- fix``) naming the file
    for anything a predict job cannot use."""
    from ..data import PartyPreprocessor
    from ..glm.persistence import decode_design, decode_labels
    from .party_table import preprocessor_path

    path = Path(path)
    retrain = ("give [party] model the output file this party wrote when it trained the GLM or trees job with "
               "`vflsec party` (this version)")
    if not path.is_file():
        raise ValueError(f"the model file {path} {'is not a file' if path.exists() else 'does not exist'} -- "
                         f"{retrain}")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a training output of vflsec party ({exc}) -- {retrain}") from None
    kind = saved.get("kind") if isinstance(saved, dict) else None
    if not isinstance(saved, dict) or kind not in ("glm", "trees") or (kind == "glm" and not isinstance(
            saved.get("coef"), list)):
        raise ValueError(f"{path}: not the output of a GLM or trees training job of vflsec party -- {retrain}")
    if saved.get("party") != party or saved.get("role") != role:
        raise ValueError(f"{path} is the model of party {saved.get('party')!r} ({saved.get('role')}), this party "
                         f"is {party!r} ({role}) -- give [party] model this party's own training output")
    prep_path = preprocessor_path(path)
    preprocessor = PartyPreprocessor.load(prep_path) if prep_path is not None and prep_path.is_file() else None
    names = _label_names(saved.get("label_names"), path)
    if kind == "trees":
        from .predict_trees import load_trees_model

        model = load_trees_model(path, saved, party, role, tuple(parties or (party,)), missing)
        return dataclasses.replace(model, preprocessor=preprocessor,
                                   preprocessor_path=prep_path if preprocessor is not None else None,
                                   label_names=names)
    if not isinstance(saved.get("design"), dict):
        raise ValueError(f"{path} has no model design (written by an older vflsec) -- train the model again "
                         "with this version")
    design = decode_design(saved["design"])
    coef = _floats(saved["coef"], "coef", path)
    intercept, labels, fallback = 0.0, None, None
    if role == "active":
        if not isinstance(saved.get("label_encoding"), dict) or not isinstance(saved.get("intercept"), (int, float)):
            raise ValueError(f"{path} has no label encoding or intercept (written by an older vflsec) -- train "
                             "the model again with this version")
        intercept = float(saved["intercept"])
        labels = decode_labels(saved["label_encoding"])
        extra = saved.get("active_only_model")
        if isinstance(extra, dict):
            fallback = (_floats(extra.get("coef"), "active_only_model coef", path), float(extra["intercept"]))
            if fallback[0].shape != coef.shape:
                raise ValueError(f"{path}: the active-only model has {fallback[0].size} weights, the joint model "
                                 f"{coef.size} -- train the model again")
        if missing == "active_only" and fallback is None:
            raise ValueError(f"the predict job has missing = 'active_only' but {path} holds no active-only model "
                             "-- train with active_only_model = true in the training job's [job], or set "
                             "missing = 'none' in the predict job")
    digests = saved.get("job_sha256"), saved.get("ids_sha256")
    if not all(isinstance(d, str) for d in digests):
        raise ValueError(f"{path} does not say which training run it comes from (job_sha256, ids_sha256) -- "
                         f"{retrain}")
    return SavedPartyModel(path, party, role, coef, design, str(digests[0]), str(digests[1]), intercept, labels,
                           fallback, preprocessor, prep_path if preprocessor is not None else None, names)


def _label_names(value: Any, path: Path) -> Optional[Tuple[Any, Any]]:
    """The training output's ``label_names`` (the label values coded 0 and 1, as the active
    party's training file had them), None when it has none (numeric labels, or a negative
    class no training row had)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, (str, int, float, bool)) or v is None
                                                                  for v in value):
        raise ValueError(f"{path}: label_names is not the two label values coded 0 and 1 -- train the model again")
    return None if value[0] is None else (value[0], value[1])


def _named(predict: Optional[Callable[[np.ndarray], np.ndarray]], classes: Optional[np.ndarray],
           names: Optional[Tuple[Any, Any]]) -> Optional[Callable[[np.ndarray], np.ndarray]]:
    """``predict`` giving each class by its own name (``names`` for ``classes``, negative first)."""
    if predict is None or classes is None or names is None:
        return predict
    assert predict is not None

    def named(theta: np.ndarray) -> np.ndarray:
        return np.where(predict(theta) == classes[1], names[1], names[0]).astype(object)

    return named


def scores_path(output: Path) -> Path:
    """Where the active party writes the scores: beside its summary."""
    return Path(output).with_suffix(".scores.csv")


class PredictJobKind(JobKind[PredictJob]):
    name = "predict"
    default_row_norm = "none"
    #: the run scores saved models instead of training (runtime.party)
    scores_saved_model = True
    #: a predict job reads no labels
    uses_labels = False

    def job_fields(self) -> Set[str]:
        return {"active", "passives", "missing"}

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> PredictJob:
        return PredictJob(n_samples=n_samples, **dict(fields))

    def party_rows(self, job: PredictJob, fields: Mapping[str, Any], row_norm: str, party: str,
                   X: np.ndarray, order: Optional[np.ndarray] = None) -> np.ndarray:
        return X if order is None else X[order]  # the saved model's design is applied when scoring

    def receive_tags(self, job: PredictJob) -> Optional[FrozenSet[str]]:
        from ..trees.prediction import TAG_MASKS

        return frozenset({TAG_PREDICT_MODEL, TAG_PREDICT_SCORES, TAG_MASKS})

    def resume_refusal(self, job: PredictJob, fields: Mapping[str, Any]) -> Optional[str]:
        return "a predict job has no epochs to resume; run it again"

    def load_model(self, path: Path, party: str, role: str, job: PredictJob) -> Any:
        return load_saved_model(path, party, role, job.missing, job.data_parties)

    def check_model(self, model: Any, n_features: int, data: Path) -> None:
        """The new rows fit the saved weights or bins (ValueError naming both files)."""
        from .predict_trees import SavedTreesModel

        if isinstance(model, SavedTreesModel):
            if n_features != model.n_features:
                raise ValueError(f"{data} gives {n_features} feature columns, the trees model {model.path} bins "
                                 f"{model.n_features} -- give [party] data the columns of the training file")
            return
        if n_features != model.coef.size:
            raise ValueError(f"{data} gives {n_features} feature columns, the model {model.path} has "
                             f"{model.coef.size} weights -- give [party] data the columns of the training file")

    def agree_on_model(self, channel: Any, job: PredictJob, model: Any) -> None:
        """Every passive party's model comes from the active party's training run (else the
        active party stops the job with one line naming the party and both runs: a
        :class:`~vflsec.errors.CommandError`, which its peers are told too)."""
        if model.role != "active":
            channel.send(job.active, TAG_PREDICT_MODEL, {"run": model.training_run,
                                                         "job_sha256": model.training_job_sha256,
                                                         "ids_sha256": model.training_ids_sha256})
            return
        for party in job.passives:
            theirs = channel.recv(party, TAG_PREDICT_MODEL)
            run = theirs.get("run") if isinstance(theirs, dict) else theirs.decode("ascii", "replace") if isinstance(
                theirs, bytes) else None  # bytes: a vflsec that sends the run's digest only
            if run != model.training_run:
                raise _another_run(party, model, theirs)

    def score(self, channel: Any, job: PredictJob, model: Any, ids: Sequence[str], X: np.ndarray,
              common: Sequence[str], output: Optional[Path]) -> Dict[str, Any]:
        """Send (passive) or gather (active) the partial scores (GLM) or split masks (trees) of the
        aligned rows; the active party writes the scores file. The kind's entries of the party's
        summary."""
        from ..federation.psi import row_order
        from .glm_kind import receive_partial_scores
        from .predict_trees import PRIVACY_NOTE as TREES_PRIVACY_NOTE
        from .predict_trees import SavedTreesModel, trees_scores

        trees = isinstance(model, SavedTreesModel)
        if model.role != "active" and common and model.budget is not None:
            refused = model.budget.refusal(common)  # before any score leaves this party
            if refused is not None:
                raise _over_budget(model.party, refused)
        aligned = X[row_order(ids, common)] if common else X[:0]
        if trees:
            joint = trees_scores(channel, job.active, model, aligned, PHASE_PREDICTION) if common else np.zeros(0)
            if model.role != "active":
                return _released(model, common, trees)
        else:
            own = model.scores(aligned) if common else np.zeros(0)
            if model.role != "active":
                if common:
                    channel.send(job.active, TAG_PREDICT_SCORES, np.ascontiguousarray(own, dtype=np.float64))
                return _released(model, common, trees)
            joint = (receive_partial_scores(channel, job.passives, own, TAG_PREDICT_SCORES, PHASE_PREDICTION,
                                            "partial scores") if common else own)
        order = np.argsort(np.asarray(ids, dtype=object).astype(str), kind="stable")
        sorted_ids = [ids[i] for i in order]
        theta = np.full(len(ids), np.nan)
        source = np.full(len(ids), "missing", dtype=object)
        position = {item: i for i, item in enumerate(sorted_ids)}
        at = np.fromiter((position[item] for item in common), dtype=np.int64, count=len(common))
        theta[at], source[at] = joint, "joint"
        rest = np.setdiff1d(np.arange(len(ids)), at)
        if job.missing == "active_only" and rest.size:
            rows = np.asarray(order)[rest]
            theta[rest], source[rest] = model.fallback_scores(X[rows]), "active_only"
        counts = {name: int(np.sum(source == name)) for name in ("joint", "active_only", "missing")}
        out: Dict[str, Any] = {"missing_policy": job.missing, "counts": counts, "n_customers": len(ids),
                               "model": str(model.path), "privacy_note": TREES_PRIVACY_NOTE if trees else PRIVACY_NOTE}
        if output is not None:
            target = scores_path(output)
            if trees:
                _write_scores(target, sorted_ids, theta, source, logistic=True,
                              predict=_named(model.predict, model.classes, model.label_names))
            else:
                labels = model.labels
                _write_scores(target, sorted_ids, theta, source, logistic=labels is not None and
                              labels.loss == "logistic", predict=None if labels is None else _named(
                                  labels.predict, labels.classes, model.label_names))
                if labels is not None and labels.classes is not None:
                    out["threshold"] = labels.threshold
            out["scores"] = str(target)
        return out


def _over_budget(party: str, why: str) -> Exception:
    from ..errors import CommandError

    what = f"passive party {party!r} refuses to score: {why}"
    fix = ("ask that party to raise its [predict] budget in its party file (max_ids_per_job, max_jobs, max_scores, "
           "repeat_window_days), or ask for fewer or other customers")
    return CommandError(what, fix, shared=f"{what} -- {fix}")


def _released(model: Any, common: Sequence[str], trees: bool) -> Dict[str, Any]:
    """A passive party's summary entries: what it released (and, with a budget, its ledger and what is left)."""
    out: Dict[str, Any] = {"scored_rows_sent": len(common)}
    if common and model.budget is not None:
        out["released"] = {"what": "split masks" if trees else "partial scores x_p . w_p",
                           **model.budget.record(common)}
    return out


PRIVACY_NOTE = ("prediction showed the active party every passive party's partial scores x_p . w_p of the aligned "
                "customers (not covered by any training epsilon), and every party which of its customers are "
                "aligned (PSI's output)")


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    odds = math.exp(value)
    return odds / (1.0 + odds)


def _label_text(value: Any) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value.item() if isinstance(value, np.generic) else value)


def _write_scores(path: Path, ids: Sequence[str], theta: np.ndarray, source: np.ndarray, *, logistic: bool,
                  predict: Optional[Callable[[np.ndarray], np.ndarray]]) -> None:
    """``id, score, probability, prediction, source`` (empty cells for an unscored customer;
    ``logistic``: a probability ``sigmoid(score)``; ``predict``: the label of each score, None:
    the score itself); 0600, atomic, as the runtime writes its other files."""
    import io

    from ..federation.private_files import write_private_bytes

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "score", "probability", "prediction", "source"])
    predictions = predict(np.nan_to_num(theta)) if predict is not None else theta
    for i, item in enumerate(ids):
        value = float(theta[i])
        if math.isnan(value):
            writer.writerow([item, "", "", "", source[i]])
            continue
        probability = repr(_sigmoid(value)) if logistic else ""
        writer.writerow([item, repr(value), probability, _label_text(predictions[i]), source[i]])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private_bytes(path, buffer.getvalue().encode("utf-8"))


register_job_kind(PredictJobKind(), replace=True)
