"""Network benchmark: GLM jobs over loopback gRPC (one process per party, mutual TLS) vs in-memory, and PSI.

``vflsec bench network [--quick] [--config FILE] [--out DIR] [--methods plain,hdp,paillier,ckks] [--rows N]
[--links loopback,lan,datacenter,wan,internet]``

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

With ``--links``, the link stage follows (:mod:`.network_links`): each
method of ``[links]`` as processes over every listed link profile through
user-space relays, against the cost model's prediction from its in-memory
run (``results.json["links"]``, a plot of the ratios against bandwidth).

Writes ``DIR/results.json`` and ``DIR/report.md`` (default
``bench-out/network``).

The grid is data: ``configs/network.toml`` (:class:`NetworkGrid`); this
module is the runner and :mod:`.network_report` the renderer.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .common import add_rerender_argument, git_revision, machine_info, package_versions, read_results, write_json
from .config import BenchConfigError, load_variant, spec, with_overrides
from .network_report import render

METHODS = ("plain", "hdp", "paillier", "ckks")
_PROG = "vflsec bench network"


@dataclass(frozen=True)
class JobSettings:
    """The GLM job every method runs (``[<variant>.job]``)."""

    loss: str = field(metadata=spec(choices=("logistic",)))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    epochs: int = field(metadata=spec(low=1))
    paillier_epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    seed: int = field(metadata=spec(low=0))
    hdp_epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    hdp_delta: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    hdp_noise_seed: int = field(metadata=spec(low=0))
    key_bits: int = field(metadata=spec(low=2048))


@dataclass(frozen=True)
class NetworkSettings:
    """The ``vflsec party`` processes' network settings (``[<variant>.network]``, seconds)."""

    peer_timeout: float = field(metadata=spec(low=0, low_inclusive=False))
    heartbeat_interval: float = field(metadata=spec(low=0, low_inclusive=False))
    connect_timeout: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class PartiesAndData:
    """The methods, the parties and their data: what the loopback stage and the
    link stage both describe."""

    methods: Tuple[str, ...] = field(metadata=spec(choices=METHODS, non_empty=True))
    parties: Tuple[str, ...] = field(metadata=spec(non_empty=True))
    dataset: str = field(metadata=spec(choices=("adult", "synthetic")))
    features_per_party: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    rows: int = field(metadata=spec(low=2))
    keep: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    data_seed: int = field(metadata=spec(low=0))

    _table_prefix = ""  # names the table in errors

    def __post_init__(self) -> None:
        where = self._table_prefix
        if len(self.parties) < 2 or len(set(self.parties)) != len(self.parties):
            raise BenchConfigError(f"{where}parties must be 2 or more distinct names, got {list(self.parties)}")
        if len(self.features_per_party) != len(self.parties):
            raise BenchConfigError(f"{where}features_per_party has {len(self.features_per_party)} entries for "
                                   f"{len(self.parties)} parties; give one per party")


@dataclass(frozen=True)
class LinkGrid(PartiesAndData):
    """The link stage (``[<variant>.links]``, run with ``--links``): one job per
    method, in memory and as processes over every link profile."""

    job: JobSettings

    _table_prefix = "links: "


@dataclass(frozen=True)
class NetworkGrid(PartiesAndData):
    """One variant of ``configs/network.toml`` (``[full]`` or ``[quick]``)."""

    psi_sizes: Tuple[int, ...] = field(metadata=spec(low=1))
    psi_overlap: float = field(metadata=spec(low=0, high=1))
    job: JobSettings
    network: NetworkSettings
    links: LinkGrid


def load_grid(quick: bool, path: Optional[Path] = None) -> NetworkGrid:
    """``[quick]`` or ``[full]`` of the shipped ``network.toml`` or of the user's copy ``path``."""
    return load_variant(NetworkGrid, "network", "quick" if quick else "full", path)


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run): the [quick] grid")
    parser.add_argument("--out", default=str(Path("bench-out") / "network"),
                        help="output folder (default bench-out/network)")
    parser.add_argument("--methods", default=None,
                        help="comma-separated protocols (default: the config's, plain,hdp,paillier,ckks)")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows per party (default: the config's; Adult 4000, --quick: synthetic 300)")
    parser.add_argument("--psi-sizes", default=None, help="comma-separated IDs per party for PSI timings")
    parser.add_argument("--data-dir", default=None, help="Adult folder (default $VFLSEC_DATA)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the data, the party split and the jobs (HDP noise: seed + 1); default: the "
                             "config's (0)")
    parser.add_argument("--links", default=None,
                        help="also run the link stage over these profiles: names from loopback,lan,datacenter,"
                             "wan,internet and/or BANDWIDTH,RTT (separate with ';' when one is custom, e.g. "
                             "'loopback;wan;5mbit,80ms'); loopback is always run first (it calibrates the model)")
    add_rerender_argument(parser)


def _frames(grid: PartiesAndData, data_dir):
    from ..runtime.party_data import make_party_frames

    frames = make_party_frames(grid.dataset, grid.features_per_party, grid.parties, keep=grid.keep,
                               seed=grid.data_seed, rows=grid.rows,
                               **({"data_dir": data_dir} if grid.dataset != "synthetic" else {}))
    return {name: (ids, X, y) for name, (ids, X, y, _) in frames.items()}


def _job(method: str, grid: Union[NetworkGrid, LinkGrid]) -> Dict[str, Any]:
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
    return job


def _in_memory(job_table, frames):
    """The job in one process, each party's block and the labels built as ``vflsec party`` builds them (the
    model's design, :mod:`vflsec.glm.model`, with the job file's defaults)."""
    from ..glm.job import GLMJob, PartyData
    from ..glm.model import GLMDesign
    from ..glm.runner import run_job

    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    design = GLMDesign(loss=job_table["loss"])
    data = {}
    for name, (ids, X, y) in frames.items():
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        role = "active" if name == job_table["active"] else "passive"
        data[name] = PartyData(design.block(X[order], role),
                               None if y is None else design.fit_labels(y[order]).encode(y[order]))
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in job_table.items()}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_job(GLMJob(n_samples=len(common), **fields), data)
    return result, time.perf_counter() - start


def _network(job_table, frames, workdir: Path, settings: NetworkSettings, profile=None):
    """The job as ``vflsec party`` processes; ``profile``: a link profile every
    party-to-party connection goes through (a relay each; the unshaped
    ``loopback`` profile too, so the relays' own hand-off cost is in every
    link run), None for direct loopback."""
    from ..runtime.launch import kill_parties, start_parties, wait_parties, write_local_job
    from .network_links import relay_local_job

    local = write_local_job(workdir, job_table, frames,
                            network=dict(peer_timeout=settings.peer_timeout,
                                         heartbeat_interval=settings.heartbeat_interval,
                                         connect_timeout=settings.connect_timeout))
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


def _coef_diff(job: Dict[str, Any], output: Dict[str, Any], result: Any) -> float:
    """Largest difference between a party's written model (feature weights, the active party's
    intercept) and the in-memory run's block, split by the same design."""
    from ..glm.model import GLMDesign

    role = "active" if output["party"] == job["active"] else "passive"
    coef, intercept = GLMDesign(loss=job["loss"]).split_coef(result.coef, role)
    diffs = np.abs(np.array(output["coef"]) - coef).tolist()
    if intercept is not None:
        diffs.append(abs(output["intercept"] - intercept))
    return float(max(diffs, default=0.0))


def _bench_method(method: str, grid: NetworkGrid, frames, workdir: Path) -> Dict[str, Any]:
    job = _job(method, grid)
    reference, memory_wall = _in_memory(job, frames)
    outputs, process_wall, _ = _network(job, frames, workdir / method, grid.network)
    training_tags = set(reference.hub.bytes_by_tag())
    net_training_bytes = sum(v for out in outputs.values() for t, v in out["bytes_sent_by_tag"].items()
                             if t in training_tags)
    diff = max(_coef_diff(job, outputs[p], reference.results[p]) for p in grid.parties)
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


def _bench_links(grid: LinkGrid, profiles, settings: NetworkSettings, *, data_dir=None) -> Dict[str, Any]:
    """The link stage: every method of ``grid`` in memory (the cost model's
    trace), as processes on plain loopback (the model's calibration) and over
    each shaped profile (measurement vs prediction)."""
    from ..federation.link_profiles import PROFILES
    from .network_links import InMemoryTrace, calibrate, link_row

    shaped = [p for p in profiles if p.shaped]
    frames = _frames(grid, data_dir)
    rows: List[Dict[str, Any]] = []
    calibrations: Dict[str, Any] = {}
    traces: Dict[str, Any] = {}
    total = len(grid.methods) * (1 + len(shaped))
    done, started = 0, time.perf_counter()

    def progress(what: str) -> None:
        elapsed = time.perf_counter() - started
        eta = "" if done == 0 else f", about {elapsed / done * (total - done):.0f} s left"
        print(f"[bench network] links {done + 1}/{total}: {what} ({elapsed:.0f} s elapsed{eta})", flush=True)

    with tempfile.TemporaryDirectory(prefix="vflsec-bench-links-") as tmp:
        for method in grid.methods:
            job = _job(method, grid)
            reference, memory_wall = _in_memory(job, frames)
            trace = InMemoryTrace(reference.hub.records, reference.hub.receipts, memory_wall)
            progress(f"{method} over loopback through unshaped relays (calibration)")
            outputs, _, relayed = _network(job, frames, Path(tmp) / method / "loopback", settings,
                                           PROFILES["loopback"])
            loopback_s = max(out["timings"]["train_s"] for out in outputs.values())
            done += 1
            calibration = calibrate(trace, loopback_s)
            calibrations[method] = {"message_seconds": calibration.message_seconds,
                                    "compute_scale": calibration.compute_scale,
                                    "in_memory_seconds": memory_wall}
            traces[method] = (trace, calibration)
            rows.append(link_row(method, PROFILES["loopback"], loopback_s,
                                 calibration.predict(trace, PROFILES["loopback"]), None,
                                 {"calibration_run": True, "relayed_bytes": relayed}))
            for profile in shaped:
                progress(f"{method} over {profile.describe()}")
                outputs, _, relayed = _network(job, frames, Path(tmp) / method / profile.name, settings, profile)
                measured = max(out["timings"]["train_s"] for out in outputs.values())
                done += 1
                rows.append(link_row(method, profile, measured, calibration.predict(trace, profile), None,
                                     {"calibration_run": False, "relayed_bytes": relayed}))
    plain = {r["link"]: r["seconds"] for r in rows if r["method"] == "plain"}
    for r in rows:
        base = plain.get(r["link"])
        r["vs_plain"] = r["seconds"] / base if base else None
    job_shape = {"parties": list(grid.parties), "dataset": grid.dataset,
                 "features_per_party": list(grid.features_per_party), "rows": grid.rows,
                 "epochs": grid.job.epochs, "paillier_epochs": grid.job.paillier_epochs,
                 "batch_size": grid.job.batch_size, "key_bits": grid.job.key_bits}
    from .network_links import rtt_for_ratio

    # The model's answer beyond the measured links: at each bandwidth, the
    # smallest RTT at which each method's predicted time falls within 3x plain's.
    model_answer = []
    if "plain" in traces:
        for method in traces:
            if method == "plain":
                continue
            for bandwidth in (1e9, 100e6, 20e6):
                model_answer.append({"method": method, "bandwidth_bps": bandwidth,
                                     "rtt_s": rtt_for_ratio(traces[method], traces["plain"], bandwidth, 3.0)})
    return {"links": rows, "links_calibration": calibrations, "links_job": job_shape,
            "links_model_answer": model_answer,
            "links_profiles": [{"link": p.name, "bandwidth_bps": p.bandwidth_bps, "rtt_s": p.rtt_s}
                               for p in profiles]}


def run(quick: bool = False, out: str = str(Path("bench-out") / "network"), methods: Optional[str] = None,
        rows: Optional[int] = None, psi_sizes: Optional[str] = None, data_dir=None,
        config: Optional[Path] = None, links: Optional[str] = None, seed: Optional[int] = None,
        rerender: Optional[Path] = None) -> Dict[str, Any]:
    """Run the grid (``config``: a user's copy of ``network.toml``; the other
    arguments override it), write ``results.json`` and render ``report.md``.
    ``rerender``: no run; write the report and plots of ``rerender/results.json`` again."""
    if rerender is not None:
        saved = read_results(Path(rerender))
        render(saved, Path(rerender))
        return saved
    grid = load_grid(quick, config)
    overrides: Dict[str, Any] = {}
    if methods is not None:
        overrides["methods"] = tuple(m.strip() for m in methods.split(",") if m.strip())
    if rows is not None:
        overrides["rows"] = rows
    if psi_sizes is not None:
        try:
            overrides["psi_sizes"] = tuple(int(v) for v in psi_sizes.split(",") if v.strip())
        except ValueError:
            raise BenchConfigError(f"--psi-sizes must be comma-separated integers, got {psi_sizes!r}") from None
    if overrides:
        grid = with_overrides(grid, "command line (--methods, --rows, --psi-sizes)", **overrides)
    if seed is not None:
        if seed < 0:
            raise BenchConfigError(f"--seed must be >= 0, got {seed}")
        job = with_overrides(grid.job, "--seed", seed=seed, hdp_noise_seed=seed + 1)
        link_grid = grid.links
        link_grid = with_overrides(link_grid, "--seed", data_seed=seed,
                                   job=with_overrides(link_grid.job, "--seed", seed=seed, hdp_noise_seed=seed + 1))
        grid = with_overrides(grid, "--seed", data_seed=seed, job=job, links=link_grid)
    profiles = None
    if links is not None:
        from .network_links import parse_links

        try:
            profiles = parse_links(links)
        except ValueError as exc:
            raise BenchConfigError(str(exc)) from None
    payload = run_grid(grid, quick=quick, data_dir=data_dir, links=profiles)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "results.json", payload)
    render(payload, out_dir)
    print(f"[bench network] wrote {out_dir / 'results.json'} and {out_dir / 'report.md'}")
    return payload


def run_grid(grid: NetworkGrid, *, quick: bool, data_dir=None, links=None) -> Dict[str, Any]:
    """Every method of ``grid`` in memory and over gRPC, then the PSI timings, then
    (``links``: link profiles) the link stage: the content of ``results.json``."""
    from ..federation.psi import time_two_party_psi

    machine = machine_info()
    machine["load_average_start"] = os.getloadavg()
    frames = _frames(grid, data_dir)
    results: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="vflsec-bench-network-") as tmp:
        for method in grid.methods:
            print(f"[bench network] {method} ...", flush=True)
            results.append(_bench_method(method, grid, frames, Path(tmp)))
    psi = []
    for size in grid.psi_sizes:
        print(f"[bench network] PSI {size} IDs per party ...", flush=True)
        psi.append(time_two_party_psi(size, overlap=grid.psi_overlap, seed=0))
    payload = {
        "benchmark": "network", "quick": quick, "dataset": grid.dataset, "seed": grid.data_seed,
        "machine": machine, "git": git_revision(),
        "packages": package_versions(["numpy", "grpcio", "cryptography", "openmined-psi", "phe", "tenseal"]),
        "methods": results, "psi": psi,
    }
    if links is not None:
        payload.update(_bench_links(grid.links, links, grid.network, data_dir=data_dir))
    machine["load_average_end"] = os.getloadavg()
    return payload
