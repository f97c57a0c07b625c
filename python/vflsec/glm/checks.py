"""The checks both GLM estimators make around a fit.

* ``sample_weight`` of the central DP estimator: accepted by ``fit`` only as
  None. Its DP analyses weight every row equally (a weight would scale a row's
  influence and with it the sensitivity), so a weight is refused instead of
  being ignored. (The vertical estimator takes row weights where its protocol
  can apply them: :mod:`vflsec.glm.weights`.)
* ``delta``: None (the default) is :func:`vflsec.dp.default_delta` of the
  training rows, ``min(1e-5, 1/(10 n))``; an explicit delta of at least ``1/n``
  is honoured with a :class:`~vflsec.dp.PrivacyWarning`
  (:func:`vflsec.dp.check_delta_for_rows`).
* A DP model that predicts one class for every training row gets a
  :class:`~vflsec.dp.PrivacyWarning`: its accuracy is then the majority-class
  model's (the majority rate) and looks like a result. Two causes, which the
  warning tells apart with a non-private reference fitted on the same rows
  (scikit-learn's logistic regression on the joined features) where the caller
  has one: at a small epsilon the noise can drown the signal (HDP-VFL at
  epsilon 1 on Adult predicted the majority class for everyone, silently); or
  the label is rare, and the reference predicts one class too at the same
  decision threshold -- then the DP noise is not to blame, and the warning
  says to judge the model by its AUC and lower the threshold (or weight the
  classes, with a protocol that can).
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..dp.delta_rule import check_delta_for_rows, default_delta
from ..dp.gaussian import PrivacyWarning

__all__ = ["reference_predictions", "refuse_sample_weight", "resolve_delta", "warn_single_class"]


def refuse_sample_weight(sample_weight: Any, who: str) -> None:
    """ValueError unless ``sample_weight`` is None (module docstring)."""
    if sample_weight is not None:
        raise ValueError(f"{who}.fit does not take sample_weight: the vertical protocols and the DP analyses weight "
                         "every row equally (a row weight would change the sensitivity) -- pass sample_weight=None, "
                         "or repeat or drop rows instead")


def resolve_delta(delta: Optional[float], n: int, *, warn: bool) -> float:
    """The delta of a fit on ``n`` rows: ``default_delta(n)`` for None; an explicit one as
    given, with a PrivacyWarning when ``warn`` (the fit releases under DP) and it is at
    least ``1/n``. Its range is checked by the mechanism that uses it."""
    if delta is None:
        return default_delta(n)
    if warn and isinstance(delta, (int, float, np.floating)) and not isinstance(delta, bool) and 0 < delta < 1:
        check_delta_for_rows(delta, n)
    return delta  # type: ignore[return-value]  # validated (TypeError/ValueError) where it is used


def warn_single_class(predicted: np.ndarray, who: str, epsilon: Any, *, y: Any = None,
                      reference: Optional[Tuple[str, np.ndarray]] = None) -> None:
    """A PrivacyWarning when a DP model's predictions on its training rows are all one class
    (module docstring). ``y``: the training labels (for the majority rate); ``reference``:
    ``(name, predictions)`` of a non-private model on the same rows at the same threshold."""
    values = np.unique(predicted)
    if values.size != 1:
        return
    label = values[0].item() if isinstance(values[0], np.generic) else values[0]
    majority = ""
    if y is not None and np.asarray(y).size:
        rate = float(np.mean(np.asarray(y) == values[0]))
        majority = (f" (its accuracy {rate:.4f} is the majority-class model's)" if rate >= 0.5
                    else f" (the minority class: its accuracy is {rate:.4f})")
    fixes = ("judge it by its AUC, and lower the decision threshold (threshold=) or weight the classes "
             "(class_weight='balanced', with a protocol that takes it: 'plain', 'paillier')")
    name, theirs = (None, None) if reference is None else (reference[0], np.unique(reference[1]))
    if theirs is not None and theirs.size == 1 and theirs[0] == values[0]:
        text = (f"{who} predicts the single class {label!r} for every training row{majority}, and so does the "
                f"non-private {name} on the same rows, so the DP noise (epsilon={epsilon}) is not the cause: "
                f"at this decision threshold the label is too rare (or the features too weak) for either model to "
                f"predict the other class -- {fixes}")
    else:
        if theirs is None:
            beside = ""
        elif theirs.size == 1:
            other = theirs[0].item() if isinstance(theirs[0], np.generic) else theirs[0]
            beside = f" ({name} predicts {other!r} on the same rows)"
        else:
            beside = f" ({name} predicts both classes on the same rows)"
        text = (f"{who} predicts the single class {label!r} for every training row{majority}: at epsilon={epsilon} "
                f"the DP noise has drowned the signal{beside} -- raise epsilon, use more rows, or take fewer steps "
                f"(fewer epochs, larger batches); for a rare label, also {fixes}")
    warnings.warn(text, PrivacyWarning, stacklevel=3)


#: rows the single-class warning's reference is fitted on at most (a sample beyond: the question is
#: only whether it predicts one class, and its joined copy of the features stays small)
REFERENCE_ROWS = 10_000


def reference_predictions(design: Any, parts: Sequence[np.ndarray], y_signed: np.ndarray, labels: Any, *,
                          lam: float, penalty: str, mu: float) -> Optional[Tuple[str, np.ndarray]]:
    """``(name, predictions)`` of the non-private centralized reference (scikit-learn's
    LogisticRegression on the joined features through ``design``, the same penalty) on the
    training rows ``parts`` (active first; at most :data:`REFERENCE_ROWS` of them, a fixed
    sample beyond) at the decision threshold of ``labels``, for :func:`warn_single_class`;
    None for a loss other than "logistic"."""
    if labels.loss != "logistic":
        return None
    from .reference import fit_logistic_reference

    n = len(y_signed)
    rows = np.sort(np.random.default_rng(0).choice(n, REFERENCE_ROWS, replace=False)) if n > REFERENCE_ROWS else None
    joined = np.hstack([design.features(X if rows is None else X[rows], "active" if i == 0 else "passive")
                        for i, X in enumerate(parts)])
    targets = y_signed if rows is None else y_signed[rows]
    if np.unique(targets).size < 2:
        return None
    w, intercept = fit_logistic_reference(joined, targets, lam=lam, penalty=penalty, mu=mu,
                                          fit_intercept=design.fit_intercept)
    name = "scikit-learn LogisticRegression" + ("" if rows is None else f" (on a sample of {REFERENCE_ROWS:,} rows)")
    return name, labels.predict(joined @ w + intercept)
