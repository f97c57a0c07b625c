"""The party configuration file (``party.toml``) of ``vflsec party``.

Format (relative paths are relative to the file)::

    [party]
    name = "active"                 # this party's name (also its certificate name)
    listen = "127.0.0.1:50051"
    job = "job.toml"                # the job description (every party has a copy)
    data = "data/active.csv"        # CSV with a header row (not for a coordinator)
    id_column = "id"
    label_column = "y"              # the active party only
    test_data = "data/active-test.csv"  # held-out rows (same columns), for a job with evaluate = true
    positive_label = ">50K"         # text labels: the class coded 1 (the active party only)
    output = "out/active.json"      # the party's result (its own weights)
    model = "out/active.json"       # a predict job only: this party's output of the training job
    checkpoint_dir = "checkpoints"  # per-epoch checkpoints (for --resume)
    shard_dir = "shards"            # a job with shard_rows: the aligned rows' Parquet shards go to a folder
                                    # of the run's own in here (default: output's folder; runtime.party_shards)
    keep_shards = false             # true: leave that folder when the run ends (default: deleted)

    [peers]                         # every other party of the job: name = "host:port"
    passive1 = "127.0.0.1:50052"

    [tls]                           # from `vflsec certs init`
    ca = "certs/ca.pem"
    cert = "certs/active.pem"
    key = "certs/active.key"

    [preprocess]                    # optional: the party's own raw table (CSV or Parquet, any column
    scaling = "zscore_clip"         # types) through vflsec.data.PartyPreprocessor, fitted on this
    column_types = { joined = "date" }  # file's rows; keys are its parameters (see party_table)
    high_cardinality = ["branch"]   # categorical columns of more than cardinality_limit (100) values

    [network]                       # optional, see NetworkSettings
    peer_timeout = 10.0
    heartbeat_interval = 1.0
    handshake_timeout = 60.0        # per handshake message (job agreement, start plan)
    step_timeout = 900.0            # per protocol message after it (PSI, training);
                                    # default from the job (runtime.deadlines)
    engine_link = "wan"             # MPC jobs only, a rehearsal: the link (a profile or "100mbit,20ms") the
                                    # relay in front of this party's engine port emulates (default unshaped)

    [predict]                       # a passive party of predict jobs: what it answers (runtime.predict_budget);
    max_ids_per_job = 100000        # these are the defaults: a budget is always finite
    max_jobs = 1000
    max_scores = 10000000
    repeat_window_days = 0.0        # 0: repeats allowed (the same model and row give the same score)

    [compute]                       # optional: where the party's HE vector work runs (vflsec.he.executor)
    engine = "ray"                  # "local" (default): this machine's process pool; "ray": a Ray cluster
    address = "10.0.0.5:6379"       # the Ray head's HOST:PORT, or "auto"; without it a Ray instance of the
                                    # party's own on this machine. The key holder decrypts locally either way.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from .predict_budget import budget_from_table

__all__ = ["PartyConfig", "load_party_config", "read_toml"]


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def read_toml(path: Path) -> Dict[str, Any]:
    """The parsed TOML file; FileNotFoundError / ValueError naming ``path``."""
    try:
        with open(path, "rb") as fh:
            return _toml().load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"config file not found: {path}") from None
    except OSError as exc:  # a folder, no permission, ...
        raise ValueError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:
        if type(exc).__name__ == "TOMLDecodeError":
            raise ValueError(f"{path}: invalid TOML: {exc}") from None
        raise


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
    test_data: Optional[Path] = None
    network: Mapping[str, Any] = field(default_factory=dict)
    positive_label: Any = None
    preprocess: Optional[Mapping[str, Any]] = None
    model: Optional[Path] = None
    compute: Mapping[str, Any] = field(default_factory=dict)
    shard_dir: Optional[Path] = None
    keep_shards: bool = False
    predict: Optional[Mapping[str, float]] = None  # [predict]: a passive party's budget (runtime.predict_budget)


PARTY_KEYS = ("name", "listen", "job", "data", "id_column", "label_column", "output", "checkpoint_dir", "test_data",
              "positive_label", "model", "shard_dir", "keep_shards")
TLS_KEYS = ("ca", "cert", "key")
COMPUTE_KEYS = ("engine", "address")


def _table(raw: Mapping[str, Any], name: str, path: Path) -> Dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"{path}: [{name}] must be a table, got {type(value).__name__} {value!r}")
    return dict(value)


def _strings(table: Mapping[str, Any], section: str, path: Path) -> None:
    for key, value in table.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{path}: [{section}] {key} must be a non-empty string, got "
                             f"{type(value).__name__} {value!r}")


def _compute(raw: Mapping[str, Any], path: Path) -> Dict[str, Any]:
    """``[compute]`` checked: ``engine`` one of the executors, ``address`` (HOST:PORT or
    "auto") only with engine = "ray". Whether the cluster answers is checked by
    :mod:`vflsec.runtime.startup`, which connects to it."""
    from ..federation.address import parse_address
    from ..he.executor import ENGINES

    compute = _table(raw, "compute", path)
    unknown = sorted(set(compute) - set(COMPUTE_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown [compute] keys {unknown} (known: {', '.join(COMPUTE_KEYS)})")
    _strings(compute, "compute", path)
    engine = compute.setdefault("engine", "local")
    if engine not in ENGINES:
        raise ValueError(f"{path}: [compute] engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r} "
                         "-- set engine = \"local\" (this machine's process pool) or \"ray\" (a Ray cluster: "
                         "address = its head's HOST:PORT)")
    address = compute.get("address")
    if address is not None:
        if engine != "ray":
            raise ValueError(f"{path}: [compute] address is set but engine is {engine!r} -- set engine = \"ray\" "
                             "to use the Ray cluster at that address, or remove address")
        if address != "auto":
            try:
                parse_address(address, "[compute] address")
            except ValueError as exc:
                raise ValueError(f"{path}: {exc} -- give the Ray head's HOST:PORT (6379 for `ray start --head`) "
                                 "or \"auto\"") from None
    return compute


def _joined(base: Path, value: str) -> Path:
    """``base / value`` without ``x/..`` steps (what every message and output then shows), unless
    dropping them changes the file meant (a symlinked folder before a ``..``)."""
    joined = base / value
    tidy = Path(os.path.normpath(joined))
    return tidy if tidy == joined or os.path.realpath(tidy) == os.path.realpath(joined) else joined


def load_party_config(path: Path) -> PartyConfig:
    """The checked configuration: ValueError naming ``path`` and the table for an
    unknown table or key, a missing key or a value that is not a string (the
    addresses and files are checked where they are used, see
    :mod:`vflsec.runtime.startup`)."""
    path = Path(path)
    raw = read_toml(path)
    base = path.parent
    unknown = set(raw) - {"party", "peers", "tls", "network", "preprocess", "compute", "predict"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)} (a party file has [party], [peers], [tls], "
                         "[preprocess], [network], [compute] and [predict])")
    party = _table(raw, "party", path)
    for key in ("name", "listen", "job"):
        if key not in party:
            raise ValueError(f"{path}: [party] needs {key!r}")
    if set(party) - set(PARTY_KEYS):
        raise ValueError(f"{path}: unknown [party] keys {sorted(set(party) - set(PARTY_KEYS))} "
                         f"(known: {', '.join(PARTY_KEYS)})")
    positive_label = party.pop("positive_label", None)
    if positive_label is not None and (isinstance(positive_label, bool)
                                       or not isinstance(positive_label, (str, int, float))):
        raise ValueError(f"{path}: [party] positive_label must be a string or a number, got {positive_label!r}")
    keep_shards = party.pop("keep_shards", False)
    if not isinstance(keep_shards, bool):
        raise ValueError(f"{path}: [party] keep_shards must be true or false, got {keep_shards!r}")
    _strings(party, "party", path)
    resolve = lambda value: None if value is None else _joined(base, value)  # noqa: E731
    tls = raw.get("tls")
    if tls is not None:
        tls = _table(raw, "tls", path)
        missing = set(TLS_KEYS) - set(tls)
        if missing:
            raise ValueError(f"{path}: [tls] needs {sorted(missing)}")
        if set(tls) - set(TLS_KEYS):
            raise ValueError(f"{path}: unknown [tls] keys {sorted(set(tls) - set(TLS_KEYS))} (known: ca, cert, key)")
        _strings(tls, "tls", path)
        tls = {k: _joined(base, tls[k]) for k in TLS_KEYS}
    peers = _table(raw, "peers", path)
    if not all(isinstance(v, str) for v in peers.values()):
        raise ValueError(f"{path}: [peers] maps party names to 'host:port' strings")
    return PartyConfig(
        name=party["name"], listen=party["listen"], job=_joined(base, party["job"]), peers=peers,
        data=resolve(party.get("data")), id_column=party.get("id_column", "id"),
        label_column=party.get("label_column"), output=resolve(party.get("output")),
        checkpoint_dir=resolve(party.get("checkpoint_dir")), tls=tls, test_data=resolve(party.get("test_data")),
        network=_table(raw, "network", path), positive_label=positive_label,
        preprocess=_table(raw, "preprocess", path) if "preprocess" in raw else None,
        model=resolve(party.get("model")),
        compute=_compute(raw, path),
        shard_dir=resolve(party.get("shard_dir")), keep_shards=keep_shards,
        predict=budget_from_table(_table(raw, "predict", path), str(path)) if "predict" in raw else None,
    )
