"""VFL-AFE's rescale rule measured: section ``rescale`` of ``vflsec bench splitnn``.

In Table 2, +R (rescale) cost accuracy instead of adding it, and the paper's
rule has no DP guarantee (its factor reads the batch it releases). This
section trains the Table 2 models again (same data, epochs, batch, t,
epsilon) for ``vanilla``, ``R`` and ``full``: with the paper's rule
(``rescale_estimate="batch"``, no guarantee), with it and
``rescale_shrink=False`` (the factor ``2t / (mu_d + 3 sigma_d)`` floored at
1), and with the DP factor (``rescale_estimate="dp"``, the default: a noisy
centre and noisy distance statistics in the same accounted release), over
several seeds, and records per epoch what the rule did
(``VFLAFE.rescale_trace_``, first passive party): the mean factor and the
mean ratio of the diameter estimate ``mu_d + 3 sigma_d`` to the batch's true
largest distance. A ratio above 1 with a factor below 1 means the rule
shrinks embeddings whose diameter is already within the clip's 2t, and with
the noise fixed that lowers the signal-to-noise ratio.

Rows (``results.json``'s ``"accuracy"``, ``"section": "rescale"``)::

    {"dataset", "defense", "variant", "rescale_shrink", "rescale_estimate", "seed", "metric",
     "value" (test accuracy), "train_accuracy_by_epoch", "factor_by_epoch",
     "estimate_over_max_by_epoch", "epsilon", "epsilon_composed" (None: no
     guarantee), "delta", "seconds", ...}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from ...._progress import progress
from ...common import markdown_table, n_label, pyplot, save_figure
from .afe import DELTA, fit_split_model, make_afe

__all__ = ["CELLS", "plot_rescale", "report_rescale", "section_rescale"]

# (Table 2 variant, rescale_shrink, rescale_estimate); the last two only matter with +R.
CELLS = (("vanilla", True, "dp"), ("R", True, "batch"), ("R", False, "batch"), ("R", True, "dp"),
         ("R", False, "dp"), ("full", True, "batch"), ("full", True, "dp"))


def _label(variant: str, shrink: bool, estimate: str = "batch") -> str:
    """Cell names; "R" / "R, no shrink" are the paper's rule (as in runs from before the DP factor)."""
    if variant in ("vanilla", "D"):
        return variant
    label = variant if shrink else f"{variant}, no shrink"
    return label if estimate == "batch" else f"{label}, DP factor"


def section_rescale(datasets: Dict[str, Any], cfg: Dict[str, Any],
                    rows: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    """Test accuracy and per-epoch rescale diagnostics of the CELLS, per dataset and seed,
    each row appended to ``rows`` (returned) as it finishes."""
    rows = [] if rows is None else rows
    seeds = cfg["rescale"]["seeds"]
    work = [(name, seed, cell) for name in datasets for seed in range(seeds) for cell in CELLS]
    for name, seed, (variant, shrink, estimate) in progress(work, desc="rescale", unit="fit"):
        data = datasets[name]
        defense = make_afe(variant, cfg, kind=data.kind, seed=seed, rescale_shrink=shrink,
                           rescale_estimate=estimate)
        model = fit_split_model(data, defense, epochs=cfg["epochs"], batch_size=cfg["batch_size"],
                                lr=cfg["lr"][data.kind], seed=seed, device=cfg["device"])
        trace = model.party_defenses_["passive_0"].rescale_trace_.get("passive_0", {})
        epochs = sorted(trace)
        spent = model.privacy_spent_["passive_0"]
        rows.append({
            "section": "rescale", "dataset": data.name, "parties": len(data.train_parts), "defense": defense.name,
            "variant": variant, "rescale_shrink": shrink, "rescale_estimate": estimate,
            "label": _label(variant, shrink, estimate), "seed": seed,
            "metric": "test_accuracy", "value": float(model.score(data.test_parts, data.y_test)),
            "train_accuracy_by_epoch": [float(a) for a in model.history_["accuracy"]],
            "factor_by_epoch": [trace[e]["factor"] for e in epochs],
            "estimate_over_max_by_epoch": [trace[e]["estimate_over_max"] for e in epochs],
            "epsilon": cfg["epsilon"][data.kind], "delta": DELTA, "epsilon_composed": spent.epsilon,
            "epsilon_per_release_accountant": spent.epsilon_per_release,
            "seconds": sum(model.history_["seconds"]),
        })
    return rows


def _rows(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [r for r in result["accuracy"] if r.get("section") == "rescale"]


def _grouped(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, List[Dict[str, Any]]]]:
    out: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
    for r in rows:
        out.setdefault(r["dataset"], {}).setdefault(r["label"], []).append(r)
    return out


def _epoch_mean(runs: List[Dict[str, Any]], key: str) -> Optional[np.ndarray]:
    series = [r[key] for r in runs if r[key]]
    if not series:
        return None
    length = min(len(s) for s in series)
    return np.mean([s[:length] for s in series], axis=0)


def report_rescale(result: Dict[str, Any]) -> List[str]:
    cfg = result["config"]
    rows = _rows(result)
    groups = _grouped(rows)
    seeds = len({r["seed"] for r in rows})
    lines = ["## +R measured: the paper's rescale rule, without shrinking, and with the DP factor", "",
             f"Table 2's models again ({cfg['epochs']} epochs, batch {cfg['batch_size']}, t = {cfg['t']}, "
             f"epsilon per release {cfg['epsilon']}), {seeds} seed(s) per cell. 'R' / 'full' are the paper's "
             "rule (`rescale_estimate=\"batch\"`: its factor reads the batch it releases, so it has **no** DP "
             "guarantee); 'no shrink' = `VFLAFE(rescale_shrink=False)`: the factor 2t / (mu_d + 3 sigma_d) floored "
             "at 1; 'DP factor' = `rescale_estimate=\"dp\"` (the default): the factor from a noisy centre and "
             "noisy distance statistics, accounted in the same release, so the row's epsilon holds. Factor and "
             "estimate / max are means over the first passive party's training batches (the estimate "
             "mu_d + 3 sigma_d over the batch's largest pairwise distance after clipping).", ""]
    table = []
    for name, cells in groups.items():
        for label, runs in cells.items():
            acc = [100 * r["value"] for r in runs]
            factor = _epoch_mean(runs, "factor_by_epoch")
            ratio = _epoch_mean(runs, "estimate_over_max_by_epoch")
            table.append([name, label, float(np.mean(acc)), float(np.min(acc)), float(np.max(acc)),
                          None if factor is None else float(factor[0]),
                          None if factor is None else float(factor[-1]),
                          None if ratio is None else float(ratio[-1]), _guarantee(runs)])
    lines += [markdown_table(["dataset", "cell", "test accuracy % (mean)", "min", "max", "factor, first epoch",
                              "factor, last epoch", "estimate / max, last epoch", "epsilon (composed)"], table), ""]
    mean = {(name, label): 100 * float(np.mean([r["value"] for r in runs]))
            for name, cells in groups.items() for label, runs in cells.items()}
    for name in groups:
        parts = []
        for variant in ("R", "full"):
            if (name, variant) in mean and (name, f"{variant}, no shrink") in mean:
                parts.append(f"{variant} {mean[(name, f'{variant}, no shrink')] - mean[(name, variant)]:+.2f}")
        if parts:
            line = f"- {name}: no shrink minus the paper's rule, accuracy points: {', '.join(parts)}"
            if (name, "vanilla") in mean and (name, "R, no shrink") in mean:
                line += f"; R (no shrink) minus vanilla: {mean[(name, 'R, no shrink')] - mean[(name, 'vanilla')]:+.2f}"
            lines.append(line + ".")
        dp = [(label, mean[(name, label)] - mean[(name, "vanilla")]) for label in
              ("R, DP factor", "R, no shrink, DP factor", "full, DP factor") if (name, label) in mean]
        if dp and (name, "vanilla") in mean:
            lines.append(f"- {name}: with a valid guarantee (DP factor), minus vanilla, accuracy points: "
                         + ", ".join(f"{label} {gap:+.2f}" for label, gap in dp) + ".")
    lines.append("")
    return lines


def _guarantee(runs: List[Dict[str, Any]]) -> str:
    """The cell's composed epsilon, or "no guarantee" (the paper's batch factor; older
    runs recorded none for any cell)."""
    values = [r.get("epsilon_composed") for r in runs]
    known = [float(v) for v in values if v is not None]
    if len(known) < len(values):
        return "no guarantee" if all(r.get("rescale_estimate") == "batch" for r in runs) else "not recorded"
    return f"{max(known):.3g}"


def plot_rescale(result: Dict[str, Any], path: Path) -> None:
    """Per dataset: test accuracy per cell (bars: mean, dots: seeds) and, where a
    run traced at least 2 epochs, the mean rescale factor per epoch of each cell
    with the diameter estimate over the true maximum (R), n in every legend."""
    plt = pyplot()
    groups = _grouped(_rows(result))

    def traced(runs: List[Dict[str, Any]], key: str) -> Optional[np.ndarray]:
        values = _epoch_mean(runs, key)
        return values if values is not None and len(values) >= 2 else None  # one epoch shows no trend

    with_trace = any(traced(runs, "factor_by_epoch") is not None
                     for cells in groups.values() for runs in cells.values())
    fig, axes = plt.subplots(2 if with_trace else 1, len(groups), figsize=(5.5 * len(groups), 7 if with_trace else 4),
                             squeeze=False)
    for col, (name, cells) in enumerate(groups.items()):
        ax = axes[0][col]
        labels = list(cells)
        means = [100 * np.mean([r["value"] for r in cells[k]]) for k in labels]
        seeds = max(len(runs) for runs in cells.values())
        ax.bar(range(len(labels)), means, color="tab:blue", label=f"mean ({n_label(seeds, 'seeds')})")
        for i, k in enumerate(labels):
            ax.plot([i] * len(cells[k]), [100 * r["value"] for r in cells[k]], "k.", ms=6,
                    label=f"one seed ({n_label(1)})" if i == 0 else None)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=20, fontsize=8)
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(max(0.0, min(means) - 15), 100)
        ax.set_title(f"{name}: accuracy")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        if not with_trace:
            continue
        ax = axes[1][col]
        if all(traced(cells[k], "factor_by_epoch") is None for k in labels):
            ax.set_visible(False)  # nothing traced over 2+ epochs for this dataset
            continue
        for k in labels:
            factor = traced(cells[k], "factor_by_epoch")
            if factor is not None:
                ax.plot(np.arange(1, len(factor) + 1), factor, marker=".",
                        label=f"factor ({k}, mean of {n_label(len(cells[k]))})")
        ratio = traced(cells["R"], "estimate_over_max_by_epoch") if "R" in cells else None
        if ratio is not None:
            ax.plot(np.arange(1, len(ratio) + 1), ratio, "k--", marker="x",
                    label=f"estimate / max (R, mean of {n_label(len(cells['R']))})")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="1 (no rescaling)")
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{name}: rescale factor per epoch")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)  # below: the lines stay clear
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
