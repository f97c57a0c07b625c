"""The accuracy and runtime rows of a ``vflsec bench glm`` run, summarized for the
report, the claims' verdicts and the plots (from the results alone)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

__all__ = ["dp_mean", "ref_mean", "runtime_series", "spectrum_mean", "stats", "summarize"]


def runtime_series(rows: Sequence[Dict[str, Any]], epochs_n: int) -> Dict[str, Dict[str, List[Tuple[Any, ...]]]]:
    """The runtime plot's series: ``{"epochs": {method: points}, "n": {method: points}}``,
    each point ``(x, seconds, bytes, extrapolated, cpu_seconds)`` (CPU None in runs before it
    was recorded): against epochs at n = ``epochs_n``
    and against n for one epoch. A series of fewer than 2 points is left out, and so
    is an axis with no series left (a one-point panel shows no trend)."""
    out: Dict[str, Dict[str, List[Tuple[Any, ...]]]] = {}
    for axis, key, fixed, value in (("epochs", "epochs", "n", epochs_n), ("n", "n", "epochs", 1)):
        series = {}
        for method in dict.fromkeys(r["method"] for r in rows):
            pts = sorted(((r[key], r["seconds"], r["bytes"], r["extrapolated"], r.get("cpu_seconds")) for r in rows
                          if r["method"] == method and r[fixed] == value), key=lambda p: p[0])
            if len(pts) >= 2:
                series[method] = pts
        if series:
            out[axis] = series
    return out


def stats(values: Sequence[float]) -> Tuple[float, float, int]:
    """(mean, standard deviation, count) of the measured values (None and NaN left out)."""
    arr = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan, 0
    return float(arr.mean()), float(arr.std()), int(arr.size)


def summarize(rows: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """dataset -> {"reference": method -> [acc], "dp": (family, calibration) -> eps -> [acc],
    "search": family -> eps -> search epsilon, "figure2": (e, k) -> {"hdp": [...], "plain": [...]},
    "skipped": method -> estimated seconds (rows of runs before issue 25, whose HE accuracy
    cells were skipped when estimated over a time budget), "not_run": method -> why (the MPC
    cells of a run without the ``mpc`` extra), "reference_by_split": method -> split seed -> acc,
    "spectrum": (method, delta) -> eps ->
    [acc] (the DP spectrum's rows, :mod:`.spectrum`), "spectrum_rows": those rows, "spectrum_not_run":
    (method, delta) -> eps -> why (its MPC+DP cells that did not run)}."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        ds = out.setdefault(r["dataset"], {"reference": {}, "dp": {}, "search": {}, "figure2": {}, "skipped": {},
                                           "not_run": {}, "reference_by_split": {}, "auc": {}, "pr_auc": {},
                                           "spectrum": {}, "spectrum_rows": [], "spectrum_not_run": {}})
        if r.get("not_run"):
            ds["not_run"][r["method"]] = r["not_run"]
            if r["family"] == "spectrum":
                ds["spectrum_not_run"].setdefault((r["method"], r["delta"]), {})[r["epsilon"]] = r["not_run"]
            continue
        if r["family"] == "spectrum":
            ds["spectrum"].setdefault((r["method"], r["delta"]), {}).setdefault(r["epsilon"], []).append(
                r["accuracy"])
            ds["spectrum_rows"].append(r)
            continue
        if r.get("auc") is not None and r["family"] in ("reference", "headline") and r["calibration"] != "classic":
            key = r["method"] if r["family"] == "reference" else r["epsilon"]
            ds["auc"].setdefault(key, []).append(r["auc"])
            if r.get("pr_auc") is not None:
                ds["pr_auc"].setdefault(key, []).append(r["pr_auc"])
        if r["family"] == "reference":
            if r.get("skipped"):
                ds["skipped"][r["method"]] = r.get("estimated_seconds")
                continue
            ds["reference"].setdefault(r["method"], []).append(r["accuracy"])
            ds["reference_by_split"].setdefault(r["method"], {})[r.get("split_seed")] = r["accuracy"]
        elif r["family"] == "figure2":
            key = (r["config"]["epochs"], r["config"]["k"])
            ds["figure2"].setdefault(key, {"hdp": [], "plain": []})[r["method"]].append(r["accuracy"])
        else:
            ds["dp"].setdefault((r["family"], r["calibration"]), {}).setdefault(r["epsilon"], []).append(
                r["accuracy"])
            if "search_epsilon" in r:
                ds["search"].setdefault(r["family"], {}).setdefault(r["epsilon"], []).append(r["search_epsilon"])
            if r.get("transcript_epsilon") is not None:
                ds["search"].setdefault("transcript", {}).setdefault(r["epsilon"], []).append(
                    r["transcript_epsilon"])
    return out


def ref_mean(ds: Dict[str, Any], method: str) -> float:
    """Mean test accuracy of reference ``method`` on one dataset's summary (NaN: not run)."""
    return stats(ds["reference"].get(method, []))[0]


def dp_mean(ds: Dict[str, Any], eps: float, family: str = "headline", calibration: str = "analytic") -> float:
    """Mean test accuracy of HDP-VFL's ``family`` rows at ``eps`` (NaN: not run)."""
    return stats(ds["dp"].get((family, calibration), {}).get(eps, []))[0]


def spectrum_mean(ds: Dict[str, Any], method: str, eps: float, delta: float) -> float:
    """Mean test accuracy of the spectrum's ``method`` at ``(eps, delta)`` (NaN: not run)."""
    return stats(ds["spectrum"].get((method, delta), {}).get(eps, []))[0]
