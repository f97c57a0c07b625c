"""``report.md`` and the PNGs of ``vflsec bench trees``, from the results alone (``--rerender``):
the setup, one accuracy table per dataset (every reference, every variant, the attack beside each),
SecureBoost's time and bytes per tree by step, the targets judged, the answers and the conclusion;
``accuracy_vs_epsilon.png``, ``secureboost_time.png`` and ``leakage.png``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ...claims import verdict_table
from ...common import (
    audit_legend,
    audit_mechanisms,
    epsilon_cell,
    markdown_table,
    n_label,
    pyplot,
    save_figure,
)
from ...envelope import load_text
from .answers import DP_VARIANTS, LABELS, answers, conclusion, summary, verdicts
from .grid import DP_OVERRIDES

__all__ = ["answers", "conclusion", "render", "render_report"]

FIGURES = ("accuracy_vs_epsilon.png", "secureboost_time.png", "leakage.png")
STEP_LABELS = {"encrypt": "encryption (active)", "receive": "reading ciphertexts (passive)",
               "aggregate": "aggregation (passive)", "pack": "packing + re-randomization (passive)",
               "decrypt": "decryption (active)", "active_compute": "other work (active)",
               "passive_compute": "other work (passive)", "messaging": "messaging (the rest of the wall time)"}


def _spread(entry: Optional[Dict[str, Any]], field: str, scale: float = 1.0, digits: int = 4) -> Any:
    value = (entry or {}).get(field)
    if value is None:
        return None
    text = f"{value['mean'] * scale:.{digits}g}"
    return text + (f" ± {value['std'] * scale:.2g} (n={value['n']})" if value["n"] > 1 else " (n=1)")


def _mean(entry: Optional[Dict[str, Any]], field: str) -> Optional[float]:
    value = (entry or {}).get(field)
    return None if value is None else value["mean"]


def _order(kinds: Dict[str, Dict[str, Any]]) -> List[str]:
    fixed = ("majority", "hgb_centralized", "hgb_active", "hgb_passive", "plain", "secureboost")
    ordered: List[str] = [k for k in fixed if k in kinds]
    for method in DP_VARIANTS:
        ordered += sorted((k for k, e in kinds.items() if e["method"] == method), key=lambda k: kinds[k]["epsilon"])
    return ordered


def _epsilon(entry: Dict[str, Any], result: Dict[str, Any]) -> Any:
    if entry["method"] not in DP_VARIANTS:
        return None
    spent = _mean(entry, "epsilon_spent")
    mechanisms = audit_mechanisms(result, (result.get("audit_mechanisms") or {}).get(entry["method"], ()))
    return epsilon_cell(spent if spent is not None else entry["epsilon"], claims_dp=True, mechanisms=mechanisms)


def _notes(entry: Dict[str, Any]) -> str:
    notes = []
    if entry["method"] == "secureboost":
        same = entry["trees_equal_plain"]
        notes.append(f"accuracy = plain's: same trees ({'checked' if same and all(same) else 'NOT the same'} on its "
                     f"first {entry['trees']} trees); attack on those {entry['trees']} trees")
    if entry["method"] in DP_VARIANTS and entry.get("epsilon_spent") is None:
        notes.append(f"epsilon requested {entry['epsilon']:g} (the model reports none)")
    notes += [f"warning: {w}" for w in entry["warnings"]]
    return "; ".join(notes)


def _accuracy_table(kinds: Dict[str, Dict[str, Any]], result: Dict[str, Any]) -> str:
    rows = []
    plain = kinds.get("plain")
    # Rare positives (the rows carry average precision): a PR-AUC column, whose random-ranking reference is
    # the positive rate (the majority row's value).
    rare = any(e.get("pr_auc") is not None for e in kinds.values())
    for key in _order(kinds):
        e = kinds[key]
        accuracy_of = plain if e["method"] == "secureboost" else e
        rows.append([LABELS.get(e["method"], e["method"]), _epsilon(e, result), _spread(accuracy_of, "accuracy"),
                     _spread(accuracy_of, "auc")] + ([_spread(accuracy_of, "pr_auc")] if rare else []) + [
                     _spread(e, "seconds_per_tree", digits=3),
                     _spread(e, "bytes_per_tree", 1 / 2**20, 3), _spread(e, "leak_instance_space", digits=3),
                     _spread(e, "leak_gradients", digits=3), _spread(e, "leak_own_features", digits=3),
                     _notes(e)])
    return markdown_table(["model", "epsilon", "test accuracy", "test AUC"] + (["test PR-AUC"] if rare else []) + [
                           "s per tree", "MiB per tree",
                           "attack AUC: instance spaces", "attack AUC: gradients", "own features (reference)",
                           "notes"], rows)


def _aggregation_section(result: Dict[str, Any]) -> List[str]:
    agg = result.get("aggregation")
    if not agg:
        return []
    native = agg.get("native_us_per_product")
    equal = agg.get("native_equals_gmpy2")
    rows = [["vflsec kernel (C++, AVX-512 IFMA, 1 thread)", "n/a (no IFMA)" if native is None else f"{native:.3f}",
             "" if agg.get("native_over_phe") is None else f"{agg['native_over_phe']:.1f}x",
             "" if equal is None else ("equal" if equal else "DIFFERENT")],
            ["vflsec gmpy2 loop (the path without IFMA)", f"{agg['gmpy2_us_per_product']:.3f}",
             f"{agg['gmpy2_over_phe']:.1f}x", "the reference"],
            [f"phe additions (gmpy2 backend, one exponent; {agg['phe_rows']} rows)",
             f"{agg['phe_us_per_addition']:.3f}", "1x", "equal" if agg["phe_equals_gmpy2"] else "DIFFERENT"]]
    return ["## Encrypted histogram aggregation per CPU-second" + chr(10),
            f"A passive party's SecureBoost histogram: the per-bin products mod n^2 of {agg['rows']} Paillier-"
            f"{agg['key_bits']} ciphertexts over {agg['features']} features of {agg['bins_per_feature']} bins "
            "(random codes), CPU seconds on one thread each, every result checked against the gmpy2 loop." + chr(10),
            markdown_table(["aggregation", "us per product", "over phe", "bins"], rows), ""]


def _secureboost_section(result: Dict[str, Any], found: Dict[str, Dict[str, Any]]) -> List[str]:
    measured = {d: a["secureboost"] for d, a in found.items() if a.get("secureboost")}
    if not measured:
        return []
    cfg = result["config"]
    out = ["## SecureBoost: time and bytes per tree\n",
           f"SecureBoost (Paillier-{cfg['key_bits']}) runs the party programs for {cfg['secureboost_trees']} trees "
           "per split, not a whole fit: its trees are plain's bit for bit (the histograms it decrypts are exact; "
           "checked on every split of this run, the `same trees` column), so its accuracy is plain's; its cost "
           "per tree is measured on those first trees. Seconds: the active party's program (the wall time of the run; "
           "key generation, once per fit, apart); plain's per tree: its whole fit over its trees. Bytes: every "
           "message of both parties (the public key, once, apart)."
           + (f" The Paillier worker processes were started before the first row "
              f"({result['paillier_pool_start_seconds']:.2g} s, not counted)."
              if result.get("paillier_pool_start_seconds") is not None else "") + "\n"]
    rows = []
    for d, sb in measured.items():
        rows.append([d, sb["trees"], sb["seconds_per_tree"], sb["plain_seconds_per_tree"], sb["time_ratio"],
                     sb["bytes_per_tree"] / 2**20, sb["plain_bytes_per_tree"] / 2**20, sb["bytes_ratio"],
                     sb["keygen_seconds"], "yes" if sb["trees_equal_plain"] else "NO"])
    out.append(markdown_table(["dataset", "trees timed", "s per tree", "plain s per tree", "time ratio",
                               "MiB per tree", "plain MiB per tree", "bytes ratio", "key generation s (once)",
                               "same trees"], rows))
    steps = list(STEP_LABELS)
    out.append("\nOne SecureBoost tree, seconds by step (means over splits): encryption and decryption at the active "
               "party; the passive party reads the round's ciphertexts, aggregates each node's bins (ciphertext "
               "products) and packs them (with re-randomization); messaging is what is left of the wall time "
               "(encoding and copying the messages in one process, and waits no party's work covers).\n")
    out.append(markdown_table(["dataset"] + [STEP_LABELS[s] for s in steps],
                              [[d] + [sb["steps_per_tree"].get(s) for s in steps] for d, sb in measured.items()]))
    kinds_rows = []
    for d in measured:
        by_kind = [r.get("bytes_by_kind") or {} for r in result["cells"]
                   if r["dataset"] == d and r["method"] == "secureboost"]
        if by_kind and by_kind[0]:
            k = result["config"]["secureboost_trees"]
            kinds_rows.append([d] + [by_kind[0].get(kind, 0) / k / 2**20 for kind in ("gradients", "histograms",
                                                                                      "control")])
    if kinds_rows:
        out.append("\nSecureBoost's MiB per tree by message kind (first split): the round's encrypted gradients, the "
                   "packed histograms, and the control messages (steps, split replies, node partitions).\n")
        out.append(markdown_table(["dataset", "gradients", "histograms", "control"], kinds_rows))
    out.append("")
    return out


def _leakage_section(found: Dict[str, Dict[str, Any]], k: int) -> List[str]:
    out = ["## Label leakage to the passive party\n",
           "The honest-but-curious passive party's attack (`vflsec.attacks.label_leakage`) on what it received "
           "in training: each node's partition (instance spaces) and, where readable, the round's gradients; it "
           "knows the labels of a few training rows and is scored (ROC AUC) on the others. The reference is what it "
           "infers from its own features alone (a logistic regression on its standardized columns fitted to the "
           "same known labels): the leak is the gain over it.\n"]
    rows = []
    for d, a in found.items():
        for key, leak in a.get("leakage", {}).items():
            head = leak.get("first_trees")
            rows.append([d, key, leak.get("trees"), leak["instance_space_auc"], leak["instance_space_gain"],
                         leak.get("gradients_auc"), leak.get("gradients_gain"), leak.get("own_features_auc"),
                         None if head is None else head["instance_space_auc"],
                         None if head is None else head.get("gradients_auc")])
    if rows:
        out.append(markdown_table(["dataset", "variant", "trees seen", "instance-space AUC", "gain",
                                   "gradient AUC", "gain", "own features AUC",
                                   f"first {k} trees: instance-space AUC", f"first {k} trees: gradient AUC"],
                                  rows))
    out.append("")
    return out


def _answers_section(found: Dict[str, Dict[str, Any]]) -> List[str]:
    out = ["## Answers, per dataset\n"]
    for d, a in found.items():
        out.append(f"**{d}**\n")
        dp = a.get("dp_beats_active") or {}
        for method in DP_VARIANTS:
            beat = dp.get(method)
            if beat is None:
                continue
            answer = ("at no epsilon of the grid" if beat["epsilon"] is None else
                      f"from epsilon {beat['epsilon']:g} on (+{beat['margin_points']:.2f} points there)")
            out.append(f"- {LABELS[method]} beats the active party alone: {answer} "
                       f"(grid {', '.join(f'{e:g}' for e in beat['grid'])}).")
        sb = a.get("secureboost")
        if sb and sb.get("time_ratio") is not None:
            out.append(f"- SecureBoost over plain: {sb['time_ratio']:.3g}x the time per tree, {sb['bytes_ratio']:.3g}x "
                       "the bytes per tree.")
        for key, leak in (a.get("leakage") or {}).items():
            if leak.get("best_gain") is None:
                continue
            aucs = [f"instance spaces {leak['instance_space_auc']:.3f}"]
            if leak.get("gradients_auc") is not None:
                aucs.append(f"gradients {leak['gradients_auc']:.3f}")
            out.append(f"- the attack on {key} ({leak.get('trees')} trees): AUC {', '.join(aucs)} against "
                       f"{leak['own_features_auc']:.3f} from the passive party's own features: a gain of "
                       f"{leak['best_gain']:+.3f}.")
        out.append("")
    return out


def render_report(result: Dict[str, Any]) -> str:
    cfg, machine = result["config"], result.get("machine", {})
    kinds_by_dataset = summary(result)
    found = answers(result)
    hyper = ", ".join(f"{k}={cfg.get(k)}" for k in ("max_iter", "learning_rate", "max_leaf_nodes", "max_depth",
                                                       "min_samples_leaf", "l2_regularization", "max_bins"))
    dp_own = {k: cfg.get(f"dp_{k}") for k in DP_OVERRIDES if cfg.get(f"dp_{k}") is not None}
    if dp_own:
        hyper += ("; the \"dp\" variant with " + ", ".join(f"{k}={v}" for k, v in dp_own.items())
                  + ", chosen before the run in a pilot on Adult (not privately tuned: the choice is not covered "
                  "by epsilon)")
    out = ["# vflsec bench trees: vertical gradient boosting, plain / SecureBoost / DP / label-DP\n",
           f"`{result.get('command', 'vflsec bench trees')}` at git {result.get('git')}, "
           f"{'--quick' if result.get('quick') else 'full'} configuration, {result.get('seconds', 0):.0f} s. "
           f"Machine: {machine.get('cpu')}, {machine.get('logical_cores')} logical cores; "
           f"{load_text(result)}.\n",
           f"Seed {cfg['seed']}: the train/test splits (seed + k, stratified, test share {cfg['test_size']}), the "
           f"attacker's {cfg['attack_known']} known labels, and every DP draw. {result.get('dp_noise', '')}.\n",
           "Every model shares one binning and one set of hyper-parameters (" + hyper + "; no early stopping): "
           "each party bins its own columns by their training quantiles (`vflsec.trees.FeatureBins`), and the "
           "references are scikit-learn's `HistGradientBoostingClassifier` fitted on those bin codes (its own "
           "binning of at most max_bins distinct integers is the identity). The active party holds the labels and "
           "the first half of the attributes (a one-hot attribute's columns together), the passive party the "
           "rest, raw values. Accuracy and AUC on the test rows: mean ± sample standard deviation over the "
           "splits (n).\n"]
    if result.get("partial"):
        out.append("**This run stopped before its last row**: only the finished rows are reported.\n")
    out.append("## Data\n")
    rows = []
    for d, rec in (result.get("datasets") or {}).items():
        if rec.get("status") != "ok":
            rows.append([d, f"skipped: {rec.get('reason')} -- {rec.get('fix')}", None, None, None, None])
            continue
        attrs, cols, bins = rec["attributes"], rec["columns"], rec.get("bins", {})
        rows.append([d, "ok", f"{rec.get('train_rows')} / {rec.get('test_rows')}", rec["positive_rate"],
                     f"{len(attrs['active'])} attributes, {cols['active']} columns, {bins.get('active')} bins",
                     f"{len(attrs['passive_0'])} attributes, {cols['passive_0']} columns, {bins.get('passive_0')} "
                     "bins"])
    out.append(markdown_table(["dataset", "status", "train / test rows", "positive rate", "active party",
                               "passive party"], rows))
    out.append("")
    for d, kinds in kinds_by_dataset.items():
        out.append(f"## {d}: accuracy, cost and leakage\n")
        out.append(_accuracy_table(kinds, result))
        out.append("")
    if any(e["method"] in DP_VARIANTS for kinds in kinds_by_dataset.values() for e in kinds.values()):
        out.append("Epsilon: what the model reports spent (`privacy_spent_`; label-DP against the passive party, "
                   "replace-one label). " + audit_legend() + " The attack on a DP row reads a second run of the "
                   "party programs with the model's job and noise seed (the same trees: checked). A \"dp\" model "
                   "starts from the log-odds of a released (noisy) positive count, one more release inside its "
                   "epsilon: where the noise leaves no split, every row gets that score, so its accuracy is the "
                   "majority rate (or the other class's, if the noise flips the count) and its AUC 0.5.\n")
    out += _aggregation_section(result)
    out += _secureboost_section(result, found)
    out += _leakage_section(found, cfg['secureboost_trees'])
    out += ["## Targets (issue 29)\n", verdict_table(verdicts(result)), ""]
    out += _answers_section(found)
    out += ["## Conclusion\n", conclusion(result), ""]
    return "\n".join(out)


# -- figures -----------------------------------------------------------------------------------

_REFERENCE_STYLE = {"hgb_centralized": ("black", "-"), "plain": ("tab:green", "--"), "hgb_active": ("tab:red", ":"),
                    "hgb_passive": ("tab:purple", ":"), "majority": ("gray", "-.")}
_DP_COLOR = {"dp": "tab:blue", "label_dp": "tab:orange"}


def _accuracy_figure(result: Dict[str, Any], path: Path) -> bool:
    kinds_by_dataset = {d: k for d, k in summary(result).items()
                        if sum(e["method"] in DP_VARIANTS for e in k.values()) >= 2}
    if not kinds_by_dataset:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(kinds_by_dataset), figsize=(5.2 * len(kinds_by_dataset), 4.2), squeeze=False)
    for ax, (d, kinds) in zip(axes[0], kinds_by_dataset.items()):
        for method in DP_VARIANTS:
            entries = sorted((e for e in kinds.values() if e["method"] == method and e["accuracy"]),
                             key=lambda e: e["epsilon"])
            if not entries:
                continue
            ax.errorbar([e["epsilon"] for e in entries], [e["accuracy"]["mean"] for e in entries],
                        yerr=[e["accuracy"]["std"] for e in entries], marker="o", capsize=3, color=_DP_COLOR[method],
                        label=f"{LABELS[method]} ({n_label(entries[0]['accuracy']['n'], 'splits/point')})")
        for key, (color, style) in _REFERENCE_STYLE.items():
            entry = kinds.get(key)
            if entry and entry["accuracy"]:
                ax.axhline(entry["accuracy"]["mean"], color=color, linestyle=style, lw=1.2,
                           label=f"{LABELS[key]} ({n_label(entry['accuracy']['n'])})")
        ax.set_xscale("log")
        grid_eps = sorted({e["epsilon"] for e in kinds.values() if e["method"] in DP_VARIANTS})
        ax.set_xticks(grid_eps, [f"{e:g}" for e in grid_eps])
        ax.minorticks_off()
        ax.set_xlabel("epsilon (label-DP against the passive party)")
        ax.set_ylabel("test accuracy")
        ax.set_title(d)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.18), ncol=2)
    save_figure(fig, path)
    return True


def _secureboost_figure(result: Dict[str, Any], path: Path) -> bool:
    measured = {d: a["secureboost"] for d, a in answers(result).items() if a.get("secureboost")}
    if not measured:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.9 * len(measured)))
    colors = plt.get_cmap("tab10")
    longest = 0.0
    for i, sb in enumerate(measured.values()):
        left = 0.0
        for j, step in enumerate(STEP_LABELS):
            width = sb["steps_per_tree"].get(step, 0.0)
            ax.barh(i, width, left=left, color=colors(j), label=STEP_LABELS[step] if i == 0 else None)
            left += width
        ax.barh(i + 0.35, sb["plain_seconds_per_tree"], height=0.2, color="black",
                label="plain, whole tree" if i == 0 else None)
        ax.text(left, i, f" {left:.2f} s ({sb['time_ratio']:.0f}x plain)", va="center", fontsize=8)
        longest = max(longest, left)
    ax.set_yticks(range(len(measured)), list(measured))
    ax.set_xlim(0, longest * 1.3)
    ax.set_xlabel(f"seconds per tree (means over splits; {n_label(result['config']['secureboost_trees'])} trees "
                  "timed per split)")
    ax.set_title(f"SecureBoost (Paillier-{result['config']['key_bits']}): one tree by step")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, path)
    return True


def _leakage_figure(result: Dict[str, Any], path: Path) -> bool:
    found = {d: a for d, a in answers(result).items() if len(a.get("leakage") or {}) >= 2}
    if not found:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(len(found), 1, figsize=(max(7.0, 0.55 * max(len(a["leakage"]) for a in found.values())
                                                         + 3), 3.2 * len(found)), squeeze=False)
    for ax, (d, a) in zip(axes[:, 0], found.items()):
        keys = list(a["leakage"])
        inst = [a["leakage"][k]["instance_space_auc"] for k in keys]
        grad = [a["leakage"][k].get("gradients_auc") or 0.0 for k in keys]
        x = range(len(keys))
        ax.bar([i - 0.2 for i in x], inst, width=0.4, label="instance spaces", color="tab:blue")
        ax.bar([i + 0.2 for i in x], grad, width=0.4, label="gradients (no bar: not readable)", color="tab:orange")
        own = a["leakage"][keys[0]].get("own_features_auc")
        if own is not None:
            ax.axhline(own, color="black", linestyle="--", lw=1, label="own features (reference)")
        ax.axhline(0.5, color="gray", lw=0.8)
        ax.set_xticks(list(x), keys, rotation=45, ha="right", fontsize=7)
        ax.set_ylim(0.4, 1.02)
        ax.set_ylabel("attack AUC (unknown training rows)")
        n = a.get("splits")
        ax.set_title(f"{d}: the passive party's label attack ({n_label(n, 'splits/bar')})", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, path)
    return True


def render(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``report.md`` and the figures that have data into ``out``; return their names."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(render_report(result))
    written = ["report.md"]
    for name, draw in zip(FIGURES, (_accuracy_figure, _secureboost_figure, _leakage_figure)):
        if draw(result, out / name):
            written.append(name)
    return written
