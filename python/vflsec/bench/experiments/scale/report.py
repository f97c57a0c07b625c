"""The report of ``vflsec bench scale``: ``report.md``, ``scale_time.png`` and ``scale_memory.png``
from the results alone (``--rerender`` rewrites them without measuring)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ...common import markdown_table, pyplot, save_figure
from ...envelope import load_text
from .model import fit_cost_model, relative_error, summarize_exponents

__all__ = ["conclusion", "render", "report_markdown"]

GIB = 1024 ** 3


def _ok(cells: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [c for c in cells if "error" not in c]


def _estimator(payload: Dict[str, Any], *, wide: bool) -> List[Dict[str, Any]]:
    """The estimator cells that finished: at the grid's width (``wide=False``; a cell recorded
    without ``widths`` is one) or at the wide reference shape (``wide=True``)."""
    grid_widths = payload.get("features_per_party")
    return [c for c in _ok(payload.get("estimator", [])) if (c.get("widths", grid_widths) != grid_widths) == wide]


def _party(payload: Dict[str, Any], *, sharded: bool = False) -> List[Dict[str, Any]]:
    """The ``vflsec party`` cells with the rows in memory (``sharded=False``: what the growth, the fits table
    and the plots are of), or the ones whose parties streamed Parquet shards (``shard_rows``)."""
    return [c for c in payload.get("party", []) if bool(c.get("shard_rows")) == sharded]


def _ratio_over_data(cell: Dict[str, Any]) -> Optional[float]:
    data = cell.get("data_bytes")
    return cell["peak_rss_bytes"] / data if data else None


def _added_over_data(cell: Dict[str, Any]) -> Optional[float]:
    data = cell.get("data_bytes")
    return (cell["peak_rss_bytes"] - cell.get("base_rss_bytes", 0)) / data if data else None


def _peak_over(cell: Dict[str, Any], key: str) -> Optional[Dict[str, float]]:
    """The largest peak over ``key`` among the job's parties, and that party's peak in GiB
    (None for a cell recorded without ``key``)."""
    parties = [p for p in cell["parties"].values() if p.get(key)]
    if not parties:
        return None
    worst = max(parties, key=lambda p: p["peak_rss_bytes"] / p[key])
    return {"ratio": worst["peak_rss_bytes"] / worst[key], "peak_gib": worst["peak_rss_bytes"] / GIB,
            "data_gib": worst[key] / GIB}


def _party_peak(cell: Dict[str, Any]) -> Dict[str, float]:
    """The largest peak over its data (the party's table in Arrow form) among the job's parties."""
    peak = _peak_over(cell, "data_bytes")
    if peak is None:
        raise ValueError("a vflsec party cell without data_bytes")
    return peak


def party_marginal(cells: List[Dict[str, Any]]) -> Optional[float]:
    """The memory an extra row cost over the data it added, between a method's two largest
    cells (the worst party): what the peak tends to at large n, past the fixed cost of the
    interpreter and its libraries."""
    if len(cells) < 2:
        return None
    small, large = cells[-2], cells[-1]
    ratios = []
    for name, party in large["parties"].items():
        before = small["parties"].get(name)
        if before is None or party["data_bytes"] <= before["data_bytes"]:
            continue
        added = party["data_bytes"] - before["data_bytes"]
        ratios.append((party["peak_rss_bytes"] - before["peak_rss_bytes"]) / added)
    return max(ratios) if ratios else None


def ray_model(payload: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The cost model fitted on the Ray stage and its check on the 2-node run (None without it)."""
    runs = {(c["engine"], c.get("workers") or c.get("nodes")): c for c in _ok(payload.get("ray", []))}
    needed = [("local", 1), ("local", 2), ("ray", 1), ("ray", 2)]
    if not all(key in runs for key in needed) or "operation_overhead_s" not in runs[("ray", 1)]:
        return None  # (a 1-node cell recorded before the overhead was measured has none)
    n = runs[("local", 1)]["n"]
    ray_1 = runs[("ray", 1)]
    model = fit_cost_model(n, runs[("local", 1)]["wall_s"], runs[("local", 2)]["wall_s"], ray_1["operations"],
                           ray_1["operation_overhead_s"])
    predicted = model.predict(n, nodes=2, cores=1)
    measured = runs[("ray", 2)]["wall_s"]
    return {"model": model, "n": n, "predicted_2_nodes_s": predicted, "measured_2_nodes_s": measured,
            "error": relative_error(predicted, measured),
            "ray2_over_local2": measured / runs[("local", 2)]["wall_s"],
            "predict_1e7_s": model.predict(1e7, nodes=4, cores=16), "predict_1e8_s": model.predict(1e8, nodes=4,
                                                                                                 cores=16)}


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def fits_table(payload: Dict[str, Any]) -> List[List[Any]]:
    """"How big a job fits": per method and place, the largest n measured, its epoch time and peak
    memory over the data, and the time predicted for 10^7 and 10^8 rows (linear in n from the
    largest measured cell: every method's epoch touches each row once; on 4 x 16 cores through
    the cost model for Paillier)."""
    rows: List[List[Any]] = []
    est = _estimator(payload, wide=False)
    exponents = summarize_exponents(est)
    model = ray_model(payload)
    for method in sorted({c["method"] for c in est}):
        cells = sorted((c for c in est if c["method"] == method), key=lambda c: c["n"])
        top = cells[-1]
        per_row = top["wall_s"] / top["n"]
        if method == "paillier" and model is not None:
            p7, p8 = _duration(model["predict_1e7_s"]), _duration(model["predict_1e8_s"])
            how = "cost model, 4 x 16 cores"
        else:
            p7, p8 = _duration(per_row * 1e7), _duration(per_row * 1e8)
            how = "linear from the largest n, this machine"
        b = exponents.get(method)
        rows.append([f"estimator {method}", f"{top['n']:,}", _duration(top["wall_s"]),
                     f"{_ratio_over_data(top):.2f}x ({top['peak_rss_bytes'] / GIB:.2f} GiB)",
                     "n/a" if b is None else f"{b:.2f}", p7, p8, how])
    for method in sorted({c["method"] for c in _ok(_party(payload))}):
        cells = sorted((c for c in _ok(_party(payload)) if c["method"] == method), key=lambda c: c["n"])
        top = cells[-1]
        peak = _party_peak(top)
        rows.append([f"vflsec party {method}", f"{top['n']:,}", _duration(top["wall_s"]),
                     f"{peak['ratio']:.2f}x ({peak['peak_gib']:.2f} GiB)", "n/a",
                     _duration(top["wall_s"] / top["n"] * 1e7), _duration(top["wall_s"] / top["n"] * 1e8),
                     "linear from the largest n (PSI included), this machine"])
    return rows


def conclusion(payload: Dict[str, Any]) -> List[str]:
    """The answers to the issue's questions, from the rows."""
    lines = []
    est = _estimator(payload, wide=False)
    plain = sorted((c for c in est if c["method"] in ("plain", "hdp")), key=lambda c: c["n"])
    if plain:
        top = plain[-1]
        lines.append(f"The estimator's largest plain/HDP cell ({top['method']}, {top['n']:,} rows) peaked at "
                     f"{_ratio_over_data(top):.2f}x its data ({_added_over_data(top):.2f}x added over the "
                     "interpreter's own memory; the target is at most 1.5x at 3x10^6 rows).")
    for c in sorted(_estimator(payload, wide=True), key=lambda c: (c["n"], c["method"])):
        ratio = _ratio_over_data(c)
        assert ratio is not None  # every estimator cell records its data bytes
        lines.append(f"At the wide shape {c['widths']} (Adult's width), {c['n']:,} rows, {c['method']}: peak "
                     f"{ratio:.2f}x its data ({c['data_bytes'] / GIB:.2f} GiB; "
                     f"{'within' if ratio <= 1.5 else 'above'} the 1.5x target).")
    party = _ok(_party(payload))
    for method in sorted({c["method"] for c in party}):
        cells = sorted((c for c in party if c["method"] == method), key=lambda c: c["n"])
        top = cells[-1]
        peak = _party_peak(top)
        verdict = "within" if peak["ratio"] <= 2.0 else "above"
        marginal = party_marginal(cells)
        extra = "" if marginal is None else (f"; between the two largest n each extra row cost "
                                             f"{marginal:.2f}x its data (the rest is the interpreter and libraries)")
        lines.append(f"`vflsec party` ({method}) ran {top['n']:,} rows per party in {_duration(top['wall_s'])}; "
                     f"its largest party peaked at {peak['ratio']:.2f}x its data ({peak['peak_gib']:.2f} GiB), "
                     f"{verdict} the 2x target{extra}.")
    lines += _sharded_conclusion(payload)
    psi = {(c["variant"], c["n"]): c for c in _ok(payload.get("psi", []))}
    both = sorted(n for v, n in psi if v == "sequential" and ("bucketed", n) in psi)
    if both:
        n = both[-1]
        speed = psi[("sequential", n)]["wall_s"] / psi[("bucketed", n)]["wall_s"]
        lines.append(f"PSI of {n:,} IDs per party: {psi[('sequential', n)]['wall_s']:.1f} s sequential, "
                     f"{psi[('bucketed', n)]['wall_s']:.1f} s bucketed ({speed:.2f}x; the target is 2x). Both "
                     "parties share this machine's cores, and the work per ID is the same, so the number of cores "
                     "bounds the speed-up.")
    model = ray_model(payload)
    if model is not None:
        lines.append(f"A Paillier epoch on {model['n']:,} rows through Ray on 2 nodes took "
                     f"{model['ray2_over_local2']:.2f}x the local pool's time with 2 workers (target: within "
                     f"1.15x); the cost model predicted the 2-node run within {100 * model['error']:.0f}% "
                     f"(target 20%), and predicts {_duration(model['predict_1e7_s'])} for 10^7 rows and "
                     f"{_duration(model['predict_1e8_s'])} for 10^8 on 4 x 16 cores.")
    runs = {c["engine"]: c for c in _ok(payload.get("ray_party", []))}
    if "local" in runs and "ray" in runs:
        local, ray = runs["local"], runs["ray"]
        lines.append(f"A whole Paillier `vflsec party` job on {ray['n']:,} rows per party, the data parties' HE work "
                     f"on a 2-node Ray cluster: {ray['wall_s']:.1f} s against {local['wall_s']:.1f} s on their local "
                     f"pools ({ray['wall_s'] / local['wall_s']:.2f}x).")
    return lines or ["No cell finished."]


def _gib_by_party(cell: Dict[str, Any], key: str) -> Optional[str]:
    values = [f"{name} {party[key] / GIB:.2f}" for name, party in cell["parties"].items() if party.get(key)]
    return ", ".join(values) + " GiB" if len(values) == len(cell["parties"]) else None


def _sharded_conclusion(payload: Dict[str, Any]) -> List[str]:
    """The memory of a job whose parties streamed Parquet shards beside the same job with the rows in memory."""
    lines = []
    in_memory = {(c["method"], c["n"]): c for c in _ok(_party(payload))}
    for c in _ok(_party(payload, sharded=True)):
        text = (f"With Parquet shards of {c['shard_rows']:,} rows, `vflsec party` ({c['method']}) on {c['n']:,} rows "
                f"per party peaked at {_gib_by_party(c, 'peak_rss_bytes')}")
        after = _gib_by_party(c, "rss_after_training_bytes")
        if after is not None:
            text += f", and held {after} when training ended"
        other = in_memory.get((c["method"], c["n"]))
        if other is not None:
            text += f"; with the rows in memory: peak {_gib_by_party(other, 'peak_rss_bytes')}"
            other_after = _gib_by_party(other, "rss_after_training_bytes")
            if other_after is not None:
                text += f", {other_after} when training ended"
        lines.append(text + " (the peak comes before the shards: reading the file and PSI).")
    return lines


def report_markdown(payload: Dict[str, Any]) -> str:
    est = [[c["method"], "x".join(str(w) for w in c.get("widths", payload.get("features_per_party") or [])),
            f"{c['n']:,}", c.get("error") or f"{c['wall_s']:.2f}",
            "" if "error" in c else f"{c['cpu_s']:.2f}",
            "" if "error" in c else f"{c['peak_rss_bytes'] / GIB:.2f}",
            "" if "error" in c else f"{c['data_bytes'] / GIB:.3f}",
            "" if "error" in c else f"{_ratio_over_data(c):.2f}x",
            "" if "error" in c else f"{_added_over_data(c):.2f}x"] for c in payload.get("estimator", [])]
    party = []
    for c in payload.get("party", []):
        method = c["method"] + (f", shards of {c['shard_rows']:,} rows" if c.get("shard_rows") else "")
        if "error" in c:
            party.append([method, f"{c['n']:,}", c["error"], "", "", "", "", ""])
            continue
        t = c["parties"]["active"]["timings"]
        peak = _party_peak(c)
        features = _peak_over(c, "feature_bytes")
        shards = f", shards {t['shards_s']:.1f}" if "shards_s" in t else ""
        party.append([method, f"{c['n']:,}", f"{c['n_aligned']:,}", f"{c['wall_s']:.1f}",
                      f"PSI {t.get('psi_s', 0):.1f}{shards}, train {t.get('train_s', 0):.1f}",
                      f"{peak['peak_gib']:.2f} / {peak['data_gib']:.3f}", f"{peak['ratio']:.2f}x",
                      "" if features is None else f"{features['ratio']:.2f}x"])
    psi = [[f"{c['n']:,}", c["variant"], c.get("error") or f"{c['wall_s']:.2f}"] for c in payload.get("psi", [])]
    ray = [[c["engine"], c.get("workers") or c.get("nodes"), f"{c['n']:,}", c.get("error") or f"{c['wall_s']:.2f}",
            c.get("tasks", ""), c.get("operations", ""),
            f"{c['operation_overhead_s']:.2f}" if "operation_overhead_s" in c else "",
            f"{c['load_before']:.1f} / {c['load_after']:.1f}" if "load_before" in c else ""]
           for c in payload.get("ray", [])]
    model = ray_model(payload)
    exponents = summarize_exponents(_estimator(payload, wide=False))
    lines = [
        "# vflsec bench scale",
        "",
        f"Synthetic float64 features per party {payload.get('features_per_party')}; one epoch per cell; "
        f"{load_text(payload)}. Every cell ran in processes of its own; peak = the process's peak resident "
        "memory (VmHWM, the cell's own program; not ru_maxrss, which carries the bench's size at fork). "
        "Data: for the estimator the float64 bytes of its features; for a `vflsec party` "
        "party its table in Arrow form (the IDs' UTF-8 bytes and an 8-byte offset each, 8 bytes per feature "
        "and label), with the peak over the float64 features alone beside it.",
        "",
        "## How big a job fits",
        "",
        markdown_table(["method", "largest n measured", "epoch (or job)", "peak / data", "growth exponent",
                        "10^7 rows", "10^8 rows", "prediction"], fits_table(payload)),
        "",
        "## Estimator (one process, every party on threads)",
        "",
        markdown_table(["method", "features per party", "n", "wall s", "CPU s", "peak GiB", "data GiB", "peak / data",
                        "added / data"], est),
        "",
        "Growth exponents of the wall time (time ~ n^b): "
        + ", ".join(f"{m} {b:.2f}" for m, b in exponents.items() if b is not None) + ".",
        "",
        "## vflsec party (two processes, mutual TLS on loopback)",
        "",
        markdown_table(["method", "rows per party", "aligned", "wall s", "active party", "peak / data GiB",
                        "peak / data", "peak / features"], party),
        "",
        "## PSI (two parties on threads of one process)",
        "",
        markdown_table(["IDs per party", "protocol", "wall s"], psi),
        "",
        "## Paillier epoch: local process pool vs Ray",
        "",
        markdown_table(["engine", "workers / nodes", "rows", "wall s", "Ray tasks", "Ray operations",
                        "round trips s", "load before / after"], ray),
        "",
    ]
    if model is not None:
        m = model["model"]
        lines += [f"Cost model (per row): serial {m.s * 1e3:.3f} ms, shared {m.w * 1e3:.3f} ms; "
                  f"{m.tau * 1e3:.1f} ms per Ray operation ({m.operations_per_row:.5f} operations per row), "
                  "the round trips of the 1-node run (the seconds its operations spent beyond their tasks' "
                  "work: submitting, shipping arguments and results) over its operations. Predicted 2-node "
                  f"epoch {model['predicted_2_nodes_s']:.1f} s, measured {model['measured_2_nodes_s']:.1f} s "
                  f"({100 * model['error']:.0f}% off).", ""]
    ray_party = payload.get("ray_party", [])
    if ray_party:
        rows = []
        for c in ray_party:
            if "error" in c:
                rows.append([c["engine"], f"{c['n']:,}", c["error"], "", "", ""])
                continue
            t = c["parties"]["active"]["timings"]
            tasks = {name: sum((p.get("compute") or {}).get("tasks_per_node", {}).values())
                     for name, p in c["parties"].items()}
            rows.append([c["engine"], f"{c['n']:,}", f"{c['wall_s']:.1f}", f"{t.get('psi_s', 0):.1f}",
                         f"{t.get('train_s', 0):.1f}", ", ".join(f"{k} {v}" for k, v in tasks.items() if v) or "-"])
        lines += ["## A whole Paillier `vflsec party` job: local pools vs a 2-node Ray cluster", "",
                  markdown_table(["data parties' HE work", "rows per party", "wall s", "PSI s", "train s (active)",
                                  "Ray tasks"], rows), ""]
    lines += ["## Conclusion", ""] + [f"- {line}" for line in conclusion(payload)] + [""]
    return "\n".join(lines)


def _plot(payload: Dict[str, Any], path: Path, key: str, ylabel: str, title: str) -> bool:
    est = _estimator(payload, wide=False)
    party = _ok(_party(payload))
    if not est and not party:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, method in enumerate(sorted({c["method"] for c in est})):
        rows = sorted((c for c in est if c["method"] == method), key=lambda c: c["n"])
        values = [c["wall_s"] if key == "time" else _ratio_over_data(c) for c in rows]
        ax.plot([c["n"] for c in rows], values, "o-", color=f"C{i}", label=f"estimator {method} (1 run per n)")
    for i, method in enumerate(sorted({c["method"] for c in party})):
        rows = sorted((c for c in party if c["method"] == method), key=lambda c: c["n"])
        values = [c["wall_s"] if key == "time" else _party_peak(c)["ratio"] for c in rows]
        ax.plot([c["n"] for c in rows], values, "s--", color=f"C{i + 5}", label=f"vflsec party {method} (1 run)")
    if key == "time":
        psi = sorted(_ok(payload.get("psi", [])), key=lambda c: c["n"])
        for variant, style in (("bucketed", "^-"), ("sequential", "v:")):
            rows = [c for c in psi if c["variant"] == variant]
            if rows:
                ax.plot([c["n"] for c in rows], [c["wall_s"] for c in rows], style, color="k", alpha=0.6,
                        label=f"PSI, {variant} (IDs per party)")
        ax.set_yscale("log")
    else:
        for i, method in enumerate(sorted({c["method"] for c in est})):
            wide = [c for c in _estimator(payload, wide=True) if c["method"] == method]
            if wide:
                ax.plot([c["n"] for c in wide], [_ratio_over_data(c) for c in wide], "*", ms=12, color=f"C{i}",
                        label=f"estimator {method}, {'x'.join(map(str, wide[0]['widths']))} features")
        ax.axhline(1.5, color="grey", ls=":", label="1.5x (estimator target)")
        ax.axhline(2.0, color="grey", ls="--", label="2x (party target)")
    ax.set_xscale("log")
    ax.set_xlabel("rows (n)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    return True


def render(payload: Dict[str, Any], out: Path) -> List[str]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report_markdown(payload))
    written = ["report.md"]
    if _plot(payload, out / "scale_time.png", "time", "seconds, one epoch (log)", "Time against n"):
        written.append("scale_time.png")
    if _plot(payload, out / "scale_memory.png", "memory", "peak resident memory / data bytes",
             "Peak memory over the data's bytes against n"):
        written.append("scale_memory.png")
    return written
