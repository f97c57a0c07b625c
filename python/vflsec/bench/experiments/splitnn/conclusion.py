"""The "Conclusion" of ``vflsec bench splitnn``'s report: what the run shows, in
plain words, computed from its rows (``results.json`` content), one paragraph
per section that ran:

* Table 2: what VFL-AFE costs in accuracy against unprotected split learning
  at its epsilon (per release and composed), which component costs most, the
  paper's number beside it, and which components come within
  ``papers/vfl_afe.toml``'s "learns" threshold of the majority-class rate;
* Table 3: the kernels' speed-up over the baseline implementation in training
  and alone, and the defense's share of a training step;
* DP-VFL: per clip, what DP-SGD costs against non-private VFL at the smallest
  and the largest epsilon (accuracy points, or the MSE ratio), and whether that
  cost changes by less than ``papers/dp_vfl.toml``'s threshold;
* FedPass: the range of accuracy the passport settings cost;
* rescale: what dropping the shrink of the rescale rule changes.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ...dp_sgd_clip import is_percentile_variant
from .papers import PAPER_TABLE2
from .verdicts import (
    accuracy_cost,
    by_dataset,
    clip_rows,
    dp_vfl_clips,
    dp_vfl_costs,
    mean,
    section_rows,
    table2_means,
    threshold,
)

__all__ = ["conclusion", "lattice_run"]

_COMPONENTS = (("vanilla", "the noise alone (vanilla)"), ("R", "noise + rescale (+R)"),
               ("D", "noise + gradient adjustment (+D)"), ("full", "the full defense"))


def lattice_run(result: Dict[str, Any]) -> bool:
    """Whether the run's noise rows time the lattice release (``"noise_release":
    "lattice"``, recorded since it exists); older runs timed a ChaCha20 noise draw
    against torch.randn, and their reports say so."""
    return result.get("noise_release") == "lattice"


def _points(cost: float) -> str:
    """``"costs 2.1 points"`` / ``"gains 0.4 points"`` for an accuracy loss in points."""
    return f"costs {cost:.1f} points" if cost >= 0 else f"gains {-cost:.1f} points"


def _within(limit: float) -> str:
    """``"half a point"`` for 0.5, ``"a point"`` for 1, else ``"N points"``."""
    return {0.5: "half a point", 1.0: "a point"}.get(limit, f"{limit:g} points")


def _table2(result: Dict[str, Any]) -> List[str]:
    rows = section_rows(result, "table2")
    means = table2_means(result)
    out = []
    for name, sub in by_dataset(rows):
        cell = means[name]
        base = cell["none"]
        if base is None:
            continue
        text = f"On {name}, unprotected split learning reaches {100 * base:.1f}%"
        if cell["centralized"] is not None:
            text += f" (one model on all features: {100 * cell['centralized']:.1f}%)"
        measured = {k: v for k, v in cell.items() if v is not None and k != "majority"}
        costs = {k: 100 * (base - measured[k]) for k, _ in _COMPONENTS if k in measured}
        dp = next((r for r in sub if r.get("epsilon_composed")), None)
        if "full" in costs and dp is not None:
            text += (f". At epsilon = {dp['epsilon']:g} per release ({dp['epsilon_composed']:.3g} composed over the "
                     f"run, delta = {dp['delta']:g}), VFL-AFE {_points(costs['full'])} of accuracy")
            paper = PAPER_TABLE2.get(name, {}).get("full")
            if paper is not None:
                text += f" (it reaches {100 * measured['full']:.1f}%; the paper reports {paper:.1f}%)"
        if "vanilla" in costs:
            text += f"; the noise alone (vanilla) {_points(costs['vanilla'])}"
            for key, label in (("R", "the rescale (+R)"), ("D", "the gradient adjustment (+D)")):
                if key in costs:
                    extra = costs[key] - costs["vanilla"]
                    text += (f", adding {label} costs {extra:.1f} more" if extra >= 0
                             else f", adding {label} wins back {-extra:.1f}")
        majority = cell["majority"]
        if majority is not None:
            # papers/vfl_afe.toml's "learns" claim: more than its threshold (points) above the majority class
            limit = threshold("vfl_afe", f"table2.{name}.least_over_majority")
            below = [label for key, label in (("vanilla", "vanilla"), ("R", "+R"), ("D", "+D"), ("full", "full"))
                     if limit is not None and key in measured and 100 * (measured[key] - majority) <= limit]
            text += f". Always predicting the majority class scores {100 * majority:.1f}%"
            if below and limit is not None:
                text += (f"; {', '.join(below)} {'is' if len(below) == 1 else 'are'} within {_within(limit)} of it "
                         "or below: at this epsilon the protected model barely learns")
        out.append(text + ".")
    return out


def _table3(result: Dict[str, Any]) -> List[str]:
    timing = result.get("timing") or []
    out = []
    if timing:
        by = {(r["impl"], r["step"]): r for r in timing}
        speed = []
        for step, label in (("rescale", "the pairwise-distance statistics"), ("adjust", "fuzzy c-means")):
            v, b = by.get(("vflsec", step)), by.get(("baseline", step))
            if v and b and v.get("kernel_seconds_per_step") and b.get("kernel_seconds_per_step"):
                speed.append(f"{label} {b['kernel_seconds_per_step'] / v['kernel_seconds_per_step']:.3g}x")
        total = sum(r["seconds_per_step"] for r in timing if r["impl"] == "vflsec")
        base = by.get(("vflsec", "base"))
        text = "In training, vflsec's kernels run " + (", ".join(speed) if speed else "no faster")
        text += " as fast as the baseline implementation's (their own timers)"
        if base and total > 0:
            text += (f"; with them the defense takes {100 * (1 - base['seconds_per_step'] / total):.0f}% of a "
                     "training step (the rest is the split model itself)")
        out.append(text + ".")
    isolated = result.get("timing_isolated") or []
    if isolated:
        alone = {(r["impl"], r["step"]): r["seconds_per_call"] for r in isolated}
        parts = [f"{label} {alone[('baseline', step)] / alone[('vflsec', step)]:.3g}x"
                 for step, label in (("noise", "the noise release" if lattice_run(result) else "the noise draw"),
                                     ("rescale", "the distance statistics"),
                                     ("adjust", "fuzzy c-means"))
                 if alone.get(("vflsec", step)) and alone.get(("baseline", step))]
        if parts:
            out.append("Timed alone on one batch, vflsec against the baseline: " + ", ".join(parts)
                       + " (above 1x: vflsec is faster).")
    return out


def _clip_words(clip: Any) -> str:
    """How the Conclusion names a DP-SGD clip (a row's ``variant``)."""
    if clip is None:  # the first runs did not name it
        return ""
    if is_percentile_variant(clip):
        return f" with the paper's percentile clip ({clip}, read from the gradients: no guarantee)"
    return f" with the clip fixed before the run ({clip})"


def _dp_vfl(result: Dict[str, Any]) -> List[str]:
    rows = section_rows(result, "dp_vfl")
    out = []
    for (name, all_rows), clip in ((d, c) for d in by_dataset(rows) for c in dp_vfl_clips(d[1])):
        sub = clip_rows(all_rows, clip)
        metric = sub[0]["metric"]
        eps = sorted({r["epsilon"] for r in sub if r["defense"] == "dp_sgd"})
        if not eps:
            continue
        pieces = []
        mean_cost = []
        for e, gaps in dp_vfl_costs(sub):
            if metric == "accuracy":
                cost = accuracy_cost(gaps)
                mean_cost.append(float(np.mean(cost)))
                pieces.append(f"at epsilon = {e:g}, DP-SGD {_points(mean_cost[-1])} of accuracy against "
                              f"non-private VFL (mean over {len(gaps)} owner counts; "
                              + ", ".join(f"{m} owners {c:+.1f}" for (m, _, _), c in zip(gaps, cost)) + ")")
            else:
                ratio = [dp / ref for _, dp, ref in gaps if ref > 0]
                if ratio:
                    pieces.append(f"at epsilon = {e:g}, DP-SGD's {metric} is {np.mean(ratio):.2f}x non-private "
                                  f"VFL's (mean over {len(ratio)} owner counts)")
        if pieces:
            text = f"DP-VFL on {name}{_clip_words(clip)}: " + "; ".join(pieces)
            # papers/dp_vfl.toml's claim on the cost's change: below its threshold either way, "hardly changes"
            limit = threshold("dp_vfl", f"dp_vfl.{name}.cost_drop")
            if limit is not None and len(mean_cost) == 2 and abs(mean_cost[0] - mean_cost[1]) < limit:
                text += (f". The cost hardly changes from epsilon = {eps[0]:g} to {eps[-1]:g}: the noise is not what "
                         "costs accuracy here, the rest of DP-SGD (per-sample clipping, sampled batches) is")
            diverged = [r for r in sub if r.get("diverged")]
            if diverged:  # left out of the means above; each is a row of the table
                text += (f". {len(diverged)} of its {sum(r['defense'] == 'dp_sgd' for r in sub)} DP-SGD cells "
                         "diverged (" + ", ".join(f"{r['parties']} owners at epsilon {r['epsilon']:g}"
                                                  for r in diverged) + "), left out of these means")
            out.append(text + ".")
    return out


def _fedpass(result: Dict[str, Any]) -> List[str]:
    rows = section_rows(result, "fedpass")
    out = []
    for name, sub in by_dataset(rows):
        base = mean([r["value"] for r in sub if r["defense"] == "none"])
        passports = [(r["variant"], r["value"]) for r in sub if r["defense"] == "fedpass"]
        if base is None or not passports:
            continue
        worst = min(passports, key=lambda p: p[1])
        best = max(passports, key=lambda p: p[1])
        out.append(f"FedPass on {name}: against {100 * base:.1f}% unprotected, the passport settings reach "
                   f"{100 * worst[1]:.1f}% ({worst[0]}: {_points(100 * (base - worst[1]))}) to "
                   f"{100 * best[1]:.1f}% ({best[0]}: {_points(100 * (base - best[1]))}).")
    return out


def _rescale(result: Dict[str, Any]) -> List[str]:
    rows = section_rows(result, "rescale")
    out = []
    for name, sub in by_dataset(rows):
        diffs = []
        for variant in ("R", "full"):
            rule = mean([r["value"] for r in sub if r["variant"] == variant and r["rescale_shrink"]])
            free = mean([r["value"] for r in sub if r["variant"] == variant and not r["rescale_shrink"]])
            if rule is not None and free is not None:
                diffs.append(f"{variant} {100 * (free - rule):+.1f}")
        if diffs:
            seeds = len({r["seed"] for r in sub})
            out.append(f"Rescale rule on {name}: never shrinking (factor floored at 1) changes the accuracy by "
                       + ", ".join(diffs) + f" points against the paper's rule (mean of {seeds} seed(s)).")
    return out


def conclusion(result: Dict[str, Any]) -> List[str]:
    """Markdown lines of the report's ``## Conclusion`` section."""
    paragraphs = [p for part in (_table2, _table3, _dp_vfl, _fedpass, _rescale) for p in part(result)]
    if result.get("partial"):
        paragraphs.append("This is a partial run: only the sections that finished are concluded on.")
    if not paragraphs:
        paragraphs = ["The run has no finished section to conclude on."]
    lines = ["## Conclusion", ""]
    for p in paragraphs:
        lines += [p, ""]
    return lines
