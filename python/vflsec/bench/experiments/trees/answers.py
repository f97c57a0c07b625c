"""What ``vflsec bench trees`` concludes, from its rows alone: each row kind's mean, spread and n
(:func:`summary`), the targets of issue 29 judged (``papers/vflsec_targets.toml``, ``trees.*``), the
three questions the report answers per dataset (:func:`answers`) and the plain-words conclusion."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from ...claims import Claim, Verdict, judge, load_claims

__all__ = ["LABELS", "answers", "claims", "conclusion", "row_key", "stats", "summary", "verdicts"]

TARGETS = "vflsec_targets"
QUANTITY_PREFIX = "trees."
#: the aggregation target's quantity (one per run, not per dataset)
AGGREGATION_QUANTITY = "trees.aggregation_native_over_phe"

#: how the report names each kind of row
LABELS = {"majority": "majority class", "hgb_centralized": "HGB centralized (both parties' bins)",
          "hgb_active": "HGB active party alone", "hgb_passive": "HGB passive party alone",
          "plain": "vertical, plain", "secureboost": "vertical, SecureBoost", "dp": "vertical, DP gradients",
          "label_dp": "vertical, label-DP (RR with prior)"}
VARIANTS = ("plain", "secureboost", "dp", "label_dp")
DP_VARIANTS = ("dp", "label_dp")


def row_key(method: str, epsilon: Optional[float]) -> str:
    """``"plain"``, ``"dp@1"``: a row kind (method, and epsilon for the DP rows)."""
    return method if epsilon is None else f"{method}@{epsilon:g}"


def stats(values: List[Any]) -> Optional[Dict[str, float]]:
    """Mean, sample standard deviation (0 for one value) and n of the finite ``values``; None if none."""
    vals = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None
    mean = sum(vals) / len(vals)
    spread = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return {"mean": mean, "std": spread, "n": len(vals)}


def _leak(row: Dict[str, Any], key: str, attack: str) -> Optional[float]:
    leakage = row.get(key) or {}
    return (leakage.get(attack) or {}).get("auc")


def summary(result: Dict[str, Any]) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Per dataset and row kind (:func:`row_key`): the method, epsilon and the stats over splits of
    accuracy, AUC, seconds and bytes per tree, the attack's AUCs and the epsilon spent."""
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for row in result.get("cells", []):
        groups.setdefault((row["dataset"], row_key(row["method"], row.get("epsilon"))), []).append(row)
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for (dataset, key), rows in groups.items():
        first = rows[0]
        entry: Dict[str, Any] = {"method": first["method"], "epsilon": first.get("epsilon"), "rows": len(rows)}
        for field in ("accuracy", "auc", "pr_auc", "seconds_per_tree", "bytes_per_tree", "keygen_seconds"):
            entry[field] = stats([r.get(field) for r in rows])
        for attack in ("instance_space", "gradients", "own_features"):
            entry[f"leak_{attack}"] = stats([_leak(r, "leakage", attack) for r in rows])
            entry[f"leak_first_{attack}"] = stats([_leak(r, "leakage_first", attack) for r in rows])
        entry["epsilon_spent"] = stats([(r.get("privacy") or {}).get("epsilon") for r in rows])
        entry["steps_per_tree"] = {step: stats([(r.get("steps_per_tree") or {}).get(step) for r in rows])
                                   for step in (first.get("steps_per_tree") or {})}
        entry["trees_equal_plain"] = [r.get("trees_equal_plain") for r in rows if "trees_equal_plain" in r]
        entry["warnings"] = sorted({w for r in rows for w in r.get("warnings") or []})
        entry["trees"] = first.get("trees")
        out.setdefault(dataset, {})[key] = entry
    return out


def _mean(entry: Optional[Dict[str, Any]], field: str) -> Optional[float]:
    value = (entry or {}).get(field)
    return None if value is None else value["mean"]


def _gain(entry: Dict[str, Any], attack: str, prefix: str = "leak_") -> Optional[float]:
    auc, own = _mean(entry, f"{prefix}{attack}"), _mean(entry, f"{prefix}own_features")
    return None if auc is None or own is None else auc - own


def answers(result: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Per measured dataset: plain's accuracy against the centralized booster (points), the epsilon
    from which each DP variant beats the active party alone, what SecureBoost costs over plain per
    tree, and the attack's AUC and gain over the own-features reference per variant."""
    out: Dict[str, Dict[str, Any]] = {}
    for dataset, kinds in summary(result).items():
        plain, central, active = kinds.get("plain"), kinds.get("hgb_centralized"), kinds.get("hgb_active")
        a: Dict[str, Any] = {}
        pm, cm = _mean(plain, "accuracy"), _mean(central, "accuracy")
        a["plain_minus_centralized_points"] = None if pm is None or cm is None else 100.0 * (pm - cm)
        a["splits"] = (plain or {}).get("rows")
        am = _mean(active, "accuracy")
        a["active_alone_accuracy"] = am
        a["dp_beats_active"] = {}
        for method in DP_VARIANTS:
            points = sorted((float(e["epsilon"]), float(e["accuracy"]["mean"])) for e in kinds.values()
                            if e["method"] == method and e["accuracy"] is not None)
            if points and am is not None:
                a["dp_beats_active"][method] = _beats_from(points, am)
        sb = kinds.get("secureboost")
        if sb is not None and plain is not None:
            st, pt = _mean(sb, "seconds_per_tree"), _mean(plain, "seconds_per_tree")
            sbb, pb = _mean(sb, "bytes_per_tree"), _mean(plain, "bytes_per_tree")
            a["secureboost"] = {
                "seconds_per_tree": st, "plain_seconds_per_tree": pt,
                "time_ratio": st / pt if st is not None and pt else None,
                "bytes_per_tree": sbb, "plain_bytes_per_tree": pb,
                "bytes_ratio": sbb / pb if sbb is not None and pb else None,
                "keygen_seconds": _mean(sb, "keygen_seconds"), "trees": sb.get("trees"),
                "trees_equal_plain": all(sb["trees_equal_plain"]) if sb["trees_equal_plain"] else None,
                "steps_per_tree": {k: v["mean"] for k, v in sb["steps_per_tree"].items() if v is not None},
            }
        leakage: Dict[str, Any] = {}
        for key, entry in kinds.items():
            if entry["method"] not in VARIANTS or entry.get("leak_instance_space") is None:
                continue
            leakage[key] = {"instance_space_auc": _mean(entry, "leak_instance_space"),
                            "gradients_auc": _mean(entry, "leak_gradients"),
                            "own_features_auc": _mean(entry, "leak_own_features"),
                            "instance_space_gain": _gain(entry, "instance_space"),
                            "gradients_gain": _gain(entry, "gradients"), "trees": entry.get("trees")}
            gains = [g for g in (leakage[key]["instance_space_gain"], leakage[key]["gradients_gain"]) if g is not None]
            leakage[key]["best_gain"] = max(gains) if gains else None
            if entry.get("leak_first_instance_space") is not None:
                leakage[key]["first_trees"] = {"instance_space_auc": _mean(entry, "leak_first_instance_space"),
                                               "gradients_auc": _mean(entry, "leak_first_gradients"),
                                               "instance_space_gain": _gain(entry, "instance_space", "leak_first_")}
        a["leakage"] = leakage
        out[dataset] = a
    return out


def _beats_from(points: List[Tuple[float, float]], active: float) -> Dict[str, Any]:
    """The smallest grid epsilon from which on (it and every larger one) the variant's mean accuracy
    is above the active party alone's (None: not even at the largest)."""
    from_eps: Optional[float] = None
    for eps, acc in reversed(points):
        if acc > active:
            from_eps = eps
        else:
            break
    margin = None
    if from_eps is not None:
        margin = 100.0 * (dict(points)[from_eps] - active)
    return {"epsilon": from_eps, "margin_points": margin, "grid": [e for e, _ in points],
            "best_points": 100.0 * (max(acc for _, acc in points) - active)}


# -- targets ---------------------------------------------------------------------------------

def claims() -> Tuple[Claim, ...]:
    """Issue 29's targets this benchmark is judged against (``trees.*`` in ``vflsec_targets.toml``)."""
    return tuple(c for c in load_claims(TARGETS) if c.quantity.startswith(QUANTITY_PREFIX))


def verdicts(result: Dict[str, Any]) -> List[Verdict]:
    """``trees.plain_gap_points.<dataset>``: |plain - centralized| mean accuracy, in points."""
    measured: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    found = answers(result)
    for claim in claims():
        if claim.quantity == AGGREGATION_QUANTITY:
            agg = result.get("aggregation") or {}
            if agg.get("native_over_phe") is None:
                notes[claim.id] = ("not measured: the CPU lacks AVX-512 IFMA (the gmpy2 loop ran)"
                                   if agg else "not measured in this run")
                continue
            measured[claim.quantity] = agg["native_over_phe"]
            notes[claim.id] = (f"{agg['native_us_per_product']:.3f} us per product against "
                               f"{agg['phe_us_per_addition']:.3f} us per phe addition ({agg['rows']} rows x "
                               f"{agg['features']} features; phe on {agg['phe_rows']} rows)")
            continue
        dataset = claim.quantity.rsplit(".", 1)[-1]
        gap = (found.get(dataset) or {}).get("plain_minus_centralized_points")
        if gap is None:
            status = (result.get("datasets") or {}).get(dataset, {}).get("status")
            notes[claim.id] = "dataset skipped (not found)" if status == "skipped" else "dataset not in this run"
            continue
        measured[claim.quantity] = abs(gap)
        notes[claim.id] = (f"plain {'+' if gap >= 0 else '-'}{abs(gap):.2f} points against the centralized booster, "
                           f"means over {found[dataset]['splits']} split(s)")
    return judge(claims(), measured, notes)


# -- the conclusion --------------------------------------------------------------------------

def _points(value: float) -> str:
    return f"{value:+.2f} points"


def _dataset_sentences(dataset: str, a: Dict[str, Any]) -> List[str]:
    parts: List[str] = []
    gap = a.get("plain_minus_centralized_points")
    if gap is not None:
        within = "within" if abs(gap) <= 0.5 else "NOT within"
        parts.append(f"On {dataset}, plain vertical boosting is {_points(gap)} from the centralized booster on the "
                     f"same bins ({within} 0.5 points).")
    for method, beat in a.get("dp_beats_active", {}).items():
        name = "DP-gradient" if method == "dp" else "label-DP"
        if beat["epsilon"] is None:
            parts.append(f"{name} boosting does not beat the active party alone at any epsilon of the grid (up to "
                         f"{max(beat['grid']):g}; best {_points(beat['best_points'])}).")
        else:
            parts.append(f"{name} boosting beats the active party alone from epsilon {beat['epsilon']:g} on "
                         f"({_points(beat['margin_points'])} there).")
    sb = a.get("secureboost")
    if sb and sb.get("time_ratio") is not None:
        parts.append(f"SecureBoost costs {sb['time_ratio']:.3g}x plain's time per tree ({sb['seconds_per_tree']:.3g} s "
                     f"against {sb['plain_seconds_per_tree']:.3g} s) and {sb['bytes_ratio']:.3g}x its bytes, for the "
                     "same trees" + ("" if sb.get("trees_equal_plain") else " (NOT the same trees in this run)") + ".")
    leak = a.get("leakage", {})
    said = []
    for key in ("plain", "secureboost"):
        entry = leak.get(key)
        if entry and entry.get("instance_space_gain") is not None:
            grad = entry.get("gradients_auc")
            said.append(f"{key} {entry['instance_space_auc']:.3f}" + (f" (gradients {grad:.3f})" if grad is not None
                                                                      else ""))
    dp = [(k, v) for k, v in leak.items() if k.split("@")[0] in DP_VARIANTS and v.get("best_gain") is not None]
    if said:
        own = next(iter(leak.values())).get("own_features_auc")
        parts.append("The passive party's attack reaches AUC " + ", ".join(said)
                     + (f" against {own:.3f} from its own features" if own is not None else "") + ".")
    if dp:
        low = min(dp, key=lambda kv: kv[1]["best_gain"])
        high = max(dp, key=lambda kv: kv[1]["best_gain"])
        parts.append(f"Under DP its best attack's gain over its own features runs from {low[1]['best_gain']:+.3f} "
                     f"AUC ({low[0]}) to {high[1]['best_gain']:+.3f} ({high[0]}).")
    return parts


#: an attack AUC gain over the own-features reference counted as a leak (below: within the attack's noise)
LEAK_MARGIN = 0.02


def _encryption_sentences(found: Dict[str, Dict[str, Any]]) -> List[str]:
    """What SecureBoost's encryption does against the attack, where it was measured."""
    leaks: List[str] = []
    none: List[str] = []
    for dataset, a in found.items():
        sb = (a.get("leakage") or {}).get("secureboost")
        if sb is None or sb.get("instance_space_gain") is None:
            continue
        gain = sb["instance_space_gain"]
        (leaks if gain > LEAK_MARGIN else none).append(f"{dataset} {gain:+.3f}")
    out = []
    if leaks:
        out.append("Encryption hides the gradients, not the trees: under SecureBoost the node partitions alone still "
                   f"gave the attack more than the passive party's own features ({', '.join(leaks)} AUC).")
    if none:
        out.append("Under SecureBoost the node partitions gave the attack no more than the passive party's own "
                   f"features ({', '.join(none)} AUC; within {LEAK_MARGIN} counted as none) on the trees it saw.")
    return out


def conclusion(result: Dict[str, Any]) -> str:
    """The plain-words conclusion of ``result``, every number from its rows."""
    found = answers(result)
    parts: List[str] = []
    for dataset, a in found.items():
        parts += _dataset_sentences(dataset, a)
    skipped = [d for d, r in (result.get("datasets") or {}).items() if r.get("status") == "skipped"]
    if skipped:
        parts.append(f"Not measured (data not found): {', '.join(skipped)}.")
    missed = [v.claim.statement for v in verdicts(result) if v.holds is False]
    if missed:
        parts.append("Not met in this run: " + "; ".join(missed) + ".")
    parts += _encryption_sentences(found)
    if result.get("partial"):
        parts.append("This run stopped early: only its finished rows are reported.")
    return " ".join(parts) if parts else "No dataset was measured in this run."
