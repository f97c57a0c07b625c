"""The measurements of ``vflsec bench trees``, one row at a time: per dataset and train/test split,
the references (majority class; scikit-learn's ``HistGradientBoostingClassifier`` centralized,
on the active party's and on the passive party's features, all on the same bin codes with the same
hyper-parameters), then vertical boosting with every protection of the grid (:mod:`.vertical`).
Each finished row is added to the results at once, so an interrupted run keeps it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

from ...common import DP_LAYER, dp_noise_label
from .data import PARTIES, PartySplit, load, split
from .grid import TreesGrid

__all__ = ["AUDIT_MECHANISMS", "REFERENCES", "run_cells"]

#: the reference rows of every split, in the order they run
REFERENCES = ("majority", "hgb_centralized", "hgb_active", "hgb_passive")

#: the mechanisms of vflsec.dp behind each DP variant (the audit verdict printed beside its epsilon)
AUDIT_MECHANISMS = {"dp": ("trees_gradient",), "label_dp": ("trees_label_rr",)}


def run_cells(grid: TreesGrid, result: Dict[str, Any], *, data_dir: Optional[Path]) -> None:
    """Measure every row of ``grid`` into ``result`` (the runner's envelope), then record the
    report's answers and conclusion (the report recomputes both from the rows)."""
    from ...._progress import progress
    from ....he import shutdown_pool

    result.update({
        "data_dir": None if data_dir is None else str(data_dir),
        "dp_noise": dp_noise_label(grid.seed), "dp_layer": DP_LAYER,
        "audit_mechanisms": {p: list(AUDIT_MECHANISMS[p]) for p in grid.dp_protections},
        "datasets": {}, "cells": [],
    })
    per_split = len(REFERENCES) + 1 + int(grid.secureboost_trees > 0) + len(grid.dp_protections) * len(grid.epsilons)
    total = len(grid.datasets) * grid.split_seeds * per_split
    try:
        if grid.aggregation_rows:
            from .aggregation import aggregation_throughput

            result["aggregation"] = aggregation_throughput(grid.aggregation_rows, grid.aggregation_features,
                                                           min(grid.max_bins, 255), grid.aggregation_phe_rows,
                                                           grid.key_bits, grid.seed)
        if grid.secureboost_trees:
            from .vertical import warm_paillier_pool

            result["paillier_pool_start_seconds"] = warm_paillier_pool(grid.key_bits)
        for _ in progress(_steps(grid, result, data_dir), desc="bench trees", unit="row", total=total):
            pass
    finally:
        shutdown_pool()
    from .report import answers, conclusion

    result["answers"] = answers(result)
    result["conclusion"] = conclusion(result)


def _steps(grid: TreesGrid, result: Dict[str, Any], data_dir: Optional[Path]) -> Iterator[str]:
    from .vertical import vertical_rows

    for name in grid.datasets:
        ds, record = load(name, grid, data_dir)
        result["datasets"][name] = record
        if ds is None:
            continue
        for k in range(grid.split_seeds):
            data = split(ds, grid, k)
            if k == 0:
                record["train_rows"], record["test_rows"] = len(data.y_train), len(data.y_test)
                record["bins"] = {party: int(sum(b)) for party, b in zip(PARTIES, data.n_bins)}
            for method in REFERENCES:
                result["cells"].append({"dataset": name, "split": k, "method": method,
                                        **_reference(method, data, grid)})
                yield f"{name} split {k} {method}"
            for row in vertical_rows(name, k, data, grid, result["cells"]):
                result["cells"].append(row)
                yield f"{name} split {k} {row['method']}"


def _reference(method: str, data: PartySplit, grid: TreesGrid) -> Dict[str, Any]:
    """Majority class (of the training labels) or scikit-learn's booster on the bin codes of
    both parties, the active party's or the passive party's (its own binning of at most
    ``max_bins`` distinct integers is the identity: the same bins as the vertical models)."""
    if method == "majority":
        majority = int(np.mean(data.y_train) >= 0.5)
        rate = float(np.mean(data.y_test == 1))
        # A constant score ranks at random: ROC AUC 0.5, average precision the positive rate.
        return {"accuracy": float(np.mean(data.y_test == majority)), "auc": 0.5,
                **({"pr_auc": rate} if rate < RARE_POSITIVES else {}), "seconds": 0.0}
    from sklearn.ensemble import HistGradientBoostingClassifier

    blocks = {"hgb_centralized": (0, 1), "hgb_active": (0,), "hgb_passive": (1,)}[method]
    train = np.hstack([data.codes_train[i] for i in blocks]).astype(np.float64)
    test = np.hstack([data.codes_test[i] for i in blocks]).astype(np.float64)
    model = HistGradientBoostingClassifier(early_stopping=False, **grid.hyper_parameters())
    started = time.perf_counter()
    model.fit(train, data.y_train)
    seconds = time.perf_counter() - started
    return {**scores(data.y_test, model.predict_proba(test)[:, 1]), "seconds": seconds,
            "features": int(train.shape[1])}


# Positives below this share of the test rows make the label "rare": the rows then carry PR-AUC too.
RARE_POSITIVES = 0.2


def scores(y: np.ndarray, p1: np.ndarray) -> Dict[str, float]:
    """Test accuracy (threshold 0.5) and ROC AUC of the positive-class probabilities ``p1``, and
    PR-AUC (average precision) where positives are rare (under :data:`RARE_POSITIVES`)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    out = {"accuracy": float(np.mean((p1 > 0.5) == (y == 1))), "auc": float(roc_auc_score(y, p1))}
    if np.mean(y == 1) < RARE_POSITIVES:
        out["pr_auc"] = float(average_precision_score(y == 1, p1))
    return out


def warnings_of(caught: List[Any]) -> List[str]:
    """Each distinct warning a row raised, as ``"Category: message"`` (a row's label, never silenced)."""
    seen: List[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        if text not in seen:
            seen.append(text)
    return seen
