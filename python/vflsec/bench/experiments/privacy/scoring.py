"""FedPass's scores of an attack row: the recovery error (:func:`recovery_error`) and the
calibrated averaged performance of a defense over its strengths (:func:`cap_table`,
FedPass Table 3), shared by the cells (``results.json``'s ``"cap"``) and the report."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

__all__ = ["FEATURE_ATTACKS", "LABEL_ATTACKS", "cap_table", "recovery_error"]

FEATURE_ATTACKS = ("model_inversion_blackbox", "model_inversion_whitebox")
LABEL_ATTACKS = ("direct_label", "norm_scoring", "direction_scoring", "model_completion")


def recovery_error(row: Dict[str, Any]) -> Optional[float]:
    """FedPass's recovery error: feature MSE, or the fraction of wrong labels."""
    if row["attack"] in FEATURE_ATTACKS and row["metric"] == "mse":
        return row["value"]
    if row["attack"] in LABEL_ATTACKS and row["metric"] == "accuracy":
        return 1.0 - row["value"]
    return None


def cap_table(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per dataset, defense and attack: CAP over the defense's strengths (the undefended rows left out)."""
    from ....attacks import calibrated_averaged_performance

    groups: Dict[Tuple[str, str, str], List[Tuple[Any, float, float]]] = {}
    for r in rows:
        err = recovery_error(r)
        if err is None or r["defense"] == "none":
            continue
        groups.setdefault((r["dataset"], r["defense"], r["attack"]), []).append(
            (r["strength"], r["main_accuracy"], err))
    out = []
    for (dataset, defense, attack), cells in sorted(groups.items()):
        cap = calibrated_averaged_performance([c[1] for c in cells], [c[2] for c in cells])
        out.append({"dataset": dataset, "defense": defense, "attack": attack, "cap": cap,
                    "strengths": [c[0] for c in cells]})
    return out
