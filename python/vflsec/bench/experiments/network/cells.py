"""The measurements of ``vflsec bench network``: every method in memory and as
processes over loopback gRPC, then the PSI timings, then (``--links``) the
link stage (:mod:`.links`). Each finished cell is added to the results as it
finishes, so an interrupted run keeps them."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from .grid import NetworkGrid
from .jobs import Frames, coef_diff, in_memory, job_table, party_frames, run_processes

__all__ = ["bench_method", "run_cells"]


def bench_method(method: str, grid: NetworkGrid, frames: Frames, workdir: Path) -> Dict[str, Any]:
    """One ``results.json["methods"]`` row: the job in memory and as processes over loopback gRPC."""
    job = job_table(method, grid)
    reference, memory_wall = in_memory(job, frames)
    outputs, process_wall, _ = run_processes(job, frames, workdir / method, grid.network)
    training_tags = set(reference.hub.bytes_by_tag())
    net_training_bytes = sum(v for out in outputs.values() for t, v in out["bytes_sent_by_tag"].items()
                             if t in training_tags)
    diff = max(coef_diff(job, outputs[p], reference.results[p]) for p in grid.parties)
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


def run_cells(grid: NetworkGrid, result: Dict[str, Any], *, data_dir: Any = None,
              links: Optional[List[Any]] = None) -> None:
    """Every method of ``grid`` in memory and over gRPC (``result["methods"]``), then the PSI
    timings (``result["psi"]``), then with ``links`` (link profiles) the link stage."""
    from ...._progress import progress
    from ....federation.psi import time_two_party_psi

    result["dataset"] = grid.dataset
    methods: List[Dict[str, Any]] = result.setdefault("methods", [])
    psi: List[Dict[str, Any]] = result.setdefault("psi", [])
    frames = party_frames(grid, data_dir)
    with tempfile.TemporaryDirectory(prefix="vflsec-bench-network-") as tmp:
        for method in progress(grid.methods, desc="bench network: loopback gRPC and in memory", unit="method"):
            methods.append(bench_method(method, grid, frames, Path(tmp)))
    for size in progress(grid.psi_sizes, desc="bench network: PSI", unit="size"):
        psi.append(time_two_party_psi(size, overlap=grid.psi_overlap, seed=0))
    if links is not None:
        from .links import run_links

        run_links(grid.links, links, grid.network, result, data_dir=data_dir)
