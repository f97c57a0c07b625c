"""What the timed rows of ``vflsec bench kernels`` say, beyond the rows themselves:
vflsec's speed-up over each alternative per case (:func:`summarize`), and the
secure DP release's targets judged as claims (:func:`release_verdicts`).

Both read rows only, so the report of any results file computes them again.
The runner of a run stores them beside the rows too (``"summary"``,
``"release_criteria"``) for readers of the JSON.

The release's targets are data, ``[[claims]]`` in
``vflsec/bench/papers/vflsec_targets.toml`` whose quantity starts with
``kernels.release_``; :func:`release_ratios` measures those quantities.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ...claims import Claim, Verdict, judge, load_claims

__all__ = ["NUMPY_RELEASE", "PURE_PYTHON_SAMPLER", "SECURE_RELEASE", "TARGETS", "release_claims", "release_key",
           "release_criteria", "release_ratios", "release_verdicts", "summarize"]

# Method names the release's targets and the summary look for.
NUMPY_RELEASE = "numpy default_rng.standard_normal * sigma + x"
SECURE_RELEASE = "vflsec add_gaussian_noise (secure lattice release)"
PURE_PYTHON_SAMPLER = "pure-Python exact discrete Gaussian (vflsec, CKS 2020)"

TARGETS = "vflsec_targets"
"""The papers/ file of the targets vflsec set itself."""
_QUANTITY = "kernels.release_"
"""The quantities of :func:`release_ratios` are named ``kernels.release_<key>`` in the claims."""


def summarize(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per case: vflsec's time and its speed-up over each alternative (>1: vflsec faster)."""
    out = []
    cases: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        cases.setdefault((r["kernel"], r["case"]), []).append(r)
    for (kernel, case), rs in cases.items():
        # A case may name its subject ("primary"); otherwise every vflsec method is.
        ours = [r for r in rs if r.get("primary")] or [r for r in rs if r["method"].startswith("vflsec")]
        others = [r for r in rs if r not in ours]
        if not ours or not others:
            continue
        best_ours = min(ours, key=lambda r: r["seconds"])
        best_other = min(others, key=lambda r: r["seconds"])
        out.append({
            "kernel": kernel, "case": case,
            "vflsec_method": best_ours["method"], "vflsec_seconds": best_ours["seconds"],
            "fastest_alternative": best_other["method"], "alternative_seconds": best_other["seconds"],
            "speedup_vs_fastest": best_other["seconds"] / best_ours["seconds"],
            "speedup_vs_each": {r["method"]: r["seconds"] / best_ours["seconds"] for r in others},
        })
    return out


def release_ratios(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The secure release's speed against its two references, from the rows of one run:
    ``vs_numpy_1_thread`` (numpy's CPU time / the release's, 1 thread),
    ``vs_pure_python_discrete`` (the pure-Python exact sampler's CPU time per value / the
    release's, 1 thread each) and ``vs_pure_python_discrete_threads`` (the same with the
    release's wall time per value on its threads). Absent where the rows are missing."""
    one = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("threads") == 1
           and r.get("unit") == "CPU s"}
    per = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("unit") == "CPU s/value"}
    out: Dict[str, Dict[str, Any]] = {}
    if SECURE_RELEASE in one and NUMPY_RELEASE in one:
        out["vs_numpy_1_thread"] = {"ratio": one[NUMPY_RELEASE]["seconds"] / one[SECURE_RELEASE]["seconds"]}
    if SECURE_RELEASE in per and PURE_PYTHON_SAMPLER in per:
        out["vs_pure_python_discrete"] = {"ratio": per[PURE_PYTHON_SAMPLER]["seconds"] / per[SECURE_RELEASE]["seconds"]}
        multi = [r for r in rows if r["kernel"] == "gaussian_release" and r["method"] == SECURE_RELEASE
                 and r.get("threads", 1) > 1]
        if multi:  # the release's wall time per value with its threads, against the 1-thread sampler
            per_value = multi[0]["seconds"] / multi[0]["samples"]
            out["vs_pure_python_discrete_threads"] = {"ratio": per[PURE_PYTHON_SAMPLER]["seconds"] / per_value,
                                                      "threads": multi[0]["threads"]}
    return out


def release_claims() -> Tuple[Claim, ...]:
    """The release's targets: the claims of ``papers/vflsec_targets.toml`` on ``kernels.release_*``."""
    return tuple(c for c in load_claims(TARGETS) if c.quantity.startswith(_QUANTITY))


def release_key(claim: Claim) -> str:
    """The :func:`release_ratios` key a claim is judged on (``vs_numpy_1_thread``)."""
    return claim.quantity[len(_QUANTITY):]


def release_verdicts(rows: List[Dict[str, Any]]) -> List[Verdict]:
    """Every release target judged against the rows of one run (not measured where the rows are missing)."""
    ratios = release_ratios(rows)
    measured = {_QUANTITY + key: value["ratio"] for key, value in ratios.items()}
    notes = {}
    threads = ratios.get("vs_pure_python_discrete_threads")
    claims = release_claims()
    if threads:
        for claim in claims:
            if release_key(claim) == "vs_pure_python_discrete":
                notes[claim.id] = (f"{threads['ratio']:.4g}x with the release on {threads['threads']} threads, "
                                   f"its wall time per value")
    return judge(claims, measured, notes)


def release_criteria(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The ``"release_criteria"`` of a run's results: :func:`release_ratios`, each judged
    ratio with its claim's ``target`` and whether it was ``met``."""
    out = release_ratios(rows)
    for verdict in release_verdicts(rows):
        key = release_key(verdict.claim)
        if key in out and verdict.holds is not None:
            out[key].update(target=verdict.claim.threshold, met=verdict.holds)
    return out
