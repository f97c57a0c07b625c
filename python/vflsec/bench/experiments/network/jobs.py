"""One GLM job of ``vflsec bench network``, run both ways: in one process over the
in-memory hub, and as separate ``vflsec party`` processes over gRPC (mutual TLS),
optionally through a link relay on every party-to-party connection. Both
stages (:mod:`.cells`, :mod:`.links`) run their jobs through these functions."""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from .grid import MPC_METHODS, LinkGrid, NetworkGrid, NetworkSettings, PartiesAndData, mpc_protocol

__all__ = ["coef_diff", "in_memory", "job_table", "party_frames", "run_processes"]

Frames = Dict[str, Tuple[Any, Any, Any]]  # party -> (ids, X, y or None)


def party_frames(grid: PartiesAndData, data_dir: Any = None) -> Frames:
    """Every party's (IDs, features, labels or None): un-aligned, shuffled rows, as
    ``vflsec party-data`` writes them."""
    from ....runtime.party_data import make_party_frames

    frames = make_party_frames(grid.dataset, grid.features_per_party, grid.parties, keep=grid.keep,
                               seed=grid.data_seed, rows=grid.rows,
                               **({"data_dir": data_dir} if grid.dataset != "synthetic" else {}))
    return {name: (ids, X, y) for name, (ids, X, y, _) in frames.items()}


def job_table(method: str, grid: Union[NetworkGrid, LinkGrid]) -> Dict[str, Any]:
    """The job table of one method (the same keys, in the same order, as the party job files)."""
    j = grid.job
    job = dict(protocol=method, loss=j.loss, lr=j.lr, epochs=j.epochs, batch_size=j.batch_size, seed=j.seed,
               active=grid.parties[0], passives=list(grid.parties[1:]))
    if method == "hdp":
        job.update(epsilon=j.hdp_epsilon, delta=j.hdp_delta, noise_seed=j.hdp_noise_seed)
    if method in ("paillier", "ckks"):
        job.update(coordinator="coordinator", key_bits=j.key_bits)
    if method == "paillier":
        job.update(epochs=j.paillier_epochs)
    if method in MPC_METHODS:  # plain VFL's recursion on secret shares; the job file names the engine protocol
        job.update(protocol="mpc", mpc_protocol=mpc_protocol(method))
    return job


def in_memory(job: Dict[str, Any], frames: Frames) -> Tuple[Any, float]:
    """The job in one process, each party's block and the labels built as ``vflsec party`` builds them (the
    model's design, :mod:`vflsec.glm.model`, with the job file's defaults): (its result, wall seconds)."""
    from ....glm.job import GLMJob, PartyData
    from ....glm.model import GLMDesign
    from ....glm.runner import run_job

    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    design = GLMDesign(loss=job["loss"])
    data = {}
    for name, (ids, X, y) in frames.items():
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        role = "active" if name == job["active"] else "passive"
        data[name] = PartyData(design.block(X[order], role),
                               None if y is None else design.fit_labels(y[order]).encode(y[order]))
    fields: Dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in job.items()}
    # the job file's protocol options (an MPC job's engine protocol) are the GLMJob's options
    options = {key: fields.pop(key) for key in ("mpc_protocol",) if key in fields}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_job(GLMJob(n_samples=len(common), options=options, **fields), data)
    return result, time.perf_counter() - start


def run_processes(job: Dict[str, Any], frames: Frames, workdir: Path, settings: NetworkSettings,
                  profile: Optional[Any] = None) -> Tuple[Dict[str, Dict[str, Any]], float, int]:
    """The job as ``vflsec party`` processes: (each party's output, wall seconds, bytes the relays
    carried). ``profile``: a link profile every party-to-party connection goes through (a relay
    each; the unshaped ``loopback`` profile too, so the relays' own hand-off cost is in every
    link run), None for direct loopback. An MPC job's engine link goes through its parties' own
    relays, which emulate the same profile (``[network] engine_link``); their bytes are in the
    outputs (``info.engine_bytes_in``), not in the relays' count returned here."""
    from ....runtime.launch import kill_parties, start_parties, wait_parties, write_local_job
    from .links import relay_local_job

    network: Dict[str, Any] = dict(peer_timeout=settings.peer_timeout, heartbeat_interval=settings.heartbeat_interval,
                                   connect_timeout=settings.connect_timeout)
    if job["protocol"] == "mpc" and profile is not None and profile.shaped:
        network["engine_link"] = profile.name  # a profile's name or its "BW,RTT" text (parse_links)
    local = write_local_job(workdir, job, frames, network=network)
    relays = relay_local_job(local, profile) if profile is not None else []
    import vflsec

    env = {"PYTHONPATH": str(Path(vflsec.__file__).resolve().parents[1]) + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    procs = start_parties(local, env=env)
    try:
        status = wait_parties(procs, 3600)
    finally:
        kill_parties(procs)
        for relay in relays:
            relay.stop()
    wall = time.perf_counter() - start
    for name, (rc, err) in status.items():
        if rc != 0:
            raise RuntimeError(f"party {name} failed (exit {rc}):\n{err[-3000:]}")
    outputs = {name: json.loads(path.read_text()) for name, path in local.outputs.items()}
    relayed = sum(r.stats.bytes_forward + r.stats.bytes_backward for r in relays)
    return outputs, wall, relayed


def coef_diff(job: Dict[str, Any], output: Dict[str, Any], result: Any) -> float:
    """Largest difference between a party's written model (feature weights, the active party's
    intercept) and the in-memory run's block, split by the same design."""
    import numpy as np

    from ....glm.model import GLMDesign

    role = "active" if output["party"] == job["active"] else "passive"
    coef, intercept = GLMDesign(loss=job["loss"]).split_coef(result.coef, role)
    diffs = np.abs(np.array(output["coef"]) - coef).tolist()
    if intercept is not None:
        diffs.append(abs(output["intercept"] - intercept))
    return float(max(diffs, default=0.0))
