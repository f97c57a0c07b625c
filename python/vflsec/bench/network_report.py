"""Renderer of ``vflsec bench network``: ``report.md`` from ``results.json``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from .common import markdown_table
from .network_links_report import links_markdown

__all__ = ["render", "render_file", "report_markdown"]


def render(payload: Dict[str, Any], out: Path) -> None:
    """Write ``report.md`` (and, with a link stage, ``links.png``) of ``payload``
    (a run's ``results.json`` content) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report_markdown(payload))
    if payload.get("links"):
        from .network_links_report import plot_links

        plot_links(payload, out / "links.png")


def render_file(results_json: Path) -> None:
    """Write ``report.md`` again beside an existing ``results.json``."""
    path = Path(results_json)
    render(json.loads(path.read_text()), path.parent)


def _load_line(machine: Dict[str, Any]) -> str:
    def fmt(key: str) -> str:
        value = machine.get(key)
        return "/".join(f"{v:.2f}" for v in value) if value else "not recorded"

    return (f"Load average (1/5/15 min) before the run {fmt('load_average_start')}, after "
            f"{fmt('load_average_end')}.")


def report_markdown(payload: Dict[str, Any]) -> str:
    """``report.md`` of one run's ``results.json`` content."""
    rows = [[r["method"], r["n_samples"], f"{r['in_memory_train_s']:.3f}", f"{r['network_train_s']:.3f}",
             f"{r['network_party_total_s']:.2f}", f"{r['network_psi_s']:.3f}", r["in_memory_payload_bytes"],
             r["network_training_payload_bytes"], r["network_wire_bytes_sent"], f"{r['max_abs_coef_diff']:.2e}"]
            for r in payload["methods"]]
    psi_rows = [[p["n_ids"], p["shared"], f"{p['client_request_s']:.3f}", f"{p['server_reply_s']:.3f}",
                 f"{p['client_intersect_s']:.3f}", f"{p['total_s']:.3f}",
                 p["request_bytes"] + p["setup_bytes"] + p["response_bytes"]] for p in payload["psi"]]
    machine = payload["machine"]
    return "\n".join([
        "# Network benchmark: loopback gRPC (mutual TLS, one process per party) vs in-memory",
        "",
        _load_line(machine),
        "",
        f"Dataset: {payload['dataset']}; quick={payload['quick']}; seed {payload.get('seed', 0)}; "
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
    ] + (links_markdown(payload) if payload.get("links") else []))
