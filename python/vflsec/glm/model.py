"""The vertical GLM as a model: one definition for every path that trains one.

A vertical GLM is trained by the estimator
(:class:`~vflsec.glm.estimator.VerticalLogisticRegression`), by the
benchmarks' grid trainer on the same blocks (:mod:`vflsec.glm.fast`, fed by
:meth:`GLMDesign.blocks`) and by ``vflsec party`` (:mod:`vflsec.runtime.glm_kind`,
each party building its own block). The protocols (:mod:`.job`,
:mod:`.registry`) see only blocks of rows and targets; what those are is
defined here, once:

* **Party blocks**: one feature block per party, active party first, rows
  aligned. Each party builds its own block from its own rows
  (:meth:`GLMDesign.block`, one new array; or batch by batch,
  :meth:`GLMDesign.rows`, which the estimator trains on without a copy of
  the data); nothing here needs another party's data.
* **Row normalisation** (``row_norm="clip"``): every row onto the unit ball,
  ``x <- x / max(1, ||x||_2)`` (HDP-VFL's sensitivities need ``||x_i|| <= 1``
  per party); a per-row, data-independent map, applied again at prediction.
  ``None`` uses the rows as given (HDP-VFL then refuses rows above norm 1).
* **Intercept** (``fit_intercept=True``): the active party appends a constant
  column ``c = intercept_scaling`` and first projects its feature part onto
  the ball of radius ``sqrt(1 - c^2)``, so its rows ``[x, c]`` keep norm <= 1
  and the constant stays exactly ``c``. The intercept weight ``w_c`` is an
  ordinary weight of the active block: inside the DP row bound, penalized by
  ``lam`` and clipped with the block (``||[w_A, w_c]|| <= k``); the model's
  intercept is ``c * w_c``. Without it a logistic model must express the base
  rate through the features, which centred features cannot do (on
  Credit/Adult, 22-24% positives, it then predicts the majority class).
* **Labels** (:class:`LabelEncoding`, the active party's): "logistic" and
  "svm" take any two classes, the larger (``np.unique`` order) as +1;
  "least_squares" standardises the targets with the training labels' mean and
  standard deviation and clips them to ``+-3`` (the bound HDP-VFL's constants
  assume), predictions are mapped back; "poisson" takes counts as they are.
* **Metric** (:func:`glm_metric`): accuracy (beside the majority rate), ROC AUC and,
  for rare positives, PR AUC for the classification losses, R^2 of the prediction
  otherwise. A logistic model decides at its ``threshold`` (:class:`LabelEncoding`).
* **Privacy report** (:func:`privacy_spent`): what a party's released IR
  sequence spent under "hdp" with noise (the mechanism's own report), or the
  guarantee of the noisy gradients of an HE protocol with a DP model.

The least-squares standardisation uses the training labels' statistics: they
are not covered by epsilon (the same holds for the per-party feature scaling
of :func:`vflsec.data.vertical_split`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .._arrays import as_float_array, check_real
from ..dp.sensitivity import clip_row_norms, row_chunk
from .classification import check_threshold, ranking_metrics, threshold_logit
from .design_rows import DesignedRows
from .job import LOSSES, SIGNED_LABEL_LOSSES, GLMJob
from .shards import ShardedTable

__all__ = [
    "DEFAULT_INTERCEPT_SCALING",
    "GLMDesign",
    "LSQ_TARGET_CLIP",
    "LabelEncoding",
    "ROW_NORMS",
    "glm_metric",
    "privacy_spent",
    "privacy_text",
]

ROW_NORMS = ("clip", None)
DEFAULT_INTERCEPT_SCALING = 0.5
# |y| bound of the standardised least-squares targets (HDP-VFL's k_y).
LSQ_TARGET_CLIP = 3.0
_ROLES = ("active", "passive")


def _check_role(role: str) -> str:
    if role not in _ROLES:
        raise ValueError(f"role must be 'active' or 'passive' (a data party), got {role!r}")
    return role


@dataclass(frozen=True)
class GLMDesign:
    """How one vertical GLM's parties turn their rows into the blocks the
    protocols train on, and the trained blocks back into a model (module
    docstring).

    Parameters
    ----------
    loss : the GLM's loss (its labels' encoding, :meth:`fit_labels`).
    fit_intercept : the active party holds an intercept as a constant column.
    intercept_scaling : that column's constant ``c``, in (0, 1) (checked only
        with ``fit_intercept``, which alone uses it).
    row_norm : "clip" or None.
    """

    loss: str = "logistic"
    fit_intercept: bool = True
    intercept_scaling: float = DEFAULT_INTERCEPT_SCALING
    row_norm: Optional[str] = "clip"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be a bool, got {type(self.fit_intercept).__name__}")
        object.__setattr__(self, "fit_intercept", bool(self.fit_intercept))
        if self.fit_intercept:
            object.__setattr__(self, "intercept_scaling", check_real(
                self.intercept_scaling, "intercept_scaling", low=0.0, low_inclusive=False, high=1.0,
                high_inclusive=False))
        if self.row_norm not in ROW_NORMS:
            raise ValueError(f"row_norm must be one of {ROW_NORMS}, got {self.row_norm!r}")

    @property
    def active_radius(self) -> float:
        """Norm bound of the active party's feature part: ``sqrt(1 - c^2)``
        leaves room for the constant column (1 without an intercept)."""
        if not self.fit_intercept:
            return 1.0
        c = self.intercept_scaling
        return math.sqrt(1.0 - c * c)

    # -- rows -> blocks ------------------------------------------------------
    def features(self, X: np.ndarray, role: str) -> np.ndarray:
        """One party's feature rows after the row normalisation (no constant
        column): with "clip" onto the unit ball and, for the active party with
        an intercept, onto the ball of radius :attr:`active_radius` (a new
        array; ``X`` itself without "clip")."""
        _check_role(role)
        X = np.asarray(X, dtype=np.float64)
        if not self._projects(X):
            return X
        return self._project(X, role, np.empty_like(X))

    def _projects(self, X: np.ndarray) -> bool:
        return self.row_norm == "clip" and X.shape[1] > 0

    def _project(self, X: np.ndarray, role: str, out: np.ndarray) -> np.ndarray:
        """The row normalisation of ``X`` written into ``out`` (``X``'s shape):
        onto the unit ball, then in place onto the active party's ball; no
        other array of ``X``'s size."""
        clip_row_norms(X, out=out)
        radius = self.active_radius
        if role == "active" and radius < 1.0:
            clip_row_norms(out, radius, out=out)
        return out

    def block(self, X: np.ndarray, role: str) -> np.ndarray:
        """The block party ``role`` ("active" or "passive") trains on, from its
        own rows ``X`` (2-D): :meth:`features`, and for the active party with
        an intercept the constant column ``c`` appended. One new array at most
        (the rows are normalised straight into the block); ``X`` is never
        written."""
        _check_role(role)
        X = np.asarray(X, dtype=np.float64)
        if not (role == "active" and self.fit_intercept):
            return self.features(X, role)
        n, d = X.shape
        block = np.empty((n, d + 1))
        block[:, d] = self.intercept_scaling
        if self._projects(X):
            self._project(X, role, block[:, :d])
        else:
            block[:, :d] = X
        return block

    def rows(self, X: Union[np.ndarray, ShardedTable], role: str, index: Optional[np.ndarray] = None) -> DesignedRows:
        """The block of :meth:`block`, built batch by batch from ``X`` (2-D
        float64, kept as given): ``rows[idx]`` is ``block(X)[idx]`` bit for
        bit (every step of the design maps a row on its own), so a program
        that reads its block by batches holds no copy of the party's data
        (:mod:`vflsec.glm.design_rows`). ``index``: the block of ``X[index]``
        (without that copy). ``X`` may be a :class:`~vflsec.glm.shards.ShardedTable` (rows read
        from Parquet shards per batch)."""
        _check_role(role)
        if not isinstance(X, ShardedTable):
            X = np.asarray(X, dtype=np.float64)
        return DesignedRows(X, lambda selected: self.block(selected, role), self.width(X.shape[1], role), index)

    def blocks(self, parts: Sequence[np.ndarray], *, by_batch: bool = False) -> List[Any]:
        """Every party's block, active first (as :meth:`block` builds each;
        ``by_batch``: as :meth:`rows`, built batch by batch)."""
        make = self.rows if by_batch else self.block
        return [make(X, "active" if i == 0 else "passive") for i, X in enumerate(parts)]

    def width(self, n_features: int, role: str) -> int:
        """Columns of the block of a party holding ``n_features`` features."""
        return int(n_features) + (1 if _check_role(role) == "active" and self.fit_intercept else 0)

    def widths(self, n_features: Mapping[str, int], active: str) -> Dict[str, int]:
        """Block widths (a job's ``widths``) from every data party's number of
        feature columns; ``active`` names the active party."""
        return {party: self.width(d, "active" if party == active else "passive") for party, d in n_features.items()}

    # -- weights -> model ----------------------------------------------------
    def split_coef(self, coef: np.ndarray, role: str) -> Tuple[np.ndarray, Optional[float]]:
        """A trained block's weights as ``(feature weights, intercept)``: the
        intercept ``c * w_c`` for the active party (0.0 without one), None for
        a passive party."""
        coef = np.asarray(coef, dtype=np.float64)
        if _check_role(role) == "passive":
            return coef.copy(), None
        if not self.fit_intercept:
            return coef.copy(), 0.0
        return coef[:-1].copy(), float(self.intercept_scaling) * float(coef[-1])

    def decision_function(self, parts: Sequence[np.ndarray], coef: Sequence[np.ndarray],
                          intercept: float) -> np.ndarray:
        """``theta = sum_p features_p w_p + intercept`` on every party's rows
        ``parts`` (active first) with feature weights ``coef`` (equal to the
        blocks' ``X_p w_p`` summed: the constant column times ``w_c`` is the
        intercept).

        A chunk of about 1 MB of rows at a time: the row-normalised features
        exist for one chunk, not for every row (a prediction on a table the
        size of the training data would otherwise copy a party's columns
        whole). A chunk's product may differ in the last bit from one product
        over all rows (the BLAS kernel's blocking)."""
        weights = [np.asarray(w, dtype=np.float64) for w in coef]
        n = parts[0].shape[0] if parts else 0
        theta = np.empty(n, dtype=np.float64)
        step = row_chunk(sum(X.shape[1] for X in parts))
        for start in range(0, n, step):
            # One party's features at a time (a generator): the same sum, without every party's copy at once.
            features = (self.features(X[start:start + step], "active" if i == 0 else "passive")
                        for i, X in enumerate(parts))
            theta[start:start + step] = sum(X @ w for X, w in zip(features, weights)) + float(intercept)
        return theta

    def fit_labels(self, y: Any) -> "LabelEncoding":
        """The encoding of this GLM's labels fitted on the training labels ``y``."""
        return LabelEncoding.fit(self.loss, y)


@dataclass(frozen=True, eq=False)
class LabelEncoding:
    """How the active party's labels become the loss's targets and a linear
    predictor ``theta`` becomes a prediction in the labels' own terms.

    ``classes`` (logistic, svm): the two labels, the second one +1.
    ``threshold`` (logistic): the decision threshold on the probability,
    ``classes[1]`` when ``sigmoid(theta) > threshold`` (0.5: ``theta > 0``;
    :mod:`vflsec.glm.classification`); other losses take only 0.5 (svm:
    ``theta > 0``).
    ``mean``, ``scale`` (least squares): targets ``(y - mean) / scale``
    clipped to ``+-LSQ_TARGET_CLIP``; predictions ``theta * scale + mean``.
    Poisson: counts as they are, predictions ``exp(theta)``.
    """

    loss: str
    classes: Optional[np.ndarray] = None
    mean: float = 0.0
    scale: float = 1.0
    threshold: float = 0.5

    def __post_init__(self) -> None:
        threshold = check_threshold(self.threshold)
        if threshold != 0.5 and self.loss != "logistic":
            raise ValueError(f"a decision threshold other than 0.5 needs loss 'logistic' (a probability), this "
                             f"model has loss {self.loss!r}")
        object.__setattr__(self, "threshold", threshold)

    def with_threshold(self, threshold: float) -> "LabelEncoding":
        """This encoding deciding at ``threshold`` instead."""
        return dataclasses.replace(self, threshold=threshold)

    @classmethod
    def fit(cls, loss: str, y: Any) -> "LabelEncoding":
        """The encoding fitted on the training labels ``y`` (1-D; ValueError on
        NaN/inf, or for a classification loss on other than two classes)."""
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if loss in SIGNED_LABEL_LOSSES:
            y_arr = np.asarray(y)
            if y_arr.ndim != 1:
                raise ValueError(f"y must be 1-dimensional, got shape {y_arr.shape}")
            if y_arr.dtype.kind in "fc" and not np.isfinite(y_arr).all():
                raise ValueError("y contains NaN or infinite values")
            classes = np.unique(y_arr)
            if len(classes) != 2:
                raise ValueError(f"loss {loss!r} needs exactly 2 classes in y, got {len(classes)}")
            return cls(loss, classes=classes)
        values, _ = as_float_array(y, "y", ndim=1, dtype=np.float64)
        if loss == "least_squares":
            return cls(loss, mean=float(values.mean()), scale=float(values.std()) or 1.0)
        return cls(loss)

    def encode(self, y: Any) -> np.ndarray:
        """The loss's float64 targets: {-1, +1}, standardised values or counts."""
        if self.loss in SIGNED_LABEL_LOSSES:
            assert self.classes is not None  # fit gives classes to every classification encoding
            return np.where(np.asarray(y) == self.classes[1], 1.0, -1.0)
        values, _ = as_float_array(y, "y", ndim=1, dtype=np.float64)
        if self.loss == "least_squares":
            return np.clip((values - self.mean) / self.scale, -LSQ_TARGET_CLIP, LSQ_TARGET_CLIP)
        return values

    def predict(self, theta: np.ndarray) -> np.ndarray:
        """Predictions from the linear predictor: the class (``theta`` above the
        threshold's logit, ``theta > 0`` at 0.5), the
        target ``theta * scale + mean``, or the mean count ``exp(theta)``."""
        theta = np.asarray(theta, dtype=np.float64)
        if self.loss in SIGNED_LABEL_LOSSES:
            assert self.classes is not None
            cut = 0.0 if self.threshold == 0.5 else threshold_logit(self.threshold)
            return self.classes[(theta > cut).astype(int)]
        if self.loss == "least_squares":
            return theta * self.scale + self.mean
        return np.exp(theta)

    def describe(self) -> Dict[str, Any]:
        """JSON-ready: ``{"classes": [negative, positive]}``, ``{"mean", "scale"}`` or ``{}``."""
        if self.classes is not None:
            out: Dict[str, Any] = {"classes": [v.item() if isinstance(v, np.generic) else v for v in self.classes]}
            if self.threshold != 0.5:
                out["threshold"] = self.threshold
            return out
        if self.loss == "least_squares":
            return {"mean": self.mean, "scale": self.scale}
        return {}


def glm_metric(loss: str, theta: Any, y: Any, labels: LabelEncoding) -> Dict[str, Any]:
    """The metric of a GLM's linear predictor ``theta`` (``x . w`` summed over
    the parties, intercept included) against the labels ``y`` as given:
    accuracy of ``labels.predict(theta)`` beside the majority rate for
    "logistic"/"svm", with the ranking metrics of ``theta``
    (:func:`vflsec.glm.classification.ranking_metrics`: ``auc``,
    ``positive_rate`` and, for rare positives, ``pr_auc``) and the decision
    ``threshold``; R^2 of the prediction otherwise (None for constant
    labels, where it is undefined), beside 0 (predicting the labels' mean)."""
    theta = np.asarray(theta, dtype=np.float64)
    y = np.asarray(y)
    if theta.shape != y.shape:
        raise ValueError(f"theta has shape {theta.shape}, y {y.shape}")
    predicted = labels.predict(theta)
    if loss in SIGNED_LABEL_LOSSES:
        assert labels.classes is not None
        majority = max(float(np.mean(y == c)) for c in labels.classes) if y.size else 0.0
        return {"metric": "accuracy", "value": float(np.mean(predicted == y)), "n": int(y.size),
                "baseline": majority, "baseline_name": "majority rate",
                **ranking_metrics(theta, y == labels.classes[1]), "threshold": labels.threshold}
    y = y.astype(np.float64)
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - predicted) ** 2)) / total if total > 0 else None
    return {"metric": "R^2", "value": r2, "n": int(y.size), "baseline": 0.0,
            "baseline_name": "R^2 of predicting the held-out mean"}


def privacy_spent(job: GLMJob, role: str, releases: int = 1) -> Any:
    """What party ``role``'s releases spent, a :class:`vflsec.dp.PrivacySpent`:
    for "hdp" with noise the mechanism's own report over ``releases`` releases
    of the party's IR sequence (1, or one more per resume); for an HE protocol
    with a DP model ("paillier_dp", "ckks_dp", "taylor_dp") the guarantee of
    every block's noisy gradients, the same for every data party
    (:func:`vflsec.glm.he_dp.he_dp_privacy_spent`). None for every other
    protocol, for ``noise=False`` and for a party without data."""
    if not job.noise or role not in _ROLES:
        return None
    if job.protocol == "hdp":
        from .hdp import hdp_privacy_spent

        spent = hdp_privacy_spent(job, role, releases=releases)
    elif job.protocol == "mpc_dp":
        from .mpc_dp import mpc_dp_privacy_spent

        spent = mpc_dp_privacy_spent(job)
    else:
        from .he_dp import he_dp_privacy_spent

        spent = he_dp_privacy_spent(job)
    if job.loss == "least_squares" and spent is not None:
        # The targets' standardisation reads the labels the release protects: say so on the report.
        import dataclasses

        note = LEAST_SQUARES_CAVEAT if not spent.caveat else f"{spent.caveat}; {LEAST_SQUARES_CAVEAT}"
        spent = dataclasses.replace(spent, caveat=note)
    return spent


LEAST_SQUARES_CAVEAT = ("the least-squares targets are standardised with the training labels' mean and standard "
                        "deviation, which this epsilon does not cover")


def privacy_text(job: GLMJob, role: str, releases: int = 1) -> Optional[str]:
    """:func:`privacy_spent` as one line of text (what ``vflsec party`` writes),
    naming the releases of a resumed run."""
    spent = privacy_spent(job, role, releases)
    if spent is None:
        return None
    if releases == 1:  # an HE-DP guarantee counts one release per epoch: spent.releases is the epochs there
        return str(spent)
    return (f"{spent} over {spent.releases} releases of the IR sequence (the job was resumed or run again on these "
            f"rows: every run's releases count; calibrated for epsilon {job.epsilon:g} per release)")
