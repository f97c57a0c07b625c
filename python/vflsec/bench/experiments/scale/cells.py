"""The measurements of ``vflsec bench scale``: the estimator, PSI, ``vflsec party`` and Ray
cells, each added to the results as it finishes (an interrupted run keeps them). Every cell
runs in processes of its own (:mod:`.probe`, the party processes), so each peak memory is the
cell's."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .grid import ScaleGrid

__all__ = ["party_cell", "run_cells", "run_probe_process"]

#: seconds one cell may take before it is stopped (and recorded as such)
CELL_TIMEOUT = 4 * 3600


def _env() -> Dict[str, str]:
    import vflsec

    return {**os.environ, "PYTHONPATH": str(Path(vflsec.__file__).resolve().parents[1]) + os.pathsep
            + os.environ.get("PYTHONPATH", "")}


def run_probe_process(kind: str, args: Dict[str, Any], timeout: float = CELL_TIMEOUT) -> Dict[str, Any]:
    """One :mod:`.probe` measurement in a fresh process: its JSON, or ``{"error": ...}``."""
    command = [sys.executable, "-m", "vflsec.bench.experiments.scale.probe", kind, json.dumps(args)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _estimator_cells(grid: ScaleGrid, cells: List[Dict[str, Any]], progress: Any) -> None:
    limits = {"paillier": grid.paillier_max_rows, "ckks": grid.ckks_max_rows}
    todo = [(m, n) for m in grid.estimator_methods for n in grid.estimator_sizes if n <= limits.get(m, n)]
    todo_widths = [(m, n, list(grid.features_per_party)) for m, n in todo]
    # The plain and HDP cells again at a wide shape (Adult's width): the memory target's reference, where the
    # interpreter's fixed ~0.2 GB is a small part of the data.
    todo_widths += [(m, n, list(grid.wide_features_per_party)) for m in grid.estimator_methods
                    if m in ("plain", "hdp") for n in grid.wide_sizes]
    for method, n, widths in progress(todo_widths, desc="bench scale: estimator", unit="cell"):
        args = dict(method=method, n=n, widths=widths, batch_size=grid.batch_size, lr=grid.lr,
                    epsilon=grid.hdp_epsilon, key_bits=grid.key_bits, seed=grid.seed)
        cells.append({"method": method, "n": n, "widths": widths, **run_probe_process("estimator", args)})


def _psi_cells(grid: ScaleGrid, cells: List[Dict[str, Any]], progress: Any) -> None:
    todo = [(n, False) for n in grid.psi_sizes] + [(n, True) for n in grid.psi_sizes if n <= grid.psi_sequential_max]
    for n, sequential in progress(sorted(todo), desc="bench scale: PSI", unit="cell"):
        args = dict(n=n, overlap=grid.psi_overlap, seed=grid.seed, sequential=sequential)
        cells.append({"n": n, "variant": "sequential" if sequential else "bucketed",
                      **run_probe_process("psi", args)})


def _write_party_csv(path: Path, ids: np.ndarray, n_features: int, labels: bool, seed: int,
                     chunk: int = 500_000) -> Dict[str, int]:
    """A numeric party CSV written in chunks (``id``, ``y`` for the active party, ``x0..``).
    Its size in memory: ``table_bytes``, the table in Arrow form (the IDs' UTF-8 bytes and an
    8-byte offset each, 8 bytes per number: what "its data" is), and ``feature_bytes``, the
    float64 features alone."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    names = ["id"] + (["y"] if labels else []) + [f"x{j}" for j in range(n_features)]
    writer = None
    try:
        for start in range(0, len(ids), chunk):
            part = ids[start:start + chunk]
            X = rng.standard_normal((len(part), n_features))
            columns = [pa.array(part)] + ([pa.array((X[:, 0] + rng.standard_normal(len(part)) > 0).astype(float))]
                                          if labels else []) + [pa.array(X[:, j]) for j in range(n_features)]
            batch = pa.record_batch(columns, names=names)
            if writer is None:
                writer = pacsv.CSVWriter(str(path), batch.schema)
            writer.write_batch(batch)
    finally:
        if writer is not None:
            writer.close()
    id_bytes = sum(len(str(v).encode("utf-8")) for v in ids)
    numbers = n_features + (1 if labels else 0)
    return {"table_bytes": id_bytes + 8 * len(ids) + 8 * numbers * len(ids), "feature_bytes": 8 * n_features * len(ids)}


def _wait_with_usage(procs: Dict[str, Any], timeout: float) -> Dict[str, Dict[str, Any]]:
    """Every party process waited for with ``os.wait4``: exit code and CPU seconds."""
    deadline = time.monotonic() + timeout

    def watchdog() -> None:
        while time.monotonic() < deadline:
            if all(p.process.returncode is not None for p in procs.values()):
                return
            time.sleep(1.0)
        for p in procs.values():
            if p.process.returncode is None:
                p.process.kill()

    threading.Thread(target=watchdog, daemon=True).start()
    out = {}
    for name, party in procs.items():
        _, status, usage = os.wait4(party.process.pid, 0)
        party.process.returncode = os.waitstatus_to_exitcode(status)
        out[name] = {"exit": party.process.returncode, "cpu_s": usage.ru_utime + usage.ru_stime,
                     "stderr_tail": party.stderr_path.read_text(errors="replace")[-2000:]}
    return out


def party_cell(grid: ScaleGrid, method: str, n: int, workdir: Path,
               compute: Optional[Dict[str, Any]] = None, shard_rows: int = 0) -> Dict[str, Any]:
    """One two-party ``vflsec party`` job (mutual TLS on loopback) on ``n`` rows per party before
    the ID overlap (each party keeps 95%, shuffled): wall time split and peak memory per party.
    ``method`` "paillier" adds the key-holding coordinator; ``compute``: the data parties'
    ``[compute]`` table (their HE work on a Ray cluster); ``shard_rows``: the job's (each party
    streams its aligned rows from Parquet shards of that many rows)."""
    from ....runtime.launch import start_parties, to_toml, write_local_job

    parties = ["active", "passive1"]
    rng = np.random.default_rng(grid.seed)
    universe = np.array([f"u{v:010d}" for v in rng.permutation(10 * n)[:n]])
    placeholder = {"active": (["a", "b"], np.zeros((2, 1)), np.array([0.0, 1.0])),
                   "passive1": (["a", "b"], np.zeros((2, 1)), None)}
    job = dict(protocol=method, loss="logistic", lr=grid.lr, epochs=1, batch_size=grid.batch_size, seed=grid.seed,
               active="active", passives=["passive1"])
    if method == "hdp":
        job.update(epsilon=grid.hdp_epsilon, noise_seed=grid.seed + 1)
    if method == "paillier":
        job.update(coordinator="coordinator", key_bits=grid.key_bits, batch_size=grid.ray_batch_size)
    if shard_rows:
        job.update(shard_rows=shard_rows)
    local = write_local_job(workdir, job, placeholder,
                            network=dict(peer_timeout=3600.0, heartbeat_interval=2.0, connect_timeout=600.0))
    if compute is not None:
        for name in parties:
            config = local.configs[name]
            config.write_text(config.read_text() + "\n" + to_toml({"compute": compute}))
    sizes = {}
    for p, name in enumerate(parties):
        kept = universe[rng.random(n) < 0.95]
        kept = kept[rng.permutation(len(kept))]
        sizes[name] = _write_party_csv(local.directory / f"{name}.csv", kept, grid.features_per_party[p],
                                       labels=p == 0, seed=grid.seed + 10 + p)
        del kept
    start = time.perf_counter()
    procs = start_parties(local, env={"PYTHONPATH": _env()["PYTHONPATH"]})
    usage = _wait_with_usage(procs, CELL_TIMEOUT)
    wall = time.perf_counter() - start
    failed = {k: v for k, v in usage.items() if v["exit"] != 0}
    if failed:
        return {"error": "; ".join(f"{k}: exit {v['exit']}: {v['stderr_tail'].strip().splitlines()[-1:]}"
                                   for k, v in failed.items())}
    outputs = {name: json.loads(path.read_text()) for name, path in local.outputs.items()}
    # The party's own peak (VmHWM, in its output): wait4's ru_maxrss would carry this process's size at fork.
    per_party = {name: {"peak_rss_bytes": outputs[name]["peak_rss_bytes"], "cpu_s": usage[name]["cpu_s"],
                        "data_bytes": sizes[name]["table_bytes"], "feature_bytes": sizes[name]["feature_bytes"],
                        "timings": outputs[name]["timings"], "compute": outputs[name].get("compute"),
                        **{key: outputs[name][key] for key in ("rss_after_training_bytes", "shards")
                           if key in outputs[name]}}
                 for name in parties}
    return {"wall_s": wall, "n_aligned": outputs["active"]["n_samples"], "parties": per_party}


def _party_cells(grid: ScaleGrid, cells: List[Dict[str, Any]], progress: Any) -> None:
    """Every method at every size with the rows in memory, then (``sharded_party_rows``) one plain job whose
    parties stream their aligned rows from Parquet shards of ``party_shard_rows`` rows."""
    todo = [(m, n, 0) for m in grid.party_methods for n in grid.party_sizes]
    if grid.sharded_party_rows:
        todo.append(("plain", grid.sharded_party_rows, grid.party_shard_rows))
    for method, n, shard_rows in progress(todo, desc="bench scale: vflsec party", unit="job"):
        with tempfile.TemporaryDirectory(prefix="vflsec-bench-scale-") as tmp:
            try:
                cell = party_cell(grid, method, n, Path(tmp), shard_rows=shard_rows)
            except (OSError, RuntimeError, ValueError) as exc:
                cell = {"error": f"{type(exc).__name__}: {exc}"}
        cells.append({"method": method, "n": n, **({"shard_rows": shard_rows} if shard_rows else {}), **cell})


def _ray_party_cells(grid: ScaleGrid, cells: List[Dict[str, Any]], progress: Any) -> None:
    """A whole Paillier ``vflsec party`` job on ``ray_party_rows`` rows per party: the data parties'
    HE work on their local pools, then on a 2-node Ray cluster (one CPU each, 127.0.0.1, started
    and stopped here; the parties are told to keep its loopback address)."""
    from .probe import local_cluster

    for engine in progress(["local", "ray"], desc="bench scale: vflsec party, local pools vs Ray", unit="job"):
        with tempfile.TemporaryDirectory(prefix="vflsec-bench-scale-") as tmp, contextlib.ExitStack() as stack:
            try:
                compute = None
                if engine == "ray":
                    cluster = stack.enter_context(local_cluster(2))
                    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # the party processes keep 127.0.0.1
                    stack.callback(os.environ.pop, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
                    compute = {"engine": "ray", "address": cluster.address}
                cell = party_cell(grid, "paillier", grid.ray_party_rows, Path(tmp), compute)
            except (OSError, RuntimeError, ValueError) as exc:
                cell = {"error": f"{type(exc).__name__}: {exc}"}
        cells.append({"engine": engine, "n": grid.ray_party_rows, **cell})


def _ray_cells(grid: ScaleGrid, cells: List[Dict[str, Any]], progress: Any) -> None:
    todo: Sequence[Dict[str, Any]] = [{"engine": "local", "workers": 1}, {"engine": "local", "workers": 2},
                                      {"engine": "ray", "nodes": 1}, {"engine": "ray", "nodes": 2}]
    for setting in progress(todo, desc="bench scale: Paillier epoch, local pool vs Ray", unit="run"):
        args = dict(setting, n=grid.ray_rows, widths=list(grid.features_per_party), batch_size=grid.ray_batch_size,
                    lr=grid.lr, key_bits=grid.key_bits, seed=grid.seed)
        cells.append({**setting, "n": grid.ray_rows, **run_probe_process("paillier_epoch", args)})


def run_cells(grid: ScaleGrid, result: Dict[str, Any], *, stages: Optional[Sequence[str]] = None) -> None:
    """Every stage of the grid (``stages``: a subset, for tests), in the order PSI, estimator,
    party, Ray, a party job through Ray; each cell added to ``result[stage]`` as it finishes."""
    from ...._progress import progress

    stages = stages or ("psi", "estimator", "party", "ray", "ray_party")
    result["features_per_party"] = list(grid.features_per_party)
    runners = {"psi": _psi_cells, "estimator": _estimator_cells, "party": _party_cells, "ray": _ray_cells,
               "ray_party": _ray_party_cells}
    for stage in stages:
        if (stage == "ray" and not grid.ray_rows) or (stage == "ray_party" and not grid.ray_party_rows):
            continue
        runners[stage](grid, result.setdefault(stage, []), progress)
