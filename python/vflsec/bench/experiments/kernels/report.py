"""The report of ``vflsec bench kernels``: ``kernels.md`` and ``kernels.png`` from a CPU
run's results (``kernels.json``), ``kernels-cuda.md`` and ``kernels-cuda.png`` from a
``--device cuda`` run's (``kernels-cuda.json``; its ``"machine"`` names the GPU).

Everything here reads the results only (rows, recorded configuration, envelope),
never measures: ``--rerender`` writes the same report again. The secure release's
targets are judged through :mod:`vflsec.bench.claims` (:mod:`.analysis`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...claims import verdict_table
from ...common import markdown_table, n_label, pyplot, save_figure
from ...envelope import load_averages
from .analysis import SECURE_RELEASE, release_key, release_verdicts, summarize

__all__ = ["ACCURACY_FACTOR", "conclusion", "plot_speedups", "render", "render_cpu", "render_cuda", "report_tables"]

_EXTRA_COLUMNS = ("max_rel_error", "max_abs_diagonal", "extra_peak_mib", "unit", "wall_s", "values_per_s", "vs_numpy",
                  "samples")


def _release_text(rows: List[Dict[str, Any]], epsilon: float, delta: float) -> List[str]:
    """The release section's preamble and its targets (claims) as measured."""
    release = [r for r in rows if r["kernel"] == "gaussian_release"]
    if not release:
        return []
    sigma, g = release[0]["sigma"], release[0]["lattice_spacing"]
    parts = [
        f"x + N(0, sigma^2) on float64 values, sigma = {sigma:.6g} (epsilon = {epsilon:g}, delta = "
        f"{delta:g}, sensitivity 1; lattice spacing g = 2^{round(math.log2(g))}, integer scale s = sigma / g "
        f"= {sigma / g:.6g}). `{SECURE_RELEASE}` is the DP release; numpy, torch and `vflsec float x + noise` add "
        "float noise in floating point, which is NOT a DP release (it leaks x through the float grid: "
        "Mironov 2012; Jin et al. 2022) and is timed as the speed reference. 1-thread rows: median CPU time "
        "(time.process_time); `vs_numpy` = numpy's time / the row's (> 1: faster than numpy). Per-value rows: "
        "CPU seconds per released value or exact sample, 1 thread; vflsec's C++ and pure-Python exact discrete "
        "Gaussians and OpenDP's integer mechanism draw at scale s (the release's integer noise), OpenDP's float "
        "mechanism at sigma, diffprivlib's discrete Gaussian at scale sigma (its scale search fails at s and its "
        "time grows with the scale). OpenDP and diffprivlib rows appear only where they import.\n",
    ]
    verdicts = release_verdicts(rows)
    if verdicts:
        parts += ["Done criteria, as measured in this run:\n", verdict_table(verdicts), ""]
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
    targets (the claims' verdicts)."""
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
    measured = [v for v in release_verdicts(rows) if v.holds is not None]
    if measured:
        parts.append("The secure DP release: " + "; ".join(
            f"{release_key(v.claim).replace('_', ' ')} {v.measured:.3g}x (target {v.claim.holds_if()}: {v.word})"
            for v in measured) + ".")
    return "## Conclusion\n\n" + " ".join(parts) + "\n"


ACCURACY_FACTOR = 10.0
"""An alternative counts as "as accurate" as vflsec when its ``max_rel_error`` is
within this factor of vflsec's (or 1e-12, for exact kernels). A definition the
conclusion uses to name the fastest alternative as accurate, not a claim."""


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
    return "/".join(f"{float(v):.2f}" for v in load) if load else "n/a"


def _summary(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The stored speed-ups, or computed from the rows (a partial run stores none)."""
    summary = result.get("summary")
    return summary if summary is not None else summarize(result.get("results", []))


def render(result: Dict[str, Any], out: Path) -> List[str]:
    """The report of ``result``: :func:`render_cuda` for a ``--device cuda`` run (its
    machine has a ``"gpu"``), else :func:`render_cpu`; returns the names written."""
    if "gpu" in (result.get("machine") or {}):
        return render_cuda(result, out)
    return render_cpu(result, out)


def render_cpu(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``kernels.md`` and ``kernels.png`` of a CPU run's ``result`` (the
    content of its ``kernels.json``) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config, machine = result["config"], result["machine"]
    rows, summary = result.get("results", []), _summary(result)
    report = report_tables(rows, summary, config.get("release_epsilon", 1.0), config.get("release_delta", 1e-5))
    before, after = load_averages(result)
    (out / "kernels.md").write_text(
        f"# vflsec kernel benchmark\n\nMachine: {machine['cpu']}, {machine['logical_cores']} "
        f"logical cores, {config['threads']} threads for every multi-threaded library (1-thread comparisons of the "
        f"DP release in CPU time). Seed {config['seed']} (the data; DP noise from the OS CSPRNG, as deployed). Load "
        f"average (1/5/15 min) {_load_text(before)} before, {_load_text(after)} after.\n\n{report}\n\n"
        f"{conclusion(rows, summary)}")
    plot_speedups(summary, out / "kernels.png", config.get("repeats"))
    return ["kernels.md", "kernels.png"]


def render_cuda(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``kernels-cuda.md`` and ``kernels-cuda.png`` of a ``--device cuda`` run's ``result``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows, summary = result.get("results", []), _summary(result)
    text = report_tables(rows, summary)
    before, after = load_averages(result)
    if before is not None or after is not None:
        load = f"Host load average (1/5/15 min) {_load_text(before)} before, {_load_text(after)} after."
    else:
        load = "Host load average: not recorded by this run."
    (out / "kernels-cuda.md").write_text(f"# vflsec CUDA kernel benchmark\n\nGPU: {result['machine']['gpu']}; every "
                                         f"timing ends with torch.cuda.synchronize(). {load}\n\n{text}\n\n"
                                         f"{conclusion(rows, summary)}")
    plot_speedups(summary, out / "kernels-cuda.png", (result.get("config") or {}).get("repeats"))
    return ["kernels-cuda.md", "kernels-cuda.png"]
