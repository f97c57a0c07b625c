"""Job kind "glm": a vertical GLM job (:mod:`vflsec.glm`) under ``vflsec party``.

``[job]`` holds the public :class:`~vflsec.glm.job.GLMJob` fields and the
model's design fields ``fit_intercept`` (default true) and
``intercept_scaling`` (default 0.5). Each party builds its block as the
estimator does (:class:`vflsec.glm.model.GLMDesign`: the job's ``row_norm``,
and for the active party with an intercept its features projected onto the
ball of radius ``sqrt(1 - c^2)`` and the constant column ``c`` appended), so a
job trains the model :class:`~vflsec.glm.VerticalLogisticRegression` trains
on the same rows. ``widths`` (the handshake's, or ``[job.widths]``) count
every party's feature columns as in its CSV; the job's block widths add the
intercept column. The active party encodes its labels as the estimator does
(:class:`~vflsec.glm.model.LabelEncoding`: any two classes for "logistic" /
"svm", the larger one +1; "least_squares" standardised with the training
labels' mean and standard deviation; counts for "poisson") and writes the
encoding beside its weights. Every party's output has its feature weights
(``coef``) and the model's ``design`` (row normalisation, intercept column); the active
party's also the model's ``intercept``, ``labels`` and ``label_encoding``. With
``active_only_model = true`` in ``[job]`` (loss "logistic") the active party also fits, on
its own features of the aligned training rows, a model that uses no partner column (the
reference :mod:`vflsec.glm.reference`, with the job's penalty) and writes it to its output
as ``active_only_model``: the fallback a ``predict`` job (:mod:`.predict_kind`) scores the
active party's customers with when a partner does not hold them. It stays with the active
party, and uses only that party's own data.

``shard_rows = S`` in ``[job]`` (protocols "plain" and "hdp"; 0, the default:
none) trains on the shard-local schedule (:mod:`vflsec.vfl.schedule`), and
each data party writes its aligned rows once as Parquet shards of ``S`` rows
(the active party's encoded labels beside its features) and streams them per
batch, with its table dropped (:mod:`.party_shards`,
:mod:`vflsec.glm.shards`); its output then has ``shards``: the shard size,
the number of files, the shard reads of the run and the most shards held at
once. The model is bit for bit the one trained on the rows in memory with the
same ``shard_rows``.

Every data party checkpoints its weight block after each epoch; a protocol
with a ``resume_refusal`` refuses ``--resume``. "hdp" counts every run's
releases, resumed or run again on the same rows: each party's privacy ledger in its
checkpoint directory (:mod:`vflsec.glm.hdp`), and its ``privacy_spent`` is then the
composition of every run's releases, above the calibrated epsilon.

Rare labels. ``class_weight`` in ``[job]`` (loss "logistic"/"svm"; protocols that apply
row weights: "plain", "paillier", "taylor"; a DP protocol or "ckks" refuses the job
before any party connects, naming why, :mod:`vflsec.glm.weights`): "balanced" (each
class weighs ``n / (2 * count)``, computed by the active party from its own training
labels) or a table ``{ "0" = 1.0, "1" = 10.0 }`` keyed by the labels as the active
party's training file codes them. The active party's output has the weights it used
(``class_weight``). ``threshold`` in ``[job]`` (loss "logistic") is the decision
threshold on the probability written into the model (``label_encoding``), which a
predict job applies: a number in (0, 1) (default 0.5), or ``"recall:R"`` /
``"precision:P"`` (needs ``evaluate = true``): chosen by the active party on the
held-out rows as the highest threshold whose predictions reach recall R there (the
lowest reaching precision P; the most precise one when none does), reported in the
evaluation beside the precision and recall it gives on those rows.

Held-out evaluation (``evaluate = true``): each passive party sends the
active party its partial scores ``X_p w_p`` of the aligned held-out rows
(tag ``eval_scores``, a float64 vector: anything else, NaN/inf included, is
refused naming the sender), as prediction with the model does; the active party
adds its own (its intercept included) and scores the sum
(:func:`vflsec.glm.model.glm_metric`: accuracy beside the majority rate, ROC AUC
and, for fewer than 20% positives, PR AUC for the classification losses, R^2
otherwise). A key holder (coordinator) takes no
part: every data party holds its weights in plaintext.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Set, Tuple, Union

import numpy as np

from ..glm.classification import choose_threshold, parse_threshold_rule
from ..glm.design_rows import DesignedRows
from ..glm.job import SIGNED_LABEL_LOSSES, GLMJob, PartyData
from ..glm.model import DEFAULT_INTERCEPT_SCALING, GLMDesign, LabelEncoding, glm_metric, privacy_text
from ..glm.persistence import encode_design, encode_labels
from ..glm.registry import get_protocol
from ..glm.shards import ShardedTable
from ..glm.weights import RowWeights, check_class_weight, row_weights
from ..vfl.received import PeerMessageRefused, check_received_array
from .class_weight_field import class_weight_field
from .deadlines import PHASE_EVALUATION
from .kinds import JobKind, register_job_kind

__all__ = ["DECISION_FIELDS", "DESIGN_FIELDS", "LOCAL_MODEL_FIELDS", "TAG_EVAL_SCORES", "GLMJobKind", "GLMPartyInput",
           "glm_design", "glm_metrics", "job_class_weight", "job_threshold", "receive_partial_scores"]

TAG_EVAL_SCORES = "eval_scores"
#: the [job] fields of the model's design (vflsec.glm.model), beside the GLMJob's
DESIGN_FIELDS = {"fit_intercept": True, "intercept_scaling": DEFAULT_INTERCEPT_SCALING}
#: [job] fields of models a party fits on its own, beside the joint one
LOCAL_MODEL_FIELDS = {"active_only_model": False}
#: [job] fields of the classes' weights and the decision threshold (module docstring)
DECISION_FIELDS = {"class_weight": None, "threshold": 0.5}
#: [job] field of protocol "mpc": the engine protocol (vflsec.glm.mpc), written into the job's options
MPC_FIELDS = {"mpc_protocol": None}


def glm_design(loss: str, fields: Mapping[str, Any], row_norm: str = "clip") -> GLMDesign:
    """The model design of a job with loss ``loss``, ``[job]`` fields
    ``fields`` and the job file's ``row_norm`` ("clip" or "none")."""
    return GLMDesign(loss=loss, fit_intercept=fields.get("fit_intercept", DESIGN_FIELDS["fit_intercept"]),
                     intercept_scaling=fields.get("intercept_scaling", DESIGN_FIELDS["intercept_scaling"]),
                     row_norm="clip" if row_norm == "clip" else None)


@dataclass
class GLMPartyInput(PartyData):
    """A ``vflsec party`` data party's program input: its design block and
    encoded labels (:class:`~vflsec.glm.job.PartyData`), with the design and
    label encoding they were built with (for its output and the held-out
    evaluation)."""

    design: Optional[GLMDesign] = None
    labels: Optional[LabelEncoding] = None
    active_only_model: bool = False
    shards: Optional[ShardedTable] = None  # the aligned rows' Parquet shards (a job with shard_rows)
    threshold_rule: Optional[Tuple[str, float]] = None  # a threshold to choose on the held-out rows
    output: Optional[Dict[str, Any]] = None  # the kind's summary entries, completed by the evaluation


def job_class_weight(fields: Mapping[str, Any]) -> Any:
    """``[job] class_weight`` as :mod:`vflsec.glm.weights` takes it: None, "balanced", or the
    table's labels (text, as the training file codes them) as numbers."""
    weights = class_weight_field(fields, codes='"0" and "1"')
    return check_class_weight(weights) if isinstance(weights, dict) else weights


def job_threshold(fields: Mapping[str, Any], loss: str) -> Union[float, Tuple[str, float]]:
    """``[job] threshold``: a fixed probability, or ``(target, value)`` to choose on the held-out rows."""
    rule = parse_threshold_rule(fields.get("threshold", DECISION_FIELDS["threshold"]))
    if rule != 0.5 and loss != "logistic":
        raise ValueError(f"threshold needs loss 'logistic' (a threshold on the probability), the job has loss "
                         f"{loss!r} -- remove threshold")
    return rule


def _jsonable(info: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, (bool, int, str)) or value is None:
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else str(value)
        elif isinstance(value, (list, tuple)):
            out[key] = [v if isinstance(v, (int, float, str)) else str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def _csv_labels(loss: str, y: np.ndarray) -> LabelEncoding:
    """The encoding of labels given as 0/1 or -1/+1 (classification; the
    convention of :func:`glm_metrics` without an encoding), else the labels as
    they are (the score already on their scale)."""
    if loss in SIGNED_LABEL_LOSSES:
        negative = 0.0 if set(np.unique(y).tolist()) <= {0.0, 1.0} else -1.0
        return LabelEncoding(loss, classes=np.array([negative, 1.0]))
    return LabelEncoding(loss)


class GLMJobKind(JobKind[GLMJob]):
    name = "glm"
    default_row_norm = "clip"
    writes_checkpoints = True

    def job_fields(self) -> Set[str]:
        return (({f.name for f in dataclasses.fields(GLMJob)} - {"n_samples", "start_epoch", "weighted"})
                | set(DESIGN_FIELDS) | set(LOCAL_MODEL_FIELDS) | set(DECISION_FIELDS) | set(MPC_FIELDS))

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> GLMJob:
        kwargs = {k: v for k, v in fields.items()
                  if k not in DESIGN_FIELDS and k not in LOCAL_MODEL_FIELDS and k not in DECISION_FIELDS
                  and k not in MPC_FIELDS}
        kwargs["weighted"] = job_class_weight(fields) is not None
        if fields.get("mpc_protocol") is not None:
            if fields.get("protocol") not in ("mpc", "mpc_dp"):
                raise ValueError(f"mpc_protocol is a key of protocol 'mpc' jobs, the job has protocol "
                                 f"{fields.get('protocol')!r} -- remove mpc_protocol, or set protocol = \"mpc\"")
            kwargs["options"] = {**dict(kwargs.get("options") or {}), "mpc_protocol": fields["mpc_protocol"]}
        fallback = fields.get("active_only_model", False)
        if not isinstance(fallback, bool):
            raise TypeError(f"active_only_model must be true or false, got {fallback!r}")
        if isinstance(kwargs.get("passives"), list):  # TOML's array; anything else is the job's to refuse
            kwargs["passives"] = tuple(kwargs["passives"])
        widths = kwargs.pop("widths", None)
        job = GLMJob(n_samples=n_samples, start_epoch=start_epoch, **kwargs)
        design = glm_design(job.loss, fields)  # the design fields' own checks
        job_threshold(fields, job.loss)
        if job.weighted and job.loss not in SIGNED_LABEL_LOSSES:
            raise ValueError(f"class_weight needs a classification loss ('logistic', 'svm'), the job has loss "
                             f"{job.loss!r} -- remove class_weight")
        if fallback and job.loss != "logistic":
            raise ValueError(f"active_only_model = true needs loss 'logistic' (the fallback is a logistic "
                             f"regression), the job has loss {job.loss!r} -- remove active_only_model")
        if widths is None:
            return job
        # The CSVs' feature columns (announced, or pinned by [job.widths]) -> the blocks' widths.
        job = dataclasses.replace(job, widths=widths)  # the job's checks of the map (parties, ints >= 1)
        return dataclasses.replace(job, widths=design.widths(dict(job.widths or {}), job.active))

    def check_job(self, job: GLMJob, fields: Mapping[str, Any]) -> None:
        # The protocol lookup, its coordinator and its own checks (e.g. hdp's lr bound, Paillier's key size, a
        # weighted job of a protocol that cannot apply weights).
        get_protocol(job.protocol).check_job(job)

    def check_evaluation(self, job: GLMJob, fields: Mapping[str, Any], evaluate: bool) -> None:
        if isinstance(job_threshold(fields, job.loss), tuple) and not evaluate:
            raise ValueError(f"threshold = {fields['threshold']!r} is chosen on the held-out rows, but the job has no "
                             "held-out evaluation -- set evaluate = true (and [party] test_data), or give a fixed "
                             "threshold such as 0.3")

    def party_rows(self, job: GLMJob, fields: Mapping[str, Any], row_norm: str, party: str,
                   X: np.ndarray, order: Optional[np.ndarray] = None) -> DesignedRows:
        # Built batch by batch (plain and hdp read their block that way; other protocols build it whole once).
        return glm_design(job.loss, fields, row_norm).rows(X, job.role_of(party), order)

    def check_party(self, job: GLMJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                    y: Optional[np.ndarray]) -> None:
        data = self.party_data(job, fields, party, X, y, None)
        if data is None:
            return
        # What every role program checks first (labels of the loss, finite values), then the protocol's own.
        rows, labels = data.checked_by_batch(job, party, needs_labels=job.role_of(party) == "active")
        check_rows = get_protocol(job.protocol).check_rows
        if check_rows is not None:
            check_rows(job, party, rows, labels)

    def resume_refusal(self, job: GLMJob, fields: Mapping[str, Any]) -> Optional[str]:
        reason = get_protocol(job.protocol).resume_refusal
        return None if reason is None else f"protocol {job.protocol!r} cannot resume: {reason}"

    def party_data(self, job: GLMJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                   y: Optional[np.ndarray], checkpoint: Any) -> Optional[GLMPartyInput]:
        if X is None:
            return None
        # X came through party_rows already; the design kept here splits the trained block into the model's terms.
        design = glm_design(job.loss, fields)
        labels, weights = _labels_and_weights(job, fields, design, y)
        targets = None if labels is None else labels.encode(y)
        return GLMPartyInput(X, targets, checkpoint=checkpoint, weights=weights, design=design, labels=labels,
                             active_only_model=bool(fields.get("active_only_model", False)),
                             threshold_rule=_threshold_rule(job, fields, labels))

    def shard_rows(self, job: GLMJob) -> int:
        return job.shard_rows

    def sharded_party_data(self, job: GLMJob, fields: Mapping[str, Any], row_norm: str, party: str, X: np.ndarray,
                           order: np.ndarray, y: Optional[np.ndarray], checkpoint: Any,
                           directory: Path) -> GLMPartyInput:
        # The labels encoded as party_data encodes them, then written beside the features; the block is designed
        # per batch from the shards as party_rows designs it from the table (the same rows, bit for bit).
        design = glm_design(job.loss, fields)
        labels = targets = weights = None
        if y is not None:
            aligned = y[order]
            labels, weights = _labels_and_weights(job, fields, design, aligned)
            assert labels is not None  # labels given
            targets = labels.encode(aligned)
            del aligned
        table = ShardedTable.write(directory, X, order, job.shard_rows, targets)
        del targets
        rows = glm_design(job.loss, fields, row_norm).rows(table, job.role_of(party))
        return GLMPartyInput(rows, table.labels, checkpoint=checkpoint, weights=weights, design=design, labels=labels,
                             active_only_model=bool(fields.get("active_only_model", False)), shards=table,
                             threshold_rule=_threshold_rule(job, fields, labels))

    def program(self, job: GLMJob, role: str):
        return get_protocol(job.protocol).roles[role]

    def receive_tags(self, job: GLMJob) -> Optional[FrozenSet[str]]:
        return get_protocol(job.protocol).tags

    def default_step_timeout(self, job: GLMJob) -> float:
        # HE protocols (those with a key holder): key generation and the
        # decryption of every party's gradient can fall into one wait.
        return 900.0 if get_protocol(job.protocol).needs_coordinator else 300.0

    def summary(self, job: GLMJob, result, output: Optional[Path], data: Any = None) -> Dict[str, Any]:
        out: Dict[str, Any] = {"protocol": job.protocol, "coef": None}
        prepared = data if isinstance(data, GLMPartyInput) else None
        if result.coef is not None:
            coef, intercept = np.asarray(result.coef, dtype=np.float64), None
            if prepared is not None and prepared.design is not None:
                # The model's terms: feature weights, and the active party's intercept c * w_c.
                coef, intercept = prepared.design.split_coef(coef, result.role)
            out["coef"] = [float(v) for v in coef]
            if intercept is not None:
                out["intercept"] = intercept
        if prepared is not None and prepared.design is not None:
            out["design"] = encode_design(prepared.design)  # what a predict job rebuilds the rows with
        if prepared is not None and prepared.labels is not None:
            out["labels"] = prepared.labels.describe()
            out["label_encoding"] = encode_labels(prepared.labels)
            if prepared.labels.classes is not None:
                out["threshold"] = prepared.labels.threshold
        if prepared is not None and prepared.weights is not None:
            out["class_weight"] = prepared.weights.describe()  # the active party's own output only
        if prepared is not None and prepared.active_only_model and result.role == "active":
            out["active_only_model"] = _active_only_model(job, prepared)
        if prepared is not None and prepared.shards is not None:
            table = prepared.shards
            out["shards"] = {"shard_rows": table.shard_rows, "files": table.n_shards, "loads": table.loads,
                             "max_resident": table.max_resident}
        out["info"] = _jsonable(result.info)
        out["privacy_spent"] = privacy_text(job, result.role, int(result.info.get("releases", 1)))
        if prepared is not None:
            prepared.output = out  # a threshold chosen on the held-out rows is written in by evaluate
        return out

    def evaluation_tags(self, job: GLMJob) -> FrozenSet[str]:
        return frozenset({TAG_EVAL_SCORES})

    def evaluate(self, channel: Any, job: GLMJob, role: str, result: Any, X: Optional[np.ndarray],
                 y: Optional[np.ndarray], data: Any = None) -> Optional[Dict[str, Any]]:
        if role not in ("active", "passive") or X is None:
            return None
        coef = np.asarray(result.coef, dtype=np.float64)
        own = np.asarray(X @ coef, dtype=np.float64)  # the active block's constant column adds the intercept
        if role == "passive":
            channel.send(job.active, TAG_EVAL_SCORES, own)
            return None
        score = receive_partial_scores(channel, job.passives, own, TAG_EVAL_SCORES, PHASE_EVALUATION,
                                       "held-out scores")
        if y is None:
            raise ValueError("the active party has no held-out labels")
        labels = data.labels if isinstance(data, GLMPartyInput) else None
        choice = None
        if isinstance(data, GLMPartyInput) and data.threshold_rule is not None and labels is not None:
            choice = _choose_threshold(data, labels, score, y)
            labels = data.labels
        metrics = glm_metrics(job.loss, score, y, labels)
        if choice is not None:
            metrics["threshold_choice"] = choice
        return metrics


def _labels_and_weights(job: GLMJob, fields: Mapping[str, Any], design: GLMDesign,
                        y: Optional[np.ndarray]) -> Tuple[Optional[LabelEncoding], Optional[RowWeights]]:
    """The active party's label encoding (deciding at a fixed ``threshold``) and row weights
    (``class_weight``: "balanced" counts its own labels ``y``); None, None without labels."""
    if y is None:
        return None, None
    labels = design.fit_labels(y)
    rule = job_threshold(fields, job.loss)
    if not isinstance(rule, tuple):
        labels = labels.with_threshold(rule)
    return labels, row_weights(job_class_weight(fields), None, labels, y, len(y))


def _threshold_rule(job: GLMJob, fields: Mapping[str, Any],
                    labels: Optional[LabelEncoding]) -> Optional[Tuple[str, float]]:
    rule = job_threshold(fields, job.loss)
    return rule if isinstance(rule, tuple) and labels is not None else None


def _choose_threshold(data: GLMPartyInput, labels: LabelEncoding, score: np.ndarray, y: np.ndarray) -> Dict[str, Any]:
    """Choose the job's threshold on the held-out scores (:func:`vflsec.glm.classification.choose_threshold`),
    and write it into the model: ``data.labels`` and the output's label encoding."""
    from scipy.special import expit

    assert data.threshold_rule is not None and labels.classes is not None
    target, value = data.threshold_rule
    choice = choose_threshold(expit(score), np.asarray(y, dtype=np.float64) == labels.classes[1], target, value)
    choice["chosen_on"] = "these held-out rows (the accuracy at it is measured on the rows it was chosen on)"
    data.labels = labels.with_threshold(choice["threshold"])
    if data.output is not None:
        data.output["label_encoding"] = encode_labels(data.labels)
        data.output["labels"] = data.labels.describe()
        data.output["threshold"] = data.labels.threshold
    return choice


def receive_partial_scores(channel: Any, passives: Any, own: np.ndarray, tag: str, phase: str,
                           what: str) -> np.ndarray:
    """``own`` plus every passive party's partial scores ``X_p w_p`` (a float64 vector of
    ``own``'s shape under ``tag``; anything else, NaN/inf included, or a sum that overflows, is
    refused naming the sender): the scores of a vertical GLM at the active party."""
    score = np.array(own, dtype=np.float64, copy=True)
    for party in passives:
        part = check_received_array(channel.recv(party, tag), receiver=channel.name, sender=party, tag=tag,
                                    step=phase, dtype=np.float64, shape=own.shape, what=what)
        with np.errstate(over="ignore"):  # an overflow is refused just below
            score += part
        if not np.all(np.isfinite(score)):  # finite scores whose sum overflows
            raise PeerMessageRefused(channel.name, party, tag, phase, f"{what}: adding them overflows the float64 "
                                                                      "range")
    return score


def _active_only_model(job: GLMJob, data: GLMPartyInput) -> Dict[str, Any]:
    """The active party's fallback: the logistic reference on its own features of the aligned
    training rows (its block without the constant column), with the job's penalty."""
    from ..glm.reference import fit_logistic_reference

    assert data.design is not None and data.y is not None
    block = np.asarray(data.X, dtype=np.float64)
    features = block[:, :-1] if data.design.fit_intercept else block
    coef, intercept = fit_logistic_reference(features, np.asarray(data.y), lam=job.lam, penalty=job.penalty,
                                             mu=job.mu, fit_intercept=data.design.fit_intercept)
    return {"coef": [float(v) for v in coef], "intercept": float(intercept), "n": int(features.shape[0]),
            "trained_on": "the active party's own features of the aligned training rows (no partner column)"}


def glm_metrics(loss: str, score: np.ndarray, y: np.ndarray, labels: Optional[LabelEncoding] = None) -> Dict[str, Any]:
    """The held-out metric of a GLM's scores ``score`` (``x . w`` summed over the
    parties, intercept included) against the labels ``y`` as the active party's
    CSV has them (:func:`vflsec.glm.model.glm_metric`), with the label encoding
    ``labels`` fitted on the training labels (None: labels 0/1 or -1/+1 for
    "logistic"/"svm", the score already on the labels' scale otherwise).
    ValueError for held-out labels of a class the training labels lack."""
    y = np.asarray(y, dtype=np.float64)
    if labels is None:
        labels = _csv_labels(loss, y)
    elif labels.classes is not None:
        unknown = sorted(set(np.unique(y).tolist()) - set(np.asarray(labels.classes).tolist()))
        if unknown:
            raise ValueError(f"the held-out labels hold {unknown[:5]}, not among the training labels' classes "
                             f"{np.asarray(labels.classes).tolist()}")
    return glm_metric(loss, score, y, labels)


register_job_kind(GLMJobKind(), replace=True)
