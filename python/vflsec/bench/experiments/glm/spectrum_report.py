"""The DP spectrum's part of the ``vflsec bench glm`` report (rows of :mod:`.spectrum`).

Per dataset: every DP method beside the central-DP ceiling at each (epsilon,
delta), the references on the same splits, the configurations selection chose,
the independent library (Opacus) beside the ceiling, and what HE+DP and MPC+DP
cost; then issue 26's targets judged (``papers/vflsec_targets.toml``, ``glm.*``)
and the plain-words answers the Conclusion gives (which vertical protocol is most
accurate at each epsilon, and how far each is from the ceiling).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...claims import judge, load_claims, verdict_table
from ...common import markdown_table
from .grid import MPC_DP_METHODS
from .mpc_cells import engine_protocol, threat_model
from .summary import ref_mean, spectrum_mean, stats

__all__ = ["he_dp_time_ratios", "spectrum_conclusion", "spectrum_measurements", "spectrum_section"]

TARGETS = "vflsec_targets"
CEILING_BUDGET = (1.0, 1e-5)  # where issue 26 compares HE+DP and Opacus with the ceiling
VERTICAL = ("hdp", "taylor_dp", "paillier_dp", "ckks_dp") + MPC_DP_METHODS
LABELS = {
    "central_dp": "central-DP ceiling",
    "hdp": "HDP-VFL",
    "taylor_dp": "HE+DP (taylor_dp: its flow in the clear)",
    "paillier_dp": "HE+DP, Paillier (paillier_dp)",
    "ckks_dp": "HE+DP, CKKS (ckks_dp)",
    "mpc_dp_semi2k": "MPC+DP, semi2k (mpc_dp)",
    "mpc_dp_cheetah": "MPC+DP, Cheetah (mpc_dp)",
    "central_dp_sgd": "vflsec DP-SGD, replace-one",
    "central_dp_sgd_add_remove": "vflsec DP-SGD, add/remove",
    "opacus_dp_sgd": "Opacus DP-SGD, add/remove",
}


def _fmt(values: Sequence[float]) -> str:
    mean, std, n = stats(values)
    return "n/a" if n == 0 else f"{mean:.3f} ± {std:.3f} (n={n})"


def _budgets(ds: Dict[str, Any]) -> List[Tuple[float, float]]:
    rows = ds["spectrum_rows"]
    return sorted({(r["epsilon"], r["delta"]) for r in rows if r["method"] == "central_dp"},
                  key=lambda b: (b[1], b[0]))


def he_dp_time_ratios(runtime: Sequence[Dict[str, Any]]) -> Dict[str, Tuple[float, int]]:
    """HE+DP method -> (median ratio of its runtime cells' seconds over the same protocol's
    without DP, number of cell pairs); extrapolated cells are compared only with
    extrapolated ones from the same measured batches."""
    by = {(r["method"], r["n"], r["epochs"]): r for r in runtime}
    out = {}
    for method in ("paillier_dp", "ckks_dp"):
        base = method[:-3]
        pairs = [(r, by.get((base, r["n"], r["epochs"]))) for key, r in by.items() if key[0] == method]
        ratios = [r["seconds"] / b["seconds"] for r, b in pairs
                  if b and b["seconds"] > 0 and r.get("measured_batches") == b.get("measured_batches")]
        if ratios:
            out[method] = (float(np.median(ratios)), len(ratios))
    return out


def _he_dp_accuracy(ds: Dict[str, Any], eps: float, delta: float) -> Tuple[str, float]:
    """HE+DP's accuracy at a budget: the encrypted run's where it ran (Paillier first), else taylor_dp's."""
    for method in ("paillier_dp", "ckks_dp", "taylor_dp"):
        value = spectrum_mean(ds, method, eps, delta)
        if not math.isnan(value):
            return method, value
    return "taylor_dp", math.nan


def spectrum_measurements(summary: Dict[str, Dict[str, Any]], runtime: Sequence[Dict[str, Any]]
                          ) -> Tuple[Dict[str, Optional[float]], Dict[str, str]]:
    """Issue 26's ``glm.*`` quantities and a note on each."""
    values: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    for method, (ratio, count) in he_dp_time_ratios(runtime).items():
        values[f"glm.he_dp_time_ratio.{method}"] = ratio
        notes[f"glm.he_dp_time_ratio.{method}"] = f"median of {count} runtime cells"
    eps, delta = CEILING_BUDGET
    for name, ds in summary.items():
        ceiling = spectrum_mean(ds, "central_dp", eps, delta)
        method, he_dp = _he_dp_accuracy(ds, eps, delta)
        if not (math.isnan(ceiling) or math.isnan(he_dp)):
            values[f"glm.he_dp_gap_points.{name}"] = (ceiling - he_dp) * 100
            notes[f"glm.he_dp_gap_points.{name}"] = f"ceiling {ceiling:.3f}, {method} {he_dp:.3f}"
        opacus = spectrum_mean(ds, "opacus_dp_sgd", eps, delta)
        if not (math.isnan(ceiling) or math.isnan(opacus)):
            values[f"glm.ceiling_minus_opacus_points.{name}"] = (ceiling - opacus) * 100
            notes[f"glm.ceiling_minus_opacus_points.{name}"] = (f"ceiling {ceiling:.3f} "
                                                                f"({_ceiling_method(ds, eps, delta)}), Opacus "
                                                                f"{opacus:.3f}")
        ours = spectrum_mean(ds, "central_dp_sgd", eps, delta)
        if not (math.isnan(ours) or math.isnan(opacus)):
            values[f"glm.dp_sgd_minus_opacus_points.{name}"] = (ours - opacus) * 100
            notes[f"glm.dp_sgd_minus_opacus_points.{name}"] = (f"vflsec DP-SGD {ours:.3f} (replace-one), Opacus "
                                                               f"{opacus:.3f} (add/remove)")
    return values, notes


def _ceiling_method(ds: Dict[str, Any], eps: float, delta: float) -> str:
    """The method the ceiling's selection chose at a budget (the most frequent over its rows)."""
    methods = [r["config"]["method"] for r in ds["spectrum_rows"] if r["method"] == "central_dp"
               and (r["epsilon"], r["delta"]) == (eps, delta) and r.get("config")]
    return max(sorted(set(methods)), key=methods.count) if methods else "n/a"


def _targets(summary: Dict[str, Dict[str, Any]], runtime: Sequence[Dict[str, Any]]) -> str:
    claims = [c for c in load_claims(TARGETS) if c.quantity.startswith("glm.")]
    values, notes = spectrum_measurements(summary, runtime)
    return verdict_table(judge(claims, values, {c.id: notes[c.quantity] for c in claims if c.quantity in notes}))


def _table(name: str, ds: Dict[str, Any]) -> str:
    not_run = ds.get("spectrum_not_run", {})
    methods = [m for m in ("central_dp", "hdp", "taylor_dp", "paillier_dp", "ckks_dp") + MPC_DP_METHODS
               if any(key[0] == m for key in ds["spectrum"]) or any(key[0] == m for key in not_run)]
    rows = []
    for eps, delta in _budgets(ds):
        row: List[Any] = [f"{delta:g}", f"{eps:g}"]
        for m in methods:
            values = ds["spectrum"].get((m, delta), {}).get(eps, [])
            row.append(_fmt(values) if values else not_run.get((m, delta), {}).get(eps, "not run"))
        rows.append(row)
    refs = [f"{label} {ref_mean(ds, m):.3f}" for m, label in
            (("majority", "majority"), ("single_party", "active party alone"), ("plain", "plain VFL"),
             ("paillier", "Paillier (no DP)"), ("ckks", "CKKS (no DP)"), ("taylor", "Taylor flow (no DP)"),
             ("centralized_sklearn", "centralized non-private")) if not math.isnan(ref_mean(ds, m))]
    return (f"References on the same splits: {', '.join(refs)}.\n\n"
            + markdown_table(["δ", "ε"] + [LABELS[m] for m in methods], rows))


def _selected(ds: Dict[str, Any], selection: Dict[str, Any]) -> str:
    if not selection:
        return ""
    families = ["central_dp", "hdp", "taylor_dp"] + (["mpc_dp"] if selection.get("mpc_dp") else [])
    rows = [[key] + [selection.get(f, {}).get(key, "") for f in families] for key in selection.get("central_dp", {})]
    mpc_dp = (" MPC+DP runs the ceiling's best-ranked DP-SGD candidate (the DP-SGD configuration selected for the "
              "ceiling's DP-SGD candidates) with expected batch b = ceil(q n), no weight decay and no weight clip."
              if "mpc_dp" in families else "")
    return (f"Configurations (selected per budget on {', '.join(selection.get('selected_on', []))}, never on "
            f"this dataset; the ceiling's candidates are DP-SGD, output and objective perturbation).{mpc_dp}\n\n"
            + markdown_table(["ε/δ", "central-DP ceiling", "HDP-VFL", "HE+DP", "MPC+DP"][:len(families) + 1], rows))


def _opacus(ds: Dict[str, Any]) -> str:
    rows = []
    budgets = sorted({(r["epsilon"], r["delta"]) for r in ds["spectrum_rows"] if r["method"] == "opacus_dp_sgd"})
    for eps, delta in budgets:
        cells = [r for r in ds["spectrum_rows"] if (r["epsilon"], r["delta"]) == (eps, delta)]
        multiplier = {m: np.mean([r["noise_multiplier"] for r in cells if r["method"] == m and
                                  r.get("noise_multiplier") is not None] or [math.nan])
                      for m in ("central_dp_sgd", "central_dp_sgd_add_remove", "opacus_dp_sgd")}
        row = [f"{eps:g}", f"{delta:g}", _fmt(ds["spectrum"].get(("central_dp", delta), {}).get(eps, []))]
        for m in ("central_dp_sgd", "central_dp_sgd_add_remove", "opacus_dp_sgd"):
            values = [r["accuracy"] for r in cells if r["method"] == m]
            missing = next((r["not_run"] for r in cells if r["method"] == m and r.get("not_run")), None)
            row.append(f"not run ({missing})" if missing else
                       f"{_fmt(values)}; noise multiplier {multiplier[m]:.3g}")
        rows.append(row)
    if not rows:
        return ""
    return ("The independent library: Opacus 1.6 DP-SGD (torch, Poisson sampling, its PRV accountant calibrating "
            "its own noise; add/remove neighbours, the relation of Opacus and most central-DP libraries, which "
            "needs about half the noise of replace-one) with the DP-SGD configuration selected for the ceiling's "
            "DP-SGD candidates, on the rows vflsec's model saw (same projection and intercept column), beside "
            "vflsec's DP-SGD with the same settings under both relations. diffprivlib, the library the issue "
            "names, does not import with scikit-learn 1.9.\n\n"
            + markdown_table(["ε", "δ", "central-DP ceiling (replace-one)", LABELS["central_dp_sgd"],
                              LABELS["central_dp_sgd_add_remove"], LABELS["opacus_dp_sgd"]], rows))


def _cost(ds: Dict[str, Any], runtime: Sequence[Dict[str, Any]]) -> str:
    lines = []
    cells = [r for r in ds["spectrum_rows"] if r["method"] in ("paillier_dp", "ckks_dp")]
    if cells:
        lines.append(markdown_table(
            ["method", "ε", "δ", "test accuracy", "taylor_dp, same noise seed", "epoch seconds", "configuration"],
            [[r["method"], f"{r['epsilon']:g}", f"{r['delta']:g}", f"{r['accuracy']:.3f}", _same_seed(ds, r),
              f"{r['epoch_seconds']:.1f}", _config(r["config"])] for r in cells]))
    return "\n".join(lines)


def _mpc_dp_cost(ds: Dict[str, Any]) -> str:
    """The MPC+DP runs: accuracy beside the ceiling at the same budget, the engine's steps, wall and CPU time."""
    cells = [r for r in ds["spectrum_rows"] if r["method"] in MPC_DP_METHODS]
    if not cells:
        return ""
    return markdown_table(
        ["method", "ε", "δ", "test accuracy", "AUC", "central-DP ceiling", "ε spent", "steps", "noise shares",
         "wall s", "CPU s", "configuration"],
        [[r["method"], f"{r['epsilon']:g}", f"{r['delta']:g}", f"{r['accuracy']:.3f}", _num(r.get("auc"), ".3f"),
          _num(spectrum_mean(ds, "central_dp", r["epsilon"], r["delta"]), ".3f"), _num(r.get("epsilon_spent"), ".3f"),
          _num(r.get("steps"), "d"), _num(r.get("noise_shares"), "d"), f"{r['seconds']:.1f}",
          _num(r.get("cpu_seconds"), ".1f"), _config(r["config"])] for r in cells])


def _num(value: Any, spec: str) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _same_seed(ds: Dict[str, Any], row: Dict[str, Any]) -> str:
    twin = [r for r in ds["spectrum_rows"] if r["method"] == "taylor_dp" and r["noise_draw"] == 0 and
            (r["epsilon"], r["delta"], r["split_seed"]) == (row["epsilon"], row["delta"], row["split_seed"])]
    return f"{twin[0]['accuracy']:.3f}" if twin else "n/a"


def _config(cfg: Dict[str, Any]) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in cfg.items() if k != "method")


def _mpc_dp_intro(summary: Dict[str, Dict[str, Any]]) -> List[str]:
    """What MPC+DP is and what its guarantee covers (when the run has MPC+DP rows, run or not)."""
    methods = [m for m in MPC_DP_METHODS if any(
        any(key[0] == m for key in ds["spectrum"]) or any(key[0] == m for key in ds.get("spectrum_not_run", {}))
        for ds in summary.values())]
    if not methods:
        return []
    threats = " ".join(f"`{m}`: {threat_model(m)}." for m in methods)
    return ["**MPC+DP** (`mpc_dp_<engine protocol>`, protection `\"mpc_dp\"` on SPU) is the ceiling's DP-SGD run "
            "vertically inside secret-sharing MPC: the rows stay secret-shared, a secret Poisson sample (rate "
            "b / n rounded up to a multiple of 2^-12) takes the place of the curator's, and every party adds a "
            "noise share of the full σ: the total noise variance is P σ² (P parties; twice σ² with two), the price "
            "of no party, nor any coalition missing one, knowing the noise. It runs the DP-SGD candidate "
            "the ceiling's ranking puts first, on the first splits with one noise draw (both engine protocols draw "
            "the same noise seed). Its guarantee is the ceiling's (the released model, replace-one, against every "
            "party and outsider, semi-honest parties); the data in between are as safe as the engine protocol "
            "keeps them: " + threats + "\n"]


def spectrum_section(summary: Dict[str, Dict[str, Any]], selections: Dict[str, Any],
                     runtime: Sequence[Dict[str, Any]]) -> List[str]:
    """The report's "DP spectrum" section (empty when the run has no spectrum rows)."""
    names = [name for name, ds in summary.items() if ds["spectrum"]]
    if not names:
        return []
    mpc_dp = _mpc_dp_intro(summary)
    methods = "HDP-VFL, HE+DP and MPC+DP" if mpc_dp else "HDP-VFL and HE+DP"
    lines = [f"## The DP spectrum: the central-DP ceiling, {methods} at the same (ε, δ)\n",
             "Every DP method under the same neighbour relation (replace one row) and budget; each method's "
             "configuration chosen per budget by CV on the *other* datasets of the run (built-in synthetic data "
             "for a one-dataset run), so ε is the whole privacy cost of the evaluated rows. The **central-DP "
             "ceiling** (`vflsec.glm.CentralDPLogisticRegression`) trains on the joined features as a trusted "
             "curator would: the best of DP-SGD (Poisson subsampling, PLD accounting), output perturbation "
             "(Chaudhuri et al. 2011) and objective perturbation (Kifer et al. 2012). **HE+DP** is HE-VFL whose "
             "key holder adds Gaussian noise to every gradient it decrypts (`paillier_dp`, `ckks_dp`; "
             "`taylor_dp` is the same flow in the clear, run on every split; the encrypted runs use taylor_dp's "
             "first noise seed, so the two differ only by the encryption). Its batches are fixed and public, "
             "so it has no subsampling amplification, and its guarantee covers every data party, not the key "
             "holder (README, security). n = splits x noise draws.\n",
             "The guarantees differ in scope, and the table should be read with that in mind. The ceiling's covers "
             "the released model against anyone. HE+DP's covers every party's weights and the final model against "
             "every data party that follows the protocol: a data party that raises its masked request to a power M "
             "gets its own gradient with the noise divided by M, and the key holder cannot tell (measured: "
             "tests/glm/test_he_dp_deviation.py; docs/threat-model.md). HDP-VFL's covers each party's released "
             "IRs against the other party only: the active "
             "party's own gradient uses its un-noised IRs, so the final model is not differentially private with "
             "respect to the active party's rows and labels. HDP-VFL can therefore sit above the ceiling where the "
             "active party's features carry the signal (its rows pay no noise for the model itself).\n"]
    lines += mpc_dp
    for name in names:
        ds = summary[name]
        lines.append(f"### {name}\n")
        lines.append(_table(name, ds))
        lines.append("")
        selected = _selected(ds, selections.get(name, {}))
        if selected:
            lines += [selected, ""]
        opacus = _opacus(ds)
        if opacus:
            lines += [opacus, ""]
        cost = _cost(ds, runtime)
        if cost:
            lines += ["The encrypted HE+DP runs (split 0; Paillier with the run's key size):\n", cost, ""]
        mpc_cost = _mpc_dp_cost(ds)
        if mpc_cost:
            lines += ["The MPC+DP runs (first he_split_seeds splits, one noise draw; wall and CPU seconds of the fit, "
                      "every party a thread of this process on the engine's in-memory link):\n", mpc_cost, ""]
    ratios = he_dp_time_ratios(runtime)
    if ratios:
        lines.append("HE+DP's epoch time over the same protocol without DP (runtime grid, same cells): "
                     + "; ".join(f"{m} {r:.3f}x (median of {c})" for m, (r, c) in ratios.items()) + ".\n")
    lines.append("Issue 26's targets (`vflsec/bench/papers/vflsec_targets.toml`, `glm.*`):\n")
    lines.append(_targets(summary, runtime))
    lines.append("")
    return lines


def spectrum_conclusion(summary: Dict[str, Dict[str, Any]], runtime: Sequence[Dict[str, Any]]) -> List[str]:
    """Per dataset, in plain words: at which ε a DP method beats the active party alone, how far
    HDP-VFL is from the ceiling, and what HE+DP costs for its accuracy."""
    lines = []
    ratios = he_dp_time_ratios(runtime)
    for name, ds in summary.items():
        budgets = _budgets(ds)
        if not budgets:
            continue
        single = ref_mean(ds, "single_party")
        parts = [f"**{name}** (active party alone {single:.3f}):"]
        for delta in sorted({d for _, d in budgets}):
            epsilons = sorted(e for e, d in budgets if d == delta)
            first_any = _first_beating(ds, single, epsilons, delta, ("central_dp",) + VERTICAL)
            first_vfl = _first_beating(ds, single, epsilons, delta, VERTICAL)
            text = f"At δ = {delta:g}, "
            text += ("no DP method beats the active party alone at ε <= " + f"{epsilons[-1]:g}" if first_any is None
                     else f"the first ε at which a DP method beats it is {first_any[0]:g} ({LABELS[first_any[1]]} "
                          f"{first_any[2]:.3f})")
            text += ("; no vertical DP protocol does" if first_vfl is None else
                     f"; the first vertical protocol to beat it is {LABELS[first_vfl[1]]} at ε = {first_vfl[0]:g} "
                     f"({first_vfl[2]:.3f})")
            parts.append(text + ".")
        gaps = []
        for eps in sorted({e for e, _ in budgets}):
            delta = min(d for _, d in budgets)
            ceiling, hdp = spectrum_mean(ds, "central_dp", eps, delta), spectrum_mean(ds, "hdp", eps, delta)
            if not (math.isnan(ceiling) or math.isnan(hdp)):
                gaps.append(f"{(hdp - ceiling) * 100:+.1f} at ε = {eps:g} ({hdp:.3f} vs {ceiling:.3f})")
        if gaps:
            parts.append(f"HDP-VFL minus the ceiling (points, δ = {min(d for _, d in budgets):g}): "
                         + ", ".join(gaps) + " (negative: below it).")
        ranking = _most_accurate_vertical(ds)
        if ranking:
            parts.append(ranking)
        eps, delta = CEILING_BUDGET
        method, he_dp = _he_dp_accuracy(ds, eps, delta)
        ceiling = spectrum_mean(ds, "central_dp", eps, delta)
        if not (math.isnan(he_dp) or math.isnan(ceiling)):
            gap = (ceiling - he_dp) * 100
            text = (f"HE+DP at ε = 1 (δ = 1e-05) reaches {he_dp:.3f} ({method}), {abs(gap):.1f} points "
                    f"{'below' if gap >= 0 else 'above'} the ceiling's {ceiling:.3f}")
            cost = [f"{m} {r:.2f}x" for m, (r, _) in ratios.items()]
            if cost:
                text += f", for HE's time (epoch time over HE without DP: {', '.join(cost)}"
                epochs = {r["method"]: r["epoch_seconds"] for r in ds["spectrum_rows"]
                          if r["method"] in ("paillier_dp", "ckks_dp") and (r["epsilon"], r["delta"]) == (eps, delta)}
                if epochs:
                    text += "; one epoch here: " + ", ".join(f"{m} {v:.1f} s" for m, v in epochs.items())
                text += ")"
            parts.append(text + ".")
            if he_dp <= ref_mean(ds, "majority") + 0.005:
                parts.append("That is the majority-class rate: the model predicts one class.")
            chosen = _ceiling_method(ds, eps, delta)
            if ceiling - he_dp > 0.01:
                how = {"dp_sgd": "samples each row with probability q per step (amplification by subsampling) "
                                 "and uses momentum",
                       "output_perturbation": "releases the trained model once (one noisy release, no "
                                              "composition over steps)",
                       "objective_perturbation": "releases the trained model once (noise in the objective, "
                                                 "no composition over steps)"}.get(chosen, "is a different method")
                parts.append(f"It is not within 1 point. The ceiling here ({chosen}) {how}, while HE+DP's batches "
                             "are fixed and public: every epoch releases each row's gradient once at full strength "
                             "(the epochs compose), and its weights are clipped to k.")
            elif he_dp - ceiling > 0.01:
                parts.append(f"HE+DP is above the ceiling here: the ceiling's configuration ({chosen}) was selected "
                             "on the other datasets and does not transfer to this one, so the \"ceiling\" holds "
                             "only up to its selection.")
        opacus = spectrum_mean(ds, "opacus_dp_sgd", eps, delta)
        ours = spectrum_mean(ds, "central_dp_sgd", eps, delta)
        if not (math.isnan(opacus) or math.isnan(ours) or math.isnan(ceiling)):
            parts.append(f"Against the independent library at ε = 1: the ceiling {ceiling:.3f} "
                         f"({_ceiling_method(ds, eps, delta)}, as selected), vflsec's DP-SGD with Opacus' "
                         f"configuration {ours:.3f} (replace-one), Opacus {opacus:.3f} (add/remove).")
        lines.append(" ".join(parts))
    return lines


def _most_accurate_vertical(ds: Dict[str, Any]) -> str:
    """Which of HDP-VFL, HE+DP and MPC+DP is most accurate at each spectrum ε (δ of
    :data:`CEILING_BUDGET`), with MPC+DP's distance from the ceiling and its time per fit (or why it
    did not run); empty where MPC+DP has no cell at that δ."""
    delta = CEILING_BUDGET[1]
    epsilons = sorted(e for e, d in _budgets(ds) if d == delta)
    not_run = ds.get("spectrum_not_run", {})
    if not any((m, delta) in ds["spectrum"] or (m, delta) in not_run for m in MPC_DP_METHODS):
        return ""
    clauses = []
    for eps in epsilons:
        he_method, he_dp = _he_dp_accuracy(ds, eps, delta)
        accuracy = {"HDP-VFL": spectrum_mean(ds, "hdp", eps, delta), f"HE+DP ({he_method})": he_dp}
        accuracy.update({f"MPC+DP ({engine_protocol(m)})": spectrum_mean(ds, m, eps, delta) for m in MPC_DP_METHODS})
        measured = sorted(((value, name) for name, value in accuracy.items() if not math.isnan(value)), reverse=True)
        if not measured:
            continue
        top = measured[0][0]
        best = sorted(name for value, name in measured if value == top)
        behind = [f"{name} {value:.3f}" for value, name in measured if value < top]
        text = (f"at ε = {eps:g}, " + (f"{' and '.join(best)} tie at {top:.3f}" if len(best) > 1 else
                                       f"{best[0]} {top:.3f}")
                + (f", ahead of {_listing(behind)}" if behind else ""))
        ceiling = spectrum_mean(ds, "central_dp", eps, delta)
        details = []
        for m in MPC_DP_METHODS:
            rows = [r for r in ds["spectrum_rows"] if r["method"] == m and (r["epsilon"], r["delta"]) == (eps, delta)]
            why = not_run.get((m, delta), {}).get(eps)
            if why:
                details.append(f"MPC+DP ({engine_protocol(m)}) {why}")
            if not rows:
                continue
            gap = (ceiling - spectrum_mean(ds, m, eps, delta)) * 100
            cpu = [r["cpu_seconds"] for r in rows if r.get("cpu_seconds") is not None]
            details.append(f"MPC+DP ({engine_protocol(m)}) "
                           + ("" if math.isnan(gap) else f"{abs(gap):.1f} points {'below' if gap >= 0 else 'above'} "
                                                         f"the ceiling's {ceiling:.3f}, ")
                           + f"{float(np.mean([r['seconds'] for r in rows])):.0f} s per fit"
                           + (f" ({float(np.mean(cpu)):.0f} CPU s)" if cpu else ""))
        clauses.append(text + (f" [{'; '.join(details)}]" if details else " [MPC+DP not run at this ε]"))
    return (f"The most accurate vertical DP protocol at δ = {delta:g} (HDP-VFL, HE+DP, MPC+DP; MPC+DP on the "
            "first he_split_seeds splits with one noise draw): " + "; ".join(clauses) + ".")


def _listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _first_beating(ds: Dict[str, Any], single: float, epsilons: Sequence[float], delta: float,
                   methods: Sequence[str]) -> Optional[Tuple[float, str, float]]:
    """The smallest ε at which one of ``methods`` is above the active party alone by more than
    its own spread (mean minus one standard deviation), with the best such method."""
    for eps in epsilons:
        best = None
        for m in methods:
            mean, std, n = stats(ds["spectrum"].get((m, delta), {}).get(eps, []))
            if n and mean - (std if n > 1 else 0.0) > single and (best is None or mean > best[2]):
                best = (eps, m, mean)
        if best is not None:
            return best
    return None
