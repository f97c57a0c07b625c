"""Job kind "glm": a vertical GLM job (:mod:`vflsec.glm`) under ``vflsec party``.

``[job]`` holds the public :class:`~vflsec.glm.job.GLMJob` fields. Labels of
the signed losses (logistic, svm) may be 0/1 (0 becomes -1) or -1/+1. Every
data party checkpoints its weight block after each epoch; a protocol with a
``resume_refusal`` refuses ``--resume``. "hdp" resumes with the repeated
releases counted: each party's privacy ledger in its checkpoint directory
(:mod:`vflsec.glm.hdp`), and its ``privacy_spent`` is then the composition of
every run's releases, above the calibrated epsilon.

Held-out evaluation (``evaluate = true``): each passive party sends the
active party its partial scores ``X_p w_p`` of the aligned held-out rows
(tag ``eval_scores``, a float64 vector: anything else, NaN/inf included, is
refused naming the sender), as prediction with the model does; the active party
adds its own and scores the sum (:func:`glm_metrics`: accuracy beside the
majority rate for the classification losses, R^2 otherwise). A key holder
(coordinator) takes no part: every data party holds its weights in plaintext.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Set

import numpy as np

from ..glm.job import SIGNED_LABEL_LOSSES, GLMJob, PartyData
from ..glm.registry import get_protocol
from ..vfl.received import PeerMessageRefused, check_received_array
from .deadlines import PHASE_EVALUATION
from .kinds import JobKind, register_job_kind

__all__ = ["TAG_EVAL_SCORES", "GLMJobKind", "glm_metrics"]

TAG_EVAL_SCORES = "eval_scores"


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


def _labels_for(loss: str, y: np.ndarray) -> np.ndarray:
    if loss in SIGNED_LABEL_LOSSES:
        values = set(np.unique(y).tolist())
        if values <= {0.0, 1.0}:
            return np.where(y > 0, 1.0, -1.0)
    return y


def _privacy_spent(job: GLMJob, role: str = "active", releases: int = 1) -> Optional[str]:
    """"hdp" with noise: what the ``role`` party's IR mechanism spent over
    ``releases`` releases (1, or one more per resume: the party program's
    ``info["releases"]``), as :func:`vflsec.glm.hdp.hdp_privacy_spent`
    reports it (what the estimator's ``privacy_spent_`` reports for a run);
    None for the other protocols and for a party without data."""
    if job.protocol != "hdp" or not job.noise or role not in ("active", "passive"):
        return None
    from ..glm.hdp import hdp_privacy_spent

    spent = hdp_privacy_spent(job, role, releases=releases)
    if spent.releases == 1:
        return str(spent)
    return (f"{spent} over {spent.releases} releases of the IR sequence (the job was resumed: the repeated "
            f"epochs count again; calibrated for epsilon {job.epsilon:g} per release)")


class GLMJobKind(JobKind[GLMJob]):
    name = "glm"
    default_row_norm = "clip"
    writes_checkpoints = True

    def job_fields(self) -> Set[str]:
        return {f.name for f in dataclasses.fields(GLMJob)} - {"n_samples", "start_epoch"}

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> GLMJob:
        kwargs = dict(fields)
        if isinstance(kwargs.get("passives"), list):  # TOML's array; anything else is the job's to refuse
            kwargs["passives"] = tuple(kwargs["passives"])
        return GLMJob(n_samples=n_samples, start_epoch=start_epoch, **kwargs)

    def check_job(self, job: GLMJob, fields: Mapping[str, Any]) -> None:
        # The protocol lookup, its coordinator and its own checks (e.g. hdp's lr bound, Paillier's key size).
        get_protocol(job.protocol).check_job(job)

    def check_party(self, job: GLMJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                    y: Optional[np.ndarray]) -> None:
        data = self.party_data(job, fields, party, X, y, None)
        if data is None:
            return
        # What every role program checks first (labels of the loss, finite values), then the protocol's own.
        X, y = data.checked(job, party, needs_labels=job.role_of(party) == "active")
        check_rows = get_protocol(job.protocol).check_rows
        if check_rows is not None:
            check_rows(job, party, X, y)

    def resume_refusal(self, job: GLMJob, fields: Mapping[str, Any]) -> Optional[str]:
        reason = get_protocol(job.protocol).resume_refusal
        return None if reason is None else f"protocol {job.protocol!r} cannot resume: {reason}"

    def party_data(self, job: GLMJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                   y: Optional[np.ndarray], checkpoint: Any) -> Optional[PartyData]:
        if X is None:
            return None
        return PartyData(X, None if y is None else _labels_for(job.loss, y), checkpoint=checkpoint)

    def program(self, job: GLMJob, role: str):
        return get_protocol(job.protocol).roles[role]

    def receive_tags(self, job: GLMJob) -> Optional[FrozenSet[str]]:
        return get_protocol(job.protocol).tags

    def default_step_timeout(self, job: GLMJob) -> float:
        # HE protocols (those with a key holder): key generation and the
        # decryption of every party's gradient can fall into one wait.
        return 900.0 if get_protocol(job.protocol).needs_coordinator else 300.0

    def summary(self, job: GLMJob, result, output: Optional[Path]) -> Dict[str, Any]:
        return {"protocol": job.protocol,
                "coef": None if result.coef is None else [float(v) for v in result.coef],
                "info": _jsonable(result.info),
                "privacy_spent": _privacy_spent(job, result.role, int(result.info.get("releases", 1)))}


    def evaluation_tags(self, job: GLMJob) -> FrozenSet[str]:
        return frozenset({TAG_EVAL_SCORES})

    def evaluate(self, channel: Any, job: GLMJob, role: str, result: Any, X: Optional[np.ndarray],
                 y: Optional[np.ndarray]) -> Optional[Dict[str, Any]]:
        if role not in ("active", "passive") or X is None:
            return None
        coef = np.asarray(result.coef, dtype=np.float64)
        own = np.asarray(X @ coef, dtype=np.float64)
        if role == "passive":
            channel.send(job.active, TAG_EVAL_SCORES, own)
            return None
        score = own.copy()
        for party in job.passives:
            part = check_received_array(channel.recv(party, TAG_EVAL_SCORES), receiver=channel.name, sender=party,
                                        tag=TAG_EVAL_SCORES, step=PHASE_EVALUATION, dtype=np.float64,
                                        shape=own.shape, what="held-out scores")
            with np.errstate(over="ignore"):  # an overflow is refused just below
                score += part
            if not np.all(np.isfinite(score)):  # finite scores whose sum overflows
                raise PeerMessageRefused(channel.name, party, TAG_EVAL_SCORES, PHASE_EVALUATION,
                                         "held-out scores: adding them overflows the float64 range")
        if y is None:
            raise ValueError("the active party has no held-out labels")
        return glm_metrics(job.loss, score, y)


def glm_metrics(loss: str, score: np.ndarray, y: np.ndarray) -> Dict[str, Any]:
    """The held-out metric of a GLM's scores ``score`` (``x . w`` summed over the
    parties) against the labels ``y`` as the active party's CSV has them:
    accuracy (sign of the score) and the majority rate for "logistic"/"svm"
    (labels 0/1 or -1/+1), R^2 of the prediction (the score for
    "least_squares", exp(score) for "poisson") otherwise."""
    score = np.asarray(score, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if loss in SIGNED_LABEL_LOSSES:
        positive = _labels_for(loss, y) > 0
        rate = float(np.mean(positive))
        return {"metric": "accuracy", "value": float(np.mean((score > 0) == positive)), "n": int(len(y)),
                "baseline": max(rate, 1.0 - rate), "baseline_name": "majority rate"}
    predicted = score if loss == "least_squares" else np.exp(score)
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - predicted) ** 2)) / total if total > 0 else None  # constant labels: undefined
    return {"metric": "R^2", "value": r2, "n": int(len(y)), "baseline": 0.0,
            "baseline_name": "R^2 of predicting the held-out mean"}


register_job_kind(GLMJobKind(), replace=True)
