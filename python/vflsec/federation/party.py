"""``vflsec party --config party.toml``: run one party of a vertical GLM job
in its own process, over :class:`~vflsec.federation.grpc_channel.GrpcChannel`.

Party configuration (TOML; relative paths are relative to the file)::

    [party]
    name = "active"                 # this party's name (also its certificate name)
    listen = "127.0.0.1:50051"
    job = "job.toml"                # the job description (every party has a copy)
    data = "data/active.csv"        # CSV with a header row (not for a coordinator)
    id_column = "id"
    label_column = "y"              # the active party only
    output = "out/active.json"      # the party's result (its own weights)
    checkpoint_dir = "checkpoints"  # per-epoch checkpoints (for --resume)

    [peers]                         # every other party of the job: name = "host:port"
    passive1 = "127.0.0.1:50052"

    [tls]                           # from `vflsec certs init`
    ca = "certs/ca.pem"
    cert = "certs/active.pem"
    key = "certs/active.key"

    [network]                       # optional, see NetworkSettings
    peer_timeout = 10.0
    heartbeat_interval = 1.0

Job description (``job.toml``): a ``[job]`` table with the public
:class:`~vflsec.glm.job.GLMJob` fields (``protocol``, ``loss``, ``lr``,
``epochs``, ``batch_size``, ``seed``, ``active``, ``passives``,
``coordinator``, ...; not ``n_samples``, which the alignment gives), an
optional ``[job.options]`` table, and ``row_norm = "clip"`` (default; each
party maps its rows to ``x / max(1, ||x||)``) or ``"none"``. Labels of the
signed losses (logistic, svm) may be 0/1 (0 becomes -1) or -1/+1.

Start-up, in order: connect to every peer (``connect_timeout``); agree on
the job -- every party sends the SHA-256 of its canonical job description to
the active party (the leader), which refuses any mismatch, then opens a
fresh random session id (messages of any other session are rejected);
entity alignment by PSI (:mod:`.psi`), rows ordered by the sorted common
IDs; agree on the start epoch (``--resume``: one past the last epoch every
data party has checkpointed; DP protocols refuse to resume, since the
interrupted epoch's releases would be repeated beyond the privacy budget);
train; write the output; tell the peers this party is done.

Failures: any error stops the party with exit status 1 and one line on
stderr, ``vflsec party <name>: error: ...``; its peers are told and stop
with ``peer party '<name>' failed: it aborted the job: ...``. A peer that
dies or hangs is detected by the heartbeat within ``peer_timeout`` seconds:
``peer party '<name>' failed: no answer for ... s``.
"""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

__all__ = ["JobSpec", "PartyConfig", "clip_rows", "load_job_spec", "load_party_config", "read_party_csv", "run_party"]

logger = logging.getLogger("vflsec.network")

TAG_HELLO = "job_hello"
TAG_SESSION = "job_session"
TAG_READY = "job_ready"
TAG_GO = "job_go"
TAG_RESUME = "job_resume"
TAG_PLAN = "job_plan"
# Protocols whose privacy guarantee forbids re-running an interrupted epoch.
DP_PROTOCOLS = ("hdp",)
_RUNNER_FIELDS = ("row_norm",)
_FORBIDDEN_JOB_FIELDS = ("n_samples", "start_epoch")


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def _read_toml(path: Path) -> Dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return _toml().load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"config file not found: {path}") from None
    except Exception as exc:
        if type(exc).__name__ == "TOMLDecodeError":
            raise ValueError(f"{path}: invalid TOML: {exc}") from None
        raise


@dataclass(frozen=True)
class JobSpec:
    """The agreed job description: GLMJob fields (without ``n_samples``) and
    runner settings; ``digest`` is the SHA-256 of its canonical JSON."""

    fields: Mapping[str, Any]
    row_norm: str
    digest: str

    def glm_job(self, n_samples: int, start_epoch: int = 0):
        from ..glm.job import GLMJob

        kwargs = dict(self.fields)
        if "passives" in kwargs:
            kwargs["passives"] = tuple(kwargs["passives"])
        return GLMJob(n_samples=n_samples, start_epoch=start_epoch, **kwargs)

    @property
    def parties(self) -> Tuple[str, ...]:
        f = self.fields
        names = (f.get("active", "active"), *f.get("passives", ("passive",)))
        return names + ((f["coordinator"],) if f.get("coordinator") else ())


def load_job_spec(path: Path) -> JobSpec:
    raw = _read_toml(Path(path))
    if set(raw) - {"job"} or "job" not in raw:
        raise ValueError(f"{path}: a job file holds exactly one [job] table")
    table = dict(raw["job"])
    for name in _FORBIDDEN_JOB_FIELDS:
        if name in table:
            raise ValueError(f"{path}: [job] must not set {name!r} (it comes from the entity alignment / --resume)")
    row_norm = table.pop("row_norm", "clip")
    if row_norm not in ("clip", "none"):
        raise ValueError(f"{path}: row_norm must be 'clip' or 'none', got {row_norm!r}")
    from ..glm.job import GLMJob
    import dataclasses

    known = {f.name for f in dataclasses.fields(GLMJob)}
    unknown = set(table) - known
    if unknown:
        raise ValueError(f"{path}: unknown [job] fields {sorted(unknown)}")
    canonical = json.dumps({"job": table, "row_norm": row_norm}, sort_keys=True, separators=(",", ":"))
    spec = JobSpec(table, row_norm, hashlib.sha256(canonical.encode("utf-8")).hexdigest())
    spec.glm_job(n_samples=max(1, int(table.get("batch_size", 64))))  # validate the fields now
    return spec


@dataclass(frozen=True)
class PartyConfig:
    name: str
    listen: str
    job: Path
    peers: Mapping[str, str]
    data: Optional[Path] = None
    id_column: str = "id"
    label_column: Optional[str] = None
    output: Optional[Path] = None
    checkpoint_dir: Optional[Path] = None
    tls: Optional[Mapping[str, Path]] = None
    network: Mapping[str, Any] = field(default_factory=dict)


def load_party_config(path: Path) -> PartyConfig:
    path = Path(path)
    raw = _read_toml(path)
    base = path.parent
    unknown = set(raw) - {"party", "peers", "tls", "network"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}")
    party = dict(raw.get("party", {}))
    for key in ("name", "listen", "job"):
        if key not in party:
            raise ValueError(f"{path}: [party] needs {key!r}")
    resolve = lambda value: None if value is None else (base / value)  # noqa: E731
    allowed = {"name", "listen", "job", "data", "id_column", "label_column", "output", "checkpoint_dir"}
    if set(party) - allowed:
        raise ValueError(f"{path}: unknown [party] keys {sorted(set(party) - allowed)}")
    tls = raw.get("tls")
    if tls is not None:
        missing = {"ca", "cert", "key"} - set(tls)
        if missing:
            raise ValueError(f"{path}: [tls] needs {sorted(missing)}")
        tls = {k: base / tls[k] for k in ("ca", "cert", "key")}
    peers = raw.get("peers") or {}
    if not isinstance(peers, dict) or not all(isinstance(v, str) for v in peers.values()):
        raise ValueError(f"{path}: [peers] maps party names to 'host:port' strings")
    return PartyConfig(
        name=party["name"], listen=party["listen"], job=base / party["job"], peers=dict(peers),
        data=resolve(party.get("data")), id_column=party.get("id_column", "id"),
        label_column=party.get("label_column"), output=resolve(party.get("output")),
        checkpoint_dir=resolve(party.get("checkpoint_dir")), tls=tls, network=dict(raw.get("network", {})),
    )


def read_party_csv(path: Path, id_column: str, label_column: Optional[str]):
    """``(ids, X, y, feature_names)`` from a CSV with a header row; every
    column other than the ID and label columns is a numeric feature."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path} is empty") from None
        if id_column not in header:
            raise ValueError(f"{path}: no ID column {id_column!r} in header {header}")
        if label_column is not None and label_column not in header:
            raise ValueError(f"{path}: no label column {label_column!r} in header {header}")
        id_at = header.index(id_column)
        label_at = header.index(label_column) if label_column is not None else None
        feature_at = [i for i in range(len(header)) if i not in (id_at, label_at)]
        if not feature_at:
            raise ValueError(f"{path} has no feature columns")
        ids: List[str] = []
        rows: List[List[float]] = []
        labels: List[float] = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{line_no}: {len(row)} fields, header has {len(header)}")
            ids.append(row[id_at])
            try:
                rows.append([float(row[i]) for i in feature_at])
                if label_at is not None:
                    labels.append(float(row[label_at]))
            except ValueError as exc:
                raise ValueError(f"{path}:{line_no}: {exc}") from None
    X = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(feature_at))
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{path}: features contain NaN or inf")
    y = np.asarray(labels, dtype=np.float64) if label_at is not None else None
    return ids, X, y, [header[i] for i in feature_at]


def _settings(network: Mapping[str, Any]):
    from .grpc_channel import NetworkSettings

    try:
        return NetworkSettings(**network)
    except TypeError as exc:
        raise ValueError(f"[network]: {exc}") from None


def _make_channel(cfg: PartyConfig, spec: JobSpec, insecure: bool):
    from .grpc_channel import GrpcChannel
    from .tls import load_tls

    job_parties = spec.parties
    if cfg.name not in job_parties:
        raise ValueError(f"party {cfg.name!r} is not a party of the job {job_parties}")
    others = [p for p in job_parties if p != cfg.name]
    missing = [p for p in others if p not in cfg.peers]
    if missing:
        raise ValueError(f"[peers] lacks the address of {missing}")
    extra = set(cfg.peers) - set(others)
    if extra:
        raise ValueError(f"[peers] lists parties that are not in the job: {sorted(extra)}")
    tls = None
    if not insecure:
        if cfg.tls is None:
            raise ValueError("the party config has no [tls] table; mutual TLS is the default "
                             "(create certificates with `vflsec certs init`, or pass --insecure)")
        tls = load_tls(cfg.tls["ca"], cfg.tls["cert"], cfg.tls["key"])
    return GrpcChannel(cfg.name, cfg.listen, {p: cfg.peers[p] for p in others}, tls=tls, insecure=insecure,
                       settings=_settings(cfg.network), session="handshake")


def _agree_on_job(channel, spec: JobSpec, leader: str, followers: List[str]) -> None:
    """Compare job digests, then move everyone to a fresh random session."""
    if channel.name != leader:
        channel.send(leader, TAG_HELLO, {"job_sha256": spec.digest})
        reply = channel.recv(leader, TAG_SESSION)
        if "error" in reply:
            raise ValueError(f"the leader {leader!r} refused the job: {reply['error']}")
        channel.begin_session(reply["session"])
        channel.send(leader, TAG_READY, b"")
        channel.recv(leader, TAG_GO)
        return
    mismatched = []
    for follower in followers:
        hello = channel.recv(follower, TAG_HELLO)
        if hello.get("job_sha256") != spec.digest:
            mismatched.append(follower)
    if mismatched:
        error = (f"job description of {mismatched} differs from the leader's (sha256 {spec.digest[:16]}...); "
                 "every party must run the same job.toml")
        for follower in followers:
            channel.send(follower, TAG_SESSION, {"error": error})
        raise ValueError(error)
    session = f"{spec.digest[:16]}-{secrets.token_hex(16)}"
    channel.accept_session(session)
    for follower in followers:
        channel.send(follower, TAG_SESSION, {"session": session})
    channel.begin_session(session)
    for follower in followers:
        channel.recv(follower, TAG_READY)
    for follower in followers:
        channel.send(follower, TAG_GO, b"")


def _fingerprint(spec: JobSpec, common: List[str]) -> str:
    digest = hashlib.sha256(spec.digest.encode())
    for item in common:
        digest.update(item.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _plan(channel, spec: JobSpec, leader: str, followers: List[str], n_samples: Optional[int],
          last_epoch: int, resume: bool) -> Tuple[int, int]:
    """Agree on ``(n_samples, start_epoch)``; the leader decides."""
    if channel.name != leader:
        channel.send(leader, TAG_RESUME, {"last_epoch": int(last_epoch)})
        plan = channel.recv(leader, TAG_PLAN)
        if "error" in plan:
            raise ValueError(plan["error"])
        return int(plan["n_samples"]), int(plan["start_epoch"])
    epochs = [last_epoch] + [int(channel.recv(f, TAG_RESUME)["last_epoch"]) for f in followers]
    data_epochs = [e for e, p in zip(epochs, [leader] + followers) if p != spec.fields.get("coordinator")]
    start = min(data_epochs) + 1 if resume else 0
    error = None
    total = int(spec.fields.get("epochs", 10))
    if start > 0 and spec.fields.get("protocol") in DP_PROTOCOLS:
        error = (f"protocol {spec.fields['protocol']!r} cannot resume: repeating the interrupted epoch would "
                 "release more noisy values than the privacy budget covers; start the job again")
    elif start >= total:
        error = f"every data party has already checkpointed all {total} epochs; nothing to resume"
    for follower in followers:
        channel.send(follower, TAG_PLAN, {"error": error} if error else
                     {"n_samples": int(n_samples), "start_epoch": int(start)})
    if error:
        raise ValueError(error)
    return int(n_samples), start


def clip_rows(X: np.ndarray) -> np.ndarray:
    """``x / max(1, ||x||)`` per row (the job's ``row_norm = "clip"``)."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return X / np.maximum(1.0, norms)[:, None]


def _labels_for(loss: str, y: np.ndarray) -> np.ndarray:
    from ..glm.job import SIGNED_LABEL_LOSSES

    if loss in SIGNED_LABEL_LOSSES:
        values = set(np.unique(y).tolist())
        if values <= {0.0, 1.0}:
            return np.where(y > 0, 1.0, -1.0)
    return y


def run_party(config: Path, *, resume: bool = False, insecure: bool = False) -> Dict[str, Any]:
    """Run this party's side of the job; returns the summary it writes to
    ``output`` (raises on failure, after telling the peers)."""
    from ..glm.job import PartyData
    from ..glm.registry import get_protocol
    from .checkpoint import EpochCheckpoint
    from .psi import align_ids, row_order

    started = time.perf_counter()
    cfg = load_party_config(config)
    spec = load_job_spec(cfg.job)
    probe = spec.glm_job(n_samples=max(1, int(spec.fields.get("batch_size", 64))))
    role = probe.role_of(cfg.name)
    protocol = get_protocol(probe.protocol)
    leader = probe.active
    followers = [p for p in probe.parties if p != leader]
    data_members = list(probe.passives)

    ids: List[str] = []
    X = y = None
    if role != "coordinator":
        if cfg.data is None:
            raise ValueError(f"data party {cfg.name!r} needs [party] data")
        label_column = cfg.label_column if role == "active" else None
        if role == "active" and label_column is None:
            raise ValueError("the active party needs [party] label_column")
        ids, X, y, _ = read_party_csv(cfg.data, cfg.id_column, label_column)

    channel = _make_channel(cfg, spec, insecure)
    channel.start()
    timings: Dict[str, float] = {}
    try:
        t = time.perf_counter()
        channel.wait_for_peers()
        _agree_on_job(channel, spec, leader, followers)
        timings["connect_and_agree_s"] = time.perf_counter() - t
        t = time.perf_counter()
        common: List[str] = []
        if role != "coordinator":
            common = align_ids(channel, ids, leader=leader, members=data_members if role == "active" else ())
            if not common:
                raise ValueError("the parties share no IDs; nothing to train on")
        timings["psi_s"] = time.perf_counter() - t
        checkpoint = None
        last_epoch = -1
        if role != "coordinator" and cfg.checkpoint_dir is not None:
            checkpoint = EpochCheckpoint(cfg.checkpoint_dir, cfg.name, _fingerprint(spec, common))
            last_epoch = checkpoint.latest_epoch() if resume else -1
        elif resume and role != "coordinator":
            raise ValueError("--resume needs [party] checkpoint_dir")
        n_samples, start_epoch = _plan(channel, spec, leader, followers, len(common) or None, last_epoch, resume)
        if role != "coordinator" and n_samples != len(common):
            raise ValueError(f"the leader announced {n_samples} aligned rows, this party aligned {len(common)}")
        job = spec.glm_job(n_samples=n_samples, start_epoch=start_epoch)
        data = None
        if role != "coordinator":
            order = row_order(ids, common)
            X = X[order]
            if spec.row_norm == "clip":
                X = clip_rows(X)
            y = _labels_for(job.loss, y[order]) if y is not None else None
            data = PartyData(X, y, checkpoint=checkpoint)
        logger.info("party %r: %d aligned rows, training %s from epoch %d", cfg.name, n_samples, job.protocol,
                    start_epoch)
        t = time.perf_counter()
        result = protocol.roles[role](channel, job, data)
        timings["train_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - started
        summary = {
            "party": cfg.name, "role": role, "protocol": job.protocol, "n_samples": n_samples,
            "start_epoch": start_epoch, "coef": None if result.coef is None else [float(v) for v in result.coef],
            "history": {k: [float(v) for v in vals] for k, vals in result.history.items()},
            "program_timings": dict(result.timings), "timings": timings,
            "bytes_sent_by_tag": channel.bytes_by_tag(), "payload_bytes_sent": sum(channel.bytes_by_tag().values()),
            "wire_bytes_sent": channel.wire_bytes_sent, "wire_bytes_received": channel.wire_bytes_received,
            "info": _jsonable(result.info), "job_sha256": spec.digest,
            "ids_sha256": hashlib.sha256("\n".join(common).encode()).hexdigest(),
        }
        if cfg.output is not None:
            cfg.output.parent.mkdir(parents=True, exist_ok=True)
            tmp = cfg.output.with_name(cfg.output.name + ".tmp")
            tmp.write_text(json.dumps(summary, indent=1))
            tmp.replace(cfg.output)
        channel.notify_done()
        return summary
    except BaseException as exc:
        channel.notify_abort(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        channel.close()


def _jsonable(info: Mapping[str, Any]) -> Dict[str, Any]:
    out = {}
    for key, value in info.items():
        if isinstance(value, (bool, int, str)) or value is None:
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else str(value)
        elif isinstance(value, (list, tuple)):
            out[key] = [v if isinstance(v, (int, float, str)) else str(v) for v in value]
        else:
            out[key] = str(value)
    return out


def main(config: str, resume: bool = False, insecure: bool = False, quiet: bool = False) -> int:
    """CLI entry (``vflsec party``): exit status 0 on success, 1 on failure."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    name = Path(config).stem
    try:
        name = load_party_config(Path(config)).name
        summary = run_party(Path(config), resume=resume, insecure=insecure)
    except KeyboardInterrupt:
        print(f"vflsec party {name}: interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:  # noqa: BLE001 - reported as one clear line
        print(f"vflsec party {name}: error: {exc}", file=sys.stderr)
        return 1
    if not quiet:
        print(json.dumps({k: summary[k] for k in ("party", "role", "protocol", "n_samples", "start_epoch",
                                                 "timings")}))
    return 0
