"""The report of ``vflsec bench network``: ``report.md`` and the plots from the results alone
(the link stage's part: :mod:`.links_report`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ...common import markdown_table, n_label, pyplot, save_figure
from ...envelope import load_text
from .links_report import links_conclusion, links_markdown

__all__ = ["conclusion", "plot_loopback", "render", "report_markdown"]


def render(payload: Dict[str, Any], out: Path) -> List[str]:
    """Write ``report.md``, ``network.png`` (time and bytes per method, loopback
    vs in-memory) and, with a link stage, ``links.png`` of ``payload`` (a run's
    ``results.json`` content) into ``out``; return the names written."""
    from .links_report import plot_links

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report_markdown(payload))
    written = ["report.md"]
    if payload.get("methods"):
        plot_loopback(payload, out / "network.png")
        written.append("network.png")
    if payload.get("links") and plot_links(payload, out / "links.png"):
        written.append("links.png")
    return written


def plot_loopback(payload: Dict[str, Any], path: Path) -> None:
    """Per method: training time in memory and over loopback gRPC, and the party's
    total (connecting, agreement, PSI); the bytes of the training messages and
    the wire bytes every party sent (log scales; one run per method)."""
    import numpy as np

    rows = payload["methods"]
    names = [r["method"] for r in rows]
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4))
    x = np.arange(len(names))
    for i, (key, label) in enumerate((("in_memory_train_s", "training, in memory"),
                                      ("network_train_s", "training, loopback gRPC"),
                                      ("network_party_total_s", "party total (connect, agree, PSI, train)"))):
        ax.bar(x + (i - 1) * 0.27, [r[key] for r in rows], width=0.27, color=f"C{i}",
               label=f"{label} ({n_label(1, 'run')})")
    for i, (key, label) in enumerate((("in_memory_payload_bytes", "training payload (in-memory accounting)"),
                                      ("network_wire_bytes_sent", "wire bytes, every party (handshake, PSI "
                                                                  "included)"))):
        bx.bar(x + (i - 0.5) * 0.4, [r[key] for r in rows], width=0.4, color=f"C{i + 3}",
               label=f"{label} ({n_label(1, 'run')})")
    for axis, ylabel, title in ((ax, "seconds (log scale)", "Wall time per method"),
                                (bx, "bytes (log scale)", "Bytes per method")):
        axis.set_xticks(x, names)
        axis.set_yscale("log")
        axis.set_ylabel(ylabel)
        axis.set_title(title)
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1)
    fig.suptitle(f"Loopback gRPC (mutual TLS, one process per party) vs in-memory, {payload.get('dataset')}")
    fig.tight_layout()
    save_figure(fig, path)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}x" if b else "n/a"


def conclusion(payload: Dict[str, Any]) -> List[str]:
    """What the run shows, in plain words, from its rows: the cost of separate
    processes over gRPC against the in-memory run, whether the weights agree, each
    protection's time and bytes against plain VFL's, PSI's cost, and the link
    stage's answers."""
    rows = {r["method"]: r for r in payload.get("methods", [])}
    parts = []
    if rows:
        setup = [r["network_party_total_s"] - r["network_train_s"] for r in rows.values()]
        same = [m for m, r in rows.items() if r["max_abs_coef_diff"] == 0]
        differ = [f"{m} by {r['max_abs_coef_diff']:.2g}" for m, r in rows.items() if r["max_abs_coef_diff"] != 0]
        parts.append("As separate processes over loopback gRPC, training takes "
                     + ", ".join(f"{_ratio(r['network_train_s'], r['in_memory_train_s'])} ({m})"
                                 for m, r in rows.items())
                     + f" the in-memory time; connecting, agreeing on the job and PSI add {min(setup):.3g}-"
                     f"{max(setup):.3g} s per run. The weights "
                     + (f"equal the in-memory run's for {', '.join(same)}" if same else "")
                     + ("; " if same and differ else "")
                     + (f"differ from it for {', '.join(differ)} (largest coefficient difference)" if differ else "")
                     + ".")
    plain = rows.get("plain")
    if plain:
        for method in ("hdp", "paillier", "ckks"):
            r = rows.get(method)
            if r is not None:
                parts.append(f"{method} costs {_ratio(r['network_train_s'], plain['network_train_s'])} the training "
                             f"time and {_ratio(r['network_wire_bytes_sent'], plain['network_wire_bytes_sent'])} the "
                             "wire bytes of plain VFL over loopback.")
    psi = payload.get("psi") or []
    if psi:
        big = max(psi, key=lambda p: p["n_ids"])
        parts.append(f"Two-party PSI of {big['n_ids']:,} IDs per party takes {big['total_s']:.3g} s and "
                     f"{(big['request_bytes'] + big['setup_bytes'] + big['response_bytes']) / 1e6:.3g} MB in process.")
    lines = ["## Conclusion", "", " ".join(parts), ""]
    if payload.get("links"):
        lines += ["Over emulated links: " + links_conclusion(payload), ""]
    return lines


def _load_line(payload: Dict[str, Any]) -> str:
    text = load_text(payload)
    return text[:1].upper() + text[1:] + "."


def report_markdown(payload: Dict[str, Any]) -> str:
    """``report.md`` of one run's ``results.json`` content."""
    rows = [[r["method"], r["n_samples"], f"{r['in_memory_train_s']:.3f}", f"{r['network_train_s']:.3f}",
             f"{r['network_party_total_s']:.2f}", f"{r['network_psi_s']:.3f}", r["in_memory_payload_bytes"],
             r["network_training_payload_bytes"], r["network_wire_bytes_sent"], f"{r['max_abs_coef_diff']:.2e}"]
            for r in payload.get("methods", [])]
    psi_rows = [[p["n_ids"], p["shared"], f"{p['client_request_s']:.3f}", f"{p['server_reply_s']:.3f}",
                 f"{p['client_intersect_s']:.3f}", f"{p['total_s']:.3f}",
                 p["request_bytes"] + p["setup_bytes"] + p["response_bytes"]] for p in payload.get("psi", [])]
    machine = payload.get("machine") or {}
    partial = (["**Partial run**: it stopped before its last cell; the tables hold the cells that finished.", ""]
               if payload.get("partial") else [])
    return "\n".join([
        "# Network benchmark: loopback gRPC (mutual TLS, one process per party) vs in-memory",
        "",
        _load_line(payload),
        "",
    ] + partial + [
        f"Dataset: {payload.get('dataset')}; quick={payload.get('quick')}; seed {payload.get('seed', 0)}; "
        f"git {payload.get('git')}; "
        f"machine: {machine.get('cpu', machine)}.",
        "",
        "Training wall time is the slowest party's program time; 'party total' adds connecting, the job "
        "agreement and PSI alignment (not process start-up). Payload bytes use the in-memory hub's "
        "accounting for the training messages; wire bytes are the envelopes and frames every party sent "
        "over gRPC (handshake and PSI included; TLS and HTTP/2 overhead not included).",
        "",
        markdown_table(["method", "rows", "in-memory s", "network train s", "party total s", "PSI s",
                        "in-memory bytes", "network payload bytes", "wire bytes sent", "max |coef diff|"], rows),
        "",
        "## Two-party PSI (openmined-psi, ECDH P-256, exact RAW set), in process",
        "",
        markdown_table(["IDs per party", "shared", "client request s", "server reply s", "client intersect s",
                        "total s", "bytes exchanged"], psi_rows),
        "",
        "![time and bytes per method](network.png)" if payload.get("methods") else "",
        "",
    ] + (links_markdown(payload) if payload.get("links") else []) + conclusion(payload))
