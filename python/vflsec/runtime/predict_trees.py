"""A vertical trees model a party saved when it trained a ``kind = "trees"`` job, as a predict job scores with it.

A trees job's output (:mod:`.trees_kind`) holds what each party needs to answer for its own
splits: its bin thresholds, its lookup table, and the training job's data parties in order
(the keys of ``n_bins``: the owner positions the trees refer to); the active party's also the
trees, the baseline score and the two label classes. :func:`load_trees_model` reads and checks
one (ValueError with `` -- fix`` naming the file). Scoring is the held-out evaluation's
protocol (:mod:`vflsec.trees.prediction`): each passive party bins its aligned new rows with its
training bins and sends the active party one message of packed split masks (tag
``trees_masks``); the active party answers its own splits and walks the trees
(:func:`trees_scores`).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ..trees.binning import FeatureBins
from ..trees.persistence import check_lookup as _lookup
from ..trees.persistence import check_thresholds as _bins
from ..trees.persistence import check_trees as _trees
from ..trees.prediction import predict_raw, send_split_masks
from ..trees.tree import LookupTable, Tree

__all__ = ["PRIVACY_NOTE", "SavedTreesModel", "load_trees_model", "trees_scores"]

PRIVACY_NOTE = ("prediction showed the active party, for every aligned customer, on which side of each split a "
                "passive party owns its value lies (also at nodes the customer does not reach; never a value or a "
                "threshold; not covered by any training epsilon), and every party which of its customers are "
                "aligned (PSI's output)")


@dataclass(frozen=True)
class SavedTreesModel:
    """One party's part of a vertical trees model, as its training output holds it."""

    path: Path
    party: str
    role: str
    bins: FeatureBins
    lookup: LookupTable
    parties: Tuple[str, ...]
    training_job_sha256: str
    training_ids_sha256: str
    trees: Tuple[Tree, ...] = ()
    baseline: float = 0.0
    classes: Optional[np.ndarray] = None
    preprocessor: Any = None
    preprocessor_path: Optional[Path] = None
    label_names: Optional[Tuple[Any, Any]] = None  # the labels' own names of classes (predict_kind)
    budget: Any = None  # a passive party's predict budget (runtime.predict_budget.PredictBudget)

    @property
    def training_run(self) -> str:
        """What identifies the training run every party's model must come from (as for a GLM model)."""
        return hashlib.sha256(f"{self.training_job_sha256}:{self.training_ids_sha256}".encode()).hexdigest()

    @property
    def n_features(self) -> int:
        return int(self.bins.n_features_in_)

    def predict(self, raw: np.ndarray) -> np.ndarray:
        """The class of each raw score (the larger class where ``raw > 0``)."""
        assert self.classes is not None
        return self.classes[(np.asarray(raw) > 0).astype(np.int64)]


def load_trees_model(path: Path, saved: dict, party: str, role: str, parties: Sequence[str],
                     missing: str) -> SavedTreesModel:
    """Party ``party``'s (role ``role``) trees model from its training output ``saved`` (read
    from ``path``), for a predict job over ``parties`` (active first) with the missing-ID policy
    ``missing``; ValueError (with `` -- fix``) naming the file."""
    retrain = "train the model again with this version of vflsec"
    n_bins = saved.get("n_bins")
    if not isinstance(n_bins, dict) or not n_bins or party not in n_bins:
        raise ValueError(f"{path} does not name the training job's parties (n_bins) -- {retrain}")
    training = tuple(str(p) for p in n_bins)
    if set(training) != set(parties) or training[0] != parties[0]:
        raise ValueError(f"the predict job's parties {list(parties)} (active first) are not those of the training job "
                         f"of {path}: {list(training)} -- list the training job's active party and passive parties")
    if role == "active" and missing != "none":
        raise ValueError(f"the predict job has missing = {missing!r}, but a trees model has no active-only model "
                         "-- set missing = 'none' in the predict job")
    bins = _bins(saved.get("thresholds"), path)
    lookup = _lookup(saved.get("lookup"), bins, path)
    digests = saved.get("job_sha256"), saved.get("ids_sha256")
    if not all(isinstance(d, str) for d in digests):
        raise ValueError(f"{path} does not say which training run it comes from (job_sha256, ids_sha256) -- "
                         f"{retrain}")
    model: Dict[str, Any] = dict(path=path, party=party, role=role, bins=bins, lookup=lookup, parties=training,
                 training_job_sha256=str(digests[0]), training_ids_sha256=str(digests[1]))
    if role == "active":
        baseline, classes = saved.get("baseline"), saved.get("classes")
        if not isinstance(baseline, (int, float)) or isinstance(baseline, bool) or not math.isfinite(baseline):
            raise ValueError(f"{path} has no finite baseline score -- {retrain}")
        if not isinstance(classes, list) or len(classes) != 2:
            raise ValueError(f"{path} does not hold the two label classes -- {retrain}")
        model.update(trees=_trees(saved.get("trees"), len(training), len(lookup), path), baseline=float(baseline),
                     classes=np.asarray(classes))
    return SavedTreesModel(**model)


def trees_scores(channel: Any, active: str, model: SavedTreesModel, X: np.ndarray, step: str) -> Optional[np.ndarray]:
    """Score the aligned rows ``X`` (every party's in the same order): a passive party sends its
    split masks and gets None; the active party gets each row's raw score (log-odds of the
    larger class)."""
    codes = model.bins.transform(X)
    if model.role != "active":
        send_split_masks(channel, active, model.lookup, codes)
        return None
    return predict_raw(channel, model.parties[1:], model.trees, model.baseline, model.lookup, codes, step=step)
