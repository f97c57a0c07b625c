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
    handshake_timeout = 60.0        # per handshake message (job agreement, start plan)
    step_timeout = 900.0            # per protocol message after it (PSI, training);
                                    # default from the job (runtime.deadlines)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

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


def load_party_config(path: Path) -> PartyConfig:
    path = Path(path)
    raw = read_toml(path)
    base = path.parent
    unknown = set(raw) - {"party", "peers", "tls", "network"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}")
    party = dict(raw.get("party", {}))
    for key in ("name", "listen", "job"):
        if key not in party:
            raise ValueError(f"{path}: [party] needs {key!r}")
    resolve = lambda value: None if value is None else (base / value)  # noqa: E731
    allowed = {"name", "listen", "job", "data", "id_column", "label_column", "output", "checkpoint_dir", "test_data"}
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
        checkpoint_dir=resolve(party.get("checkpoint_dir")), tls=tls, test_data=resolve(party.get("test_data")),
        network=dict(raw.get("network", {})),
    )
