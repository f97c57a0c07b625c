"""The link stage of ``vflsec bench network --links``: parties over emulated links,
and the cost model's prediction of each run.

For one method, the stage has an in-memory reference run (its hub's message
and receipt records) and runs the same job as separate ``vflsec party``
processes once per link profile, every party-to-party connection going
through its own :class:`~vflsec.federation.link_relay.LinkRelay` (one per
ordered pair of parties: the client side of p -> q's gRPC connection, so p's
messages to q and q's acknowledgements share that relay's two directions).

The cost model (:mod:`.cost_model`) is calibrated once per
method, on the loopback run through the same relays, unshaped (:func:`calibrate`): one parameter is
fitted so that the loopback prediction equals the loopback measurement --
``message_seconds``, the fixed cost of one gRPC message (TLS, HTTP/2, the
envelope, thread hand-offs), or, when the in-memory run computed more
slowly than the processes (its parties share one interpreter), the compute
scale. Every other profile is then a prediction, and its error against the
emulated run is reported (:func:`run_links` adds the rows to the results).

A secret-sharing MPC method (``mpc_<engine protocol>``) sends most of its bytes over the engine's
own link (SPU), which the in-memory hub does not see; its parties' engine relays emulate the same
profile (``[network] engine_link``). Its model (:class:`EngineModel`) is the loopback time plus
``R`` round trips plus its bytes per direction over the bandwidth, ``R`` -- the engine's sequential
round trips, which no record counts -- fitted on the shaped link of the longest RTT; the other
links are predictions.
"""
from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ....federation.channel import MessageRecord, ReceiptRecord
from ....federation.link_profiles import PROFILES, LinkProfile, parse_link
from ....federation.link_relay import LinkRelay
from .cost_model import Prediction, WireOverhead, predict
from .grid import MPC_METHODS, LinkGrid, NetworkSettings

__all__ = ["Calibration", "EngineModel", "InMemoryTrace", "calibrate", "link_row", "parse_links", "relay_local_job",
           "rtt_for_ratio", "run_links"]


@dataclass(frozen=True)
class InMemoryTrace:
    """What the cost model needs from an in-memory run."""

    records: Sequence[MessageRecord]
    receipts: Sequence[ReceiptRecord]
    seconds: float  # its wall time


def parse_links(text: str) -> List[LinkProfile]:
    """``"loopback,lan,wan"`` or with custom ``BW,RTT`` entries separated by ``;``:
    ``"loopback;100mbit,20ms"``. Names are unique."""
    text = str(text).strip()
    parts = [p for p in (text.split(";") if ";" in text else text.split(",")) if p.strip()]
    # "100mbit,20ms" alone is one custom link, not two names
    if ";" not in text and len(parts) == 2 and parts[0].strip().lower() not in PROFILES:
        parts = [text]
    links = [parse_link(p) for p in parts]
    names = [link.name for link in links]
    if len(set(names)) != len(names) or not links:
        raise ValueError(f"--links {text!r}: give distinct links, e.g. loopback,lan,datacenter,wan,internet")
    return links


def relay_local_job(local: Any, profile: LinkProfile) -> List[LinkRelay]:
    """Put a relay on every party-to-party connection of a written loopback job
    (:func:`vflsec.runtime.launch.write_local_job`): each party's ``[peers]``
    entry for q becomes the address of a relay to q's listening port.
    Returns the started relays (stop them when the run ends)."""
    from ....runtime.config import read_toml
    from ....runtime.launch import to_toml

    bodies = {name: read_toml(Path(path)) for name, path in local.configs.items()}
    listen = {name: body["party"]["listen"] for name, body in bodies.items()}
    relays: List[LinkRelay] = []
    try:
        for name, body in bodies.items():
            for peer in list(body["peers"]):
                host, port = listen[peer].rsplit(":", 1)
                relay = LinkRelay(("127.0.0.1", 0), (host, int(port)), profile)
                relays.append(relay)
                body["peers"][peer] = f"127.0.0.1:{relay.start()}"
            Path(local.configs[name]).write_text(to_toml(body))
    except BaseException:
        for relay in relays:
            relay.stop()
        raise
    return relays


@dataclass(frozen=True)
class Calibration:
    """The cost model's two free parameters, fitted on the loopback run."""

    message_seconds: float  # fixed cost of one gRPC message
    compute_scale: float    # process compute time / in-memory compute time

    def predict(self, trace: InMemoryTrace, profile: LinkProfile, overhead: Optional[WireOverhead] = None
                ) -> Prediction:
        return predict(trace.records, trace.receipts, profile, overhead=overhead or WireOverhead(),
                       message_seconds=self.message_seconds, compute_scale=self.compute_scale)


def calibrate(trace: InMemoryTrace, measured_loopback_s: float, *,
              overhead: Optional[WireOverhead] = None) -> Calibration:
    """Fit one parameter so the loopback prediction equals the loopback
    measurement: the per-message cost when the in-memory replay is faster
    than the processes were, otherwise the compute scale (the in-memory
    run's parties shared one process and its GIL; the processes did not)."""
    loopback = PROFILES["loopback"]
    overhead = overhead or WireOverhead()

    def predicted(cost: float, scale: float) -> float:
        return predict(trace.records, trace.receipts, loopback, overhead=overhead, message_seconds=cost,
                       compute_scale=scale).seconds

    if not trace.records or measured_loopback_s <= 0:
        return Calibration(0.0, 1.0)
    if predicted(0.0, 1.0) < measured_loopback_s:
        low, high = 0.0, 1e-3
        while predicted(high, 1.0) < measured_loopback_s and high < 10.0:
            high *= 2
        for _ in range(50):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if predicted(mid, 1.0) < measured_loopback_s else (low, mid)
        return Calibration(0.5 * (low + high), 1.0)
    low, high = 1e-6, 1.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if predicted(0.0, mid) < measured_loopback_s else (low, mid)
    return Calibration(0.0, 0.5 * (low + high))


@dataclass(frozen=True)
class EngineModel:
    """An MPC run over a link: ``loopback_seconds + rounds * RTT + bytes_per_direction * 8 / bandwidth``.

    ``bytes_per_direction``: the busier direction's bytes (the engine's messages and acknowledgements
    both ways, and the Channel's); ``rounds``: the engine's round trips on the critical path, fitted by
    :meth:`fit` on one shaped run (a protocol's rounds per step do not depend on the link)."""

    loopback_seconds: float
    bytes_per_direction: int
    rounds: float = 0.0

    def predict(self, profile: LinkProfile) -> Prediction:
        transfer = 0.0 if profile.bandwidth_bps is None else self.bytes_per_direction * 8.0 / profile.bandwidth_bps
        seconds = self.loopback_seconds + self.rounds * profile.rtt_s + transfer
        return Prediction(seconds=seconds, compute_seconds=self.loopback_seconds, bytes=2 * self.bytes_per_direction,
                          rounds=int(round(self.rounds)), party_seconds={})

    def fit(self, profile: LinkProfile, measured_s: float) -> "EngineModel":
        """The model whose rounds make its prediction for ``profile`` (RTT > 0) equal ``measured_s``."""
        if not profile.rtt_s > 0:
            raise ValueError(f"the engine's rounds are fitted on a link with a round-trip time, not {profile.name}")
        beyond = measured_s - EngineModel(self.loopback_seconds, self.bytes_per_direction).predict(profile).seconds
        return EngineModel(self.loopback_seconds, self.bytes_per_direction, max(0.0, beyond / profile.rtt_s))


def engine_bytes_per_direction(outputs: Mapping[str, Mapping[str, Any]], relayed: int) -> int:
    """The busier direction's bytes of an MPC run: party q -> p carries what p's engine relay forwarded
    (q's messages to p) and what q's relay sent back (q's acknowledgements of p's messages); the
    Channel's relayed bytes are split evenly between the directions."""
    info = {name: out.get("info") or {} for name, out in outputs.items()}
    names = [n for n in info if "engine_bytes_in" in info[n]]
    directions = [int(info[p]["engine_bytes_in"]) + int(info[q].get("engine_bytes_out", 0))
                  for p in names for q in names if p != q]
    if len(names) > 2:  # each party's relay serves every peer: count all of it toward each direction (upper bound)
        directions = [int(info[p]["engine_bytes_in"]) + max(int(info[q].get("engine_bytes_out", 0)) for q in names)
                      for p in names]
    return max(directions, default=0) + relayed // 2


def link_row(method: str, profile: LinkProfile, measured_s: float, prediction: Prediction,
             plain_measured_s: Optional[float], extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """One ``results.json["links"]`` row: the issue's contract keys (method, link,
    bandwidth_bps, rtt_s, seconds, predicted_seconds, bytes, rounds,
    compute_seconds) first, then the derived ones."""
    row: Dict[str, Any] = {
        "method": method,
        "link": profile.name,
        "bandwidth_bps": profile.bandwidth_bps,
        "rtt_s": profile.rtt_s,
        "seconds": measured_s,
        "predicted_seconds": prediction.seconds,
        "bytes": prediction.bytes,
        "rounds": prediction.rounds,
        "compute_seconds": prediction.compute_seconds,
    }
    row["prediction_error"] = (prediction.seconds - measured_s) / measured_s if measured_s > 0 else None
    row["communication_share"] = (max(0.0, measured_s - prediction.compute_seconds) / measured_s
                                  if measured_s > 0 else None)
    row["vs_plain"] = measured_s / plain_measured_s if plain_measured_s else None
    if extra:
        row.update(extra)
    return row


def rtt_for_ratio(method: Tuple[InMemoryTrace, Calibration], plain: Tuple[InMemoryTrace, Calibration],
                  bandwidth_bps: float, ratio: float, *, max_rtt_s: float = 2.0) -> Optional[float]:
    """The smallest RTT (1 ms .. ``max_rtt_s``, 5% steps) at which the cost model
    predicts ``method`` within ``ratio`` times plain VFL's time on a link of
    ``bandwidth_bps``; None if not even at ``max_rtt_s``. A model extrapolation,
    labelled as such wherever it is shown."""
    rtt = 1e-3
    while rtt <= max_rtt_s:
        link = LinkProfile("model", bandwidth_bps, rtt)
        slow = method[1].predict(method[0], link).seconds
        base = plain[1].predict(plain[0], link).seconds
        if base > 0 and slow / base <= ratio:
            return rtt
        rtt *= 1.05
    return None


def _engine_rows(method: str, runs: Mapping[str, Tuple[LinkProfile, float, int, int]],
                 calibrations: Dict[str, Any]) -> List[Dict[str, Any]]:
    """An MPC method's rows, once it has run on loopback and every shaped link: its :class:`EngineModel`
    takes the loopback run's time and the bytes, and fits the engine's rounds on the shaped link of the
    longest RTT (both calibration rows); the other links are predictions."""
    loopback_s = runs["loopback"][1]
    bytes_per_direction = max(run[3] for run in runs.values())  # the same job: the bytes do not depend on the link
    model = EngineModel(loopback_s, bytes_per_direction)
    timed = [run for run in runs.values() if run[0].rtt_s > 0]
    fitted_on = max(timed, key=lambda run: run[0].rtt_s)[0] if timed else None
    if fitted_on is not None:
        model = model.fit(fitted_on, runs[fitted_on.name][1])
    calibrations[method] = {"model": "engine", "loopback_seconds": loopback_s, "engine_round_trips": model.rounds,
                            "bytes_per_direction": bytes_per_direction,
                            "fitted_on": None if fitted_on is None else fitted_on.name}
    return [link_row(method, profile, measured, model.predict(profile), None,
                     {"calibration_run": not profile.shaped or profile == fitted_on, "relayed_bytes": relayed,
                      "engine_model": True})
            for profile, measured, relayed, _ in runs.values()]


def _set_vs_plain(rows: List[Dict[str, Any]]) -> None:
    """Each row's time over plain VFL's on the same link (None until plain ran there)."""
    plain = {r["link"]: r["seconds"] for r in rows if r["method"] == "plain"}
    for r in rows:
        base = plain.get(r["link"])
        r["vs_plain"] = r["seconds"] / base if base else None


def run_links(grid: LinkGrid, profiles: Sequence[LinkProfile], settings: NetworkSettings, result: Dict[str, Any],
              *, data_dir: Any = None) -> None:
    """The link stage: every method of ``grid`` in memory (the cost model's
    trace), as processes on plain loopback (the model's calibration) and over
    each shaped profile (measurement vs prediction), each row added to
    ``result["links"]`` as it finishes; then the model's answer beyond the
    measured links (``result["links_model_answer"]``)."""
    from ...._progress import progress
    from .jobs import in_memory, job_table, party_frames, run_processes
    from .links_report import claimed_band

    # The model's answer is asked at the upper end of the claim's band (papers/hdp_vfl.toml).
    ratio = claimed_band()[1]
    shaped = [p for p in profiles if p.shaped]
    result["links_job"] = {"parties": list(grid.parties), "dataset": grid.dataset,
                           "features_per_party": list(grid.features_per_party), "rows": grid.rows,
                           "epochs": grid.job.epochs, "paillier_epochs": grid.job.paillier_epochs,
                           "batch_size": grid.job.batch_size, "key_bits": grid.job.key_bits}
    result["links_profiles"] = [{"link": p.name, "bandwidth_bps": p.bandwidth_bps, "rtt_s": p.rtt_s}
                                for p in profiles]
    rows: List[Dict[str, Any]] = result.setdefault("links", [])
    calibrations: Dict[str, Any] = result.setdefault("links_calibration", {})
    frames = party_frames(grid, data_dir)
    traces: Dict[str, Tuple[InMemoryTrace, Calibration]] = {}
    # loopback first for every method: it calibrates the model that predicts the shaped runs
    methods = list(grid.methods)
    if set(methods) & set(MPC_METHODS) and importlib.util.find_spec("spu") is None:
        skipped = [m for m in methods if m in MPC_METHODS]
        result["links_not_run"] = {m: 'not run (needs the mpc extra: pip install ".[mpc]")' for m in skipped}
        methods = [m for m in methods if m not in MPC_METHODS]
    runs = [(method, profile) for method in methods for profile in [PROFILES["loopback"], *shaped]]
    engine_runs: Dict[str, Dict[str, Tuple[LinkProfile, float, int, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="vflsec-bench-links-") as tmp:
        for method, profile in progress(runs, desc="bench network --links", unit="run"):
            job = job_table(method, grid)
            workdir = Path(tmp) / method / profile.name
            if method in MPC_METHODS:
                outputs, _, relayed = run_processes(job, frames, workdir, settings, profile)
                measured = max(out["timings"]["train_s"] for out in outputs.values())
                engine_runs.setdefault(method, {})[profile.name] = (
                    profile, measured, relayed, engine_bytes_per_direction(outputs, relayed))
                if len(engine_runs[method]) == 1 + len(shaped):
                    rows.extend(_engine_rows(method, engine_runs[method], calibrations))
                    _set_vs_plain(rows)
                continue
            if not profile.shaped:
                reference, memory_wall = in_memory(job, frames)
                trace = InMemoryTrace(reference.hub.records, reference.hub.receipts, memory_wall)
                outputs, _, relayed = run_processes(job, frames, workdir, settings, profile)
                measured = max(out["timings"]["train_s"] for out in outputs.values())
                calibration = calibrate(trace, measured)
                traces[method] = (trace, calibration)
                calibrations[method] = {"message_seconds": calibration.message_seconds,
                                        "compute_scale": calibration.compute_scale,
                                        "in_memory_seconds": memory_wall}
            else:
                trace, calibration = traces[method]
                outputs, _, relayed = run_processes(job, frames, workdir, settings, profile)
                measured = max(out["timings"]["train_s"] for out in outputs.values())
            rows.append(link_row(method, profile, measured, calibration.predict(trace, profile), None,
                                 {"calibration_run": not profile.shaped, "relayed_bytes": relayed}))
            _set_vs_plain(rows)
    # The model's answer beyond the measured links: at each bandwidth, the smallest
    # RTT at which each method's predicted time falls within the claim's upper bound.
    answers = []
    if "plain" in traces:
        for method in traces:
            if method == "plain":
                continue
            for bandwidth in (1e9, 100e6, 20e6):
                answers.append({"method": method, "bandwidth_bps": bandwidth,
                                "rtt_s": rtt_for_ratio(traces[method], traces["plain"], bandwidth, ratio)})
    result["links_model_answer"] = answers
