"""Network benchmark: GLM jobs over loopback gRPC (one process per party, mutual TLS) vs in-memory, and PSI.

``vflsec bench network [--quick] [--out DIR] [--methods plain,hdp,paillier,ckks] [--rows N]``

For every method the same job (same aligned rows, seeds, hyper-parameters)
runs twice: in one process over the in-memory hub, and as separate
``vflsec party`` processes over loopback gRPC with mutual TLS, after
private-set-intersection alignment of un-aligned, shuffled per-party CSVs.
Reported per method: wall time of training (slowest party), of the whole
party run (connect, agree, PSI, train) and the in-memory wall time; payload
bytes of the training messages (the in-memory accounting, identical by
construction) and the bytes that actually crossed gRPC (envelopes + frames,
before TLS and HTTP/2 framing); and the largest difference between the two
runs' weights. Then two-party PSI timings (openmined-psi, ECDH P-256) for
10^4 and 10^5 IDs per party (``--quick``: 10^3 and 10^4), in process.

Writes ``DIR/results.json`` and ``DIR/report.md`` (default
``benchmarks/results/network``).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .common import git_revision, machine_info, markdown_table, package_versions, write_json

METHODS = ("plain", "hdp", "paillier", "ckks")
PARTIES = ("active", "passive1", "passive2")


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--out", default="benchmarks/results/network", help="output folder")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated protocols")
    parser.add_argument("--rows", type=int, default=None,
                        help="Adult training rows to use (default 4000; --quick: synthetic 300)")
    parser.add_argument("--psi-sizes", default=None, help="comma-separated IDs per party for PSI timings")
    parser.add_argument("--data-dir", default=None, help="Adult folder (default $VFLSEC_DATA)")


def _frames(quick: bool, rows: Optional[int], data_dir):
    from ..federation.party_data import make_party_frames

    if quick:
        frames = make_party_frames("synthetic", (4, 3, 3), PARTIES, keep=0.95, seed=0, rows=rows or 300)
    else:
        frames = make_party_frames("adult", (6, 4, 4), PARTIES, keep=0.95, seed=0, rows=rows or 4000,
                                   data_dir=data_dir)
    return {name: (ids, X, y) for name, (ids, X, y, _) in frames.items()}


def _job(method: str, quick: bool) -> Dict[str, Any]:
    job = dict(protocol=method, loss="logistic", lr=0.5, epochs=2 if quick else 3,
               batch_size=64 if quick else 256, seed=0, active="active", passives=list(PARTIES[1:]))
    if method == "hdp":
        job.update(epsilon=1.0, delta=0.01, noise_seed=1)
    if method in ("paillier", "ckks"):
        job.update(coordinator="coordinator", key_bits=2048)
    if method == "paillier" and quick:
        job.update(epochs=1)
    return job


def _in_memory(job_table, frames):
    from ..federation.party import clip_rows
    from ..glm.job import GLMJob, PartyData
    from ..glm.runner import run_job

    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    data = {}
    for name, (ids, X, y) in frames.items():
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        data[name] = PartyData(clip_rows(X[order]), None if y is None else np.where(y[order] > 0, 1.0, -1.0))
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in job_table.items()}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_job(GLMJob(n_samples=len(common), **fields), data)
    return result, time.perf_counter() - start


def _network(job_table, frames, workdir: Path):
    from ..federation.launch import kill_parties, start_parties, wait_parties, write_local_job

    local = write_local_job(workdir, job_table, frames,
                            network=dict(peer_timeout=30.0, heartbeat_interval=1.0, connect_timeout=120.0))
    import vflsec

    env = {"PYTHONPATH": str(Path(vflsec.__file__).resolve().parents[1]) + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    procs = start_parties(local, env=env)
    try:
        status = wait_parties(procs, 3600)
    finally:
        kill_parties(procs)
    wall = time.perf_counter() - start
    for name, (rc, err) in status.items():
        if rc != 0:
            raise RuntimeError(f"party {name} failed (exit {rc}):\n{err[-3000:]}")
    outputs = {name: json.loads(path.read_text()) for name, path in local.outputs.items()}
    return outputs, wall


def _bench_method(method: str, quick: bool, frames, workdir: Path) -> Dict[str, Any]:
    job = _job(method, quick)
    reference, memory_wall = _in_memory(job, frames)
    outputs, process_wall = _network(job, frames, workdir / method)
    training_tags = set(reference.hub.bytes_by_tag())
    net_training_bytes = sum(v for out in outputs.values() for t, v in out["bytes_sent_by_tag"].items()
                             if t in training_tags)
    diff = max(float(np.max(np.abs(np.array(outputs[p]["coef"]) - reference.results[p].coef))) for p in PARTIES)
    return {
        "method": method, "job": job, "n_samples": outputs["active"]["n_samples"],
        "in_memory_train_s": memory_wall,
        "network_train_s": max(out["timings"]["train_s"] for out in outputs.values()),
        "network_party_total_s": max(out["timings"]["total_s"] for out in outputs.values()),
        "network_connect_agree_s": max(out["timings"]["connect_and_agree_s"] for out in outputs.values()),
        "network_psi_s": max(out["timings"]["psi_s"] for out in outputs.values()),
        "processes_wall_s": process_wall,
        "in_memory_payload_bytes": reference.hub.total_bytes(),
        "network_training_payload_bytes": net_training_bytes,
        "network_wire_bytes_sent": sum(out["wire_bytes_sent"] for out in outputs.values()),
        "max_abs_coef_diff": diff,
        "n_messages_in_memory": len(reference.records),
    }


def run(quick: bool = False, out: str = "benchmarks/results/network", methods: str = ",".join(METHODS),
        rows: Optional[int] = None, psi_sizes: Optional[str] = None, data_dir=None) -> Dict[str, Any]:
    from ..federation.psi import time_two_party_psi

    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = set(chosen) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    sizes = [int(s) for s in psi_sizes.split(",")] if psi_sizes else ([1000, 10000] if quick else [10000, 100000])
    frames = _frames(quick, rows, data_dir)
    results: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="vflsec-bench-network-") as tmp:
        for method in chosen:
            print(f"[bench network] {method} ...", flush=True)
            results.append(_bench_method(method, quick, frames, Path(tmp)))
    psi = []
    for size in sizes:
        print(f"[bench network] PSI {size} IDs per party ...", flush=True)
        psi.append(time_two_party_psi(size, overlap=0.5, seed=0))
    payload = {
        "benchmark": "network", "quick": quick, "dataset": "synthetic" if quick else "adult",
        "machine": machine_info(), "git": git_revision(),
        "packages": package_versions(["numpy", "grpcio", "cryptography", "openmined-psi", "phe", "tenseal"]),
        "methods": results, "psi": psi,
    }
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "results.json", payload)
    (out_dir / "report.md").write_text(_report(payload))
    print(f"[bench network] wrote {out_dir / 'results.json'} and {out_dir / 'report.md'}")
    return payload


def _report(payload: Dict[str, Any]) -> str:
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
        f"Dataset: {payload['dataset']}; quick={payload['quick']}; git {payload.get('git')}; "
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
    ])
