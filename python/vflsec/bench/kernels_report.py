"""Renderer of ``vflsec bench kernels``: ``kernels.md`` and ``kernels.png`` (and the
``kernels-cuda.*`` pair) from the rows of a results file, plus the two analyses
the runner stores beside the rows (per-case speed-ups, the release's criteria).

Everything here reads rows and the recorded configuration only, so the report
of any ``kernels.json`` can be written again with :func:`render_file`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import markdown_table, n_label, pyplot, save_figure

__all__ = ["NUMPY_RELEASE", "PURE_PYTHON_SAMPLER", "SECURE_RELEASE", "release_criteria", "render", "render_cuda",
           "render_file", "report_tables", "summarize"]

# Method names the release's criteria and summary look for.
NUMPY_RELEASE = "numpy default_rng.standard_normal * sigma + x"
SECURE_RELEASE = "vflsec add_gaussian_noise (secure lattice release)"
PURE_PYTHON_SAMPLER = "pure-Python exact discrete Gaussian (vflsec, CKS 2020)"
_NUMPY, _SECURE, _PURE_PYTHON = NUMPY_RELEASE, SECURE_RELEASE, PURE_PYTHON_SAMPLER


def release_criteria(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The two done-criteria of the secure release, from the rows of one run."""
    one = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("threads") == 1
           and r.get("unit") == "CPU s"}
    per = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("unit") == "CPU s/value"}
    out: Dict[str, Any] = {}
    if _SECURE in one and _NUMPY in one:
        ratio = one[_NUMPY]["seconds"] / one[_SECURE]["seconds"]
        out["vs_numpy_1_thread"] = {"ratio": ratio, "target": 1.0, "met": ratio >= 1.0}
    if _SECURE in per and _PURE_PYTHON in per:
        ratio = per[_PURE_PYTHON]["seconds"] / per[_SECURE]["seconds"]
        out["vs_pure_python_discrete"] = {"ratio": ratio, "target": 1000.0, "met": ratio >= 1000.0}
        multi = [r for r in rows if r["kernel"] == "gaussian_release" and r["method"] == _SECURE
                 and r.get("threads", 1) > 1]
        if multi:  # the release's wall time per value with its threads, against the 1-thread sampler
            per_value = multi[0]["seconds"] / multi[0]["samples"]
            out["vs_pure_python_discrete_threads"] = {"ratio": per[_PURE_PYTHON]["seconds"] / per_value,
                                                      "threads": multi[0]["threads"]}
    return out



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


_EXTRA_COLUMNS = ("max_rel_error", "max_abs_diagonal", "extra_peak_mib", "unit", "wall_s", "values_per_s", "vs_numpy",
                  "samples")


def _release_text(rows: List[Dict[str, Any]], epsilon: float, delta: float) -> List[str]:
    """The release section's preamble and its done-criteria as measured."""
    release = [r for r in rows if r["kernel"] == "gaussian_release"]
    if not release:
        return []
    sigma, g = release[0]["sigma"], release[0]["lattice_spacing"]
    parts = [
        f"x + N(0, sigma^2) on float64 values, sigma = {sigma:.6g} (epsilon = {epsilon:g}, delta = "
        f"{delta:g}, sensitivity 1; lattice spacing g = 2^{round(math.log2(g))}, integer scale s = sigma / g "
        f"= {sigma / g:.6g}). `{_SECURE}` is the DP release; numpy, torch and `vflsec float x + noise` add "
        "float noise in floating point, which is NOT a DP release (it leaks x through the float grid: "
        "Mironov 2012; Jin et al. 2022) and is timed as the speed reference. 1-thread rows: median CPU time "
        "(time.process_time); `vs_numpy` = numpy's time / the row's (> 1: faster than numpy). Per-value rows: "
        "CPU seconds per released value or exact sample, 1 thread; vflsec's C++ and pure-Python exact discrete "
        "Gaussians and OpenDP's integer mechanism draw at scale s (the release's integer noise), OpenDP's float "
        "mechanism at sigma, diffprivlib's discrete Gaussian at scale sigma (its scale search fails at s and its "
        "time grows with the scale). OpenDP and diffprivlib rows appear only where they import.\n",
    ]
    criteria = release_criteria(rows)
    lines = []
    c = criteria.get("vs_numpy_1_thread")
    if c:
        lines.append(f"- secure release vs numpy standard_normal + add, 1 thread (CPU time): **{c['ratio']:.3g}x** "
                     f"(target >= {c['target']:g}x: {'met' if c['met'] else 'NOT met'})")
    c = criteria.get("vs_pure_python_discrete")
    if c:
        lines.append(f"- secure release vs the pure-Python exact discrete sampler, per value, 1 thread each (CPU "
                     f"time): **{c['ratio']:.4g}x** (target >= {c['target']:g}x: {'met' if c['met'] else 'NOT met'})")
    c = criteria.get("vs_pure_python_discrete_threads")
    if c:
        lines.append(f"- (the same with the release on {c['threads']} threads, its wall time per value: "
                     f"{c['ratio']:.4g}x)")
    if lines:
        parts += ["Done criteria, as measured in this run:\n"] + lines + [""]
    return parts


def report_tables(rows: List[Dict[str, Any]], summary: List[Dict[str, Any]], release_epsilon: float = 1.0,
                  release_delta: float = 1e-5) -> str:
    """Markdown tables of every kernel's rows and vflsec's speed-ups."""
    parts = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        kr = [r for r in rows if r["kernel"] == kernel]
        extra_keys = [k for k in _EXTRA_COLUMNS if any(k in r for r in kr)]
        parts.append(f"### {kernel}\n")
        if kernel == "gaussian_release":
            parts += _release_text(rows, release_epsilon, release_delta)
        headers = ["case", "method", "median" if "unit" in extra_keys else "median s"] + extra_keys
        parts.append(markdown_table(headers, [[r["case"], r["method"], r["seconds"]] + [r.get(k) for k in extra_keys]
                                              for r in kr]))
        parts.append("")
    parts.append("### speed-up of vflsec (time of alternative / time of vflsec; > 1 means vflsec is faster)\n")
    parts.append(markdown_table(
        ["kernel", "case", "vflsec s", "fastest alternative", "its s", "speed-up"],
        [[s["kernel"], s["case"], s["vflsec_seconds"], s["fastest_alternative"], s["alternative_seconds"],
          s["speedup_vs_fastest"]] for s in summary]))
    return "\n".join(parts)


def conclusion(rows: List[Dict[str, Any]], summary: List[Dict[str, Any]]) -> str:
    """What the run shows, in plain words: per kernel the range of vflsec's
    speed-up over the fastest alternative, where it is slower, and the release's
    two targets."""
    parts = []
    for kernel in dict.fromkeys(s["kernel"] for s in summary):
        ks = [s for s in summary if s["kernel"] == kernel]
        speedups = [s["speedup_vs_fastest"] for s in ks]
        slower = [s for s in ks if s["speedup_vs_fastest"] < 1.0]
        span = (f"{speedups[0]:.3g}x" if len(ks) == 1
                else f"{min(speedups):.3g}x-{max(speedups):.3g}x over {len(ks)} cases")
        text = (f"{kernel}: {span} as fast as the fastest alternative "
                f"({', '.join(sorted({s['fastest_alternative'] for s in ks}))})")
        if slower:
            text += (f"; slower in {len(slower)} ({', '.join(s['case'] for s in slower)})")
        text += _as_accurate_text(rows, ks)
        parts.append(text + ".")
    criteria = release_criteria(rows)
    met = [(name, c) for name, c in criteria.items() if "met" in c]
    if met:
        parts.append("The secure DP release: " + "; ".join(
            f"{name.replace('_', ' ')} {c['ratio']:.3g}x (target {c['target']:g}x: {'met' if c['met'] else 'NOT met'})"
            for name, c in met) + ".")
    return "## Conclusion\n\n" + " ".join(parts) + "\n"


ACCURACY_FACTOR = 10.0
"""An alternative counts as "as accurate" as vflsec when its ``max_rel_error`` is
within this factor of vflsec's (or 1e-12, for exact kernels)."""


def _span(values: List[float], fmt: str = ".2g") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}-{hi:{fmt}}"


def _as_accurate_text(rows: List[Dict[str, Any]], ks: List[Dict[str, Any]]) -> str:
    """Where the fastest alternative is much less accurate than vflsec (torch.cdist's
    matrix-product path, say): its error beside vflsec's, and vflsec's speed-up
    over the fastest alternative that is as accurate, so the conclusion does not
    trade exactness for time unsaid."""
    fast_errs: List[float] = []
    our_errs: List[float] = []
    fast_names, accurate_names = set(), set()
    speedups: List[float] = []
    for s in ks:
        by_method = {r["method"]: r for r in rows if r["kernel"] == s["kernel"] and r["case"] == s["case"]}
        ours_err = by_method[s["vflsec_method"]].get("max_rel_error")
        fastest_err = by_method[s["fastest_alternative"]].get("max_rel_error")
        if ours_err is None or fastest_err is None:
            continue
        limit = ACCURACY_FACTOR * max(ours_err, 1e-12)
        if fastest_err <= limit:
            continue
        fast_errs.append(fastest_err)
        our_errs.append(ours_err)
        fast_names.add(s["fastest_alternative"])
        accurate = [r for m, r in by_method.items() if not m.startswith("vflsec")
                    and r.get("max_rel_error") is not None and r["max_rel_error"] <= limit]
        if accurate:
            best = min(accurate, key=lambda r: r["seconds"])
            accurate_names.add(best["method"])
            speedups.append(best["seconds"] / s["vflsec_seconds"])
    if not fast_errs:
        return ""
    text = (f"; in {len(fast_errs)} of them {', '.join(sorted(fast_names))} has a max relative error of "
            f"{_span(fast_errs)} against vflsec's {_span(our_errs)}")
    if speedups:
        text += (f", and vflsec is {_span(speedups, '.3g')}x as fast as the fastest alternative as accurate "
                 f"({', '.join(sorted(accurate_names))})")
    return text


def plot_speedups(summary: List[Dict[str, Any]], path: Path, repeats: Optional[int] = None) -> None:
    """One bar per kernel case and alternative: the alternative's time over
    vflsec's (log scale; green where vflsec is faster), the 1x line, and ``repeats``
    (the timed runs behind each median) in the legend. The figure is saved with a
    tight bounding box, so the long case labels are not cut."""
    from matplotlib.patches import Patch

    plt = pyplot()
    labels, values, colors = [], [], []
    for s in summary:
        for method, ratio in s["speedup_vs_each"].items():
            labels.append(f"{s['kernel']} | {s['case']}\nvs {method}")
            values.append(ratio)
            colors.append("tab:green" if ratio >= 1 else "tab:red")
    fig, ax = plt.subplots(figsize=(12, 0.42 * len(labels) + 1.8))
    ax.barh(range(len(labels)), values, color=colors)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    line = ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("speed-up of vflsec (alternative time / vflsec time, log scale)")
    ax.invert_yaxis()
    ax.set_title("vflsec kernels vs alternatives")
    timed = f"medians of {n_label(repeats, 'timed runs')} each" if repeats else "medians of timed runs"
    ax.legend([Patch(color="tab:green"), Patch(color="tab:red"), line],
              [f"vflsec faster ({timed})", f"vflsec slower ({timed})", "1x: the same time"], fontsize=8,
              loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)


def _load_text(load: Any) -> str:
    return "/".join(f"{v:.2f}" for v in load)


def render(result: Dict[str, Any], out: Path) -> str:
    """Write ``kernels.md`` and ``kernels.png`` of a CPU run's ``result`` (the
    content of its ``kernels.json``) into ``out``; returns the tables."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config, machine = result["config"], result["machine"]
    report = report_tables(result["results"], result["summary"], config.get("release_epsilon", 1.0),
                           config.get("release_delta", 1e-5))
    (out / "kernels.md").write_text(
        f"# vflsec kernel benchmark\n\nMachine: {machine['cpu']}, {machine['logical_cores']} "
        f"logical cores, {config['threads']} threads for every multi-threaded library (1-thread comparisons of the "
        f"DP release in CPU time). Seed {config['seed']} (the data; DP noise from the OS CSPRNG, as deployed). Load "
        f"average (1/5/15 min) {_load_text(result['load_average_before'])} before, "
        f"{_load_text(result['load_average_after'])} after.\n\n{report}\n\n"
        f"{conclusion(result['results'], result['summary'])}")
    plot_speedups(result["summary"], out / "kernels.png", config.get("repeats"))
    return report


def render_cuda(result: Dict[str, Any], out: Path) -> str:
    """Write ``kernels-cuda.md`` and ``kernels-cuda.png`` of a ``--device cuda`` run's ``result``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = report_tables(result["results"], result["summary"])
    if "load_average_before" in result:
        load = (f"Host load average (1/5/15 min) {_load_text(result['load_average_before'])} before, "
                f"{_load_text(result['load_average_after'])} after.")
    else:
        load = "Host load average: not recorded by this run."
    (out / "kernels-cuda.md").write_text(f"# vflsec CUDA kernel benchmark\n\nGPU: {result['machine']['gpu']}; every "
                                         f"timing ends with torch.cuda.synchronize(). {load}\n\n{text}\n\n"
                                         f"{conclusion(result['results'], result['summary'])}")
    plot_speedups(result["summary"], out / "kernels-cuda.png", result.get("config", {}).get("repeats"))
    return text


def render_file(results_json: Path) -> str:
    """Write the report again beside an existing ``kernels.json`` or ``kernels-cuda.json``."""
    path = Path(results_json)
    result = json.loads(path.read_text())
    return render_cuda(result, path.parent) if path.name == "kernels-cuda.json" else render(result, path.parent)
