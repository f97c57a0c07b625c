"""The report of ``vflsec bench privacy``: ``report.md`` and the PNG plots from a run's
results alone (accuracy vs recovery error like FedPass Fig. 4; equality-solving errors).
Reads the results of runs from before the one runner too (``"elapsed_s"``, no ``"load"``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ...common import (
    NO_GUARANTEE,
    PREDATES_DP_LAYER,
    audit_legend,
    audit_mechanisms,
    dp_noise_label,
    epsilon_cell,
    markdown_table,
    n_label,
    pyplot,
    save_figure,
    warned_cell,
    warning_notes,
)
from ...dp_sgd_clip import clip_text
from ...envelope import load_text
from .scoring import FEATURE_ATTACKS, LABEL_ATTACKS, recovery_error

__all__ = ["STRENGTH_NAMES", "conclusion", "plot_tradeoffs", "render", "write_report"]

DP_DEFENSES = ("vfl_afe", "dp_sgd", "hdp")  # their epsilon column says "no guarantee" where they report none
# The mechanisms (vflsec.dp.MECHANISMS) behind each DP defense's epsilon, for the audit column.
AUDITED = {"vfl_afe": ("vfl_afe_embedding", "vfl_afe_rescale"), "dp_sgd": ("dp_sgd",),
           "hdp": ("hdp_passive_ir", "hdp_active_ir")}
STRENGTH_NAMES = {"none": "-", "noise_embedding": "noise std", "noise_gradient": "noise std",
                  "sparsify": "kept fraction", "vfl_afe": "epsilon per release", "dp_sgd": "epsilon (run)",
                  "fedpass": "passport sigma^2", "plain": "-", "hdp": "epsilon (run)", "ckks": "-",
                  "paillier": "-"}


def render(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``report.md`` and the plots of ``result`` (a run's results) into ``out``;
    returns the names of the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = plot_tradeoffs(result.get("attacks", []), out)
    write_report(result, out, plots)
    return ["report.md", *plots]


def plot_tradeoffs(rows: List[Dict[str, Any]], out: Path) -> List[str]:
    """Per dataset, one panel per attack: the recovery error against the main task
    accuracy, one curve per defense over its strengths (the undefended model as a
    star), each point one trained model (n in the legend). Panels with fewer than
    2 points are left out, and a dataset with none left; the equality-solving
    bars need at least 2 protections. Returns the file names written."""
    plt = pyplot()
    files = []
    attacks = list(FEATURE_ATTACKS) + ["model_completion", "norm_scoring"]

    def cells(dataset: str, attack: str) -> List[Dict[str, Any]]:
        return [r for r in rows if r["dataset"] == dataset and r["attack"] == attack and recovery_error(r) is not None
                and r.get("main_accuracy") is not None]

    for dataset in sorted({r["dataset"] for r in rows if r["attack"] in attacks}):
        panels = [a for a in attacks if len(cells(dataset, a)) >= 2]
        if not panels:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
        for ax, attack in zip(axes[0], panels):
            found = cells(dataset, attack)
            for defense in sorted({r["defense"] for r in found}):
                pts = sorted(((r["main_accuracy"], recovery_error(r)) for r in found if r["defense"] == defense))
                xs, ys = zip(*pts)
                if defense == "none":
                    ax.plot(xs, ys, marker="*", ms=12, ls="", color="black", label=f"undefended ({n_label(len(pts))})")
                else:
                    ax.plot(xs, ys, marker="o", ms=5, ls="-", label=f"{defense} ({n_label(1, 'run/point')})")
            ax.set_title(attack, fontsize=9)
            ax.set_xlabel("main task accuracy")
            ax.set_ylabel("feature MSE" if attack in FEATURE_ATTACKS else "label recovery error")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{dataset}: accuracy vs recovery error (top-right is better)")
        fig.tight_layout()
        name = f"tradeoff_{dataset}.png"
        save_figure(fig, out / name)
        files.append(name)
    esa = [r for r in rows if r["attack"] == "equality_solving" and r["metric"] == "normalized_mse"]
    if len(esa) >= 2:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels = [(r["defense"] if r["strength"] is None else f"hdp eps={r['strength']:g}")
                  + (f" ({r['dataset']})" if len({e["dataset"] for e in esa}) > 1 else "") for r in esa]
        ax.bar(range(len(esa)), [max(r["value"], 1e-16) for r in esa], color="tab:red",
               label=f"equality solving ({n_label(1, 'run/bar')})")
        ax.set_yscale("log")
        ax.axhline(1.0, color="k", ls="--", lw=1, label="auxiliary-mean guess (1 by definition)")
        ax.set_xticks(range(len(esa)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("normalized feature MSE")
        ax.set_title("equality solving on vertical LR IRs")
        ax.legend(fontsize=8)
        fig.tight_layout()
        save_figure(fig, out / "equality_solving.png")
        files.append("equality_solving.png")
    return files


def _value(rows, dataset, defense, strength, attack, metric):
    for r in rows:
        key = (r["dataset"], r["defense"], r["strength"], r["attack"], r["metric"])
        if key == (dataset, defense, strength, attack, metric):
            return r["value"]
    return None


def _dp_sgd_settings(s: Dict[str, Any], rows: List[Dict[str, Any]]) -> List[str]:
    """The DP-SGD cells' clip and delta (``settings["dp_sgd"]``; runs from before those were
    recorded used the paper's percentile clip and delta 1e-3), with each dataset's delta in force."""
    if "dp_sgd" not in s["grid"]:
        return []
    dp = s.get("dp_sgd")
    if dp is None:
        return ["DP-SGD clip: the 80th percentile of the per-sample gradient norms over the first 10 steps, which "
                "reads the gradients the noise protects (no guarantee); delta 1e-3 (this run predates the grid's "
                "[dp_sgd] table, which records both).", ""]
    used = {r["dataset"]: r["delta"] for r in rows if r["defense"] == "dp_sgd" and r.get("delta") is not None}
    rule = ("the configured delta" if dp["delta"] is not None else
            "DPSGD's default min(1e-5, 1/(10 n)) for the n training rows")
    in_force = "; in force: " + ", ".join(f"{d} {v:g}" for d, v in used.items()) if used else ""
    return [f"DP-SGD clip: {clip_text(dp['clip'], dp['calibration_steps'])}; delta: {rule}"
            + (f" = {dp['delta']:g}" if dp["delta"] is not None else "") + f"{in_force}.", ""]


def write_report(result: Dict[str, Any], out: Path, plots: List[str]) -> None:
    """``report.md`` of one run's ``results.json`` content, linking ``plots``."""
    rows, caps = result.get("attacks", []), result.get("cap", [])
    s = result["settings"]
    seconds = result.get("seconds", result.get("elapsed_s"))  # "elapsed_s": results from before the runner
    lines = ["# Privacy benchmark: defenses vs attacks", "",
             f"Mode: {'quick' if s['quick'] else 'full'}; git {result['git']}; "
             f"{'n/a' if seconds is None else f'{seconds:.0f}'} s on "
             f"{result['machine']['cpu']} ({result['machine']['logical_cores']} logical cores, "
             f"shared with other jobs; {load_text(result)}).",
             "",
             f"Split learning: passive party = HDP-VFL's passive columns, active party = the active columns + labels; "
             f"half of the rows train (members), a quarter test (non-members, main accuracy), a quarter is the "
             f"attacker's auxiliary / shadow pool. Passive bottom {s['split']['passive_bottom']}, "
             f"{s['split']['epochs']} epochs, batch {s['split']['batch_size']}, Adam lr {s['split']['lr']}, "
             f"seed {s['seed']} (data splits, models, attacks). {dp_noise_label(s['seed'])}: every DP defense "
             "and HDP-VFL cell. "
             "Every attack reads only the messages addressed to its adversary (hub transcript), the models "
             "released to it and the auxiliary data its threat model grants (see `vflsec.attacks`). "
             "Recovery errors are on the parties' scaled features (each row of a party has L2 norm <= 1).", ""]
    lines += _dp_sgd_settings(s, rows)
    if result.get("partial"):
        lines += ["**Partial run** (interrupted or failed): only the finished cells are shown.", ""]
    split_sets = sorted({(r["dataset"], r["defense"], r["strength"])
                         for r in rows if r["attack"] != "equality_solving"},
                        key=lambda t: (t[0], list(s["grid"]).index(t[1]) if t[1] in s["grid"] else 99, t[2] or 0))
    cols = [("model_inversion_blackbox", "normalized_mse"), ("model_inversion_whitebox", "normalized_mse"),
            ("direct_label", "accuracy"), ("norm_scoring", "accuracy"), ("direction_scoring", "accuracy"),
            ("model_completion", "accuracy"), ("membership_shadow", "accuracy"), ("membership_shadow", "auc")]
    if split_sets:
        lines += ["## Split learning: attack success per defense", "",
                  "Inversion columns: normalized MSE (1 = no better than the auxiliary mean, 0 = exact). "
                  "Label columns: attack accuracy (norm/direction: which samples are of the minority class). "
                  "direct_label is measured on a second model with a plain softmax head (its precondition), "
                  "retrained only for the defenses that act on gradients.", ""]
        table = []
        for dataset, defense, strength in split_sets:
            cell = (dataset, defense, strength)
            acc = next(r["main_accuracy"] for r in rows if (r["dataset"], r["defense"], r["strength"]) == cell
                       and r["attack"] != "direct_label")
            first = next(r for r in rows if (r["dataset"], r["defense"], r["strength"]) == cell)
            eps = first["epsilon_composed"]
            mechanisms = audit_mechanisms(result, AUDITED.get(defense, ()))
            if eps is not None and not mechanisms and defense in ("vfl_afe", "dp_sgd"):
                # Before the mechanism layer these rows had no guarantee (VFL-AFE +R's batch factor, DP-SGD's
                # percentile clip) but reported a number: label it as the run's, not as a guarantee.
                eps_text: Any = f"{NO_GUARANTEE} (the run reported {eps:.4g})"
            else:
                # A PrivacyWarning in training (e.g. DP-SGD's delta >= 1/n) labels the cell; notes below.
                eps_text = warned_cell(epsilon_cell(eps, claims_dp=defense in DP_DEFENSES, mechanisms=mechanisms),
                                       first.get("privacy_warning"))
            table.append([dataset, defense, strength, eps_text, acc]
                         + [_value(rows, dataset, defense, strength, a, m) for a, m in cols])
        lines += [markdown_table(["dataset", "defense", "strength", "epsilon (composed)", "main acc"]
                                 + [f"{a} {m}".replace("model_inversion_", "MI ").replace("_", " ") for a, m in cols],
                                 table), ""]
        lines += warning_notes([r for r in rows if r["attack"] != "equality_solving"])
        lines += ["Strength: " + "; ".join(f"{k}: {STRENGTH_NAMES[k]}" for k in result["settings"]["grid"]), "",
                  audit_legend() if audit_mechanisms(result, ("dp_sgd",)) else f"Audit: {PREDATES_DP_LAYER}.", ""]
    if caps:
        lines += ["## Calibrated averaged performance (FedPass Table 3)", "",
                  "CAP = mean over the defense's strengths of main accuracy x recovery error (feature MSE for the "
                  "inversion attacks, fraction of wrong labels for label attacks); higher is a better trade-off.", ""]
        attacks = [a for a in FEATURE_ATTACKS + LABEL_ATTACKS if any(c["attack"] == a for c in caps)]
        for dataset in sorted({c["dataset"] for c in caps}):
            defenses = sorted({c["defense"] for c in caps if c["dataset"] == dataset})
            table = [[d] + [next((c["cap"] for c in caps
                                  if (c["dataset"], c["defense"], c["attack"]) == (dataset, d, a)), None)
                            for a in attacks] for d in defenses]
            lines += [f"**{dataset}**", "", markdown_table(["defense"] + attacks, table), ""]
    mem = [r for r in rows if r["attack"] == "membership_shadow" and r["metric"] == "accuracy"]
    if mem:
        lines += ["## Membership inference on released embeddings (VFL-AFE Table 1)", "",
                  "Shadow-model attack (Shokri et al.) by the active party; balanced members / non-members, "
                  "so 0.5 is chance.", ""]
        table = [[r["dataset"], r["defense"], r["strength"], r["value"],
                  _value(rows, r["dataset"], r["defense"], r["strength"], "membership_shadow", "auc")] for r in mem]
        lines += [markdown_table(["dataset", "defense", "strength", "attack accuracy", "attack AUC"], table), ""]
    esa = [r for r in rows if r["attack"] == "equality_solving" and r["metric"] == "mse"]
    if esa:
        lines += ["## Vertical LR: equality solving on plain vs HDP-VFL vs encrypted IRs", "",
                  f"The active party knows the passive features of {s['esa_aux_rows']} training rows; "
                  "from every step whose batch they span it solves the passive weights, "
                  "then each other row's features from its IRs "
                  "(one equation per epoch). HE leaves it no plaintext IR: it can only guess the auxiliary mean.", ""]
        table = [[r["dataset"], r["defense"], r["strength"], r["main_accuracy"], r["value"],
                  _value(rows, r["dataset"], r["defense"], r["strength"], "equality_solving", "normalized_mse"),
                  _value(rows, r["dataset"], r["defense"], r["strength"], "equality_solving",
                         "full_rank_rows_fraction"),
                  r.get("note", "")] for r in esa]
        lines += [markdown_table(["dataset", "protection", "epsilon", "test acc", "feature MSE", "normalized MSE",
                                  "rows with full-rank equations (fraction)", "note"], table), "",
                  "A row with full-rank equations is recovered exactly from plain IRs; under HDP-VFL its equations "
                  "are noisy, so full rank does not mean recovery (see the MSE). With plain IRs on real data the "
                  "per-step weights become nearly collinear as descent converges, which leaves the systems "
                  "rank-deficient.", ""]
    lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    lines += conclusion(rows)
    (out / "report.md").write_text("\n".join(lines))


# Attack success: lower is better for the defender on accuracy metrics, higher on errors.
_ERROR_METRICS = ("normalized_mse", "mse")


def conclusion(rows: List[Dict[str, Any]], accuracy_budget: float = 0.02) -> List[str]:
    """What the run shows, in plain words: per dataset and attack, how well the
    attack does undefended and the defense setting that hurts it most while
    keeping the main accuracy within ``accuracy_budget`` of the undefended model."""
    out = ["## Conclusion", ""]
    for dataset in sorted({r["dataset"] for r in rows if r["attack"] != "equality_solving"}):
        parts = []
        base_acc = next((r["main_accuracy"] for r in rows if r["dataset"] == dataset and r["defense"] == "none"
                         and r["attack"] != "direct_label"), None)
        for attack, metric in (("model_inversion_whitebox", "normalized_mse"), ("norm_scoring", "accuracy"),
                               ("direction_scoring", "accuracy"), ("membership_shadow", "auc")):
            cells = [r for r in rows if r["dataset"] == dataset and r["attack"] == attack and r["metric"] == metric
                     and r.get("value") is not None]
            undefended = next((r["value"] for r in cells if r["defense"] == "none"), None)
            if undefended is None or base_acc is None:
                continue
            usable = [r for r in cells if r["defense"] != "none"
                      and r.get("main_accuracy") is not None and r["main_accuracy"] >= base_acc - accuracy_budget]
            if not usable:
                parts.append(f"{attack} ({metric} {undefended:.3g} undefended): no defense keeps the accuracy "
                             f"within {accuracy_budget * 100:g} points")
                continue
            best = (max if metric in _ERROR_METRICS else min)(usable, key=lambda r: r["value"])
            parts.append(f"{attack} ({metric}): {undefended:.3g} undefended, {best['value']:.3g} with "
                         f"{best['defense']} at strength {best['strength']} (accuracy {best['main_accuracy']:.3f} vs "
                         f"{base_acc:.3f})")
        if parts:
            out.append(f"**{dataset}**: " + "; ".join(parts) + ".")
            out.append("")
    esa = [r for r in rows if r["attack"] == "equality_solving" and r["metric"] == "normalized_mse"]
    for dataset in sorted({r["dataset"] for r in esa}):
        by_defense = {r["defense"]: r["value"] for r in esa if r["dataset"] == dataset}
        out.append(f"**{dataset}, vertical LR**: equality solving recovers passive features with normalized MSE "
                   + ", ".join(f"{v:.3g} ({k})" for k, v in by_defense.items())
                   + " (1 = no better than the auxiliary mean).")
        out.append("")
    out.append(f"A defense is only listed where the main accuracy stays within {accuracy_budget * 100:g} points of "
               "the undefended model; the tables above give every setting. Attack accuracies and AUCs: 0.5 is "
               "chance; normalized MSE: 1 is no better than the auxiliary mean.")
    out.append("")
    return out


