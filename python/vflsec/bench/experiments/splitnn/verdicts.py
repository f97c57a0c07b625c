"""The quantities the split-learning papers' ``[[claims]]`` are judged on,
computed from a run's rows alone, and their verdicts (:mod:`vflsec.bench.claims`).

``papers/vfl_afe.toml`` judges the Table 2 means (``table2.<dataset>.R_gain``,
``D_gain``, ``least_over_majority``: accuracy points), ``papers/dp_vfl.toml``
the DP-VFL curves (``dp_vfl.<dataset>.cost_drop``, on the rows of one clip:
:func:`judged_clip`). The report prints the
verdicts (:func:`~vflsec.bench.claims.verdict_table`) and its Conclusion
reads the claims' thresholds (:func:`threshold`), so what counts as "learns"
or "hardly changes" is data, never code.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...claims import Claim, Verdict, judge, load_claims
from ...dp_sgd_clip import is_percentile_variant

__all__ = ["AFE_COMPONENTS", "accuracy_cost", "by_dataset", "clip_rows", "dp_vfl_clips", "dp_vfl_costs",
           "dp_vfl_verdicts", "judged_clip", "mean", "section_rows", "table2_means", "table2_verdicts", "threshold"]

# VFL-AFE's components in Table 2 (the variants of the defense).
AFE_COMPONENTS = ("vanilla", "R", "D", "full")


def section_rows(result: Dict[str, Any], name: str) -> List[Dict[str, Any]]:
    """The accuracy rows of section ``name`` (rows without a section are Table 2's, as in the first runs)."""
    return [r for r in result.get("accuracy", []) if r.get("section", "table2") == name]


def by_dataset(rows: List[Dict[str, Any]]) -> List[Tuple[str, List[Dict[str, Any]]]]:
    """``(dataset, its rows)`` in order of first appearance."""
    return [(name, [r for r in rows if r["dataset"] == name]) for name in dict.fromkeys(r["dataset"] for r in rows)]


def mean(values: List[float]) -> Optional[float]:
    """The mean of the finite values (a diverged cell's NaN is a labelled result, not a number)."""
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def _cell(row: Dict[str, Any]) -> str:
    return row["defense"] if row["defense"] in ("centralized", "none", "majority") else row["variant"]


def table2_means(result: Dict[str, Any]) -> Dict[str, Dict[str, Optional[float]]]:
    """Per dataset, the mean test accuracy (a fraction) of each Table 2 cell:
    ``majority``, ``centralized``, ``none`` (unprotected) and the components; None where not run."""
    out = {}
    for name, sub in by_dataset(section_rows(result, "table2")):
        out[name] = {key: mean([r["value"] for r in sub if _cell(r) == key])
                     for key in ("majority", "centralized", "none", *AFE_COMPONENTS)}
    return out


_LABELS = {"vanilla": "vanilla", "R": "+R", "D": "+D", "full": "full"}


def _table2_quantities(result: Dict[str, Any]) -> Tuple[Dict[str, Optional[float]], Dict[str, str]]:
    """(quantity -> value, quantity -> what the value is)."""
    measured: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    for name, cell in table2_means(result).items():
        vanilla, majority = cell["vanilla"], cell["majority"]
        for key in ("R", "D"):
            value = cell[key]
            if value is not None and vanilla is not None:
                measured[f"table2.{name}.{key}_gain"] = 100 * (value - vanilla)
        if majority is not None:
            margins = {k: 100 * (v - majority) for k, v in ((k, cell[k]) for k in AFE_COMPONENTS) if v is not None}
            if margins:
                least = min(margins, key=lambda k: margins[k])
                measured[f"table2.{name}.least_over_majority"] = margins[least]
                notes[f"table2.{name}.least_over_majority"] = f"{_LABELS[least]}, the least of {len(margins)}"
    return measured, notes


def _judged(paper: str, measured: Dict[str, Optional[float]], notes: Dict[str, str]) -> List[Verdict]:
    claims = load_claims(paper)
    return judge(claims, measured, {c.id: notes[c.quantity] for c in claims if c.quantity in notes})


def table2_verdicts(result: Dict[str, Any]) -> List[Verdict]:
    """``papers/vfl_afe.toml``'s claims against this run's Table 2."""
    return _judged("vfl_afe", *_table2_quantities(result))


def dp_vfl_clips(rows: List[Dict[str, Any]]) -> List[Any]:
    """The clips (``variant``: ``"clip=1"``, ``"clip=p80"``; None in the first runs) of the
    DP-SGD rows, in order of first appearance."""
    return list(dict.fromkeys(r.get("variant") for r in rows if r["defense"] == "dp_sgd"))


def clip_rows(rows: List[Dict[str, Any]], clip: Any) -> List[Dict[str, Any]]:
    """The DP-SGD rows of one clip (``variant``) with every reference row."""
    return [r for r in rows if r["defense"] != "dp_sgd" or r.get("variant") == clip]


def judged_clip(rows: List[Dict[str, Any]]) -> Any:
    """The clip the papers' claims are judged on: the first with a guarantee (a fixed
    clip norm), else the first run (the percentile rule)."""
    clips = dp_vfl_clips(rows)
    return next((c for c in clips if not is_percentile_variant(c)), clips[0] if clips else None)


def dp_vfl_costs(rows: List[Dict[str, Any]]) -> List[Tuple[float, List[Tuple[int, float, float]]]]:
    """One dataset's DP-VFL rows (of one clip: :func:`clip_rows`) at its smallest and largest epsilon: ``(epsilon,
    [(owners, DP-SGD's mean value, non-private VFL's mean value), ...])`` for every
    owner count that has both (epsilons with none are left out)."""
    eps = sorted({r["epsilon"] for r in rows if r["defense"] == "dp_sgd"})
    out = []
    for e in sorted({eps[0], eps[-1]}) if eps else []:
        gaps = []
        for m in sorted({r["parties"] for r in rows if r["defense"] == "dp_sgd"}):
            dp = mean([r["value"] for r in rows if r["defense"] == "dp_sgd" and r["parties"] == m
                       and r["epsilon"] == e])
            ref = mean([r["value"] for r in rows if r.get("variant") == "vfl" and r["parties"] == m])
            if dp is not None and ref is not None:
                gaps.append((m, dp, ref))
        if gaps:
            out.append((e, gaps))
    return out


def accuracy_cost(gaps: Sequence[Tuple[int, float, float]]) -> List[float]:
    """DP-SGD's accuracy loss against non-private VFL, in points, per owner count."""
    return [100 * (ref - dp) for _, dp, ref in gaps]


def _dp_vfl_quantities(result: Dict[str, Any]) -> Tuple[Dict[str, Optional[float]], Dict[str, str]]:
    """(quantity -> value, quantity -> what the value is)."""
    measured: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    for name, sub in by_dataset(section_rows(result, "dp_vfl")):
        clip = judged_clip(sub)
        costs = dp_vfl_costs(clip_rows(sub, clip))
        if sub[0]["metric"] == "accuracy" and len(costs) == 2:
            (e_low, gaps_low), (e_high, gaps_high) = costs
            low, high = float(np.mean(accuracy_cost(gaps_low))), float(np.mean(accuracy_cost(gaps_high)))
            measured[f"dp_vfl.{name}.cost_drop"] = low - high
            notes[f"dp_vfl.{name}.cost_drop"] = ((f"{clip}: " if clip else "")
                                                 + f"{low:.2f} at epsilon {e_low:g}, {high:.2f} at {e_high:g}")
    return measured, notes


def dp_vfl_verdicts(result: Dict[str, Any]) -> List[Verdict]:
    """``papers/dp_vfl.toml``'s claims against this run's DP-VFL rows."""
    return _judged("dp_vfl", *_dp_vfl_quantities(result))


def threshold(paper: str, quantity: str) -> Optional[float]:
    """The threshold of ``paper``'s claim on ``quantity`` (None: no such claim, or a range)."""
    claim: Optional[Claim] = next((c for c in load_claims(paper) if c.quantity == quantity), None)
    return None if claim is None else claim.threshold
