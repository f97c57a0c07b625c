"""The scikit-learn logistic-regression reference with the vertical models' objective.

``VerticalLogisticRegression(protection="centralized" | "single_party")`` and the
active-party-only model ``vflsec party`` trains beside a joint GLM (``[job]
active_only_model = true``, the fallback of a ``predict`` job) fit the same thing:
scikit-learn's ``LogisticRegression`` on rows already through the model's design
(:meth:`vflsec.glm.model.GLMDesign.features`), minimising the vertical models' objective
``mean loss + lam * R(w)`` (``C = 1 / (lam n)``; elastic net ``R = |w|_1 + mu/2 |w|^2``),
with scikit-learn's own unpenalized intercept.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np

__all__ = ["fit_logistic_reference", "logistic_regression_kwargs"]


def logistic_regression_kwargs(l1_ratio: float, C: float) -> Dict[str, Any]:
    """Arguments for sklearn's LogisticRegression across versions (1.8
    deprecated ``penalty`` in favour of ``l1_ratio`` and ``C=inf``)."""
    import sklearn

    solver = "lbfgs" if l1_ratio == 0.0 else "saga"
    major, minor = (int(part) for part in sklearn.__version__.split(".")[:2])
    if (major, minor) >= (1, 8):
        return dict(l1_ratio=l1_ratio, C=C, solver=solver)
    if math.isinf(C):
        return dict(penalty=None, solver="lbfgs")
    penalty = {0.0: "l2", 1.0: "l1"}.get(l1_ratio, "elasticnet")
    extra = dict(l1_ratio=l1_ratio) if penalty == "elasticnet" else {}
    return dict(penalty=penalty, C=C, solver=solver, **extra)


def fit_logistic_reference(X: np.ndarray, y_signed: np.ndarray, *, lam: float, penalty: str, mu: float,
                           fit_intercept: bool, sample_weight: Optional[np.ndarray] = None) -> Tuple[np.ndarray, float]:
    """``(w, intercept)`` of scikit-learn's LogisticRegression on ``X`` (rows through the design)
    and labels ``y_signed`` (+-1), with the vertical models' objective (module docstring);
    intercept 0.0 without ``fit_intercept``. ``sample_weight``: each row's loss weight (the
    class and sample weights of :mod:`vflsec.glm.weights`, combined per row)."""
    from sklearn.linear_model import LogisticRegression

    n = X.shape[0]
    l1_ratio = {"l2": 0.0, "l1": 1.0, "elasticnet": 1.0 / (1.0 + mu)}[penalty]
    if lam == 0:
        l1_ratio, C = 0.0, math.inf
    elif penalty == "elasticnet":
        C = l1_ratio / (lam * n)
    else:
        C = 1.0 / (lam * n)
    model = LogisticRegression(fit_intercept=bool(fit_intercept), max_iter=5000,
                               **logistic_regression_kwargs(l1_ratio, C))
    model.fit(X, y_signed, sample_weight=sample_weight)
    intercept = float(model.intercept_[0]) if fit_intercept else 0.0
    return np.asarray(model.coef_, dtype=np.float64).ravel().copy(), intercept
