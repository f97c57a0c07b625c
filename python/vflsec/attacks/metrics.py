"""Attack-success and privacy-utility metrics.

* :func:`feature_mse` / :func:`normalized_feature_mse`: feature recovery error.
  The normalized version divides by the error of the trivial guess "every
  row is the column mean of the true data", so 1.0 means the attack learned
  nothing beyond the marginal means and 0.0 means exact recovery.
* :func:`label_attack_accuracy`: fraction of labels an attack got right.
* :func:`membership_scores`: accuracy and ROC AUC of a membership attack.
* :func:`calibrated_averaged_performance`: FedPass's CAP, the mean over
  defense strengths of ``accuracy * recovery_error``.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np

from .._arrays import as_float_array

__all__ = [
    "calibrated_averaged_performance",
    "feature_mse",
    "label_attack_accuracy",
    "membership_scores",
    "normalized_feature_mse",
]


def _pair(true: Any, recovered: Any):
    t, _ = as_float_array(true, "true", dtype=np.float64)
    r, _ = as_float_array(recovered, "recovered", dtype=np.float64)
    if t.shape != r.shape:
        raise ValueError(f"true has shape {t.shape} but recovered has shape {r.shape}")
    if t.ndim == 0:
        raise ValueError("true and recovered must have one row per sample (ndim >= 1)")
    # One row per sample, any trailing shape (images) flattened.
    return t.reshape(t.shape[0], -1), r.reshape(r.shape[0], -1)


def feature_mse(true: Any, recovered: Any) -> float:
    """Mean squared error over all entries (FedPass's feature recovery error)."""
    t, r = _pair(true, recovered)
    return float(np.mean((t - r) ** 2))


def normalized_feature_mse(true: Any, recovered: Any) -> float:
    """``MSE(true, recovered) / MSE(true, column means of true)``.

    The denominator is the error of the best data-independent guess; a
    constant column contributes nothing to it, and if every column is
    constant a ValueError is raised (nothing to recover)."""
    t, r = _pair(true, recovered)
    baseline = float(np.mean((t - t.mean(axis=0)) ** 2))
    if baseline == 0.0:
        raise ValueError("true data has no variance: the normalized error is undefined")
    return float(np.mean((t - r) ** 2)) / baseline


def _labels(values: Any, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} must not be empty")
    return arr


def label_attack_accuracy(true_labels: Any, inferred_labels: Any) -> float:
    """Fraction of samples whose inferred label equals the true one."""
    t = _labels(true_labels, "true_labels")
    p = _labels(inferred_labels, "inferred_labels")
    if t.shape != p.shape:
        raise ValueError(f"true_labels has {t.shape[0]} entries but inferred_labels has {p.shape[0]}")
    return float(np.mean(t == p))


def membership_scores(is_member: Any, scores: Any, threshold: float = 0.5) -> Dict[str, float]:
    """``{"accuracy", "auc"}`` of a membership attack.

    ``is_member`` is 1/True for training members, ``scores`` the attack's
    membership probability; accuracy thresholds the scores at ``threshold``.
    Evaluate on balanced member / non-member sets so 0.5 is chance."""
    from sklearn.metrics import roc_auc_score

    m = _labels(is_member, "is_member").astype(bool)
    s, _ = as_float_array(scores, "scores", ndim=1, dtype=np.float64)
    if s.shape != m.shape:
        raise ValueError(f"is_member has {m.shape[0]} entries but scores has {s.shape[0]}")
    if m.all() or not m.any():
        raise ValueError("is_member must contain both members and non-members")
    return {"accuracy": float(np.mean((s >= threshold) == m)), "auc": float(roc_auc_score(m, s))}


def calibrated_averaged_performance(accuracies: Sequence[float], recovery_errors: Sequence[float]) -> float:
    """FedPass Definition 2: ``(1/m) sum_s Acc(g_s) * Rerr(g_s)`` over the m
    defense strengths ``s`` of one defense against one attack. Recovery error
    is the feature MSE for feature attacks and the fraction of wrongly
    inferred labels for label attacks (higher = better defense)."""
    acc, _ = as_float_array(accuracies, "accuracies", ndim=1, dtype=np.float64)
    err, _ = as_float_array(recovery_errors, "recovery_errors", ndim=1, dtype=np.float64)
    if acc.shape != err.shape:
        raise ValueError(f"accuracies has {acc.shape[0]} entries but recovery_errors has {err.shape[0]}")
    if acc.size == 0:
        raise ValueError("need at least one defense strength")
    return float(np.mean(acc * err))
