"""The plots of ``vflsec bench splitnn``'s report, from the results alone:
``table2_accuracy.png`` (accuracy per VFL-AFE component, the paper's value
and the majority-class rate beside it), ``table3_timing.png`` (time per
training step by component) and ``dp_vfl.png`` (utility against epsilon);
``rescale.png`` is :func:`.rescale.plot_rescale`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

from ...common import n_label, pyplot, save_figure
from ...dp_sgd_clip import is_percentile_variant
from .baseline import IMPLS
from .papers import PAPER_TABLE2, TIMING_STEPS

__all__ = ["plot_dp_vfl", "plot_table2", "plot_table3", "table2_summary"]


def _mean(values: List[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def table2_summary(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    """Per dataset, the mean of each Table 2 cell (``unprotected`` for the defense
    "none"), and ``majority_n``: the test rows behind the majority-class rate."""
    out: Dict[str, Dict[str, List[float]]] = {}
    for r in rows:
        if r.get("section", "table2") != "table2":
            continue
        key = r["defense"] if r["defense"] in ("centralized", "none", "majority") else r["variant"]
        key = "unprotected" if key == "none" else key
        out.setdefault(r["dataset"], {}).setdefault(key, []).append(r["value"])
        if key == "majority" and r.get("n"):
            out[r["dataset"]]["majority_n"] = [float(r["n"])]  # the test rows behind the rate (plot legend)
    return {ds: {k: _mean(v) for k, v in cells.items()} for ds, cells in out.items()}


def plot_table2(summary: Dict[str, Dict[str, float]], path: Path, seeds: int) -> bool:
    """Per dataset: test accuracy per Table 2 component (bars: mean of ``seeds``
    runs), the paper's value as a red tick, the majority-class rate as a dashed
    line. A dataset with fewer than 2 cells is
    left out; False, and no file, when none is left."""
    order = ["centralized", "unprotected", "vanilla", "R", "D", "full"]
    items = [(name, cells) for name, cells in summary.items() if sum(k in cells for k in order) >= 2]
    if not items:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(items), figsize=(5.5 * len(items), 4.4), squeeze=False)
    for ax, (name, cells) in zip(axes[0], items):
        keys = [k for k in order if k in cells]
        ax.bar(range(len(keys)), [100 * cells[k] for k in keys], color="tab:blue",
               label=f"vflsec (mean, {n_label(seeds, 'seeds')})")
        paper = PAPER_TABLE2.get(name, {})
        px = [i for i, k in enumerate(keys) if k in paper]
        if px:
            ax.plot(px, [paper[keys[i]] for i in px], "r_", ms=22, mew=3, label="paper (its Table 2)")
        if "majority" in cells:
            rows = f", {n_label(int(cells['majority_n']), 'test rows')}" if "majority_n" in cells else ""
            ax.axhline(100 * cells["majority"], color="black", ls="--", lw=1,
                       label=f"majority class ({100 * cells['majority']:.1f}%{rows})")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=20)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(name)
        lo = min([100 * v for k, v in cells.items() if k != "majority_n"] + list(paper.values()))
        ax.set_ylim(max(0, lo - 10), 100)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # below: no bar hidden
    fig.suptitle("VFL-AFE Table 2: accuracy per component")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_table3(rows: List[Dict[str, Any]], path: Path, epochs_timed: int) -> None:
    """Milliseconds per training step of each component, stacked per impl (each the
    minimum over ``epochs_timed`` timed epochs)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    bottom = np.zeros(len(IMPLS))
    for step in TIMING_STEPS:
        vals = np.array([1e3 * max(0.0, next(r["seconds_per_step"] for r in rows if r["impl"] == impl and
                                            r["step"] == step)) for impl in IMPLS])
        ax.bar(list(IMPLS), vals, bottom=bottom, label=step)
        bottom += vals
    ax.set_ylabel("ms per training step")
    ax.set_title("VFL-AFE Table 3: time per step by component")
    ax.legend(title=f"component (min over {n_label(epochs_timed, 'epochs')})", fontsize=8, title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def plot_dp_vfl(rows: List[Dict[str, Any]], path: Path) -> bool:
    """Per dataset: DP-SGD's metric against epsilon, one curve per number of data
    owners and clip (a percentile clip, which has no guarantee, dotted and named
    so), with the non-private VFL (dashed, the curve's colour) and centralized
    (black) references, n in every legend entry. A dataset whose curves all have
    fewer than 2 epsilons is left out; False, and no file, when none is left."""
    plt = pyplot()

    def curves(name: str) -> Dict[Tuple[int, Any], List[Tuple[float, float, int]]]:
        sub = [r for r in rows if r["dataset"] == name and r["defense"] == "dp_sgd"]
        out = {}
        for m in sorted({r["parties"] for r in sub}):
            for clip in dict.fromkeys(r.get("variant") for r in sub if r["parties"] == m):
                own = [r for r in sub if r["parties"] == m and r.get("variant") == clip]
                eps = sorted({r["epsilon"] for r in own})
                values = [[r["value"] for r in own if r["epsilon"] == e] for e in eps]
                if len(eps) >= 2:
                    out[(m, clip)] = [(e, float(np.mean(v)), len(v)) for e, v in zip(eps, values)]
        return out

    def curve_label(m: int, clip: Any, n: int) -> str:
        clip_words = "" if clip is None else f" {clip}{', no guarantee' if is_percentile_variant(clip) else ''}"
        return f"DP-SGD{clip_words}, {m} owners ({n_label(n, 'run/point')})"

    names = [name for name in dict.fromkeys(r["dataset"] for r in rows) if curves(name)]
    if not names:
        return False
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        sub = [r for r in rows if r["dataset"] == name]
        colours: Dict[int, Any] = {}
        for (m, clip), pts in curves(name).items():
            percentile = is_percentile_variant(clip)
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="s" if percentile else "o",
                            color=colours.get(m), ls=":" if percentile else "-",
                            label=curve_label(m, clip, max(p[2] for p in pts)))
            if m in colours:
                continue  # one reference line per owner count, in its curves' colour
            colours[m] = line.get_color()
            ref = [r["value"] for r in sub if r["variant"] == "vfl" and r["parties"] == m]
            if ref:
                ax.axhline(np.mean(ref), color=line.get_color(), ls="--", lw=1,
                           label=f"non-private VFL, {m} owners ({n_label(len(ref))})")
        central = [r["value"] for r in sub if r["defense"] == "centralized"]
        if central:
            ax.axhline(np.mean(central), color="k", ls="-", lw=1.4, label=f"centralized ({n_label(len(central))})")
        ax.set_xscale("log")
        deltas = sorted({r["delta"] for r in sub if r["defense"] == "dp_sgd" and r.get("delta") is not None})
        ax.set_xlabel("epsilon" + (f" (delta = {deltas[0]:g})" if len(deltas) == 1 else ""))
        ax.set_ylabel(sub[0]["metric"])
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.suptitle("DP-VFL: utility vs privacy budget")
    fig.tight_layout()
    save_figure(fig, path)
    return True


