"""Row weights of vertical boosting: scikit-learn's ``sample_weight`` and ``class_weight``; which protections take them.

As scikit-learn's ``HistGradientBoostingClassifier`` defines them: a row's weight is its
``sample_weight`` (1 when None) times its class's weight (``class_weight``: None, every class 1;
"balanced", ``n_samples / (n_classes * bincount(y))``; a dict from class label to weight, a class
it does not name 1) (:func:`row_weights`). The weights multiply each row's gradient and hessian
(:meth:`vflsec.trees.protection.Protection.gradients`); the baseline score is the log-odds of the
weighted positive rate and ``train_loss_`` the weighted mean loss. ``min_samples_leaf`` still
counts rows, ``min_hessian`` bounds the weighted hessian sums (scikit-learn's rules too).

Weighted gradients stay on a fixed-point grid as unit-weight ones do: ``g / s`` on the job's grid
(:meth:`vflsec.trees.job.TreeJob.quantize`), ``s`` = :func:`weight_scale`, the least power of two
at least the largest weight. Every histogram sum is then exact, and SecureBoost, which packs
``g / s'`` for a power of two ``s'`` of its own (|g| <= 1, h <= 1/4 in its slots), opens the same
histograms bit for bit: the same trees as the plain protocol with the same weights.

Which protections take which weights (:func:`check_weights_for`, :data:`WEIGHT_REFUSALS`):
"plain" and "secureboost" both; "label_dp" ``class_weight`` only, computed from the labels it
trains on, those randomized response released (post-processing: the guarantee holds; the
weights are the released labels' classes', not the true ones'); "dp" neither.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

__all__ = ["WEIGHT_REFUSALS", "ClassWeight", "check_sample_weight", "check_weights_for", "power_of_two_at_least",
           "resolve_class_weight", "row_weights", "weight_scale"]

#: a class weight resolved for the 0/1-encoded labels: None, "balanced", or (weight of class 0, of class 1)
ClassWeight = Union[None, str, Tuple[float, float]]

#: why a protection refuses a kind of weight (protection -> {"sample_weight" | "class_weight": why})
WEIGHT_REFUSALS: Dict[str, Dict[str, str]] = {
    "dp": {
        "sample_weight": "its Gaussian gradient release is calibrated to a sensitivity of 1 per replaced label "
                         "(g = q - y at unit weight) and releases every row's hessian as it is: a row weight would "
                         "scale that row's sensitivity and be released through its hessian",
        "class_weight": "class weights read the labels it protects: a row's weight, and with it its gradient's "
                        "sensitivity and its released hessian, would depend on the row's label -- use protection "
                        "'label_dp' (it weights the labels it released)",
    },
    "label_dp": {
        "sample_weight": "its guarantee covers the labels, released once by randomized response; a row weight "
                         "reaches training without that release, and one derived from the label would carry it "
                         "past the guarantee -- use class_weight (label_dp computes it from the released labels)",
    },
}


def check_weights_for(protection: str, *, sample_weight: bool, class_weight: bool) -> None:
    """ValueError naming the protection and why, when it cannot take the weights given (module docstring)."""
    refusals = WEIGHT_REFUSALS.get(protection, {})
    for what, given in (("sample_weight", sample_weight), ("class_weight", class_weight)):
        if given and what in refusals:
            raise ValueError(f"protection {protection!r} does not take {what}: {refusals[what]}; or leave "
                             f"{what}=None")


def check_sample_weight(sample_weight: Any, n_samples: int) -> Optional[np.ndarray]:
    """``sample_weight`` as ``n_samples`` finite non-negative float64 values with a positive sum (None stays None);
    ValueError (TypeError for non-numbers) saying what is wrong otherwise."""
    if sample_weight is None:
        return None
    array = np.asarray(sample_weight)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.shape != (n_samples,):
        raise ValueError(f"sample_weight must be 1-D with one weight per row ({n_samples}), got shape {array.shape}")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"sample_weight must be finite and non-negative (row {row} has {float(array[row])!r})")
    if not array.sum() > 0:
        raise ValueError("sample_weight sums to 0: at least one row must have a positive weight")
    return array


def resolve_class_weight(class_weight: Any, classes: np.ndarray) -> ClassWeight:
    """``class_weight`` for the 0/1-encoded labels (``classes``: the two labels they encode, ``classes_``):
    None, "balanced", or each class's weight (a class the dict does not name: 1). ValueError for a dict
    key that is not a class, a weight that is not a finite non-negative number, any other value."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict from class label to weight, got "
                         f"{class_weight!r}")
    labels = [c.item() if isinstance(c, np.generic) else c for c in classes]
    unknown = [key for key in class_weight if not any(key == label for label in labels)]
    if unknown:
        raise ValueError(f"class_weight names {unknown[0]!r}, which is not a class of y ({labels})")
    weights = []
    for label in labels:
        weight = class_weight.get(label, 1.0)
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) \
                or weight < 0:
            raise ValueError(f"class_weight of class {label!r} must be a finite non-negative number, got {weight!r}")
        weights.append(float(weight))
    return weights[0], weights[1]


def row_weights(y: np.ndarray, sample_weight: Optional[np.ndarray], class_weight: ClassWeight
                ) -> Optional[np.ndarray]:
    """Each row's weight for the 0/1 labels ``y`` the active party trains on (module docstring);
    None when every row weighs 1 (no weights given)."""
    if sample_weight is None and class_weight is None:
        return None
    weight = np.ones(len(y)) if sample_weight is None else sample_weight
    if class_weight is None:
        return weight
    codes = np.asarray(y).astype(np.int64)
    if isinstance(class_weight, str):  # "balanced", over the classes present in y (scikit-learn's rule)
        counts = np.bincount(codes, minlength=2).astype(np.float64)
        present = int(np.count_nonzero(counts))
        per_class = np.where(counts > 0, len(codes) / (present * np.maximum(counts, 1.0)), 0.0)
    else:
        per_class = np.asarray(class_weight, dtype=np.float64)
    expanded = per_class[codes]
    if sample_weight is None:
        return expanded
    return sample_weight * expanded


def weight_scale(weight: Optional[np.ndarray]) -> float:
    """The least power of two at least every weight, and at least 1 (1 for None)."""
    if weight is None or len(weight) == 0:
        return 1.0
    return power_of_two_at_least(float(np.max(weight)))


def power_of_two_at_least(value: float) -> float:
    """The least power of two ``>= value``, and at least 1."""
    if not value > 1.0:
        return 1.0
    mantissa, exponent = math.frexp(value)  # value = mantissa * 2^exponent, 0.5 <= mantissa < 1
    return math.ldexp(1.0, exponent - 1 if mantissa == 0.5 else exponent)
