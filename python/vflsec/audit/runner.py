"""``vflsec audit [--quick] [--mechanism NAME] [--seed N] [--out DIR] [--rerender DIR]``:
run every audit case (:mod:`.cases`), write ``audit.json``, ``audit.md`` and
``audit.png``, and exit 1 if any empirical lower bound exceeds the epsilon the
product claims (or a construction exceeds the stated sensitivity).

For each case: the claimed epsilon (the product's own report), the empirical
lower bound at the claimed delta (:func:`.statistics.epsilon_lower_bound`,
one-sided 97.5% Clopper-Pearson bounds on each rate, threshold chosen on one
half of the runs and evaluated on the other), the ratio of the two, the
fitted epsilon (Gaussian DP; for a discrete release, its outputs' frequency
ratio) with its interval, and how close the pair comes
to the stated sensitivity. Noise comes from seeded ChaCha20 streams derived
from ``--seed`` (an experiment setting: the product's default is OS entropy).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .cases import AuditCase, case_seed, load_cases
from .statistics import DEFAULT_CONFIDENCE, epsilon_lower_bound, fit_discrete_dp, fit_gaussian_dp

__all__ = ["AuditFailed", "add_arguments", "main", "render", "run", "violations"]

SENSITIVITY_TOLERANCE = 1e-6


class AuditFailed(RuntimeError):
    """An audit found an empirical epsilon above a claim (or a pair beyond a stated sensitivity)."""


def _select(cases: Dict[str, AuditCase], mechanisms: Optional[List[str]]) -> List[AuditCase]:
    if not mechanisms:
        return list(cases.values())
    from ..dp.mechanisms import mechanism_info

    for name in mechanisms:
        mechanism_info(name)
    return [c for c in cases.values() if c.mechanism in mechanisms]


def audit_case(case: AuditCase, *, runs: int, seed: int) -> Dict[str, Any]:
    """One case's row of ``audit.json``."""
    t0 = time.perf_counter()
    claim = case.claim()
    scores = case.run(runs, case_seed(seed, "case", case.name))  # every case its own streams
    delta = claim.delta
    bound = epsilon_lower_bound(scores.world0, scores.world1, delta,
                                rng=np.random.default_rng(case_seed(seed, "split", case.name)))
    if case.fit == "discrete":
        discrete = fit_discrete_dp(scores.world0, scores.world1)
        fitted_mu: Optional[float] = None
        fitted = (discrete.epsilon, discrete.epsilon_low, discrete.epsilon_high)
    else:
        fit = fit_gaussian_dp(scores.world0, scores.world1, delta)
        fitted_mu = fit.mu
        fitted = (fit.epsilon, fit.epsilon_low, fit.epsilon_high)
    ratio = bound.epsilon / claim.epsilon if claim.epsilon else None
    return {
        "case": case.name, "mechanism": case.mechanism, "pair": case.pair,
        "runs_per_world": int(len(scores.world0)),
        "claimed_epsilon": claim.epsilon, "delta": delta, "neighbours": claim.neighbours,
        "claim_source": claim.source,
        "lower_bound": bound.epsilon, "lower_bound_over_claim": ratio,
        "fpr": bound.false_positive_rate, "fnr": bound.false_negative_rate,
        "fpr_upper": bound.fpr_upper, "fnr_upper": bound.fnr_upper, "confidence": bound.confidence,
        "fit": case.fit, "fitted_mu": fitted_mu, "fitted_epsilon": fitted[0],
        "fitted_epsilon_interval": [fitted[1], fitted[2]],
        "fitted_over_claim": fitted[0] / claim.epsilon if claim.epsilon else None,
        "realized_sensitivity_ratio": scores.realized_sensitivity_ratio,
        "notes": scores.notes, "seconds": time.perf_counter() - t0,
    }


def violations(rows: List[Dict[str, Any]]) -> List[str]:
    """What makes an audit fail: a lower bound above a finite claim, or a
    construction beyond the stated sensitivity."""
    out = []
    for r in rows:
        claim = r["claimed_epsilon"]
        if claim is not None and r["lower_bound"] > claim:
            out.append(f"{r['case']}: empirical epsilon >= {r['lower_bound']:.3g} exceeds the claimed {claim:.3g}")
        ratio = r.get("realized_sensitivity_ratio")
        if ratio is not None and ratio > 1.0 + SENSITIVITY_TOLERANCE:
            out.append(f"{r['case']}: the pair's clean outputs are {ratio:.3g}x the stated sensitivity apart")
    return out


def run(quick: bool = False, mechanisms: Optional[List[str]] = None, seed: int = 0, out: Optional[Path] = None,
        runs: Optional[int] = None, rerender: Optional[Path] = None) -> Dict[str, Any]:
    """Run the selected cases; write and render the results; AuditFailed on a violation."""
    from .._progress import progress
    from ..bench.common import write_json
    from ..bench.envelope import close_envelope, open_envelope

    if rerender is not None:
        from ..bench.runner import read_results

        saved = read_results(Path(rerender), "audit.json")
        render(saved, Path(rerender))
        return saved
    out = Path(out) if out is not None else Path("bench-out") / "audit"
    selected = _select(load_cases(), mechanisms)
    result: Dict[str, Any] = open_envelope("audit", versions=["numpy", "scipy", "torch", "dp-accounting"],
                                           seed=seed, quick=quick)
    rows = []
    for case in progress(selected, desc="vflsec audit", unit="case"):
        n = runs if runs is not None else (case.runs_quick if quick else case.runs_full)
        rows.append(audit_case(case, runs=n, seed=seed))
    result.update({
        "confidence": DEFAULT_CONFIDENCE,
        "noise": f"seeded ChaCha20 streams derived from --seed {seed} (an experiment setting; the product's "
                 "default is OS entropy)",
        "cases": rows, "violations": violations(rows),
    })
    close_envelope(result)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "audit.json", result)
    print(render(result, out))
    print(f"\nwrote {out / 'audit.json'}, {out / 'audit.md'}, {out / 'audit.png'}")
    if result["violations"]:
        raise AuditFailed("; ".join(result["violations"]))
    return result


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return "inf"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _claim_text(r: Dict[str, Any]) -> str:
    if r["claimed_epsilon"] is None:
        return f"none (no guarantee; delta {r['delta']:g} used)"
    return f"{r['claimed_epsilon']:.3g} (delta {r['delta']:g}, {r['neighbours'].replace('_', '-')})"


def conclusion(rows: List[Dict[str, Any]], violations_found: List[str]) -> str:
    claimed = [r for r in rows if r["claimed_epsilon"] is not None]
    parts = []
    if violations_found:
        parts.append(f"{len(violations_found)} violation(s): " + "; ".join(violations_found) + ".")
    else:
        parts.append(f"No mechanism's empirical lower bound exceeds the epsilon the product claims for it "
                     f"({len(claimed)} cases with a claim).")
    if claimed:
        ratios = [r["lower_bound_over_claim"] for r in claimed]
        fitted = [r["fitted_over_claim"] for r in claimed if r["fitted_over_claim"] is not None]
        parts.append(f"Lower bounds are {min(ratios):.2f}-{max(ratios):.2f} of the claims; fitted epsilons "
                     f"{min(fitted):.2f}-{max(fitted):.2f} of them (a fitted epsilon is a point estimate).")
        lattice = [r for r in claimed if r["mechanism"] == "lattice_gaussian"]
        if lattice:
            parts.append("The bare lattice release reaches " + ", ".join(
                f"{r['lower_bound_over_claim']:.2f} of its claim at {r['runs_per_world']:,} runs per world "
                f"({r['case']})" for r in lattice) + ": the auditor is tight enough to catch a mechanism that "
                "gives twice the epsilon it claims.")
    unclaimed = [r for r in rows if r["claimed_epsilon"] is None]
    if unclaimed:
        parts.append("Without a claim (no guarantee): " + ", ".join(
            f"{r['case']} reaches epsilon >= {r['lower_bound']:.3g}" for r in unclaimed) + ".")
    return "## Conclusion\n\n" + " ".join(parts) + "\n"


def render(result: Dict[str, Any], out: Path) -> str:
    """Write ``audit.md`` and ``audit.png`` into ``out``; returns the markdown."""
    from ..bench.common import markdown_table

    rows = result["cases"]
    table = markdown_table(
        ["case", "mechanism", "claimed epsilon", "runs/world", "lower bound", "lower/claim", "fitted epsilon [95%]",
         "fitted/claim", "pair / stated sensitivity"],
        [[r["case"], r["mechanism"], _claim_text(r), f"{r['runs_per_world']:,}", _fmt(r["lower_bound"]),
          _fmt(r["lower_bound_over_claim"]),
          f"{_fmt(r['fitted_epsilon'])} [{_fmt(r['fitted_epsilon_interval'][0])}, "
          f"{_fmt(r['fitted_epsilon_interval'][1])}]" + (" (discrete)" if r.get("fit") == "discrete" else ""),
          _fmt(r["fitted_over_claim"]), _fmt(r["realized_sensitivity_ratio"])] for r in rows])
    pairs = "\n".join(f"- **{r['case']}**: {r['pair']}" + (
        "; " + ", ".join(f"{k}: {_fmt(v) if isinstance(v, float) else v}" for k, v in r["notes"].items())
        if r["notes"] else "") + f" (claim from {r['claim_source']})" for r in rows)
    from ..bench.envelope import load_averages

    before, after = load_averages(result)
    load = "/".join(f"{v:.2f}" for v in before or ())
    load_after = "/".join(f"{v:.2f}" for v in after or ())
    # Said only where such a case is present: earlier results re-render unchanged.
    discrete = ("; for cases marked \"discrete\", releases of a few output values: the largest log ratio of an "
                "output's frequencies in the two worlds, with two-sided 95% Clopper-Pearson intervals"
                if any(r.get("fit") == "discrete" for r in rows) else "")
    text = (f"# vflsec privacy audit\n\n{'Quick' if result['quick'] else 'Full'} audit, seed {result['seed']}, "
            f"git {result.get('git') or 'unknown'}; {result['seconds']:.0f} s on {result['machine']['cpu']} "
            f"({result['machine']['logical_cores']} logical cores), load average (1/5/15 min) {load} before, "
            f"{load_after} after. Noise: {result['noise']}.\n\n"
            "Each case runs the product's release code on a worst-case pair of neighbouring inputs; the lower bound "
            "is the empirical epsilon at the claimed delta with one-sided "
            f"{result['confidence']:.1%} Clopper-Pearson bounds on both error rates (threshold chosen on a "
            "quarter of the runs, evaluated on the other three quarters); the fitted epsilon treats the scores "
            f"as Gaussian (Gaussian DP's mu{discrete}); the last column is the distance between the pair's noiseless "
            "outputs over the sensitivity "
            f"the mechanism states (n/a where the outputs are not fixed).\n\n{table}\n\n### The pairs\n\n{pairs}\n\n"
            f"{conclusion(rows, result['violations'])}")
    out = Path(out)
    (out / "audit.md").write_text(text)
    plot(rows, out / "audit.png")
    return text


def plot(rows: List[Dict[str, Any]], path: Path) -> None:
    """Per case with a claim: lower bound / claim and fitted / claim (with its
    interval) on one axis; the 1.0 line is the claim."""
    try:
        from ..bench.common import n_label, pyplot, save_figure

        plt = pyplot()
    except ImportError:  # matplotlib is the bench extra's; the audit's verdict does not need it
        print(f"{path.name} not written: matplotlib is not installed (pip install 'vflsec[bench]')")
        return
    claimed = [r for r in rows if r["claimed_epsilon"]]
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(claimed), 1) + 1.8))
    ys = np.arange(len(claimed))
    lower = [r["lower_bound_over_claim"] for r in claimed]
    fitted = [r["fitted_over_claim"] for r in claimed]
    lo = [max(0.0, f - r["fitted_epsilon_interval"][0] / r["claimed_epsilon"]) for f, r in zip(fitted, claimed)]
    hi = [max(0.0, r["fitted_epsilon_interval"][1] / r["claimed_epsilon"] - f) for f, r in zip(fitted, claimed)]
    runs = sorted({r["runs_per_world"] for r in claimed})
    n_text = n_label(runs[0] if len(runs) == 1 else f"{runs[0]:,}-{runs[-1]:,}", "runs per world")
    ax.barh(ys, lower, height=0.4, color="tab:blue", label=f"empirical lower bound / claim ({n_text})")
    ax.errorbar(fitted, ys, xerr=[lo, hi], fmt="o", color="tab:orange",
                label="fitted epsilon / claim, 95% interval")
    ax.axvline(1.0, color="black", lw=1, label="the claim")
    ax.set_yticks(ys, [r["case"] for r in claimed], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("epsilon measured / epsilon claimed (> 1: the claim does not hold)")
    ax.set_title("vflsec audit: every DP mechanism against its claimed epsilon")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)  # below: no bar hidden
    fig.tight_layout()
    save_figure(fig, path)


def add_arguments(parser: Any) -> None:
    from ..dp.mechanisms import MECHANISMS

    parser.add_argument("--quick", action="store_true",
                        help="fewer runs per case (2e5 for the lattice release; about 2-3 minutes on 2 cores)")
    parser.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS), metavar="NAME",
                        help=f"audit only this mechanism (repeatable; one of {', '.join(sorted(MECHANISMS))})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the audit's noise streams and data")
    parser.add_argument("--runs", type=int, default=None, help="runs per world for every case (overrides the mode)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: bench-out/audit)")
    parser.add_argument("--rerender", type=Path, default=None, metavar="DIR",
                        help="run nothing: write DIR's audit.md and audit.png again from its audit.json")


def main(args: Any) -> int:
    """Entry point of ``vflsec audit`` (arguments from :func:`add_arguments`)."""
    from ..errors import CommandError

    if args.seed < 0:
        raise CommandError(f"--seed must be >= 0, got {args.seed}", "pass a non-negative integer")
    if args.runs is not None and args.runs < 8:
        raise CommandError(f"--runs must be >= 8, got {args.runs}", "pass more runs per world")
    try:
        run(quick=args.quick, mechanisms=args.mechanism, seed=args.seed, out=args.out, runs=args.runs,
            rerender=args.rerender)
    except AuditFailed as exc:
        import sys

        print(f"vflsec audit: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
