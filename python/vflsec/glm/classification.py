"""How a classifier's scores become classes, and how they are judged on rare labels.

* **Decision threshold**: a logistic model predicts the positive class when its
  probability is above ``threshold`` (0.5 by default: ``theta > 0``, scikit-learn's rule).
  :func:`check_threshold` validates a fixed one; a job may instead choose it on held-out
  rows for a target recall or precision (:func:`parse_threshold_rule`, "recall:0.5" /
  "precision:0.3"; :func:`choose_threshold`).
* **Ranking metrics** (:func:`ranking_metrics`): ROC AUC and, where positives are rare
  (below :data:`RARE_POSITIVE_RATE`), the PR AUC (average precision). On a 6%-positive
  label every model that predicts the majority class has the majority rate's accuracy;
  these tell a useful model from none.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

__all__ = ["RARE_POSITIVE_RATE", "THRESHOLD_TARGETS", "check_threshold", "choose_threshold", "parse_threshold_rule",
           "ranking_metrics", "threshold_logit"]

#: below this share of positives a summary adds the PR AUC (average precision)
RARE_POSITIVE_RATE = 0.2
#: what a threshold chosen on held-out rows targets
THRESHOLD_TARGETS = ("recall", "precision")


def check_threshold(threshold: Any, what: str = "threshold") -> float:
    """A fixed decision threshold: a probability in (0, 1) (TypeError/ValueError otherwise)."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise TypeError(f"{what} must be a probability in (0, 1), got {threshold!r}")
    value = float(threshold)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{what} must be a probability in (0, 1), got {threshold!r}")
    return value


def threshold_logit(threshold: float) -> float:
    """The linear predictor at which the probability ``sigmoid(theta)`` equals ``threshold``."""
    return math.log(threshold) - math.log1p(-threshold)


def parse_threshold_rule(rule: Any) -> Union[float, Tuple[str, float]]:
    """A job's ``threshold``: a fixed probability (float), or ``(target, value)`` for a text
    ``"recall:0.5"`` / ``"precision:0.3"`` (a threshold chosen on the held-out rows).
    ValueError/TypeError naming the accepted forms otherwise."""
    if not isinstance(rule, str):
        return check_threshold(rule)
    target, _, text = rule.partition(":")
    forms = "a probability such as 0.3, or \"recall:0.5\" / \"precision:0.3\""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if target.strip() not in THRESHOLD_TARGETS or not 0.0 < value <= 1.0:
        raise ValueError(f"threshold must be {forms}, got {rule!r}")
    return target.strip(), value


def choose_threshold(probability: np.ndarray, positive: np.ndarray, target: str, value: float) -> Dict[str, Any]:
    """The threshold on ``probability`` whose predictions (``probability > threshold``) reach
    ``target`` ("recall" or "precision") ``value`` on these rows (``positive``: bool per row):
    for recall the highest such threshold (the fewest positives predicted), for precision the
    lowest (the most recall). Thresholds sit midway between neighbouring distinct scores. When
    no threshold reaches a precision target, the one of the highest precision, the most recall
    among equals (``reached`` is False). Returns ``{"threshold", "rule", "reached", "precision", "recall"}``."""
    if target not in THRESHOLD_TARGETS:
        raise ValueError(f"target must be one of {THRESHOLD_TARGETS}, got {target!r}")
    probability = np.asarray(probability, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_positive = int(positive.sum())
    if n_positive == 0 or n_positive == positive.size:
        raise ValueError("choosing a threshold needs held-out rows of both classes")
    scores = np.unique(probability)[::-1]  # distinct, highest first: cut k predicts positive iff p >= scores[k]
    order = np.argsort(-probability, kind="stable")
    sorted_p, sorted_pos = probability[order], positive[order]
    # True positives and predicted positives at each distinct cut.
    ends = np.searchsorted(-sorted_p, -scores, side="right")
    true_pos = np.cumsum(sorted_pos)[ends - 1]
    precision = true_pos / ends
    recall = true_pos / n_positive
    if target == "recall":
        k = int(np.argmax(recall >= value - 1e-12))  # recall grows with k: the first cut that reaches it
        reached = True
    else:
        meets = np.flatnonzero(precision >= value - 1e-12)
        reached = meets.size > 0
        # Unreached: the highest precision, with the most recall among equals.
        k = int(meets[-1]) if reached else int(np.flatnonzero(precision == precision.max())[-1])
    lower = scores[k + 1] if k + 1 < scores.size else 0.0
    threshold = float((scores[k] + lower) / 2.0)
    threshold = min(max(threshold, np.nextafter(0.0, 1.0)), np.nextafter(1.0, 0.0))
    return {"threshold": threshold, "rule": f"{target}:{value:g}", "reached": bool(reached),
            "precision": float(precision[k]), "recall": float(recall[k])}


def ranking_metrics(score: np.ndarray, positive: np.ndarray) -> Dict[str, Optional[float]]:
    """``{"auc", "positive_rate"}`` and, when positives are below :data:`RARE_POSITIVE_RATE`
    of the rows, ``"pr_auc"`` (average precision) of ``score`` (higher: more likely positive)
    against ``positive`` (bool per row). AUC and PR AUC are None when the rows hold one class."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    score = np.asarray(score, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    rate = float(positive.mean()) if positive.size else 0.0
    both = 0 < positive.sum() < positive.size
    out: Dict[str, Optional[float]] = {"auc": float(roc_auc_score(positive, score)) if both else None,
                                       "positive_rate": rate}
    if rate < RARE_POSITIVE_RATE:
        out["pr_auc"] = float(average_precision_score(positive, score)) if both else None
    return out
