"""Row weights of a vertical GLM's loss: ``class_weight`` and ``sample_weight``.

The semantics are scikit-learn's ``LogisticRegression``: each row's loss (and so its
gradient) is multiplied by its weight, ``class_weight[label] * sample_weight[row]``;
``class_weight="balanced"`` is ``n / (n_classes * count(label))`` over the training
labels (:func:`sklearn.utils.class_weight.compute_class_weight`), a dict maps a label to
its weight (labels it leaves out weigh 1). Only the active party holds the weights:
they are computed from its labels.

Where a weight enters (:class:`RowWeights`, ``PartyData.weights`` of the active party):
the IR protocol "plain" multiplies the active party's residuals ``dl/dtheta`` by the
batch's weights before it uses and sends them (:mod:`.ir_exchange`); the HE protocols
("paillier", "taylor") multiply the residual ``alpha (theta + s(y))`` -- the linear
Taylor residual of the logistic loss, whose weighted loss ``v (ln 2 - y theta / 2 +
theta^2 / 8)`` has exactly the residual ``v alpha (theta + s(y))`` -- under encryption by
the weights before it is sent (:mod:`.he_vfl`). The job says publicly that a fit is
weighted (:attr:`GLMJob.weighted`), never the weights.

A protocol that cannot apply them says why (:attr:`vflsec.glm.registry.Protocol.weight_refusal`)
and a weighted fit of it is refused, never trained unweighted: the DP protocols' sensitivity
bounds assume unit weight per row (a weight scales a row's influence), and "balanced"
weights are computed from the labels the DP protects; CKKS's parameters leave one
multiplicative level, which the gradient's product uses.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

__all__ = ["DP_WEIGHT_REFUSAL", "RowWeights", "check_class_weight", "check_sample_weight", "class_weights",
           "is_weighted", "refuse_weights", "row_weights"]

ClassWeight = Union[None, str, Mapping[Any, float]]

#: why the DP protocols ("hdp", the HE-DP ones) refuse row weights
DP_WEIGHT_REFUSAL = ("its DP sensitivity bounds assume every row weighs 1 (a weight scales a row's influence on "
                     "what is released), and 'balanced' weights are computed from the labels the DP protects")


def check_class_weight(class_weight: Any) -> ClassWeight:
    """``class_weight`` if it is None, "balanced" or a mapping label -> weight (finite, >= 0);
    TypeError/ValueError otherwise."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if isinstance(class_weight, str):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict label -> weight, got {class_weight!r}")
    if not isinstance(class_weight, Mapping):
        raise TypeError(f"class_weight must be None, 'balanced' or a dict label -> weight, got "
                        f"{type(class_weight).__name__}")
    for label, weight in class_weight.items():
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"class_weight[{label!r}] must be a finite number >= 0, got {weight!r}")
    return class_weight


def is_weighted(class_weight: Any, sample_weight: Any = None) -> bool:
    """Whether a fit weights its rows: any ``class_weight`` or ``sample_weight`` given (the
    decision never reads the labels, so refusing a weighted DP fit reveals nothing of them)."""
    return class_weight is not None or sample_weight is not None


def refuse_weights(protocol: Any, class_weight: Any, sample_weight: Any = None) -> None:
    """ValueError naming the protocol and why, when a weighted fit asks for a protocol that
    cannot apply row weights (``protocol``: a :class:`vflsec.glm.registry.Protocol`)."""
    if not is_weighted(class_weight, sample_weight) or protocol.weight_refusal is None:
        return
    given = "class_weight" if class_weight is not None else "sample_weight"
    raise ValueError(f"protocol {protocol.name!r} cannot take {given}: {protocol.weight_refusal} -- use protocol "
                     "'plain', 'paillier' or 'taylor' for a weighted fit, or a decision threshold (threshold=) "
                     "instead of weights")


def check_sample_weight(sample_weight: Any, n: int) -> Optional[np.ndarray]:
    """``sample_weight`` as a float64 vector of ``n`` finite weights >= 0 with a positive sum
    (None stays None); ValueError otherwise."""
    if sample_weight is None:
        return None
    values = np.asarray(sample_weight, dtype=np.float64)
    if values.ndim == 0:
        values = np.full(n, float(values))
    if values.shape != (n,):
        raise ValueError(f"sample_weight has shape {values.shape}, expected ({n},): one weight per row")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("sample_weight must hold finite weights >= 0")
    if not values.sum() > 0:
        raise ValueError("sample_weight sums to 0: at least one row must weigh more than 0")
    return values


def class_weights(class_weight: ClassWeight, classes: np.ndarray, labels: Any) -> Dict[Any, float]:
    """The weight of each of the two ``classes`` (negative, positive): scikit-learn's
    ``compute_class_weight`` on ``labels`` (the training labels, as given; "balanced"
    counts them), all 1.0 for None. ValueError for a dict naming a label not in ``classes``."""
    if class_weight is None:
        return {c: 1.0 for c in classes.tolist()}
    from sklearn.utils.class_weight import compute_class_weight

    if isinstance(class_weight, Mapping):
        unknown = [label for label in class_weight if label not in set(classes.tolist())]
        if unknown:
            raise ValueError(f"class_weight names {unknown!r}, which are not among the classes "
                             f"{classes.tolist()!r} -- key class_weight by the labels as they are in y")
        class_weight = dict(class_weight)
    values = compute_class_weight(class_weight, classes=classes, y=np.asarray(labels))
    return {c: float(v) for c, v in zip(classes.tolist(), values)}


@dataclass(frozen=True)
class RowWeights:
    """The active party's weights of its rows: ``negative`` / ``positive`` for the rows whose
    target is -1 / +1 (the class weights), times ``sample[row]`` when per-row weights are
    given (rows in the job's aligned order). Read per batch with the batch's targets, so
    labels kept in shards are never read whole."""

    negative: float = 1.0
    positive: float = 1.0
    sample: Optional[np.ndarray] = None

    def of(self, idx: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The weights of rows ``idx`` whose targets (+-1) are ``targets``."""
        weights = np.where(np.asarray(targets) > 0, self.positive, self.negative)
        if self.sample is not None:
            weights = weights * self.sample[idx]
        return weights

    def describe(self) -> Dict[str, Any]:
        """JSON-ready: the class weights, and whether per-row weights were given."""
        return {"negative": self.negative, "positive": self.positive, "sample_weight": self.sample is not None}


def row_weights(class_weight: ClassWeight, sample_weight: Any, encoding: Any, labels: Any,
                n: int) -> Optional[RowWeights]:
    """The :class:`RowWeights` of a fit on the ``n`` training ``labels`` (as given) encoded
    by ``encoding`` (a :class:`vflsec.glm.model.LabelEncoding`; class weights need its two
    classes), None when it is unweighted (:func:`is_weighted`)."""
    sample = check_sample_weight(sample_weight, n)
    if check_class_weight(class_weight) is not None and encoding.classes is None:
        raise ValueError(f"class_weight needs a classification loss ('logistic', 'svm'), got loss {encoding.loss!r}")
    if not is_weighted(class_weight, sample):
        return None
    if encoding.classes is None:
        return RowWeights(sample=sample)
    by_class = class_weights(class_weight, encoding.classes, labels)
    negative, positive = (by_class[c] for c in encoding.classes.tolist())
    return RowWeights(negative, positive, sample)
