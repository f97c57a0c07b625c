"""``vflsec audit [--quick] [--self-test] [--mechanism NAME] [--seed N] [--out DIR] [--rerender DIR]``:
run every audit case (:mod:`.cases`), write ``audit.json``, ``audit.md`` and
``audit.png``, and exit 1 if any empirical lower bound exceeds the epsilon the
product claims, a construction exceeds the stated sensitivity, or a release
is less noisy than its mechanism states (the noise check below).

Noise check. Where a case's release is one Gaussian of a stated sigma and its
pair's noiseless outputs are fixed, the scores of an honest release separate
by exactly ``mu = distance / sigma`` (``Scores.stated_mu``); a fitted mu whose
one-sided 99.95% lower bound (``NOISE_CHECK_Z``) lies above that by more than
``NOISE_TOLERANCE`` means less noise than stated, however weak the pair is
against the claim.

Self-test (``--self-test``). Every case runs a second time against a copy of
the product with half its noise (:func:`.faults.halved_noise`); for each
mechanism with a claim, some case must fail that copy (lower bound above the
claim, or the noise check) or a case must state why it cannot
(``AuditCase.limit``). A mechanism that passes fails the audit: an auditor
that would pass a mechanism twice as leaky proves nothing for it.

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
#: how far above the stated mu (relative) a fitted mu's one-sided lower bound must lie to fail the noise check
#: (the lattice rounds sigma up by at most 0.39%: an honest release never separates more than stated)
NOISE_TOLERANCE = 0.1
#: the noise check's one-sided normal quantile (99.95%): with ~20 checked cases an honest audit
#: fails it about once in a hundred seeds, a copy with half the noise (twice the mu) at ordinary runs always
NOISE_CHECK_Z = 3.29


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
        mu_interval: List[float] = []
        fitted = (discrete.epsilon, discrete.epsilon_low, discrete.epsilon_high)
    else:
        fit = fit_gaussian_dp(scores.world0, scores.world1, delta)
        fitted_mu = fit.mu
        mu_interval = [fit.mu_low, fit.mu_high]
        fitted = (fit.epsilon, fit.epsilon_low, fit.epsilon_high)
    ratio = bound.epsilon / claim.epsilon if claim.epsilon else None
    noise = None
    if scores.stated_mu is not None and fitted_mu is not None:
        se = (mu_interval[1] - fitted_mu) / 1.96  # the fit's standard error (its interval is +-1.96 se)
        noise = {"stated_mu": scores.stated_mu, "fitted_mu": fitted_mu, "fitted_mu_interval": mu_interval,
                 "fitted_mu_lower": fitted_mu - NOISE_CHECK_Z * se,
                 "fitted_over_stated": fitted_mu / scores.stated_mu if scores.stated_mu > 0 else None}
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
        "realized_sensitivity_ratio": scores.realized_sensitivity_ratio, "noise_check": noise,
        "limit": case.limit, "notes": scores.notes, "seconds": time.perf_counter() - t0,
    }


def violations(rows: List[Dict[str, Any]]) -> List[str]:
    """What makes an audit fail: a lower bound above a finite claim, a
    construction beyond the stated sensitivity, or scores that separate more
    than the stated noise lets them (the noise check)."""
    out = []
    for r in rows:
        claim = r["claimed_epsilon"]
        if claim is not None and r["lower_bound"] > claim:
            out.append(f"{r['case']}: empirical epsilon >= {r['lower_bound']:.3g} exceeds the claimed {claim:.3g}")
        ratio = r.get("realized_sensitivity_ratio")
        if ratio is not None and ratio > 1.0 + SENSITIVITY_TOLERANCE:
            out.append(f"{r['case']}: the pair's clean outputs are {ratio:.3g}x the stated sensitivity apart")
        noise = r.get("noise_check")
        if noise is not None and noise["fitted_mu_lower"] > noise["stated_mu"] * (1.0 + NOISE_TOLERANCE):
            out.append(f"{r['case']}: the scores separate by mu = {noise['fitted_mu']:.3g} (99.95% from "
                       f"{noise['fitted_mu_lower']:.3g}), the stated noise gives this pair "
                       f"{noise['stated_mu']:.3g}: "
                       "the release is less noisy than its mechanism states")
    return out


def self_test_misses(rows: List[Dict[str, Any]]) -> List[str]:
    """Mechanisms with a claim whose halved-noise copy passed every one of their
    cases (the audit of the mechanism passes) although no case states a limit."""
    tested = [r for r in rows if r["claimed_epsilon"] is not None and r.get("halved_noise") is not None]
    out = []
    for mechanism in dict.fromkeys(r["mechanism"] for r in tested):
        own = [r for r in tested if r["mechanism"] == mechanism]
        if not any(r["halved_noise"]["caught"] or r.get("limit") for r in own):
            out.append(f"{mechanism}: a copy with half the noise passes every case of it "
                       f"({', '.join(r['case'] for r in own)})")
    return out


def _halved_noise_row(case: AuditCase, runs: int, seed: int) -> Dict[str, Any]:
    from .faults import halved_noise

    with halved_noise():
        row = audit_case(case, runs=runs, seed=seed)
    found = violations([row])
    noise = row["noise_check"]
    return {"lower_bound": row["lower_bound"], "lower_bound_over_claim": row["lower_bound_over_claim"],
            "fitted_over_claim": row["fitted_over_claim"],
            "fitted_over_stated_mu": None if noise is None else noise["fitted_over_stated"],
            "caught": bool(found), "violations": found, "seconds": row["seconds"]}


def run(quick: bool = False, mechanisms: Optional[List[str]] = None, seed: int = 0, out: Optional[Path] = None,
        runs: Optional[int] = None, rerender: Optional[Path] = None, self_test: bool = False) -> Dict[str, Any]:
    """Run the selected cases (``self_test``: each also against the halved-noise
    copy); write and render the results; AuditFailed on a violation or a miss."""
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
        row = audit_case(case, runs=n, seed=seed)
        if self_test and row["claimed_epsilon"] is not None:
            row["halved_noise"] = _halved_noise_row(case, n, seed)
        rows.append(row)
    result.update({
        "confidence": DEFAULT_CONFIDENCE, "noise_tolerance": NOISE_TOLERANCE, "self_test": self_test,
        "noise": f"seeded ChaCha20 streams derived from --seed {seed} (an experiment setting; the product's "
                 "default is OS entropy)",
        "cases": rows, "violations": violations(rows) + self_test_misses(rows),
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
        checked = sum(1 for r in rows if r.get("noise_check"))
        parts.append(f"No mechanism's empirical lower bound exceeds the epsilon the product claims for it "
                     f"({len(claimed)} cases with a claim)"
                     + (f", and no release of the {checked} cases with a stated per-pair noise separates more than "
                        "that noise allows." if checked else "."))
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
    tested = [r for r in claimed if r.get("halved_noise") is not None]
    if tested:
        caught = [r for r in tested if r["halved_noise"]["caught"]]
        by_mechanism: Dict[str, bool] = {}
        for r in tested:
            by_mechanism[r["mechanism"]] = by_mechanism.get(r["mechanism"], False) or r["halved_noise"]["caught"]
        missed = [m for m, hit in by_mechanism.items() if not hit]
        parts.append(f"Against a copy of the product with half its noise, {len(caught)} of {len(tested)} cases fail "
                     f"(the audit catches it for {len(by_mechanism) - len(missed)} of {len(by_mechanism)} mechanisms"
                     + (f"; not for {', '.join(missed)}: see the limits above)." if missed else ")."))
    unclaimed = [r for r in rows if r["claimed_epsilon"] is None]
    if unclaimed:
        parts.append("Without a claim (no guarantee): " + ", ".join(
            f"{r['case']} reaches epsilon >= {r['lower_bound']:.3g}" for r in unclaimed) + ".")
    return "## Conclusion\n\n" + " ".join(parts) + "\n"


def _caught_text(half: Dict[str, Any], row: Dict[str, Any]) -> str:
    if not half["caught"]:
        return "**no** (limit stated)" if row.get("limit") else "**no**"
    how = []
    if any("exceeds the claimed" in v for v in half["violations"]):
        how.append("lower bound")
    if any("less noisy" in v for v in half["violations"]):
        how.append("noise check")
    return "yes (" + ", ".join(how or ["sensitivity"]) + ")"


def _method_notes(result: Dict[str, Any], noise_column: bool) -> str:
    text = ""
    if noise_column:
        text += (" \"fitted mu / stated mu\": where the release is one Gaussian of a stated sigma and the pair's "
                 "noiseless outputs are fixed, the fitted Gaussian-DP mu over the mu that noise gives this very pair "
                 f"(distance / sigma; near 1 when honest); the audit fails where the fitted mu's one-sided 99.95% "
                 f"lower bound lies more than {result.get('noise_tolerance', NOISE_TOLERANCE):.0%} above it "
                 "(the noise check).")
    if result.get("self_test"):
        text += (" Self-test: every case with a claim ran again against a copy of the product whose releases draw half "
                 "their noise (vflsec.audit.faults.halved_noise; randomized response keeps labels as often as twice "
                 "its epsilon allows); \"caught\" says which rule failed that copy.")
    return text


def _limits(rows: List[Dict[str, Any]]) -> str:
    limited = [r for r in rows if r.get("limit")]
    if not limited:
        return ""
    return ("### Where a case cannot catch half the noise\n\n"
            + "\n".join(f"- **{r['case']}** (lower bound {_fmt(r['lower_bound_over_claim'])} of the claim): "
                         f"{r['limit']}" for r in limited) + "\n\n")


def render(result: Dict[str, Any], out: Path) -> str:
    """Write ``audit.md`` and ``audit.png`` into ``out``; returns the markdown."""
    from ..bench.common import markdown_table

    rows = result["cases"]
    self_test = bool(result.get("self_test"))
    header = ["case", "mechanism", "claimed epsilon", "runs/world", "lower bound", "lower/claim",
              "fitted epsilon [95%]", "fitted/claim", "pair / stated sensitivity"]
    # Columns said only where the run has them: earlier results re-render unchanged.
    noise_column = any(r.get("noise_check") for r in rows)
    if noise_column:
        header.append("fitted mu / stated mu")
    if self_test:
        header += ["half noise: lower/claim", "half noise caught"]

    def line(r: Dict[str, Any]) -> List[str]:
        cells = [r["case"], r["mechanism"], _claim_text(r), f"{r['runs_per_world']:,}", _fmt(r["lower_bound"]),
                 _fmt(r["lower_bound_over_claim"]),
                 f"{_fmt(r['fitted_epsilon'])} [{_fmt(r['fitted_epsilon_interval'][0])}, "
                 f"{_fmt(r['fitted_epsilon_interval'][1])}]" + (" (discrete)" if r.get("fit") == "discrete" else ""),
                 _fmt(r["fitted_over_claim"]), _fmt(r["realized_sensitivity_ratio"])]
        if noise_column:
            cells.append(_fmt((r.get("noise_check") or {}).get("fitted_over_stated")))
        if self_test:
            half = r.get("halved_noise")
            cells += [_fmt(None if half is None else half["lower_bound_over_claim"]),
                      "n/a (no claim)" if half is None else _caught_text(half, r)]
        return cells
    table = markdown_table(header, [line(r) for r in rows])
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
            f"as Gaussian (Gaussian DP's mu{discrete}); \"pair / stated sensitivity\" is the distance between "
            "the pair's noiseless outputs over the sensitivity "
            f"the mechanism states (n/a where the outputs are not fixed).{_method_notes(result, noise_column)}"
            f"\n\n{table}\n\n### The pairs\n\n{pairs}\n\n{_limits(rows)}"
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
    halved = [(y, r["halved_noise"]["lower_bound_over_claim"], r["halved_noise"]["caught"])
              for y, r in zip(ys, claimed) if r.get("halved_noise")]
    if halved:  # the self-test: the same case against the copy with half the noise (must pass the 1.0 line)
        ax.scatter([h[1] for h in halved], [h[0] for h in halved], marker="x", s=40,
                   c=["tab:red" if h[2] else "tab:gray" for h in halved],
                   label="copy with half the noise: lower bound / claim (red: the audit fails it)")
    ax.axvline(1.0, color="black", lw=1, label="the claim")
    ax.set_yticks(ys, [r["case"] for r in claimed], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("epsilon measured / epsilon claimed (> 1: the claim does not hold)")
    ax.set_title("vflsec audit: every DP mechanism against its claimed epsilon")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)  # below: no bar hidden
    fig.tight_layout()
    save_figure(fig, path)


def add_arguments(parser: Any) -> None:
    from ..dp.mechanisms import MECHANISMS

    parser.add_argument("--quick", action="store_true",
                        help="fewer runs per case (2e5 for the lattice release; about 2-3 minutes on 2 cores)")
    parser.add_argument("--self-test", action="store_true",
                        help="also run every case against a copy with half its noise; fail where a case with a "
                             "claim does not catch it (about twice the time)")
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
            rerender=args.rerender, self_test=args.self_test)
    except AuditFailed as exc:
        import sys

        print(f"vflsec audit: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
