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
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ....federation.channel import MessageRecord, ReceiptRecord
from ....federation.link_profiles import PROFILES, LinkProfile, parse_link
from ....federation.link_relay import LinkRelay
from .cost_model import Prediction, WireOverhead, predict
from .grid import LinkGrid, NetworkSettings

__all__ = ["Calibration", "InMemoryTrace", "calibrate", "link_row", "parse_links", "relay_local_job",
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
    runs = [(method, profile) for method in grid.methods for profile in [PROFILES["loopback"], *shaped]]
    with tempfile.TemporaryDirectory(prefix="vflsec-bench-links-") as tmp:
        for method, profile in progress(runs, desc="bench network --links", unit="run"):
            job = job_table(method, grid)
            workdir = Path(tmp) / method / profile.name
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
