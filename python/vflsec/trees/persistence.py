"""Saved vertical trees models: one JSON file, no pickle; and the checks of a saved model's parts.

``VerticalGradientBoostingClassifier.save(path)`` writes one JSON document (UTF-8, mode 0600,
atomically, never through a symlink: :func:`vflsec.federation.private_files.write_private_bytes`,
as the GLM's saved models, :mod:`vflsec.glm.persistence`)::

    {"format": "vflsec-trees-model", "version": 1, "estimator": "<class name>",
     "vflsec_version": "...", "params": {...}, "fitted": {...}, "not_saved": "..."}

``params`` are the estimator's ``get_params()`` (a ``class_weight`` dict as ``{"__items__":
[[label, weight], ...]}``: its keys are the labels, not always strings); ``fitted`` is the model
as data: the classes with their dtype, ``n_features_in_``, ``feature_names_in_``, the party names
and columns, each party's bins (``thresholds``, ``has_missing``, ``max_bins``) and lookup table,
the trees (:meth:`~vflsec.trees.tree.Tree.to_dict`), the baseline score, ``train_loss_`` and
``privacy_spent_``. Floats are written with Python's shortest round-trip repr, so a reloaded
model predicts identically.

Not saved: the noise seed (``noise_seed`` is saved as None: whoever holds it can reconstruct
the noise), and the run's facts that are not the model (``timings_``, ``bytes_``,
``protection_seconds_``). Loading reads only this format and checks every part a fit could
have produced (ValueError naming the file and the field otherwise); it never executes code from
the file.

The part checks (:func:`check_thresholds`, :func:`check_lookup`, :func:`check_trees`) are also
those of a party's saved model in a predict job (:mod:`vflsec.runtime.predict_trees`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .._json_data import read_saved_model, to_json
from ..glm.persistence import decode_privacy_spent, encode_privacy_spent
from .binning import MAX_BINS, FeatureBins
from .tree import LEAF, LookupTable, Tree

__all__ = ["FORMAT", "FORMAT_VERSION", "NOT_SAVED", "check_lookup", "check_thresholds", "check_trees",
           "load_model", "save_model"]

FORMAT = "vflsec-trees-model"
FORMAT_VERSION = 1
NOT_SAVED = ("the noise seed (noise_seed is saved as None) and the run's facts that are not the model "
             "(timings_, bytes_, protection_seconds_)")
PathLike = Union[str, "Path"]


# -- a model's parts, as saved models (the estimator's, a party's training output) hold them ----------------
def check_thresholds(value: Any, where: Any, has_missing: Optional[Any] = None,
                     max_bins: int = MAX_BINS) -> FeatureBins:
    """One party's :class:`~vflsec.trees.binning.FeatureBins` from its saved ``thresholds`` (one list of
    ascending finite cuts per feature) and ``has_missing`` (one bool per feature; None: no feature had a
    missing value); ValueError beginning with ``where`` (the file, and the part) otherwise."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: thresholds is not a list of one list of cuts per feature")
    cuts: List[np.ndarray] = []
    for j, item in enumerate(value):
        array = np.asarray(item, dtype=np.float64) if isinstance(item, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in item) else None
        if array is None or array.ndim != 1 or not np.all(np.isfinite(array)) or np.any(np.diff(array) <= 0) \
                or array.size > MAX_BINS - 1:
            raise ValueError(f"{where}: the thresholds of feature {j} are not at most {MAX_BINS - 1} ascending finite "
                             "numbers")
        cuts.append(array)
    bins = FeatureBins.from_thresholds(cuts, max_bins)
    if has_missing is not None:
        if not isinstance(has_missing, list) or len(has_missing) != len(cuts) or any(
                not isinstance(m, bool) for m in has_missing):
            raise ValueError(f"{where}: has_missing is not one true/false per feature ({len(cuts)})")
        bins.has_missing_ = np.asarray(has_missing, dtype=bool)
        bins.n_bins_ = bins.n_bins_ + bins.has_missing_
    return bins


def check_lookup(value: Any, bins: FeatureBins, where: Any) -> LookupTable:
    """A party's :class:`~vflsec.trees.tree.LookupTable` from its saved form, every record a split its
    ``bins`` can make; ValueError beginning with ``where`` otherwise."""
    try:
        table = LookupTable.from_dict(value)
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"{where}: lookup is not a lookup table (feature, code, missing_left, missing_code)") from None
    for record, (feature, code) in enumerate(zip(table.feature, table.code)):
        if not 0 <= feature < bins.n_features_in_ or not 0 <= code < len(bins.thresholds_[feature]) + 1:
            raise ValueError(f"{where}: lookup record {record} splits feature {feature} at bin {code}, which its "
                             "thresholds do not have")
        if table.missing_left[record] and table.missing_code[record] != bins.missing_code(feature):
            raise ValueError(f"{where}: lookup record {record} sends missing values left with the code "
                             f"{table.missing_code[record]}, not feature {feature}'s missing code")
    return table


def check_trees(value: Any, parties: int, own_records: int, where: Any) -> Tuple[Tree, ...]:
    """The trees from their saved form (a non-empty list), every node inside its tree, owned by one of
    ``parties`` (the active party's records below ``own_records``; a passive party's below the number of
    nodes it owns: its records are its nodes, in order); ValueError beginning with ``where`` otherwise."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: trees is not a non-empty list of trees")
    trees = []
    for i, item in enumerate(value):
        try:
            tree = Tree.from_dict(item)
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"{where}: tree {i} is not a tree (owner, record, left, right, value)") from None
        size = len(tree.owner)
        if size == 0 or tree.owner.ndim != 1 or any(getattr(tree, k).shape != (size,)
                                                     for k in ("record", "left", "right", "value")):
            raise ValueError(f"{where}: tree {i}'s node arrays (owner, record, left, right, value) differ in length")
        inner = tree.owner != LEAF
        children = np.concatenate([tree.left[inner], tree.right[inner]])
        if np.any((tree.owner < LEAF) | (tree.owner >= parties)) \
                or np.any((children <= 0) | (children >= size)) or not np.all(np.isfinite(tree.value)) \
                or np.any(tree.record[tree.owner == 0] >= own_records) or np.any(tree.record[inner] < 0):
            raise ValueError(f"{where}: tree {i} has a node that points outside the tree, its parties or this "
                             "party's lookup table")
        trees.append(tree)
    for owner in range(1, parties):  # a passive party's records are its masks' rows, one per node it owns
        records = np.concatenate([t.record[t.owner == owner] for t in trees])
        if records.size and records.max() >= records.size:
            raise ValueError(f"{where}: the trees refer to a split record of party position {owner} beyond the "
                             f"{records.size} nodes it owns")
    return tuple(trees)


# -- the estimator's file -----------------------------------------------------------------------------------
def _encode_params(params: Dict[str, Any]) -> Dict[str, Any]:
    params = dict(params)
    params["noise_seed"] = None  # never saved: whoever holds it can reconstruct the noise
    if isinstance(params.get("class_weight"), dict):
        params["class_weight"] = {"__items__": [[key, weight] for key, weight in params["class_weight"].items()]}
    return params


def _decode_params(params: Dict[str, Any]) -> Dict[str, Any]:
    weights = params.get("class_weight")
    if isinstance(weights, dict):
        items = weights.get("__items__")
        if set(weights) != {"__items__"} or not isinstance(items, list) or any(
                not isinstance(pair, list) or len(pair) != 2 for pair in items):
            raise ValueError("params.class_weight is not [[label, weight], ...]")
        params["class_weight"] = {key: weight for key, weight in items}
    return params


def _encode_classes(classes: np.ndarray) -> Dict[str, Any]:
    array = np.asarray(classes)
    if array.dtype.kind not in "biufUO":
        raise TypeError(f"labels of dtype {array.dtype} cannot be saved -- use str, int, float or bool labels")
    return {"values": to_json(array, "classes_"), "dtype": array.dtype.str if array.dtype.kind != "O" else "object"}


def _decode_classes(data: Any) -> np.ndarray:
    classes = np.asarray(data["values"], dtype=np.dtype(data["dtype"]))
    if classes.shape != (2,) or len(set(classes.tolist())) != 2:
        raise ValueError(f"classes: a model has two distinct classes, the file gives {classes.tolist()!r}")
    return classes


def save_model(model: Any, path: PathLike) -> None:
    """Write the fitted :class:`~vflsec.trees.VerticalGradientBoostingClassifier` ``model`` to ``path``
    (module docstring): 0600, atomic, not through a symlink."""
    from .. import __version__
    from ..federation.private_files import write_private_bytes

    fitted = {
        "classes": _encode_classes(model.classes_), "n_features_in": model.n_features_in_,
        "feature_names_in": getattr(model, "feature_names_in_", None), "party_names": list(model.party_names_),
        "party_columns": model.party_columns_,
        "bins": [{"thresholds": [list(t) for t in b.thresholds_], "has_missing": [bool(m) for m in b.has_missing_],
                  "max_bins": int(b.max_bins)} for b in model.bins_],
        "lookups": [table.to_dict() for table in model.lookups_], "trees": [tree.to_dict() for tree in model.trees_],
        "baseline": model.baseline_, "train_loss": list(model.train_loss_),
        "privacy_spent": encode_privacy_spent(model.privacy_spent_),
    }
    params = _encode_params(model.get_params(deep=False))
    document = {"format": FORMAT, "version": FORMAT_VERSION, "estimator": type(model).__name__,
                "vflsec_version": __version__, "params": to_json(params, "params"),
                "fitted": to_json(fitted, "fitted"), "not_saved": NOT_SAVED}
    text = json.dumps(document, indent=1, allow_nan=False)
    write_private_bytes(Path(path), (text + "\n").encode("utf-8"))


def _read(path: PathLike, estimator: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    return read_saved_model(Path(path), "a saved vflsec trees model", FORMAT, FORMAT_VERSION, estimator)


def _parties(model: Any, fitted: Dict[str, Any], file: Path) -> None:
    """The parties' names, columns, bins and lookup tables onto ``model``, checked against each other."""
    names = fitted["party_names"]
    if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names) \
            or len(set(names)) != len(names):
        raise ValueError(f"{file}: party_names is not two or more distinct names")
    bins_data, lookups_data = fitted["bins"], fitted["lookups"]
    if not isinstance(bins_data, list) or not isinstance(lookups_data, list) \
            or not len(bins_data) == len(lookups_data) == len(names):
        raise ValueError(f"{file}: bins and lookups need one entry per party ({len(names)})")
    bins, lookups = [], []
    for name, data, table in zip(names, bins_data, lookups_data):
        where = f"{file}: party {name!r}"
        if not isinstance(data, dict):
            raise ValueError(f"{where}: bins is not {{thresholds, has_missing, max_bins}}")
        max_bins = data.get("max_bins")
        if isinstance(max_bins, bool) or not isinstance(max_bins, int) or not 2 <= max_bins <= MAX_BINS:
            raise ValueError(f"{where}: bins.max_bins is not an int in [2, {MAX_BINS}]")
        party_bins = check_thresholds(data.get("thresholds"), f"{where}: bins", data.get("has_missing"), max_bins)
        bins.append(party_bins)
        lookups.append(check_lookup(table, party_bins, where))
    model.party_names_ = tuple(names)
    model.bins_ = bins
    model.lookups_ = lookups
    columns = fitted["party_columns"]
    if columns is not None:
        if not isinstance(columns, dict) or list(columns) != names or any(
                not isinstance(c, list) or len(c) != b.n_features_in_ for c, b in zip(columns.values(), bins)):
            raise ValueError(f"{file}: party_columns does not name each party's columns, as many as its bins")
        columns = {party: [int(i) if isinstance(i, int) else str(i) for i in positions]
                   for party, positions in columns.items()}
    model.party_columns_ = columns


def load_model(cls: Any, path: PathLike) -> Any:
    """The ``cls`` model saved at ``path`` by :func:`save_model`: it predicts exactly as the saved one.
    ValueError naming the file (and the field) when the file is not such a model, incomplete or damaged."""
    file = Path(path)
    params, fitted = _read(file, cls.__name__)
    try:
        model = cls(**_decode_params(params))
        model.classes_ = _decode_classes(fitted["classes"])
        model.n_features_in_ = int(fitted["n_features_in"])
        names = fitted["feature_names_in"]
        if names is not None:
            model.feature_names_in_ = np.asarray(names, dtype=object)
            if len(names) != model.n_features_in_:
                raise ValueError(f"feature_names_in: {len(names)} names for {model.n_features_in_} features")
        _parties(model, fitted, file)
        widths = sum(b.n_features_in_ for b in model.bins_)
        if widths != model.n_features_in_:
            raise ValueError(f"bins: the parties' bins cover {widths} features, n_features_in is "
                             f"{model.n_features_in_}")
        model.trees_ = list(check_trees(fitted["trees"], len(model.bins_), len(model.lookups_[0]), f"{file}"))
        for position, table in enumerate(model.lookups_):
            owned = sum(int(np.count_nonzero(t.owner == position)) for t in model.trees_)
            if owned != len(table):
                raise ValueError(f"lookups: party {model.party_names_[position]!r} holds {len(table)} split records, "
                                 f"the trees give it {owned} nodes")
        baseline = fitted["baseline"]
        if isinstance(baseline, bool) or not isinstance(baseline, (int, float)) or not np.isfinite(baseline):
            raise ValueError("baseline is not a finite number")
        model.baseline_ = float(baseline)
        model.train_loss_ = [float(v) for v in fitted["train_loss"]]
        model.privacy_spent_ = decode_privacy_spent(fitted["privacy_spent"])
    except KeyError as exc:
        raise ValueError(f"{file}: the saved model is incomplete (no field {exc.args[0]!r})") from None
    except (TypeError, ValueError, AttributeError) as exc:
        message = str(exc)
        if message.startswith(str(file)):
            raise ValueError(message) from None
        raise ValueError(f"{file}: the saved model is damaged ({message})") from None
    return model
