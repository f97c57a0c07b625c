"""``report.md`` of ``vflsec bench glm``: tables, the paper's claims with
verdicts against meaningful baselines, and a plain-words conclusion."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..common import audit_cell, audit_legend, epsilon_cell, markdown_table
from .experiment import DELTA, PAPER_FIGURE2_TEXT

HDP_MECHANISMS = ("hdp_passive_ir", "hdp_active_ir")  # the audit verdict beside each epsilon

__all__ = ["CLOSE_POINTS", "claims", "conclusion", "render_report", "summarize"]

# "Close to lossless": within this many accuracy points of plain VFL.
CLOSE_POINTS = 2.0
REFERENCE_ORDER = ("majority", "single_party", "centralized_sklearn", "centralized_gd", "plain",
                   "plain_headline", "taylor", "paillier", "ckks")
REFERENCE_NOTES = {
    "majority": "majority class of the training labels",
    "single_party": "scikit-learn LR on the active party's features only",
    "centralized_sklearn": "scikit-learn LR (lbfgs, to convergence) on all parties' features",
    "centralized_gd": "centralized mini-batch GD, same configuration as plain, no clip",
    "plain": "non-private VFL (IRs in the clear), configuration by 5-fold CV on the training rows",
    "plain_headline": "non-private VFL at the DP headline configuration",
    "taylor": ("HE-VFL's Taylor-approximated flow in the clear (the accuracy Paillier/CKKS reach), "
               "plain's configuration (if its batch is not larger than the widest passive block, which "
               "HE-VFL refuses, the best-scoring one whose batch is)"),
    "paillier": "HE-VFL, Paillier",
    "ckks": "HE-VFL, CKKS",
}
DP_FAMILIES = ("headline", "tuned_paper_grid", "tuned_wide_grid", "private_selection")


def runtime_series(rows: Sequence[Dict[str, Any]], epochs_n: int) -> Dict[str, Dict[str, List[Tuple[Any, ...]]]]:
    """The runtime plot's series: ``{"epochs": {method: points}, "n": {method: points}}``,
    each point ``(x, seconds, bytes, extrapolated)``: against epochs at n = ``epochs_n``
    and against n for one epoch. A series of fewer than 2 points is left out, and so
    is an axis with no series left (a one-point panel shows no trend)."""
    out: Dict[str, Dict[str, List[Tuple[Any, ...]]]] = {}
    for axis, key, fixed, value in (("epochs", "epochs", "n", epochs_n), ("n", "n", "epochs", 1)):
        series = {}
        for method in dict.fromkeys(r["method"] for r in rows):
            pts = sorted((r[key], r["seconds"], r["bytes"], r["extrapolated"]) for r in rows
                         if r["method"] == method and r[fixed] == value)
            if len(pts) >= 2:
                series[method] = pts
        if series:
            out[axis] = series
    return out


def _stats(values: Sequence[float]) -> Tuple[float, float, int]:
    arr = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan, 0
    return float(arr.mean()), float(arr.std()), int(arr.size)


def summarize(rows: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """dataset -> {"reference": method -> [acc], "dp": (family, calibration) -> eps -> [acc],
    "search": family -> eps -> search epsilon, "figure2": (e, k) -> {"hdp": [...], "plain": [...]},
    "skipped": method -> estimated seconds}."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        ds = out.setdefault(r["dataset"], {"reference": {}, "dp": {}, "search": {}, "figure2": {}, "skipped": {},
                                           "auc": {}})
        if r.get("auc") is not None and r["family"] in ("reference", "headline") and r["calibration"] != "classic":
            key = r["method"] if r["family"] == "reference" else r["epsilon"]
            ds["auc"].setdefault(key, []).append(r["auc"])
        if r["family"] == "reference":
            if r.get("skipped"):
                ds["skipped"][r["method"]] = r.get("estimated_seconds")
                continue
            ds["reference"].setdefault(r["method"], []).append(r["accuracy"])
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


def _ref(ds: Dict[str, Any], method: str) -> float:
    return _stats(ds["reference"].get(method, []))[0]


def _dp(ds: Dict[str, Any], eps: float, family: str = "headline", calibration: str = "analytic") -> float:
    return _stats(ds["dp"].get((family, calibration), {}).get(eps, []))[0]


def _fmt(mean: float, std: float, n: int) -> str:
    return "n/a" if n == 0 else f"{mean:.3f} ± {std:.3f} (n={n})"


def _reference_table(ds: Dict[str, Any]) -> str:
    rows = []
    for method in REFERENCE_ORDER:
        if method in ds["reference"]:
            rows.append([method, _fmt(*_stats(ds["reference"][method])), REFERENCE_NOTES[method]])
        elif method in ds["skipped"]:
            secs = ds["skipped"][method]
            when = f"{secs / 3600:.1f} h" if secs >= 3600 else f"{secs / 60:.1f} min"
            rows.append([method, f"not run (estimated {when}, over the budget)", "taylor gives its accuracy"])
    return markdown_table(["reference", "test accuracy", "what it is"], rows)


def _dp_table(ds: Dict[str, Any], epsilons: Sequence[float]) -> str:
    rows = []
    for eps in epsilons:
        row = [str(epsilon_cell(float(eps), claims_dp=True, mechanisms=HDP_MECHANISMS))]
        row.append(_fmt(*_stats(ds["dp"].get(("headline", "analytic"), {}).get(eps, []))))
        classic = ds["dp"].get(("headline", "classic"), {}).get(eps)
        not_run = "not run (not (ε, δ)-DP for ε ≥ 1)" if eps >= 1 else "n/a"
        row.append(_fmt(*_stats(classic)) if classic else not_run)
        for family in ("tuned_paper_grid", "tuned_wide_grid"):
            cell = _fmt(*_stats(ds["dp"].get((family, "analytic"), {}).get(eps, [])))
            search = ds["search"].get(family, {}).get(eps)
            if search:
                cell += f"; search ε ≥ {np.mean(search):.3g}"
            row.append(cell)
        selected = ds["dp"].get(("private_selection", "analytic"), {}).get(eps, [])
        cell = _fmt(*_stats(selected))
        if selected and _stats(selected)[2] == 0:
            cell = "not reachable: below the selection's ε floor"
        transcript = ds["search"].get("transcript", {}).get(eps)
        if transcript:
            cell += f"; parties' transcript ε ≈ {np.mean(transcript):.3g}"
        row.append(cell)
        rows.append(row)
    return markdown_table(["ε", "headline (analytic)", "headline (classic)",
                           "tuned, paper grid (ε excludes hyperparameter search)",
                           "tuned, wide grid (ε excludes hyperparameter search)",
                           "private selection (ε includes the search)"], rows)


def _auc_table(ds: Dict[str, Any], epsilons: Sequence[float]) -> str:
    """Threshold-free view: does the DP model rank the rows even where its
    accuracy sits at the majority rate?"""
    refs = [f"{m} {_stats(ds['auc'][m])[0]:.3f}" for m in ("single_party", "centralized_sklearn", "plain")
            if m in ds["auc"]]
    rows = [[f"{e:g}", _fmt(*_stats(ds["auc"].get(e, [])))] for e in epsilons if e in ds["auc"]]
    if not rows:
        return ""
    return (f"Test AUC (threshold-free; references: {', '.join(refs)}):\n\n"
            + markdown_table(["ε", "HDP-VFL headline (analytic) AUC"], rows))


def _figure2_table(ds: Dict[str, Any]) -> str:
    rows = [[e, f"{k:g}", _fmt(*_stats(cell["hdp"])), _fmt(*_stats(cell["plain"]))]
            for (e, k), cell in sorted(ds["figure2"].items())]
    table = markdown_table(["epochs e", "clip k", "HDP-VFL ε = 1", "plain VFL, same e and k"], rows)
    mean = {key: _stats(cell["hdp"])[0] for key, cell in ds["figure2"].items()}
    es, ks = sorted({e for e, _ in mean}), sorted({k for _, k in mean})
    by_e = [float(np.mean([mean[(e, k)] for k in ks])) for e in (es[0], es[-1])]
    by_k = [float(np.mean([mean[(e, k)] for e in es])) for k in (ks[0], ks[-1])]
    note = (f"\nThe paper prints no values for its Figure 2; its text (Sec. 6.4) says that at ε = 1 e from 5 to 15 "
            f"drops accuracy from {PAPER_FIGURE2_TEXT['e=5']} to about {PAPER_FIGURE2_TEXT['e=15']}, and k from 0.1 "
            f"to 0.5 raises it from {PAPER_FIGURE2_TEXT['k=0.1']} to about {PAPER_FIGURE2_TEXT['k=0.5']} (the other "
            f"parameter at an unstated value). Here, averaged over the other parameter: e = {es[0]} -> {es[-1]}: "
            f"{by_e[0]:.3f} -> {by_e[1]:.3f} ({'drops' if by_e[1] < by_e[0] else 'does not drop'}, by "
            f"{abs(by_e[0] - by_e[1]) * 100:.1f} points); k = {ks[0]:g} -> {ks[-1]:g}: {by_k[0]:.3f} -> {by_k[1]:.3f} "
            f"({'rises' if by_k[1] > by_k[0] else 'does not rise'}, by {abs(by_k[1] - by_k[0]) * 100:.1f} points). "
            + ("The paper's 30-40 point swings are not reproduced here."
               if max(abs(by_e[0] - by_e[1]), abs(by_k[1] - by_k[0])) < 0.1
               else "Swings of the paper's size (10 points or more) appear here too."))
    return table + "\n" + note


def claims(summary: Dict[str, Dict[str, Any]], epsilons: Sequence[float],
           runtime: Sequence[Dict[str, Any]] = (), links: Optional[Dict[str, Any]] = None) -> List[str]:
    """Each of the paper's claims judged against majority, single party and plain VFL."""
    out: List[str] = []
    for name, ds in summary.items():
        plain, majority, single = _ref(ds, "plain"), _ref(ds, "majority"), _ref(ds, "single_party")
        central = _ref(ds, "centralized_sklearn")
        out.append(f"**{name}** (majority {majority:.3f}, active party alone {single:.3f}, plain VFL {plain:.3f}, "
                   f"centralized scikit-learn {central:.3f}):")
        if not plain > majority + 0.01:
            out.append(f"- plain VFL does not beat the majority class ({plain:.3f} vs {majority:.3f}): the model "
                       "did not learn, so no accuracy claim can be judged on this dataset.")
            continue
        gap = (central - plain) * 100
        out.append(f"- plain VFL is within {abs(gap):.1f} points of centralized scikit-learn "
                   f"({'learns as a centralized model does' if gap <= 1.5 else 'more than 1.5 points below it'}).")
        for eps in (e for e in (10.0, 1.0) if e in epsilons):
            acc = _dp(ds, eps)
            verdict = "holds" if acc >= plain - CLOSE_POINTS / 100 else "does not hold"
            out.append(f"- 'close to lossless at ε = {eps:g}': HDP-VFL {acc:.3f} vs plain {plain:.3f} "
                       f"({(acc - plain) * 100:+.1f} points) -> {verdict} (close = within {CLOSE_POINTS:g} points).")
        measured = [(_dp(ds, e), e) for e in epsilons if e <= 10 and not math.isnan(_dp(ds, e))]
        if not measured:
            continue
        best = max(measured)
        verdict = "holds" if best[0] >= single - 0.005 else "does not hold"
        out.append(f"- 'best HDP-VFL accuracy for ε in [0.001, 10] comparable to single-party, centralized, plain "
                   f"and HE': best {best[0]:.3f} (ε = {best[1]:g}) vs single party {single:.3f}, plain {plain:.3f} "
                   f"-> {verdict} against the single party.")
        tight = [(_dp(ds, e), e) for e in epsilons if e < 0.1 and not math.isnan(_dp(ds, e))]
        if tight:
            acc = float(np.nanmean([a for a, _ in tight]))
            verdict = "holds" if acc <= majority + 0.01 else "does not hold"
            out.append(f"- 'about half of lossless below ε = 0.1': for binary labels half of lossless "
                       f"({plain / 2:.3f}) is below chance, so the claim is read as 'no better than predicting the "
                       f"majority class': HDP-VFL {acc:.3f} vs majority {majority:.3f} -> {verdict}.")
        beats = [e for e in epsilons if _dp(ds, e) > single + 0.005]
        if beats:
            out.append(f"- HDP-VFL beats the active party training alone from ε = {min(beats):g} on; "
                       "below that the passive party's features cost more accuracy (through the noise) than they add.")
        else:
            out.append(f"- HDP-VFL never beats the active party training alone ({single:.3f}) at these budgets: "
                       "the federation does not pay off under DP here.")
    out += _runtime_claims(runtime, links)
    return out


def network_citation(network: Dict[str, Any], source: str) -> Dict[str, Any]:
    """What the GLM report cites from a ``vflsec bench network --links`` run
    (its ``results.json`` content): the link rows, the job and the source."""
    return {"source": source, "links": network.get("links", []), "job": network.get("links_job", {}),
            "model_answer": network.get("links_model_answer", []),
            "load": {k: network.get("machine", {}).get(k) for k in ("load_start", "load_end")}}


def _links_claim(links: Dict[str, Any]) -> List[str]:
    rows = links.get("links", [])
    by = {(r["method"], r["link"]): r for r in rows}
    order = list(dict.fromkeys(r["link"] for r in rows))
    job = links.get("job", {})
    out = [f"- Over emulated links (`vflsec bench network --links`, {links.get('source')}: every party its own "
           f"process over gRPC with mutual TLS through a user-space link relay; n = {job.get('rows')} rows per "
           f"party before alignment, {job.get('features_per_party')} features, batch {job.get('batch_size')}, one "
           "epoch) the ratios to plain VFL on the same link are:"]
    for method, name in (("paillier", "Paillier"), ("ckks", "CKKS")):
        ratios = [(link, by[(method, link)]["vs_plain"]) for link in order
                  if (method, link) in by and by[(method, link)].get("vs_plain")]
        if not ratios:
            continue
        within = [link for link, r in ratios if r <= 3.0]
        out.append(f"  - {name}: " + ", ".join(f"{link} {r:.3g}x" for link, r in ratios) + " -> the 2-3x claim "
                   + (f"holds on {', '.join(within)}" if within else "holds on none of these links") + ".")
    answers = [a for a in links.get("model_answer", []) if a.get("method") in ("paillier", "ckks")]
    found = [a for a in answers if a.get("rtt_s") is not None]
    if found:
        out.append("  - The cost model (an extrapolation) puts HE-VFL within 3x of plain only at round-trip times "
                   "of at least " + ", ".join(f"{a['rtt_s'] * 1e3:.0f} ms ({a['method']}, "
                                              f"{a['bandwidth_bps'] / 1e6:g} Mbit/s)" for a in found) + ".")
    elif answers:
        rounds = {r["method"]: r["rounds"] for r in rows}
        ratio = ", ".join(f"{m} {rounds[m] / rounds['plain']:.2g}x" for m in ("paillier", "ckks")
                          if rounds.get(m) and rounds.get("plain"))
        out.append("  - The cost model (an extrapolation) does not put HE-VFL within 3x of plain at any round-trip "
                   "time up to 2 s at 20 Mbit/s-1 Gbit/s: as round trips come to dominate, the ratio tends to the "
                   f"ratio of sequential messages ({ratio or 'n/a'}).")
    if found:
        out.append("  - So the paper's 2-3x describes a slow network where round trips dominate both methods, not "
                   "the cryptography, whose cost the in-memory ratio above measures.")
    else:
        out.append("  - So with these HE baselines no link makes HE-VFL 2-3x of plain VFL for this job: the paper's "
                   "figure needs a network slow enough for round trips to dominate and an HE protocol with hardly "
                   "more sequential messages than plain VFL's.")
    return out


def _runtime_claims(rt: Sequence[Dict[str, Any]], links: Optional[Dict[str, Any]] = None) -> List[str]:
    by = {(r["method"], r["n"], r["epochs"]): r for r in rt}
    ratios: Dict[str, List[float]] = {}
    for (method, n, epochs), r in by.items():
        plain = by.get(("plain", n, epochs))
        if method != "plain" and plain and plain["seconds"] > 0:
            ratios.setdefault(method, []).append(r["seconds"] / plain["seconds"])
    out = []
    if ratios:
        out.append("**Runtime** (synthetic data of Adult's shape):")
    for method, values in sorted(ratios.items()):
        med = float(np.median(values))
        if method == "hdp":
            claim, verdict = "HDP-VFL runtime about that of non-private VFL", "holds" if med <= 2.0 else "does not hold"
        else:
            claim, verdict = "HE-VFL 2-3x slower than non-private VFL", "holds" if med <= 3.0 else "does not hold"
        out.append(f"- '{claim}': {method} / plain = {med:.3g}x median ({min(values):.3g}x-{max(values):.3g}x "
                   f"over {len(values)} cells) -> {verdict}"
                   + (" in memory (the cryptography alone; the paper measured a networked framework)."
                      if method != "hdp" else "."))
    if links and ratios:
        out += _links_claim(links)
    elif ratios:
        out.append("- In memory the ratios measure the cryptography alone; `vflsec bench network --links` measures "
                   "them over emulated links (pass its results.json with --network-results to cite it here).")
    return out


def conclusion(summary: Dict[str, Dict[str, Any]], runtime: Sequence[Dict[str, Any]]) -> List[str]:
    """What the run shows, in plain words."""
    lines = []
    never_better, at_majority = [], []
    for name, ds in summary.items():
        plain, single, central = _ref(ds, "plain"), _ref(ds, "single_party"), _ref(ds, "centralized_sklearn")
        majority = _ref(ds, "majority")
        parts = [f"On {name}, plain VFL reaches {plain:.3f} (centralized {central:.3f}, active party alone "
                 f"{single:.3f}, majority class {majority:.3f})."]
        for eps in (1.0, 10.0):
            acc = _dp(ds, eps)
            if not math.isnan(acc):
                where = (" -- the majority-class rate: the model predicts one class" if acc <= majority + 0.005
                         else "")
                side = "below" if acc < single else "above"
                parts.append(f"At ε = {eps:g} (δ = {DELTA:g}), HDP-VFL reaches {acc:.3f}{where}: "
                             f"{(plain - acc) * 100:.1f} points below plain VFL and {abs(single - acc) * 100:.1f} "
                             f"points {side} the active party training alone.")
                if acc <= majority + 0.005:
                    at_majority.append(name)
        if all(_dp(ds, e) <= single + 0.005 for e in ds["dp"].get(("headline", "analytic"), {}) if e <= 10):
            never_better.append(name)
        tuned = _dp(ds, 1.0, "tuned_wide_grid")
        if not math.isnan(tuned):
            parts.append(f"Tuning on the evaluated data reaches {tuned:.3f} at ε = 1 but is not covered by ε; "
                         f"accounted private selection reaches {_dp(ds, 1.0, 'private_selection'):.3f}.")
        lines.append(" ".join(parts))
    if never_better:
        lines.append(f"For ε <= 10, HDP-VFL does not beat the active party training alone on "
                     f"{', '.join(never_better)}: "
                     "the passive party's features, seen through the noise, are worth less than they cost."
                     + (f" Where it predicts the majority class ({', '.join(sorted(set(at_majority)))}), its AUC "
                        "(above) shows how much ranking survives the noise." if at_majority else ""))
    by = {(r["method"], r["n"], r["epochs"]): r for r in runtime}
    for method in ("paillier", "ckks", "hdp"):
        candidates = [(r, by.get(("plain", r["n"], r["epochs"]))) for key, r in by.items() if key[0] == method]
        pairs = [(r, p) for r, p in candidates if p and p["seconds"] > 0 and p["bytes"] > 0]
        if pairs:
            t = np.median([r["seconds"] / p["seconds"] for r, p in pairs])
            b = np.median([r["bytes"] / p["bytes"] for r, p in pairs])
            lines.append(f"{method} costs {t:.3g}x the time and {b:.3g}x the bytes of plain VFL (median over "
                         f"{len(pairs)} runtime cells).")
    return lines


def _load(machine: Dict[str, Any], when: str) -> str:
    values = machine.get(f"load_average_{when}")
    return "n/a" if values is None else "/".join(f"{v:.2f}" for v in values)


def render_report(result: Dict[str, Any]) -> str:
    cfg, acc = result["config"], result["accuracy"]
    summary = summarize(acc["rows"])
    epsilons = cfg["epsilons"]
    m = result["machine"]
    seeded = cfg.get("seed") is not None
    lines = [
        "# vflsec bench glm: HDP-VFL vs Paillier and CKKS on vertical logistic regression", "",
        f"Machine: {m.get('cpu')}, {m.get('logical_cores')} cores. `uptime` load average (1/5/15 min) before "
        f"{_load(m, 'start')}, after {_load(m, 'end')}. Wall time of the run: {result.get('seconds', 0) / 60:.1f} min."
        + (" **Partial run** (interrupted): only the finished cells are shown." if result.get("partial") else ""),
        "",
        "DP noise: " + (f"seeded per cell from --seed {cfg['seed']} (an experiment setting so the numbers reproduce; "
                        "deployments use the OS-entropy CSPRNG). " if seeded
                        else "OS-entropy CSPRNG (numbers vary run to run). ") +
        f"{cfg['split_seeds']} train/test splits (80/20, stratified) x {cfg['noise_draws']} noise draws per DP "
        f"cell; δ = {DELTA:g}; λ = {cfg['lam']:g}; learning rate {cfg['lr']:g} everywhere.", "",
        "## Protocol", "",
        "- **Preprocessing** (`vflsec.data.vertical_split`, scaling `zscore_clip`): each party z-scores its own "
        "columns on its own training rows, winsorizes at ±3, keeps one-hot columns 0/1, divides each row by "
        "sqrt(number of its attributes) and projects it onto the unit ball (HDP-VFL needs ||x_i^P|| <= 1). "
        "The means and standard deviations are statistics of each party's private training rows and are **not "
        "covered by ε**; `scaling=\"clip_only\"` (no statistics: public bounds only) is the data-independent "
        "alternative.",
        "- **Intercept**: the active party holds a constant column (0.5; its features are projected onto the "
        "ball of radius sqrt(0.75)), so the intercept is part of its block and Lemma 4 covers it.",
        "- **DP guarantee**: Lemma 3/4 sensitivities corrected for coupled parties (a sqrt(P) factor), learning "
        "rate refused above 2 / (P beta_theta + lam) = 3.99 for two parties, passive parties clip the noisy IR "
        "they receive; analytic Gaussian calibration by default (derivation in `vflsec.dp.sensitivity`). "
        "The ε column shows the last `vflsec audit`'s verdict on HDP's IR releases (largest empirical lower "
        "bound / claim over the passive and active cases); private selection's noisy score: "
        f"{audit_cell(('selection_score',))}. "
        + audit_legend(),
        "- **Hyperparameters**: *headline* = one configuration per dataset, selected by 5-fold CV on the *other* "
        "datasets only (epsilon is the whole cost); *tuned* = 5-fold CV on the evaluated training set as the "
        "paper did (paper grid: e in {5, 10, 15}, k in {0.1, 0.3, 1}, b = 3200; wide grid: k up to 10, "
        "b in {256, 1024, 3200}), labelled **ε excludes hyperparameter search**, with the composed ε of the "
        "search's training runs beside it (exact Gaussian composition; the non-private validation scoring is "
        "not counted, so the true cost is higher); *private selection* = Papernot & Steinke (2022) random "
        "stopping over the wide grid (10 expected runs, each trained on 80% of the training rows and scored by a "
        "noisy count on the other 20%), whose accounted total (Theorem 6) is the row's ε for whoever receives the "
        "selected model; the parties, who exchanged the IRs of all K runs, are charged the composition of those "
        "runs (the 'parties' transcript ε' beside it).", "",
    ]
    for name, ds in summary.items():
        head = acc.get("headline", {}).get(name)
        lines.append(f"## {name}\n")
        if head:
            lines.append(f"Headline configuration: {head['label']} (selected on {', '.join(head['selected_on'])}).\n")
        lines.append(_reference_table(ds))
        lines.append("")
        lines.append(_dp_table(ds, epsilons))
        lines.append("")
        auc_table = _auc_table(ds, epsilons)
        if auc_table:
            lines.append(auc_table)
            lines.append("")
        if ds["figure2"]:
            lines.append(f"### The paper's Figure 2 ({name}, ε = 1)\n")
            lines.append(_figure2_table(ds))
            lines.append("")
    rt = result.get("runtime") or []
    if rt:
        lines.append("## Runtime\n")
        lines.append("Paillier with 2048-bit keys (the paper's and FATE's setting; ~112-bit security) unless the "
                     "row says 3072. x = extrapolated from the measured prefix of whole batches.\n")
        lines.append(markdown_table(
            ["method", "n", "epochs", "seconds", "extrapolated", "measured batches", "MB sent"],
            [[r["method"], r["n"], r["epochs"], r["seconds"], r["extrapolated"], r["measured_batches"],
              r["bytes"] / 1e6] for r in rt]))
        lines.append("")
        if runtime_series(rt, result["config"].get("runtime_epochs_n")):
            lines.append("![runtime and bytes](runtime.png)\n")
        lines.append("The DP-vs-HE trade-off (`tradeoff.png`): each dataset's test accuracy against the time and "
                     "the bytes of one epoch at n = " + str(result["config"].get("runtime_epochs_n")) + " (the "
                     "runtime grid above, synthetic data of Adult's shape), one point per method and, for "
                     "HDP-VFL, per ε; HE points use the Taylor reference accuracy where the HE fit was not run.\n")
        lines.append("![DP vs HE trade-off](tradeoff.png)\n")
    lines.append("## The paper's claims against these measurements\n")
    lines += claims(summary, epsilons, rt, result.get("network_links"))
    lines.append("")
    lines.append("## Conclusion\n")
    lines += conclusion(summary, rt)
    return "\n".join(lines) + "\n"
