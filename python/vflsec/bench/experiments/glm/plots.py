"""PNG plots of ``vflsec bench glm``: accuracy against epsilon with every
reference, the paper's Figure 2 grid, runtime against epochs and n."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

import numpy as np

from ...common import n_label, pyplot, save_figure
from .grid import HE_DP_METHODS, HE_METHODS, MPC_METHODS
from .summary import runtime_series, stats

__all__ = ["plot_accuracy", "plot_figure2", "plot_runtime", "plot_tradeoff"]

# Reference lines: distinct colour and dash for each, so overlapping values stay readable.
_REFERENCE_STYLE = {
    "majority": ("tab:red", ":"),
    "single_party": ("tab:brown", "-."),
    "centralized_sklearn": ("black", "-"),
    "centralized_gd": ("tab:gray", (0, (5, 1))),
    "plain": ("tab:blue", "--"),
    "taylor": ("tab:cyan", (0, (1, 1))),
    "paillier": ("tab:green", (0, (3, 1, 1, 1))),
    "ckks": ("tab:purple", (0, (3, 2, 1, 2, 1, 2))),
    "mpc_semi2k": ("darkgoldenrod", (0, (6, 2))),
    "mpc_cheetah": ("teal", (0, (1, 2, 4, 2))),
}
# The runtime plot's families: marker and line style per family, so secret sharing (MPC) stands apart from
# HE and from plain / DP VFL whatever the method's colour.
_FAMILY_STYLE = {"plain / DP": ("o", "-"), "HE": ("s", "--"), "MPC": ("D", ":")}


def _family(method: str) -> str:
    if method in MPC_METHODS:
        return "MPC"
    if method.split("-")[0] in HE_METHODS + HE_DP_METHODS:
        return "HE"
    return "plain / DP"
_DP_STYLE = {
    ("headline", "analytic"): ("tab:orange", "o", "HDP-VFL headline (analytic)"),
    ("headline", "classic"): ("tab:olive", "v", "HDP-VFL headline (classic, ε < 1 only)"),
    ("tuned_wide_grid", "analytic"): ("tab:pink", "s", "tuned wide grid (ε excludes search)"),
    ("private_selection", "analytic"): ("tab:green", "D", "private selection (ε includes search)"),
}


_SPECTRUM_STYLE = {
    "central_dp": ("black", "o", "central-DP ceiling"),
    "hdp": ("tab:orange", "s", "HDP-VFL"),
    "taylor_dp": ("tab:green", "^", "HE+DP (taylor_dp, in the clear)"),
    "paillier_dp": ("darkgreen", "P", "HE+DP Paillier"),
    "ckks_dp": ("tab:purple", "X", "HE+DP CKKS"),
    "mpc_dp_semi2k": ("darkgoldenrod", "D", "MPC+DP semi2k"),
    "mpc_dp_cheetah": ("teal", "d", "MPC+DP Cheetah"),
}


def plot_accuracy(summary: Dict[str, Dict[str, Any]], path: Path) -> None:
    """Top row: HDP-VFL's families against epsilon (delta 0.01) with every reference.
    Bottom row (runs with the DP spectrum): every DP method at the same (epsilon, delta)."""
    plt = pyplot()
    n = len(summary)
    spectrum = any(ds.get("spectrum") for ds in summary.values())
    fig, axes = plt.subplots(2 if spectrum else 1, n, figsize=(6.2 * n, 14.0 if spectrum else 7.4), squeeze=False)
    if spectrum:
        for ax, (name, ds) in zip(axes[1], summary.items()):
            _plot_spectrum(ax, name, ds)
    for ax, (name, ds) in zip(axes[0], summary.items()):
        lowest = min(stats(v)[0] for v in ds["reference"].values()) if ds["reference"] else 0.5
        for key, (color, marker, label) in _DP_STYLE.items():
            cells = ds["dp"].get(key, {})
            eps = sorted(cells)
            if len(eps) < 1:
                continue
            points = [stats(cells[e]) for e in eps]
            ax.errorbar(eps, [s[0] for s in points], yerr=[s[1] for s in points], color=color, marker=marker,
                        capsize=3, lw=1.4, label=f"{label} (n={max(s[2] for s in points)}/point)")
            lowest = min([lowest] + [s[0] - s[1] for s in points if s[2]])
        for method, (color, dash) in _REFERENCE_STYLE.items():
            if method in ds["reference"]:
                mean, _, count = stats(ds["reference"][method])
                ax.axhline(mean, color=color, linestyle=dash, lw=1.3, label=f"{method} {mean:.3f} (n={count})")
        ax.set_xscale("log")
        ax.set_xlabel("ε for the whole training run (δ = 0.01)")
        ax.set_ylabel("test accuracy")
        ax.set_title(name)
        ax.set_ylim(max(0.0, lowest - 0.05), 1.0)
        ax.grid(alpha=0.3)
        # Below the panel: the curves and reference lines stay visible.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.suptitle("Accuracy vs privacy budget (cf. HDP-VFL Fig. 1), with every reference"
                 + ("; bottom: every DP method at the same (ε, δ)" if spectrum else ""))
    fig.tight_layout()
    save_figure(fig, path)


def _plot_spectrum(ax: Any, name: str, ds: Dict[str, Any]) -> None:
    """One dataset's DP spectrum: mean ± std per method; delta 1e-5 solid, larger deltas dashed."""
    deltas = sorted({d for _, d in ds.get("spectrum", {})})
    lowest = 1.0
    for (method, delta), cells in sorted(ds.get("spectrum", {}).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if method not in _SPECTRUM_STYLE or not cells:
            continue
        color, marker, label = _SPECTRUM_STYLE[method]
        eps = sorted(cells)
        points = [stats(cells[e]) for e in eps]
        dash = "-" if delta == deltas[0] else "--"
        # Offset the deltas a little along x so overlapping error bars stay readable.
        shift = 1.0 + 0.06 * deltas.index(delta)
        ax.errorbar([e * shift for e in eps], [p[0] for p in points], yerr=[p[1] for p in points], color=color,
                    marker=marker, ls=dash if len(eps) > 1 else "none", capsize=3, lw=1.3,
                    label=f"{label}, δ={delta:g} (n={max(p[2] for p in points)}/point)")
        lowest = min([lowest] + [p[0] - p[1] for p in points if p[2]])
    for method in ("majority", "single_party", "plain", "centralized_sklearn"):
        if method in ds["reference"]:
            ref_color, ref_dash = _REFERENCE_STYLE[method]
            mean, _, count = stats(ds["reference"][method])
            ax.axhline(mean, color=ref_color, linestyle=ref_dash, lw=1.1, label=f"{method} {mean:.3f} (n={count})")
            lowest = min(lowest, mean)
    ax.set_xscale("log")
    ax.set_xlabel("ε for the whole training run (δ as labelled; replace-one neighbours)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{name}: the DP spectrum")
    ax.set_ylim(max(0.0, lowest - 0.05), 1.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)


def plot_figure2(summary: Dict[str, Dict[str, Any]], path: Path) -> bool:
    """Heat map of HDP-VFL accuracy over (e, k) at epsilon = 1; False if no data."""
    items = [(name, ds) for name, ds in summary.items() if ds["figure2"]]
    if not items:
        return False
    plt = pyplot()
    name, ds = items[0]
    es = sorted({e for e, _ in ds["figure2"]})
    ks = sorted({k for _, k in ds["figure2"]})
    grid = np.array([[stats(ds["figure2"][(e, k)]["hdp"])[0] for k in ks] for e in es])
    runs = max(stats(cell["hdp"])[2] for cell in ds["figure2"].values())
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    image = ax.imshow(grid, cmap="viridis", vmin=0.4, vmax=1.0, origin="lower")
    for i in range(len(es)):
        for j in range(len(ks)):
            ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", color="white", fontsize=10)
    ax.set_xticks(range(len(ks)), [f"k = {k:g}" for k in ks])
    ax.set_yticks(range(len(es)), [f"e = {e}" for e in es])
    ax.set_title(f"HDP-VFL test accuracy on {name}, ε = 1, mean of {n_label(runs, 'runs/cell')} (cf. the "
                 "paper's Fig. 2:\ne 5 -> 15: 0.9 -> 0.6; k 0.1 -> 0.5: 0.5 -> 0.9)", fontsize=9)
    fig.colorbar(image, ax=ax, label="test accuracy")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_runtime(rows: Sequence[Dict[str, Any]], epochs_n: int, path: Path) -> bool:
    """Wall time, bytes sent and (where the rows carry it) CPU time against epochs (at
    ``epochs_n``) and against n (one epoch): one column of panels per axis with at least one
    series of 2 or more points (:func:`.report.runtime_series`); plain / DP VFL, HE and MPC
    each with its own marker and line style. False, and no file, when neither axis has a series."""
    series = runtime_series(rows, epochs_n)
    if not series:
        return False
    plt = pyplot()
    axes_x = list(series)
    panels = [(1, "wall time (s)"), (2, "bytes sent (MPC: channel + engine)")]
    if any(p[4] is not None for by_method in series.values() for pts in by_method.values() for p in pts):
        panels.append((4, "CPU time (s, every party and worker)"))
    fig, axes = plt.subplots(len(panels), len(axes_x), figsize=(5.5 * len(axes_x) + 1, 4 * len(panels)),
                             squeeze=False)
    non_mpc = [m for m in dict.fromkeys(r["method"] for r in rows) if m not in MPC_METHODS]
    colors = {m: f"C{i}" for i, m in enumerate(non_mpc)}
    colors.update({m: _REFERENCE_STYLE[m][0] for m in MPC_METHODS})
    xlabels = {"epochs": f"epochs (n = {epochs_n})", "n": "n samples (1 epoch)"}
    for col, axis in enumerate(axes_x):
        for method, pts in series[axis].items():
            marker, line = _FAMILY_STYLE[_family(method)]
            for row, (index, ylabel) in enumerate(panels):
                ax = axes[row][col]
                shown = [p for p in pts if p[index] is not None]
                if not shown:
                    continue
                # plain / DP cells take milliseconds: each is the median of 3 timed runs (.runtime)
                runs = n_label(3, "runs/point, median") if _family(method) == "plain / DP" else n_label(1, "run/point")
                ax.plot([p[0] for p in shown], [p[index] for p in shown], marker=marker, ls=line,
                        color=colors[method], label=f"{method} [{_family(method)}] ({runs})")
                ext = [p for p in shown if p[3]]
                if ext:
                    ax.plot([p[0] for p in ext], [p[index] for p in ext], "x", color=colors[method], ms=10)
                ax.set_xlabel(xlabels[axis])
                ax.set_ylabel(f"{ylabel}, log scale")
        for row in range(len(panels)):
            axes[row][col].set_yscale("log")
            axes[row][col].grid(alpha=0.3)
            axes[row][col].legend(fontsize=7)
    fig.suptitle("Runtime and bytes (cf. HDP-VFL Fig. 3): plain / DP VFL (o), HE (squares), secret-sharing MPC "
                 "(diamonds); x = extrapolated from measured batches")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def plot_tradeoff(summary: Dict[str, Dict[str, Any]], runtime: Sequence[Dict[str, Any]], epochs_n: int,
                  path: Path) -> bool:
    """The DP-vs-HE trade-off: test accuracy against the time and the bytes of one
    epoch at n = ``epochs_n`` (runtime grid, synthetic data of Adult's shape), one
    point per method and, for HDP-VFL, per epsilon; one row of panels per dataset.
    HE points use the HE run's accuracy where it ran, else the Taylor reference
    (the accuracy Paillier and CKKS reach). False when the run has no runtime cell
    at that size."""
    cost = {r["method"]: (r["seconds"], r["bytes"]) for r in runtime if r["n"] == epochs_n and r["epochs"] == 1}
    if "plain" not in cost or not summary:
        return False

    def points(ds: Dict[str, Any]) -> int:
        n = sum(1 for m in ("plain", "paillier", "ckks") if m in cost and
                (m in ds["reference"] or (m != "plain" and "taylor" in ds["reference"])))
        n += sum(1 for m in MPC_METHODS if m in cost and (m in ds["reference"] or "plain" in ds["reference"]))
        return n + (len(ds["dp"].get(("headline", "analytic"), {})) if "hdp" in cost else 0)

    names = [name for name in summary if points(summary[name]) >= 2]  # a one-point panel shows no trade-off
    if not names:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.6 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        ds = summary[name]
        for col, (index, xlabel) in enumerate(((0, "wall time of one epoch (s)"), (1, "bytes of one epoch"))):
            ax = axes[row][col]
            for method, label in (("plain", "plain VFL"), ("paillier", "Paillier"), ("ckks", "CKKS")):
                if method not in cost:
                    continue
                acc_key = method if method in ds["reference"] else ("taylor" if method != "plain" else None)
                if acc_key is None or acc_key not in ds["reference"]:
                    continue
                acc, _, n = stats(ds["reference"][acc_key])
                color = _REFERENCE_STYLE.get(method, ("black", "-"))[0]
                suffix = "" if acc_key == method else " (Taylor reference accuracy)"
                ax.plot([cost[method][index]], [acc], marker="s", ms=9, color=color, ls="none",
                        label=f"{label}{suffix} (n={n})")
            _mpc_points(ax, ds, cost, index)
            dp = ds["dp"].get(("headline", "analytic"), {})
            if "hdp" in cost and dp:
                eps = sorted(dp)
                accs = [stats(dp[e])[0] for e in eps]
                ax.plot([cost["hdp"][index]] * len(eps), accs, marker="o", color="tab:orange", ls="none",
                        label=f"HDP-VFL headline, ε = {eps[0]:g}..{eps[-1]:g} (n={len(dp[eps[0]])} each)")
                labelled: list = []
                for e, a in sorted(zip(eps, accs), key=lambda p: -p[0]):  # largest ε first; skip overlaps
                    if all(abs(a - b) > 0.004 for b in labelled):
                        ax.annotate(f"ε={e:g}", (cost["hdp"][index], a), textcoords="offset points",
                                    xytext=(6, -3), fontsize=7)
                        labelled.append(a)
            _he_dp_points(ax, ds, cost, index)
            for ref in ("majority", "single_party"):
                if ref in ds["reference"]:
                    c, ls = _REFERENCE_STYLE[ref]
                    ax.axhline(stats(ds["reference"][ref])[0], color=c, ls=ls, lw=1,
                               label=f"{ref.replace('_', ' ')} (n={len(ds['reference'][ref])})")
            ax.set_xscale("log")
            ax.set_xlabel(f"{xlabel}, log scale (n = {epochs_n})")
            ax.set_ylabel("test accuracy")
            ax.set_title(f"{name}: accuracy against {'time' if index == 0 else 'bytes'}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    fig.suptitle("DP vs HE vs MPC trade-off: accuracy (each dataset) against the cost of one epoch (runtime grid)")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _mpc_points(ax: Any, ds: Dict[str, Any], cost: Dict[str, Any], index: int) -> None:
    """Secret-sharing MPC on the trade-off: each MPC method's cost (bytes: channel + engine) at its own
    accuracy where it ran, else at plain VFL's (the recursion it computes on shares)."""
    for method in MPC_METHODS:
        acc_key = method if method in ds["reference"] else "plain"
        if method not in cost or acc_key not in ds["reference"]:
            continue
        acc, _, n = stats(ds["reference"][acc_key])
        suffix = "" if acc_key == method else " (plain VFL's accuracy: the same recursion)"
        ax.plot([cost[method][index]], [acc], marker="D", ms=8, color=_REFERENCE_STYLE[method][0], ls="none",
                label=f"{method} [MPC]{suffix} (n={n})")


def _he_dp_points(ax: Any, ds: Dict[str, Any], cost: Dict[str, Any], index: int) -> None:
    """HE+DP on the trade-off: each encrypted protocol's cost with DP at every epsilon of
    the spectrum's smallest delta (its own accuracy where it ran, else taylor_dp's), and the
    central-DP ceiling's accuracy at the same budgets as a reference line."""
    spectrum = ds.get("spectrum") or {}
    deltas = sorted({d for _, d in spectrum})
    if not deltas:
        return
    delta = deltas[0]
    for method, color in (("paillier_dp", "darkgreen"), ("ckks_dp", "tab:purple")):
        if method not in cost:
            continue
        cells = dict(spectrum.get(("taylor_dp", delta), {}))
        cells.update(spectrum.get((method, delta), {}))
        eps = sorted(cells)
        if not eps:
            continue
        accs = [stats(cells[e])[0] for e in eps]
        ax.plot([cost[method][index]] * len(eps), accs, marker="^", color=color, ls="none",
                label=f"{method} ε = {eps[0]:g}..{eps[-1]:g}, δ={delta:g}")
        for e, a in zip(eps, accs):
            ax.annotate(f"ε={e:g}", (cost[method][index], a), textcoords="offset points", xytext=(6, 2), fontsize=6)
    ceiling = spectrum.get(("central_dp", delta), {}).get(1.0)
    if ceiling:
        ax.axhline(stats(ceiling)[0], color="black", ls="-.", lw=1,
                   label=f"central-DP ceiling at ε=1, δ={delta:g} (not a VFL protocol: no cost)")
