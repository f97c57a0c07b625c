"""Saved GLM models: one JSON file, no pickle.

``VerticalLogisticRegression.save(path)`` and
``CentralDPLogisticRegression.save(path)`` write one JSON document (UTF-8,
mode 0600, atomically, never through a symlink:
:func:`vflsec.federation.private_files.write_private_bytes`, as the runtime
writes its model files)::

    {"format": "vflsec-glm-model", "version": 1, "estimator": "<class name>",
     "vflsec_version": "...", "params": {...}, "fitted": {...},
     "not_saved": "..."}

``params`` are the estimator's ``get_params()`` (a ``class_weight`` dict as
``{"label_weight_pairs": [[label, weight], ...]}``: its keys are labels); ``fitted`` is the model as
data: the weight blocks, the intercept, the design (row normalisation,
intercept column), the label encoding (the classes with their dtype and the
decision threshold, or the least-squares scaling), ``n_features_in_``, ``feature_names_in_``, the party
names and columns, the resolved ``delta_`` and ``privacy_spent_`` (the
:class:`vflsec.dp.PrivacySpent` fields). Floats are written with Python's
shortest round-trip repr, so a reloaded model's weights are bit-identical and
it predicts identically; an infinite or NaN float is written as
``{"__float__": "inf"}``.

Not saved: the noise generator and any noise seed (``noise_seed`` is saved as
None: whoever holds a seed can reconstruct the noise), HE keys (a fitted
estimator keeps none), and the training-time objects that are not the model
(the central estimator's ``mechanism_``). Loading reads only this format
(ValueError naming the file otherwise); it never executes code from the file.
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from .._json_data import from_json, read_saved_model, to_json
from .model import GLMDesign, LabelEncoding

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "NOT_SAVED",
    "decode_design",
    "decode_labels",
    "decode_privacy_spent",
    "encode_design",
    "encode_labels",
    "encode_privacy_spent",
    "from_json",
    "load_model",
    "read_model",
    "save_model",
    "to_json",
    "write_model",
]

FORMAT = "vflsec-glm-model"
FORMAT_VERSION = 1
NOT_SAVED = ("the noise generator and noise seeds (noise_seed is saved as None), HE keys, and training-time "
             "objects that are not the model (e.g. mechanism_, the executor: saved as None)")
PathLike = Union[str, "Path"]


# -- the model's parts ---------------------------------------------------------------------------
def encode_design(design: GLMDesign) -> Dict[str, Any]:
    return {"loss": design.loss, "fit_intercept": design.fit_intercept,
            "intercept_scaling": float(design.intercept_scaling), "row_norm": design.row_norm}


def decode_design(data: Any) -> GLMDesign:
    return GLMDesign(loss=data["loss"], fit_intercept=data["fit_intercept"],
                     intercept_scaling=data["intercept_scaling"], row_norm=data["row_norm"])


def encode_labels(labels: LabelEncoding) -> Dict[str, Any]:
    """The label encoding; the classes with their numpy dtype, so they come back as they were."""
    classes = None
    if labels.classes is not None:
        array = np.asarray(labels.classes)
        if array.dtype.kind not in "biufUO":
            raise TypeError(f"labels of dtype {array.dtype} cannot be saved -- use str, int, float or bool labels")
        classes = {"values": to_json(array, "classes_"), "dtype": array.dtype.str if array.dtype.kind != "O"
                   else "object"}
    return {"loss": labels.loss, "classes": classes, "mean": float(labels.mean), "scale": float(labels.scale),
            "threshold": float(labels.threshold)}


def decode_labels(data: Any) -> LabelEncoding:
    classes = data.get("classes")
    values = None
    if classes is not None:
        values = np.asarray(from_json(classes["values"]), dtype=np.dtype(classes["dtype"]))
    # A model saved before decision thresholds existed decides at 0.5.
    return LabelEncoding(data["loss"], classes=values, mean=float(data["mean"]), scale=float(data["scale"]),
                         threshold=float(data.get("threshold", 0.5)))


def encode_privacy_spent(spent: Any) -> Optional[Dict[str, Any]]:
    return None if spent is None else to_json(dataclasses.asdict(spent), "privacy_spent_")


def decode_privacy_spent(data: Any) -> Any:
    if data is None:
        return None
    from ..dp.accountant import PrivacySpent

    return PrivacySpent(**from_json(data))


# -- the file ------------------------------------------------------------------------------------
def write_model(path: PathLike, estimator: str, params: Dict[str, Any], fitted: Dict[str, Any]) -> None:
    """Write one saved model (module docstring) to ``path``: 0600, atomic, not through a symlink."""
    from .. import __version__
    from ..federation.private_files import write_private_bytes

    document = {"format": FORMAT, "version": FORMAT_VERSION, "estimator": estimator,
                "vflsec_version": __version__, "params": to_json(params, "params"),
                "fitted": to_json(fitted, "fitted"), "not_saved": NOT_SAVED}
    text = json.dumps(document, indent=1, allow_nan=False)
    write_private_bytes(Path(path), (text + "\n").encode("utf-8"))


def read_model(path: PathLike, estimator: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(params, fitted)`` of the saved ``estimator`` at ``path`` (floats decoded). ValueError
    naming the file when it is not such a model (FileNotFoundError when it does not exist)."""
    return read_saved_model(Path(path), "a saved vflsec GLM model", FORMAT, FORMAT_VERSION, estimator)


# -- the estimators ------------------------------------------------------------------------------
def save_model(model: Any, path: PathLike) -> None:
    """Save a fitted :class:`~vflsec.glm.VerticalLogisticRegression` (every party's
    weight block, its parties and columns, the batch seed) or
    :class:`~vflsec.glm.CentralDPLogisticRegression` (one weight vector, ``lam_``,
    ``steps_``) to ``path``."""
    params = model.get_params(deep=False)
    params["noise_seed"] = None  # never saved: whoever holds it can reconstruct the noise
    if "executor" in params:
        params["executor"] = None  # where the HE work ran (a process's pool, a cluster), not part of the model
    if isinstance(params.get("class_weight"), dict):  # labels as keys, which JSON objects cannot hold: pairs
        params["class_weight"] = {"label_weight_pairs": [[label, weight] for label, weight in
                                                         params["class_weight"].items()]}
    vertical = hasattr(model, "party_names_")
    fitted: Dict[str, Any] = {
        "coef": list(model.coef_) if vertical else model.coef_, "intercept": model.intercept_,
        "design": encode_design(model.design_), "labels": encode_labels(model.labels_),
        "n_features_in": model.n_features_in_, "feature_names_in": getattr(model, "feature_names_in_", None),
        "delta": model.delta_,
    }
    if vertical:
        if params["random_state"] is not None and not isinstance(params["random_state"], numbers.Integral):
            params["random_state"] = model.batch_seed_  # one draw of a RandomState: the seed the fit used
        fitted.update(party_names=list(model.party_names_), party_columns=model.party_columns_,
                      batch_size=model.batch_size_, batch_seed=model.batch_seed_,
                      privacy_spent={name: encode_privacy_spent(spent) for name, spent in model.privacy_spent_.items()})
    else:
        fitted.update(lam=model.lam_, steps=model.steps_, privacy_spent=encode_privacy_spent(model.privacy_spent_))
    write_model(path, type(model).__name__, params, fitted)


def _check_weights(model: Any, vertical: bool) -> None:
    """ValueError unless the loaded model is one a fit can produce: finite 1-D weight blocks
    and intercept, two distinct classes, and (vertical) one block per party whose width is
    that party's number of columns."""
    blocks = model.coef_ if vertical else [model.coef_]
    if any(w.ndim != 1 or not np.all(np.isfinite(w)) for w in blocks) or not math.isfinite(model.intercept_):
        raise ValueError("the weights must be finite 1-D blocks and the intercept a finite number")
    classes = model.labels_.classes
    if classes is not None and (classes.ndim != 1 or classes.size != 2 or len(set(classes.tolist())) != 2):
        raise ValueError(f"a model has two distinct classes, the file gives {classes.tolist()!r}")
    if vertical:
        if len(model.party_names_) != len(blocks):
            raise ValueError(f"{len(model.party_names_)} party names for {len(blocks)} weight blocks")
        if model.party_columns_ is not None and [len(c) for c in model.party_columns_.values()] != [
                len(w) for w in blocks]:
            raise ValueError("the parties' columns do not match their weight blocks")


def load_model(cls: Any, path: PathLike) -> Any:
    """The ``cls`` model saved at ``path`` by :func:`save_model` (ValueError naming the file
    when it is incomplete or damaged)."""
    params, fitted = read_model(path, cls.__name__)
    try:
        pairs = params.get("class_weight")
        if isinstance(pairs, dict) and set(pairs) == {"label_weight_pairs"}:
            params["class_weight"] = {label: weight for label, weight in pairs["label_weight_pairs"]}
        model = cls(**params)
        vertical = "party_names" in fitted
        if vertical:
            model.coef_ = [np.asarray(w, dtype=np.float64) for w in fitted["coef"]]
        else:
            model.coef_ = np.asarray(fitted["coef"], dtype=np.float64)
        model.intercept_ = float(fitted["intercept"])
        model.design_ = decode_design(fitted["design"])
        model.labels_ = decode_labels(fitted["labels"])
        if model.labels_.classes is not None:
            model.classes_ = model.labels_.classes
        model.n_features_in_ = int(fitted["n_features_in"])
        if fitted["feature_names_in"] is not None:
            model.feature_names_in_ = np.asarray(fitted["feature_names_in"], dtype=object)
        model.delta_ = float(fitted["delta"])
        if vertical:
            if model.labels_.loss == "least_squares":
                model.y_mean_, model.y_scale_ = model.labels_.mean, model.labels_.scale
            model.party_names_ = tuple(fitted["party_names"])
            columns = fitted["party_columns"]
            model.party_columns_ = None if columns is None else {
                str(party): [int(i) for i in positions] for party, positions in columns.items()}
            model.batch_size_ = int(fitted["batch_size"])
            model.batch_seed_ = int(fitted["batch_seed"])
            model.n_parties_ = len(model.coef_)
            model.active_radius_ = model.design_.active_radius
            model.privacy_spent_ = {name: decode_privacy_spent(spent)
                                    for name, spent in fitted["privacy_spent"].items()}
            widths = [len(w) for w in model.coef_]
        else:
            model.lam_ = float(fitted["lam"])
            model.steps_ = int(fitted["steps"])
            model.privacy_spent_ = decode_privacy_spent(fitted["privacy_spent"])
            widths = [len(model.coef_)]
        _check_weights(model, vertical)
        if sum(widths) != model.n_features_in_:
            raise ValueError(f"the weights cover {sum(widths)} features, n_features_in is {model.n_features_in_}")
        names = getattr(model, "feature_names_in_", None)
        if names is not None and len(names) != model.n_features_in_:
            raise ValueError(f"{len(names)} feature names for {model.n_features_in_} features")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: the saved model is incomplete or damaged ({exc})") from None
    return model
